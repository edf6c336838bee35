//! Domain types: every value past the HTTP edge is parsed into one of these.

pub mod enquiry;
pub mod errors;
pub mod schema;

pub use enquiry::{
    Address, ApplicationType, AttachRequest, Brand, CreditIssue, Email, EmploymentStatus, Enquiry,
    InvalidEmail, InvalidMobileNumber, MobileNumber, Mortgage, MortgagePurpose, MortgageScheme,
    Purchase, PurchaseType, Remortgage, RemortgageReason, Stage, parse_attach, parse_enquiry,
};
pub use errors::ValidationErrors;
pub use schema::{AddressRequest, AttachRequestBody, EnquiryRequest};
