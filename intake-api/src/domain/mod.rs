//! Domain types: every value past the HTTP edge is parsed into one of these.

pub mod contact;
pub mod enquiry;
pub mod errors;
pub mod parse;
pub mod redirect;
pub mod reference;

pub use contact::{
    Email, InvalidEmail, InvalidMobileNumber, MAX_EMAIL, MAX_MOBILE_CHARS, MOBILE_PATTERN,
    MobileNumber,
};
pub use enquiry::{
    Address, AttachRequest, Brand, Enquiry, Purchase, Purpose, Referral, Remortgage,
};
pub use errors::ValidationErrors;
pub use parse::{
    ADDRESS_FIELDS, DEFAULT_HISTORY_PAGE, ENQUIRY_FIELDS, EndpointRequest, HistoryFilter,
    HistoryParams, MAX_HISTORY_PAGE, MAX_ITEMS, MAX_PARTNER_REFERENCE, MAX_REFERRAL_NOTE,
    MAX_URL_CHARS, OLDEST_BIRTH_YEAR, PURCHASE_FIELDS, REMORTGAGE_FIELDS, parse_attach,
    parse_endpoint_change, parse_enquiry, parse_history_filter, parse_new_endpoint, parse_recover,
    parse_redeem, parse_referral, parse_secret_rotation, parse_test_event,
};
pub use redirect::{RedirectToken, hash_token};
pub use reference::CaseReference;
pub use shared::intake::{
    ApplicationType, CreditIssue, EmploymentStatus, MortgagePurpose, MortgageScheme, PurchaseType,
    RemortgageReason, Stage, wire_names,
};
