//! The bodies of `openapi/intake-api.yaml` and `openapi/auth-server.yaml`, as Rust types: what
//! goes over the wire is exactly what serde makes of these.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use shared::error::OAuthErrorBody;
pub use shared::intake::{
    ApplicationType, CreditIssue, EmploymentStatus, MortgageScheme, PurchaseType, RemortgageReason,
    Stage,
};
pub use shared::intake::{
    CaseResponse, RedirectResponse, ReferralRequest, ReferralResponse, ValidationErrorBody,
};

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

/// The body of the attach call (`AttachRequest`, spec 4.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachRequest {
    /// The applicant's e-mail address, from an enquiry this partner submitted.
    pub email: String,
    /// Product identifier from the eligibility engine.
    pub product_uuid: Uuid,
}

/// The intake-api's other error bodies (`Unauthenticated`, `CaseNotFound`, `TooManyAttempts`...):
/// all `{"message": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageBody {
    /// What happened, for people.
    pub message: String,
}

/// A successful token response (`AccessTokenResponse`). Not `Debug`: it holds the token.
#[derive(Deserialize)]
pub(crate) struct AccessTokenResponse {
    pub(crate) token_type: String,
    pub(crate) expires_in: i64,
    pub(crate) access_token: String,
}
