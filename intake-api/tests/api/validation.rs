//! Enquiry validation over HTTP: one rule of each kind answered 422 with exactly its own
//! error, several problems reported at once, fields that are ignored, and bodies that are not
//! JSON or too large. Every rule of spec 2.2 has its case in the unit rule table
//! (`domain/parse/tests.rs`); here is what only the running service shows. Validation never
//! touches the database, so the refusals run on SQLite only.

use chrono::{Days, Utc};
use serde_json::{Value, json};

use crate::helpers::{
    Backend, ENQUIRY, TestApp, address, fresh_email, invalid, message, purchase_enquiry,
    remortgage_enquiry, with,
};
use test_support::{on_both_backends, on_sqlite};

/// `base` without the top-level field `key`.
fn without(mut base: Value, key: &str) -> Value {
    base.as_object_mut().expect("object").remove(key);
    base
}

/// A purchase enquiry with `patch` applied.
fn p(patch: Value) -> Value {
    with(purchase_enquiry("brand_a", &fresh_email()), patch)
}

/// A remortgage enquiry with `patch` applied.
fn r(patch: Value) -> Value {
    with(remortgage_enquiry("brand_b", &fresh_email()), patch)
}

/// A purchase enquiry whose only address has `patch` applied.
fn a(patch: Value) -> Value {
    p(json!({"addresses": [with(address(), patch)]}))
}

/// (rule, body, field path, the one message expected there)
type Rule = (&'static str, Value, &'static str, String);

fn rule(name: &'static str, body: Value, path: &'static str, message: &str) -> Rule {
    (name, body, path, message.to_owned())
}

#[rustfmt::skip]
fn rules() -> Vec<Rule> {
    let tomorrow = Utc::now().date_naive().checked_add_days(Days::new(1)).expect("date").to_string();
    vec![
        // One rule of each kind.
        rule("email_is_required", without(p(json!({})), "email"),
            "email", "The email field is required."),
        rule("stage_outside_the_list_is_rejected", p(json!({"stage": "browsing"})),
            "stage", "The selected stage is invalid; allowed values: viewing_properties, researching, ready_to_make_an_offer, offer_accepted."),
        rule("email_without_at_sign_is_rejected", p(json!({"email": "jane.example.com"})),
            "email", "The email field must be a valid email address."),
        rule("terms_agreement_false_is_not_accepted", p(json!({"terms_agreement": false})),
            "terms_agreement", "The terms agreement field must be accepted."),
        rule("remortgage_reason_required_for_a_remortgage", without(r(json!({})), "remortgage_reason"),
            "remortgage_reason", "The remortgage reason field is required when mortgage purpose is remortgage."),
        rule("addresses_empty_is_rejected", p(json!({"addresses": []})),
            "addresses", "The addresses field must have at least 1 item."),
        rule("credit_issue_outside_the_list_is_reported_at_its_index", p(json!({"credit_issues": ["ccj", "parking_fine"]})),
            "credit_issues.1", "The selected credit_issues.1 is invalid; allowed values: low_credit_score, ccj, default, iva, late_payments_non_mortgage, late_payments_mortgage, debt_management_plan, repossession, bankruptcy."),
        rule("second_address_without_postcode_is_reported_at_its_index", p(json!({"addresses": [address(), {"line_1": "2 Low Road"}]})),
            "addresses.1.postcode", "The addresses.1.postcode field is required."),
        rule("address_moved_out_before_moved_in_is_rejected", a(json!({"date_moved_out": "2014-12-31"})),
            "addresses.0.date_moved_out", "The addresses.0.date_moved_out field must be a date after or equal to addresses.0.date_moved_in."),
        // Rules that depend on the running service: its configured brands and today's date.
        rule("brand_not_configured_is_rejected", p(json!({"brand": "brand_c"})),
            "brand", "The selected brand is invalid; allowed values: brand_a, brand_b."),
        rule("date_of_birth_tomorrow_is_rejected", p(json!({"date_of_birth": tomorrow})),
            "date_of_birth", "The date of birth field must be a date before today."),
        // Rules the unit rule table does not list, so they are checked here: wrong types,
        // amounts below zero, a date that is not on the calendar.
        rule("brand_must_be_a_string", p(json!({"brand": 1})),
            "brand", "The brand field must be a string."),
        rule("email_must_be_a_string", p(json!({"email": {"address": "jane@example.com"}})),
            "email", "The email field must be a string."),
        rule("date_of_birth_must_be_a_string", p(json!({"date_of_birth": 19900517})),
            "date_of_birth", "The date of birth field must be a string."),
        rule("deposit_amount_as_boolean_is_not_a_number", p(json!({"deposit_amount": true})),
            "deposit_amount", "The deposit amount field must be a number."),
        rule("new_property_value_negative_is_rejected", p(json!({"new_property_value": -1})),
            "new_property_value", "The new property value field must be at least 0."),
        rule("current_property_value_negative_is_rejected", r(json!({"current_property_value": -400000})),
            "current_property_value", "The current property value field must be at least 0."),
        rule("outstanding_mortgage_amount_negative_is_rejected", r(json!({"outstanding_mortgage_amount": -1})),
            "outstanding_mortgage_amount", "The outstanding mortgage amount field must be at least 0."),
        rule("release_borrowing_amount_negative_is_rejected", r(json!({"remortgage_reason": "release_money", "release_borrowing_amount": -5})),
            "release_borrowing_amount", "The release borrowing amount field must be at least 0."),
        // The document's maxLength counts what the service trims: a value padded past it is
        // refused as the schema refuses it.
        rule("mobile_number_padded_to_6000_characters_is_rejected", p(json!({"mobile_number": format!("07700900123{}", " ".repeat(5989))})),
            "mobile_number", "The mobile number field must not be greater than 32 characters."),
        rule("address_line_3_blank_past_255_characters_is_rejected", a(json!({"line_3": " ".repeat(300)})),
            "addresses.0.line_3", "The addresses.0.line_3 field must not be greater than 255 characters."),
        rule("address_date_moved_out_not_on_the_calendar_is_rejected", a(json!({"date_moved_out": "2020-04-31"})),
            "addresses.0.date_moved_out", "The addresses.0.date_moved_out field must be a valid date in the format YYYY-MM-DD."),
    ]
}

async fn each_kind_of_invalid_enquiry_is_answered_422_with_exactly_its_own_error(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let rules = rules();
    let names: std::collections::HashSet<_> = rules.iter().map(|r| r.0).collect();
    assert_eq!(names.len(), rules.len(), "rule names must be unique");
    let mut failures = Vec::new();
    for (name, body, path, text) in &rules {
        let reply = app.enquiry(body).await;
        let expected = invalid(json!({ (*path): [text] }));
        if reply.status != 422 || reply.body != expected {
            failures.push(format!("{name}: got {} {}", reply.status, reply.body));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rules failed:\n{}",
        failures.len(),
        rules.len(),
        failures.join("\n")
    );
}

async fn several_errors_are_all_reported_at_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = p(json!({
        "first_name": null,
        "email": "nope",
        "deposit_amount": -1,
        "credit_issues": ["ccj", "x", "iva", "y"],
        "addresses": [address(), {"date_moved_in": "2020-02-30"}]
    }));
    let reply = app.enquiry(&body).await;
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.body,
        invalid(json!({
            "addresses.1.date_moved_in": ["The addresses.1.date_moved_in field must be a valid date in the format YYYY-MM-DD."],
            "addresses.1.line_1": ["The addresses.1.line_1 field is required."],
            "addresses.1.postcode": ["The addresses.1.postcode field is required."],
            "credit_issues.1": ["The selected credit_issues.1 is invalid; allowed values: low_credit_score, ccj, default, iva, late_payments_non_mortgage, late_payments_mortgage, debt_management_plan, repossession, bankruptcy."],
            "credit_issues.3": ["The selected credit_issues.3 is invalid; allowed values: low_credit_score, ccj, default, iva, late_payments_non_mortgage, late_payments_mortgage, debt_management_plan, repossession, bankruptcy."],
            "deposit_amount": ["The deposit amount field must be at least 0."],
            "email": ["The email field must be a valid email address."],
            "first_name": ["The first name field is required."],
        }))
    );
}

async fn a_json_body_that_is_not_an_object_reports_every_required_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let reply = app.enquiry(&json!([1, 2])).await;
    assert_eq!(reply.status, 422);
    let errors: serde_json::Map<String, Value> = [
        ("application_type", "application type"),
        ("brand", "brand"),
        ("date_of_birth", "date of birth"),
        ("email", "email"),
        ("employment_status", "employment status"),
        ("first_name", "first name"),
        ("has_credit_issues", "has credit issues"),
        ("last_name", "last name"),
        ("mobile_number", "mobile number"),
        ("mortgage_purpose", "mortgage purpose"),
        ("stage", "stage"),
        ("terms_agreement", "terms agreement"),
        ("total_annual_income", "total annual income"),
    ]
    .into_iter()
    .map(|(k, a)| (k.to_owned(), json!([format!("The {a} field is required.")])))
    .collect();
    assert_eq!(reply.body, invalid(Value::Object(errors)));
}

async fn conditional_fields_whose_condition_does_not_hold_are_accepted(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // The other purpose's fields are ignored whatever they hold; the purpose's own
    // conditional fields must be valid when sent, and are dropped when their condition
    // does not hold.
    let body = r(json!({
        "remortgage_reason": "get_better_rate",
        "additional_borrowing_amount": 1000,
        "release_borrowing_amount": 2000,
        "purchase_type": "castle",
        "mortgage_scheme": 3,
        "new_property_value": -1,
        "deposit_amount": "none",
        "credit_issues": ["ccj"]
    }));
    let reply = app.enquiry(&body).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    assert_eq!(reply.body["message"], "Case created");
    // None of them reaches the case; an omitted consent is stored as false.
    let stored = app
        .intake_column(
            "SELECT CAST(enquiry AS TEXT) AS enquiry FROM cases",
            "enquiry",
        )
        .await;
    let stored: Value = serde_json::from_str(&stored[0]).expect("stored enquiry is JSON");
    for field in [
        "additional_borrowing_amount",
        "release_borrowing_amount",
        "purchase_type",
        "mortgage_scheme",
        "new_property_value",
        "deposit_amount",
        "credit_issues",
    ] {
        assert!(
            stored.get(field).is_none_or(Value::is_null),
            "{field} applied to the case: {stored}"
        );
    }
    assert_eq!(stored["remortgage_reason"], "get_better_rate");
    assert_eq!(stored["credit_check_consent"], false);
}

async fn unknown_fields_are_accepted_and_kept_out_of_the_case(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = p(json!({
        "utm_source": "partner-site",
        "addresses": [with(address(), json!({"flat": "2"}))]
    }));
    let reply = app.enquiry(&body).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let reference = reply.body["reference"].as_str().expect("reference");
    assert_eq!(
        reply.body,
        json!({"message": "Case created", "reference": reference})
    );
    let stored = app
        .intake_column(
            "SELECT CAST(enquiry AS TEXT) AS enquiry FROM cases",
            "enquiry",
        )
        .await;
    let stored: Value = serde_json::from_str(&stored[0]).expect("stored enquiry is JSON");
    assert!(stored.get("utm_source").is_none(), "{stored}");
    assert!(stored["addresses"][0].get("flat").is_none(), "{stored}");
    assert_eq!(stored["addresses"][0]["postcode"], "LS1 1AA");
}

async fn a_body_that_is_not_json_gets_400_with_a_json_message(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let bearer = app.bearer();
    for (name, body) in [
        ("plain text", b"brand=brand_a".to_vec()),
        ("truncated JSON", br#"{"brand": "brand_a", "#.to_vec()),
        ("empty body", Vec::new()),
        ("not UTF-8", vec![b'"', 0xff, 0xfe, b'"']),
    ] {
        let reply = app.post_raw(ENQUIRY, Some(&bearer), body).await;
        assert_eq!(reply.status, 400, "{name}: {:?}", reply.body);
        assert_eq!(
            reply.body,
            message("The request body must be valid JSON."),
            "{name}"
        );
    }
}

/// A valid enquiry padded with an ignored field to exactly `size` bytes.
fn enquiry_of_size(size: usize) -> Vec<u8> {
    let base = p(json!({"padding": ""})).to_string();
    let body = p(json!({"padding": "x".repeat(size - base.len())})).to_string();
    // Both bodies come from `p`, whose fresh e-mail addresses have the same length.
    assert_eq!(body.len(), size);
    body.into_bytes()
}

async fn a_body_over_64_kib_gets_413_and_one_of_64_kib_is_accepted(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let bearer = app.bearer();
    let reply = app
        .post_raw(ENQUIRY, Some(&bearer), enquiry_of_size(64 * 1024 + 1))
        .await;
    assert_eq!(reply.status, 413, "{:?}", reply.body);
    assert_eq!(
        reply.body,
        message("The request body must not exceed 64 KiB.")
    );
    let reply = app
        .post_raw(ENQUIRY, Some(&bearer), enquiry_of_size(64 * 1024))
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
}

on_sqlite!(
    each_kind_of_invalid_enquiry_is_answered_422_with_exactly_its_own_error,
    several_errors_are_all_reported_at_once,
    unknown_fields_are_accepted_and_kept_out_of_the_case,
    a_json_body_that_is_not_an_object_reports_every_required_field,
    a_body_that_is_not_json_gets_400_with_a_json_message,
    a_body_over_64_kib_gets_413_and_one_of_64_kib_is_accepted,
);

on_both_backends!(conditional_fields_whose_condition_does_not_hold_are_accepted);
