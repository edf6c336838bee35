//! The intake-api's bodies as they travel: the request bodies (documented here, parsed by the
//! domain) and the success bodies; the error bodies are `error::bodies`.
//!
//! The request types only document the wire format: bodies are parsed by
//! `domain::parse_enquiry`, which reports every problem at once in our own error shape. The
//! enums and the answers partners read are `shared::intake`'s, which the domain parses and
//! the partner client sends, so the documented wire names cannot drift from either.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use poem_openapi::{
    Object,
    registry::{MetaSchema, MetaSchemaRef},
    types::{Example, ParseError, ParseFromJSON, ParseResult, ToJSON, Type},
};
use serde_json::Value;
pub use shared::intake::{CaseResponse, RedirectResponse};
use uuid::Uuid;

use crate::domain::contact::MAX_EMAIL;
use crate::domain::{
    ApplicationType, CreditIssue, Email, EmploymentStatus, MortgagePurpose, MortgageScheme,
    PurchaseType, RemortgageReason, Stage,
};

/// The enquiry a partner submits (spec 2.2). Conditional fields are required only when their
/// condition holds, and ignored otherwise.
#[derive(Debug, Clone, Object)]
pub struct EnquiryRequest {
    /// One of the configured brand identifiers (lower case).
    pub brand: String,
    /// Applicant first name.
    #[oai(validator(min_length = 1, max_length = 255))]
    pub first_name: String,
    /// Applicant last name.
    #[oai(validator(min_length = 1, max_length = 255))]
    pub last_name: String,
    /// Applicant e-mail address (at most 254 characters); compared trimmed and case-insensitively.
    pub email: Email,
    /// Applicant mobile phone number: an optional leading `+` and 7 to 15 digits; spaces,
    /// hyphens and brackets are ignored. At most 32 characters.
    #[oai(validator(pattern = r"^[ ()-]*\+?(?:[ ()-]*[0-9]){7,15}[ ()-]*$"))]
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
#[derive(Debug, Clone, Object)]
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

/// The body of the attach endpoint (spec 4.3).
#[derive(Debug, Clone, Object)]
#[oai(rename = "AttachRequest")]
pub struct AttachRequestBody {
    /// Applicant e-mail address; it must already have been added by a successful enquiry.
    pub email: Email,
    /// Product identifier obtained from the eligibility engine.
    pub product_uuid: Uuid,
}

// `Email` is documented as `format: email` rather than a bare string.
impl Type for Email {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> Cow<'static, str> {
        "string_email".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            max_length: Some(MAX_EMAIL),
            ..MetaSchema::new_with_format("string", "email")
        }))
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(self)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        Box::new(self.as_raw_value().into_iter())
    }
}

impl ParseFromJSON for Email {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::String(raw) => Email::parse(&raw).map_err(ParseError::custom),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl ToJSON for Email {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.as_str().to_owned()))
    }
}

/// Where a case stands in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, poem_openapi::Enum)]
#[oai(rename_all = "snake_case")]
pub enum CaseState {
    /// Referred by a partner; waiting for the customer's enquiry, which makes it
    /// `pending_activation`.
    Referred,
    /// Accepted; it becomes active at `activates_at`.
    PendingActivation,
    /// Active.
    Active,
}

/// A case as its partner may read it back.
#[derive(Debug, Object)]
#[oai(example)]
pub struct CaseStatusBody {
    /// The case reference number.
    pub reference: String,
    /// The brand the case is with.
    pub brand: String,
    /// `pending_activation` until `activates_at`, then `active`; `referred` before the
    /// customer's enquiry.
    pub status: CaseState,
    /// When the case was created.
    pub created_at: DateTime<Utc>,
    /// When an enquiry or product last changed it.
    pub updated_at: DateTime<Utc>,
    /// When it becomes (or became) active; null while it is referred, waiting for the
    /// enquiry that starts the delay.
    #[oai(nullable)]
    pub activates_at: Option<DateTime<Utc>>,
    /// When it became active; null until then.
    #[oai(nullable)]
    pub activated_at: Option<DateTime<Utc>>,
    /// The eligibility-engine product attached last; null until one is.
    #[oai(nullable)]
    pub product_uuid: Option<Uuid>,
}

impl Example for CaseStatusBody {
    fn example() -> Self {
        let created = DateTime::parse_from_rfc3339("2026-11-26T09:30:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default();
        let activates = created + chrono::Duration::minutes(15);
        Self {
            reference: "418290357116".into(),
            brand: "brand_a".into(),
            status: CaseState::Active,
            created_at: created,
            updated_at: created + chrono::Duration::minutes(2),
            activates_at: Some(activates),
            activated_at: Some(activates + chrono::Duration::seconds(1)),
            product_uuid: Uuid::parse_str("3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07").ok(),
        }
    }
}

/// The body of the portal's redeem call.
#[derive(Debug, Clone, Object)]
#[oai(rename = "RedeemRequest", example)]
pub struct RedeemRequestBody {
    /// The `token` parameter of the customer's redirect link, as it arrived.
    #[oai(validator(max_length = 128))]
    pub token: String,
}

impl Example for RedeemRequestBody {
    fn example() -> Self {
        Self {
            token: "q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM".into(),
        }
    }
}

/// What a redeemed link continues with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, poem_openapi::Enum)]
#[oai(rename_all = "snake_case")]
pub enum LinkContinuation {
    /// A link attach made: the customer goes on with `product_uuid`.
    Product,
    /// A referral's link: the customer completes their enquiry (the portal's form, with
    /// what the partner referred).
    Enquiry,
}

/// What a redeemed link continues with: the case, and the product the partner attached or
/// the enquiry a referral waits for.
#[derive(Debug, Object)]
#[oai(example)]
pub struct RedeemedLink {
    /// The case reference number.
    pub reference: String,
    /// The brand the case is with.
    pub brand: String,
    /// `product` for a link attach made, `enquiry` for a referral's.
    pub continue_with: LinkContinuation,
    /// The product attached when the link was made; absent for a referral's link.
    #[oai(skip_serializing_if_is_none)]
    pub product_uuid: Option<Uuid>,
    /// The customer's e-mail address.
    pub email: String,
}

impl Example for RedeemedLink {
    fn example() -> Self {
        Self {
            reference: "418290357116".into(),
            brand: "brand_a".into(),
            continue_with: LinkContinuation::Product,
            product_uuid: Uuid::parse_str("3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07").ok(),
            email: "jane.doe@example.com".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use poem_openapi::{registry::Registry, validation::Pattern, validation::Validator};

    use super::*;
    use crate::domain::MobileNumber;

    fn schema<T: Type>() -> MetaSchema {
        let mut registry = Registry::new();
        T::register(&mut registry);
        registry
            .schemas
            .remove(&*T::name())
            .unwrap_or(MetaSchema::ANY)
    }

    fn property(schema: &MetaSchema, name: &str) -> MetaSchema {
        match schema.properties.iter().find(|(key, _)| *key == name) {
            Some((_, MetaSchemaRef::Inline(meta))) => (**meta).clone(),
            _ => MetaSchema::ANY,
        }
    }

    #[test]
    fn only_the_always_required_fields_are_documented_as_required() {
        // The parser's list starts with them, up to the first that depends on another.
        let always: Vec<&str> = crate::domain::ENQUIRY_FIELDS
            .into_iter()
            .take_while(|field| *field != "credit_issues")
            .collect();
        assert_eq!(always.len(), 13);
        assert_eq!(schema::<EnquiryRequest>().required, always);
        assert_eq!(schema::<AddressRequest>().required, ["line_1", "postcode"]);
        assert_eq!(
            schema::<AttachRequestBody>().required,
            ["email", "product_uuid"]
        );
    }

    /// The names a schema documents, and the keys serde gives `values`, all together.
    fn documented<T: Type>() -> BTreeSet<&'static str> {
        schema::<T>()
            .properties
            .iter()
            .map(|(name, _)| *name)
            .collect()
    }

    fn keys_of<T: serde::Serialize>(values: &[T]) -> BTreeSet<String> {
        values
            .iter()
            .flat_map(|v| match serde_json::to_value(v) {
                Ok(Value::Object(map)) => map.keys().cloned().collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn as_strs(keys: &BTreeSet<String>) -> BTreeSet<&str> {
        keys.iter().map(String::as_str).collect()
    }

    #[test]
    fn the_document_has_the_fields_of_the_enquiry_partners_build() {
        use shared::intake as built;
        let wire = |v: Value| serde_json::from_value::<built::Enquiry>(v).expect("an enquiry");
        let mut purchase = wire(crate::examples::purchase_enquiry("brand_a", "a@b.co"));
        let mut remortgage = wire(crate::examples::remortgage_enquiry("brand_a", "a@b.co"));
        if let built::Purpose::Remortgage(r) = &mut remortgage.purpose {
            r.release_borrowing_amount = Some(1.0);
        }
        remortgage.product_uuid = purchase.product_uuid;
        let mut address = purchase.addresses.clone().unwrap_or_default().remove(0);
        for line in [
            &mut address.line_2,
            &mut address.line_3,
            &mut address.county,
            &mut address.country,
        ] {
            *line = Some("x".into());
        }
        purchase.addresses = Some(vec![address.clone()]);

        assert_eq!(
            documented::<EnquiryRequest>(),
            as_strs(&keys_of(&[purchase, remortgage]))
        );
        assert_eq!(
            documented::<EnquiryRequest>(),
            BTreeSet::from(crate::domain::ENQUIRY_FIELDS),
            "the fields the parser names"
        );
        assert_eq!(
            documented::<AddressRequest>(),
            as_strs(&keys_of(&[address]))
        );
        assert_eq!(
            documented::<AddressRequest>(),
            BTreeSet::from(crate::domain::ADDRESS_FIELDS)
        );
        let attach = built::AttachRequest {
            email: "a@b.co".into(),
            product_uuid: Uuid::nil(),
        };
        assert_eq!(
            documented::<AttachRequestBody>(),
            as_strs(&keys_of(&[attach]))
        );
    }

    #[test]
    fn documented_rules_match_the_parser() {
        let enquiry = schema::<EnquiryRequest>();
        assert_eq!(property(&enquiry, "email").format, Some("email"));
        assert_eq!(property(&enquiry, "deposit_amount").minimum, Some(0.0));
        assert_eq!(
            property(&enquiry, "credit_check_consent").default,
            Some(Value::Bool(false))
        );
        assert_eq!(property(&enquiry, "addresses").min_items, Some(1));

        let mobile = property(&enquiry, "mobile_number")
            .pattern
            .unwrap_or_default();
        // `Pattern` wants a `'static` regex, as the derive gives it; leaking in a test is harmless.
        let pattern = Pattern::new(Box::leak(mobile.into_boxed_str()));
        for sample in [
            "+44 (0)7700-900123",
            "1234567",
            "123456",
            "+1234567890123456",
            "44+7700900",
        ] {
            assert_eq!(
                pattern.check(&sample.to_owned()),
                MobileNumber::parse(sample).is_ok(),
                "pattern and parser disagree on {sample:?}"
            );
        }
    }

    #[test]
    fn email_is_documented_and_parsed_as_an_email() {
        assert_eq!(
            Email::parse_from_json(Some(Value::from(" A@B.CO "))).ok(),
            Email::parse("a@b.co").ok()
        );
        assert!(Email::parse_from_json(Some(Value::from("a@b"))).is_err());
        assert!(Email::parse_from_json(Some(Value::from(3))).is_err());
        assert_eq!(
            Email::parse("a@b.co").ok().and_then(|e| e.to_json()),
            Some(Value::from("a@b.co"))
        );
    }
}
