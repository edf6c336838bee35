//! The enquiry and attach request as the rest of the service sees them: parsed, every rule
//! holding, conditional fields present exactly when their condition holds.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::contact::{Email, MobileNumber};
pub use shared::intake::{Address, Purchase, Purpose, Remortgage};
use shared::intake::{ApplicationType, CreditIssue, EmploymentStatus, Stage};

/// A brand identifier; brands are configuration, so only `parse` checks membership.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Brand(String);

impl Brand {
    /// Accepts exactly one of the configured brand identifiers.
    pub fn parse(raw: &str, brands: &[&str]) -> Option<Self> {
        brands.contains(&raw).then(|| Self(raw.to_owned()))
    }

    /// The identifier as configured.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A parsed enquiry (spec 2.2): every rule holds, and conditional fields exist only when required.
///
/// `terms_agreement` is not kept: it can only have been `true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enquiry {
    /// One of the configured brands.
    pub brand: Brand,
    /// Applicant first name, trimmed.
    pub first_name: String,
    /// Applicant last name, trimmed.
    pub last_name: String,
    /// Applicant e-mail address.
    pub email: Email,
    /// Applicant mobile phone number.
    pub mobile_number: MobileNumber,
    /// Applicant date of birth, in the past.
    pub date_of_birth: NaiveDate,
    /// How far the applicant has got.
    pub stage: Stage,
    /// Single or multiple applicants.
    pub application_type: ApplicationType,
    /// Status of the primary applicant.
    pub employment_status: EmploymentStatus,
    /// Combined estimated income of all applicants.
    pub total_annual_income: f64,
    /// The purpose with the fields only it needs (flattened: `mortgage_purpose` is the tag);
    /// a conditional field is `Some` exactly when its condition holds.
    #[serde(flatten)]
    pub mortgage: Purpose,
    /// `Some` and non-empty exactly when the applicant declared credit issues.
    pub credit_issues: Option<Vec<CreditIssue>>,
    /// Product chosen in the eligibility engine.
    pub product_uuid: Option<Uuid>,
    /// Consent to a credit check; an omitted value means no consent.
    pub credit_check_consent: bool,
    /// `None` when none were sent, so an update leaves the case's addresses alone. Their
    /// text is trimmed, and blank optional lines are `None`.
    pub addresses: Option<Vec<Address>>,
}

impl Enquiry {
    /// The `has_credit_issues` the partner sent, which `credit_issues` already encodes.
    pub fn has_credit_issues(&self) -> bool {
        self.credit_issues.is_some()
    }
}

/// A parsed referral: what a partner knows of a customer before their enquiry.
///
/// `contact_consent` is not kept: it can only have been `true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referral {
    /// One of the configured brands.
    pub brand: Brand,
    /// Customer first name, trimmed.
    pub first_name: String,
    /// Customer last name, trimmed.
    pub last_name: String,
    /// Customer e-mail address: with the brand, the case it refers to.
    pub email: Email,
    /// Customer mobile phone number.
    pub mobile_number: MobileNumber,
    /// The partner's own reference for the customer, if it sent one.
    pub partner_reference: Option<String>,
    /// The partner's note for whoever takes the case, if it sent one.
    pub note: Option<String>,
}

/// A parsed attach request (spec 4.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachRequest {
    /// Identifies the case (with any brand).
    pub email: Email,
    /// Product chosen in the eligibility engine.
    pub product_uuid: Uuid,
}
