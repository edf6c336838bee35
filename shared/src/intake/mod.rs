//! The intake API's wire types: every request and answer body the intake-api documents and
//! answers with and the partner client sends and reads, and the fixed lists of the enquiry
//! (spec 2.2). Each enum's serde names are its wire names (with the `openapi` feature, its
//! OpenAPI names too), and this module's test is the only place they are written out.
//!
//! The enquiry is here twice, as the derive cannot make one of the other: [`Enquiry`] as
//! partners build it (the purpose carries exactly its own fields, so no invalid combination
//! can be built), and, with the `openapi` feature, `EnquiryRequest`, its flat shape for the
//! document (every field of both purposes). The test below holds their fields equal; the
//! intake-api parses the raw body in its domain, reporting every problem at once, and refines
//! the flat schema into one per purpose. The other bodies are one type each.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[cfg(feature = "openapi")]
mod examples;
#[cfg(feature = "openapi")]
pub mod messages;
pub mod webhook_deliveries;
pub mod webhook_endpoints;
pub mod webhooks;

/// The schema `T` registers under its own name, before the services refine their documents
/// (`MetaSchema::ANY` for a type that registers none).
#[cfg(feature = "openapi")]
pub fn schema_of<T: poem_openapi::types::Type>() -> poem_openapi::registry::MetaSchema {
    let mut registry = poem_openapi::registry::Registry::new();
    T::register(&mut registry);
    registry
        .schemas
        .remove(&*T::name())
        .unwrap_or(poem_openapi::registry::MetaSchema::ANY)
}

/// The wire names of one of these lists, in declaration order, as its OpenAPI schema gives
/// them (serde's are the same: the test below holds them equal).
#[cfg(feature = "openapi")]
pub fn wire_names<T: poem_openapi::types::Type>() -> Vec<String> {
    schema_of::<T>()
        .enum_items
        .iter()
        .filter_map(|item| item.as_str().map(str::to_owned))
        .collect()
}

/// How far the applicant has got with finding a property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum Stage {
    /// `viewing_properties`
    ViewingProperties,
    /// `researching`
    Researching,
    /// `ready_to_make_an_offer`
    ReadyToMakeAnOffer,
    /// `offer_accepted`
    OfferAccepted,
}

/// Whether the mortgage is for one applicant or several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum ApplicationType {
    /// `single`
    Single,
    /// `multi_applicant`
    MultiApplicant,
}

/// Employment status of the primary applicant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum EmploymentStatus {
    /// `employed`
    Employed,
    /// `self_employed`
    SelfEmployed,
    /// `company_director`
    CompanyDirector,
    /// `contractor`
    Contractor,
    /// `cis_worker`
    CisWorker,
    /// `retired`
    Retired,
    /// `unemployed`
    Unemployed,
}

/// What the mortgage is for; it decides which other fields are required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum MortgagePurpose {
    /// `purchase`: needs `purchase_type`, `new_property_value` and `deposit_amount`.
    Purchase,
    /// `remortgage`: needs `remortgage_reason`, `current_property_value` and
    /// `outstanding_mortgage_amount`.
    Remortgage,
}

/// One kind of adverse credit history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum CreditIssue {
    /// `low_credit_score`
    LowCreditScore,
    /// `ccj`
    Ccj,
    /// `default`
    Default,
    /// `iva`
    Iva,
    /// `late_payments_non_mortgage`
    LatePaymentsNonMortgage,
    /// `late_payments_mortgage`
    LatePaymentsMortgage,
    /// `debt_management_plan`
    DebtManagementPlan,
    /// `repossession`
    Repossession,
    /// `bankruptcy`
    Bankruptcy,
}

/// The buyer's situation, for a purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum PurchaseType {
    /// `home_mover`
    HomeMover,
    /// `first_time_buyer`: needs a `mortgage_scheme`.
    FirstTimeBuyer,
    /// `additional_property`
    AdditionalProperty,
}

/// The government scheme a first-time buyer uses, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum MortgageScheme {
    /// `shared_ownership`
    SharedOwnership,
    /// `right_to_buy`
    RightToBuy,
    /// `not_sure`
    NotSure,
    /// `no`: no scheme.
    No,
}

/// Why the applicant is remortgaging; two reasons need an amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum RemortgageReason {
    /// `get_better_rate`
    GetBetterRate,
    /// `current_deal_ending`
    CurrentDealEnding,
    /// `borrow_more_money`: needs `additional_borrowing_amount`.
    BorrowMoreMoney,
    /// `release_money`: needs `release_borrowing_amount`.
    ReleaseMoney,
    /// `other`
    Other,
}

/// `{"message": "Case created" | "Case updated", "reference": "..."}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct CaseResponse {
    /// `Case created` or `Case updated`.
    pub message: String,
    /// The case reference number.
    pub reference: String,
}

/// `{"redirect": "https://..."}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct RedirectResponse {
    /// Link to send the customer to: the brand's portal, with a single-use token.
    pub redirect: String,
}

/// A customer a partner refers before their enquiry exists: `POST /partners/external/referrals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct ReferralRequest {
    /// One of the configured brand identifiers (lower case).
    pub brand: String,
    /// Customer first name.
    #[cfg_attr(feature = "openapi", oai(validator(min_length = 1, max_length = 255)))]
    pub first_name: String,
    /// Customer last name.
    #[cfg_attr(feature = "openapi", oai(validator(min_length = 1, max_length = 255)))]
    pub last_name: String,
    /// Customer e-mail address (at most 254 characters): with the brand, the case the
    /// referral is for, as an enquiry's.
    pub email: String,
    /// Customer mobile phone number, as an enquiry's.
    pub mobile_number: String,
    /// The customer agreed to be contacted about the referral; must be `true`.
    pub contact_consent: bool,
    /// The partner's own reference for the customer, kept with the referral.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", oai(validator(max_length = 64)))]
    pub partner_reference: Option<String>,
    /// A note for whoever takes the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", oai(validator(max_length = 2000)))]
    pub note: Option<String>,
}

/// `{"message": "Referral created" | "Referral added", "reference": "...", "redirect": "https://..."}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct ReferralResponse {
    /// `Referral created` (your first referral of the customer) or `Referral added` (a
    /// customer you referred or sent an enquiry for before).
    pub message: String,
    /// The referral's reference: the case's when the referral made it or you sent its
    /// enquiry, and otherwise one of the referral's own (another partner's case is not told).
    pub reference: String,
    /// Link to send the customer to: the brand's portal, with a single-use, expiring token,
    /// where they complete their enquiry.
    pub redirect: String,
}

/// `{"message": "The given data was invalid.", "errors": {...}}`
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct ValidationErrorBody {
    /// Always "The given data was invalid.".
    pub message: String,
    /// Every problem, by field path (`field`, `credit_issues.0`, `addresses.1.postcode`);
    /// absent when the request as a whole is refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "openapi", oai(default, skip_serializing_if_is_empty))]
    pub errors: BTreeMap<String, Vec<String>>,
}

impl ValidationErrorBody {
    /// The body's `message`, whatever the problems.
    pub const MESSAGE: &str = "The given data was invalid.";
}

/// A customer's mortgage enquiry (`EnquiryRequest`, spec 2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enquiry {
    /// One of the brand identifiers the service is configured with, in lower case.
    pub brand: String,
    /// Applicant first name.
    pub first_name: String,
    /// Applicant last name.
    pub last_name: String,
    /// Applicant e-mail address; the service compares it trimmed and case-insensitively.
    pub email: String,
    /// Applicant mobile number: an optional `+` and 7 to 15 digits; spaces, hyphens and
    /// brackets are ignored.
    pub mobile_number: String,
    /// Applicant date of birth, before today.
    pub date_of_birth: NaiveDate,
    /// The applicant accepts the terms of submission; the service takes only `true`.
    pub terms_agreement: bool,
    /// How far the applicant has got with finding a property.
    pub stage: Stage,
    /// One applicant or several.
    pub application_type: ApplicationType,
    /// Employment status of the primary applicant.
    pub employment_status: EmploymentStatus,
    /// Combined estimated income of all applicants.
    pub total_annual_income: f64,
    /// `mortgage_purpose` and the fields it makes required, which no other purpose takes.
    #[serde(flatten)]
    pub purpose: Purpose,
    /// Whether the applicants have any adverse credit history.
    pub has_credit_issues: bool,
    /// Required when `has_credit_issues` is true: at least one kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credit_issues: Option<Vec<CreditIssue>>,
    /// Product identifier from the eligibility engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_uuid: Option<Uuid>,
    /// Consent to a credit check; the service reads an absent value as `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credit_check_consent: Option<bool>,
    /// Applicant addresses; when present, at least one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<Address>>,
}

/// What the mortgage is for (`mortgage_purpose`), with the fields each purpose requires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mortgage_purpose", rename_all = "snake_case")]
pub enum Purpose {
    /// Buying a property.
    Purchase(Purchase),
    /// Remortgaging a property the applicants own.
    Remortgage(Remortgage),
}

impl Purpose {
    /// The purpose as sent (`mortgage_purpose`).
    pub fn purpose(&self) -> MortgagePurpose {
        match self {
            Self::Purchase(_) => MortgagePurpose::Purchase,
            Self::Remortgage(_) => MortgagePurpose::Remortgage,
        }
    }
}

/// The fields of a purchase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Purchase {
    /// The buyer's situation.
    pub purchase_type: PurchaseType,
    /// Required when `purchase_type` is `first_time_buyer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mortgage_scheme: Option<MortgageScheme>,
    /// Approximate value of the new property, or the estimated budget.
    pub new_property_value: f64,
    /// Approximate combined deposit of the applicants.
    pub deposit_amount: f64,
}

/// The fields of a remortgage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remortgage {
    /// Why the applicants are remortgaging.
    pub remortgage_reason: RemortgageReason,
    /// Approximate value of the remortgaged property.
    pub current_property_value: f64,
    /// Approximate amount left on the existing mortgage.
    pub outstanding_mortgage_amount: f64,
    /// Required when `remortgage_reason` is `borrow_more_money`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_borrowing_amount: Option<f64>,
    /// Required when `remortgage_reason` is `release_money`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_borrowing_amount: Option<f64>,
}

/// One applicant address (`AddressRequest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Address {
    /// First address line.
    pub line_1: String,
    /// Second address line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_2: Option<String>,
    /// Third address line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_3: Option<String>,
    /// Town or city.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub town_city: Option<String>,
    /// County.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub county: Option<String>,
    /// Country.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// Postcode.
    pub postcode: String,
    /// When the applicant moved in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_moved_in: Option<NaiveDate>,
    /// When the applicant moved out; not before `date_moved_in`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_moved_out: Option<NaiveDate>,
}

/// The body of the attach endpoint (spec 4.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct AttachRequest {
    /// Applicant e-mail address; it must already have been added by a successful enquiry.
    pub email: String,
    /// Product identifier obtained from the eligibility engine.
    pub product_uuid: Uuid,
}

/// The enquiry a partner submits (spec 2.2).
// Its flat shape for the OpenAPI document: every field of both purposes, the conditional
// ones optional. `Enquiry` is the same body as partners build it; the intake-api parses the
// raw body itself and refines this schema into one per purpose.
#[cfg(feature = "openapi")]
#[derive(Debug, Clone, poem_openapi::Object)]
pub struct EnquiryRequest {
    /// One of the configured brand identifiers (lower case).
    pub brand: String,
    /// Applicant first name.
    #[oai(validator(min_length = 1, max_length = 255))]
    pub first_name: String,
    /// Applicant last name.
    #[oai(validator(min_length = 1, max_length = 255))]
    pub last_name: String,
    /// Applicant e-mail address; compared trimmed and case-insensitively.
    pub email: String,
    /// Applicant mobile phone number: an optional leading `+` and 7 to 15 digits; spaces,
    /// hyphens and brackets are ignored.
    pub mobile_number: String,
    /// Applicant date of birth, `YYYY-MM-DD`, before today.
    pub date_of_birth: String,
    /// Applicant accepts the terms of submission; must be `true`.
    pub terms_agreement: bool,
    /// How far the applicant has got with finding a property.
    pub stage: Stage,
    /// Whether there is one applicant or several.
    pub application_type: ApplicationType,
    /// Status of the primary applicant.
    pub employment_status: EmploymentStatus,
    /// Combined estimated income of all applicants.
    #[oai(validator(minimum(value = "0")))]
    pub total_annual_income: f64,
    /// What the mortgage is for; decides which conditional fields are required.
    pub mortgage_purpose: MortgagePurpose,
    /// Whether the applicants have any adverse credit history.
    pub has_credit_issues: bool,
    /// Required when `has_credit_issues` is true: the kinds of adverse credit history.
    #[oai(validator(min_items = 1, max_items = 20))]
    pub credit_issues: Option<Vec<CreditIssue>>,
    /// Required when `mortgage_purpose` is `purchase`.
    pub purchase_type: Option<PurchaseType>,
    /// Required when `purchase_type` is `first_time_buyer`.
    pub mortgage_scheme: Option<MortgageScheme>,
    /// Required when `mortgage_purpose` is `purchase`: approximate value of the new property or
    /// estimated budget.
    #[oai(validator(minimum(value = "0")))]
    pub new_property_value: Option<f64>,
    /// Required when `mortgage_purpose` is `purchase`: approximate combined deposit of the
    /// applicants.
    #[oai(validator(minimum(value = "0")))]
    pub deposit_amount: Option<f64>,
    /// Required when `mortgage_purpose` is `remortgage`.
    pub remortgage_reason: Option<RemortgageReason>,
    /// Required when `mortgage_purpose` is `remortgage`: approximate value of the remortgaged
    /// property.
    #[oai(validator(minimum(value = "0")))]
    pub current_property_value: Option<f64>,
    /// Required when `mortgage_purpose` is `remortgage`: approximate amount left on the existing
    /// mortgage.
    #[oai(validator(minimum(value = "0")))]
    pub outstanding_mortgage_amount: Option<f64>,
    /// Required when `remortgage_reason` is `borrow_more_money`: approximate extra amount to
    /// borrow.
    #[oai(validator(minimum(value = "0")))]
    pub additional_borrowing_amount: Option<f64>,
    /// Required when `remortgage_reason` is `release_money`: approximate amount to release.
    #[oai(validator(minimum(value = "0")))]
    pub release_borrowing_amount: Option<f64>,
    /// Product identifier obtained from the eligibility engine.
    pub product_uuid: Option<Uuid>,
    /// Consent to a credit check by a credit reference agency.
    #[oai(default)]
    pub credit_check_consent: bool,
    /// Applicant addresses; when present, at least one.
    #[oai(validator(min_items = 1, max_items = 20))]
    pub addresses: Option<Vec<AddressRequest>>,
}

/// One applicant address.
// The document's shape of `Address`, which partners build.
#[cfg(feature = "openapi")]
#[derive(Debug, Clone, poem_openapi::Object)]
pub struct AddressRequest {
    /// First address line.
    #[oai(validator(min_length = 1, max_length = 255))]
    pub line_1: String,
    /// Second address line.
    #[oai(validator(max_length = 255))]
    pub line_2: Option<String>,
    /// Third address line.
    #[oai(validator(max_length = 255))]
    pub line_3: Option<String>,
    /// Town or city.
    #[oai(validator(max_length = 255))]
    pub town_city: Option<String>,
    /// County.
    #[oai(validator(max_length = 255))]
    pub county: Option<String>,
    /// Country.
    #[oai(validator(max_length = 255))]
    pub country: Option<String>,
    /// Postcode.
    #[oai(validator(min_length = 1, max_length = 16))]
    pub postcode: String,
    /// Date the applicant moved in, `YYYY-MM-DD`.
    pub date_moved_in: Option<String>,
    /// Date the applicant moved out, `YYYY-MM-DD`, not before `date_moved_in`.
    pub date_moved_out: Option<String>,
}

/// Where a case stands in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum CaseState {
    /// Referred by a partner; waiting for the customer's enquiry, which makes it
    /// `pending_activation`. A referral opens a case to no partner, so a partner reading
    /// its own cases back no longer meets this status; kept for clients built against it.
    Referred,
    /// Accepted; it becomes active at `activates_at`.
    PendingActivation,
    /// Active.
    Active,
}

/// A case as its partner may read it back: `GET /partners/external/cases/{reference}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct CaseStatusBody {
    /// The case reference number.
    pub reference: String,
    /// The brand the case is with.
    pub brand: String,
    /// `pending_activation` until `activates_at`, then `active` (`referred`, before the
    /// customer's enquiry, is not answered: a partner reads only cases it sent an enquiry
    /// for).
    pub status: CaseState,
    /// When the case was created.
    pub created_at: DateTime<Utc>,
    /// When an enquiry or product last changed it.
    pub updated_at: DateTime<Utc>,
    /// When it becomes (or became) active; null while it is referred, waiting for the
    /// enquiry that starts the delay.
    #[cfg_attr(feature = "openapi", oai(nullable))]
    pub activates_at: Option<DateTime<Utc>>,
    /// When it became active; null until then.
    #[cfg_attr(feature = "openapi", oai(nullable))]
    pub activated_at: Option<DateTime<Utc>>,
    /// The eligibility-engine product attached last; null until one is.
    #[cfg_attr(feature = "openapi", oai(nullable))]
    pub product_uuid: Option<Uuid>,
}

/// The body of the portal's redeem call (`POST /portal/redirect-tokens/redeem`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct RedeemRequest {
    /// The `token` parameter of the customer's redirect link, as it arrived.
    #[cfg_attr(feature = "openapi", oai(validator(max_length = 128)))]
    pub token: String,
}

/// What a redeemed link continues with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum LinkContinuation {
    /// A link attach made: the customer goes on with `product_uuid`.
    Product,
    /// A referral's link: the customer completes their enquiry (the portal's form, with
    /// what the partner referred).
    Enquiry,
}

/// What a redeemed link continues with: the case, and the product the partner attached or
/// the enquiry a referral waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object), oai(example))]
pub struct RedeemedLink {
    /// The case reference number.
    pub reference: String,
    /// The brand the case is with.
    pub brand: String,
    /// `product` for a link attach made, `enquiry` for a referral's.
    pub continue_with: LinkContinuation,
    /// The product attached when the link was made; absent for a referral's link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", oai(skip_serializing_if_is_none))]
    pub product_uuid: Option<Uuid>,
    /// The customer's e-mail address.
    pub email: String,
    /// `true` when the case is a sandbox client's, made for practice (with any address,
    /// a real customer's too): not a real customer's. Show a test page instead of the
    /// real journey, contact no one and keep it out of real records.
    #[serde(default)]
    pub sandbox: bool,
}

/// The intake-api's other error bodies (`Unauthenticated`, `CaseNotFound`, `TooManyAttempts`...):
/// all `{"message": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageBody {
    /// What happened, for people.
    pub message: String,
}

#[cfg(all(test, feature = "openapi"))]
mod tests {
    use poem_openapi::types::ParseFromJSON;
    use serde::de::DeserializeOwned;

    use super::*;

    /// The documented names of `T`, each checked to be the name serde and poem's parser
    /// give the same value.
    fn wire_names<T>() -> Vec<String>
    where
        T: ParseFromJSON + Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let names = super::wire_names::<T>();
        assert!(!names.is_empty(), "{} has no documented names", T::name());
        for name in &names {
            let value: T = serde_json::from_value(name.as_str().into()).expect(name);
            assert_eq!(serde_json::to_value(&value).unwrap(), name.as_str());
            assert_eq!(
                T::parse_from_json(Some(name.as_str().into())).ok(),
                Some(value)
            );
        }
        names
    }

    /// The names a schema documents.
    fn documented<T: poem_openapi::types::Type>() -> std::collections::BTreeSet<String> {
        schema_of::<T>()
            .properties
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect()
    }

    /// The keys serde gives `values`, all together.
    fn keys_of<T: Serialize>(values: &[T]) -> std::collections::BTreeSet<String> {
        values
            .iter()
            .flat_map(|v| match serde_json::to_value(v) {
                Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn the_documented_enquiry_has_the_fields_partners_build() {
        let date = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
        let address = Address {
            line_1: "1 High Street".into(),
            line_2: Some("x".into()),
            line_3: Some("x".into()),
            town_city: Some("x".into()),
            county: Some("x".into()),
            country: Some("x".into()),
            postcode: "LS1 1AA".into(),
            date_moved_in: Some(date),
            date_moved_out: Some(date),
        };
        let purchase = Enquiry {
            brand: "brand_a".into(),
            first_name: "Jane".into(),
            last_name: "Doe".into(),
            email: "a@b.co".into(),
            mobile_number: "07700900123".into(),
            date_of_birth: date,
            terms_agreement: true,
            stage: Stage::Researching,
            application_type: ApplicationType::Single,
            employment_status: EmploymentStatus::Employed,
            total_annual_income: 1.0,
            purpose: Purpose::Purchase(Purchase {
                purchase_type: PurchaseType::FirstTimeBuyer,
                mortgage_scheme: Some(MortgageScheme::No),
                new_property_value: 1.0,
                deposit_amount: 1.0,
            }),
            has_credit_issues: true,
            credit_issues: Some(vec![CreditIssue::Ccj]),
            product_uuid: Some(Uuid::nil()),
            credit_check_consent: Some(true),
            addresses: Some(vec![address.clone()]),
        };
        let remortgage = Enquiry {
            purpose: Purpose::Remortgage(Remortgage {
                remortgage_reason: RemortgageReason::Other,
                current_property_value: 1.0,
                outstanding_mortgage_amount: 1.0,
                additional_borrowing_amount: Some(1.0),
                release_borrowing_amount: Some(1.0),
            }),
            ..purchase.clone()
        };
        assert_eq!(
            documented::<EnquiryRequest>(),
            keys_of(&[purchase, remortgage])
        );
        assert_eq!(documented::<AddressRequest>(), keys_of(&[address]));
    }

    /// Spec 2.2's lists, written out once: renaming a variant fails here instead of changing
    /// what partners must send.
    #[test]
    fn the_wire_names_are_the_lists_of_spec_2_2() {
        assert_eq!(
            wire_names::<Stage>(),
            [
                "viewing_properties",
                "researching",
                "ready_to_make_an_offer",
                "offer_accepted",
            ]
        );
        assert_eq!(
            wire_names::<ApplicationType>(),
            ["single", "multi_applicant"]
        );
        assert_eq!(
            wire_names::<EmploymentStatus>(),
            [
                "employed",
                "self_employed",
                "company_director",
                "contractor",
                "cis_worker",
                "retired",
                "unemployed",
            ]
        );
        assert_eq!(wire_names::<MortgagePurpose>(), ["purchase", "remortgage"]);
        assert_eq!(
            wire_names::<CreditIssue>(),
            [
                "low_credit_score",
                "ccj",
                "default",
                "iva",
                "late_payments_non_mortgage",
                "late_payments_mortgage",
                "debt_management_plan",
                "repossession",
                "bankruptcy",
            ]
        );
        assert_eq!(
            wire_names::<PurchaseType>(),
            ["home_mover", "first_time_buyer", "additional_property"]
        );
        assert_eq!(
            wire_names::<MortgageScheme>(),
            ["shared_ownership", "right_to_buy", "not_sure", "no"]
        );
        assert_eq!(
            wire_names::<RemortgageReason>(),
            [
                "get_better_rate",
                "current_deal_ending",
                "borrow_more_money",
                "release_money",
                "other",
            ]
        );
    }
}
