//! Complete, valid request bodies: the enquiries the tests, the local launcher's demo and the
//! documentation start from, so there is one of each to keep right.

use serde_json::{Value, json};

/// A product identifier as the eligibility engine hands them out.
pub const PRODUCT_UUID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

/// A complete applicant address.
pub fn address() -> Value {
    json!({
        "line_1": "1 High Street",
        "town_city": "Leeds",
        "postcode": "LS1 1AA",
        "date_moved_in": "2015-01-01",
        "date_moved_out": "2020-01-01"
    })
}

/// A purchase by a first-time buyer with credit issues and an address, every field filled.
pub fn purchase_enquiry(brand: &str, email: &str) -> Value {
    json!({
        "brand": brand,
        "first_name": "Jane",
        "last_name": "Doe",
        "email": email,
        "mobile_number": "+44 7700 900123",
        "date_of_birth": "1990-05-17",
        "terms_agreement": true,
        "stage": "offer_accepted",
        "application_type": "single",
        "employment_status": "employed",
        "total_annual_income": 52000.5,
        "mortgage_purpose": "purchase",
        "purchase_type": "first_time_buyer",
        "mortgage_scheme": "shared_ownership",
        "new_property_value": 250000,
        "deposit_amount": 25000,
        "has_credit_issues": true,
        "credit_issues": ["ccj", "late_payments_non_mortgage"],
        "product_uuid": PRODUCT_UUID,
        "credit_check_consent": true,
        "addresses": [address()]
    })
}

/// A remortgage to borrow more money, without the optional fields.
pub fn remortgage_enquiry(brand: &str, email: &str) -> Value {
    json!({
        "brand": brand,
        "first_name": "John",
        "last_name": "Smith",
        "email": email,
        "mobile_number": "07700900123",
        "date_of_birth": "1980-12-31",
        "terms_agreement": true,
        "stage": "researching",
        "application_type": "multi_applicant",
        "employment_status": "self_employed",
        "total_annual_income": 0,
        "mortgage_purpose": "remortgage",
        "remortgage_reason": "borrow_more_money",
        "current_property_value": 400000,
        "outstanding_mortgage_amount": 150000.75,
        "additional_borrowing_amount": 30000,
        "has_credit_issues": false
    })
}

/// `base` with the top-level keys of `patch` replaced (a `null` in `patch` is sent as null).
pub fn with(mut base: Value, patch: Value) -> Value {
    if let (Some(base), Value::Object(patch)) = (base.as_object_mut(), patch) {
        base.extend(patch);
    }
    base
}
