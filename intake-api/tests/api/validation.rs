//! Enquiry validation over HTTP: one case per rule of spec 2.2, each answered 422 with exactly
//! its own error; several problems reported at once; bodies that are not JSON or too large.
//! Validation never touches the database, so the refusals run on SQLite only.

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
type Rule = (String, Value, &'static str, String);

fn rule(name: &str, body: Value, path: &'static str, message: &str) -> Rule {
    (name.to_owned(), body, path, message.to_owned())
}

#[rustfmt::skip]
fn rules() -> Vec<Rule> {
    let tomorrow = Utc::now().date_naive().checked_add_days(Days::new(1)).expect("date").to_string();
    let mut rules: Vec<Rule> = [
        ("brand", "brand"), ("first_name", "first name"), ("last_name", "last name"),
        ("email", "email"), ("mobile_number", "mobile number"), ("date_of_birth", "date of birth"),
        ("terms_agreement", "terms agreement"), ("stage", "stage"),
        ("application_type", "application type"), ("employment_status", "employment status"),
        ("total_annual_income", "total annual income"), ("mortgage_purpose", "mortgage purpose"),
        ("has_credit_issues", "has credit issues"),
    ]
    .into_iter()
    .map(|(field, attribute)| {
        let body = without(purchase_enquiry("brand_a", &fresh_email()), field);
        (format!("{field}_is_required"), body, field, format!("The {attribute} field is required."))
    })
    .collect();
    rules.extend([
        // Presence: null and blank strings count as not sent.
        rule("first_name_null_counts_as_missing", p(json!({"first_name": null})),
            "first_name", "The first name field is required."),
        rule("last_name_blank_counts_as_missing", p(json!({"last_name": "   "})),
            "last_name", "The last name field is required."),
        // Types.
        rule("brand_must_be_a_string", p(json!({"brand": 1})),
            "brand", "The brand field must be a string."),
        rule("first_name_must_be_a_string", p(json!({"first_name": ["Jane"]})),
            "first_name", "The first name field must be a string."),
        rule("email_must_be_a_string", p(json!({"email": {"address": "jane@example.com"}})),
            "email", "The email field must be a string."),
        rule("mobile_number_as_json_number_is_not_a_string", p(json!({"mobile_number": 7700900123_u64})),
            "mobile_number", "The mobile number field must be a string."),
        rule("date_of_birth_must_be_a_string", p(json!({"date_of_birth": 19900517})),
            "date_of_birth", "The date of birth field must be a string."),
        rule("terms_agreement_as_string_is_not_a_boolean", p(json!({"terms_agreement": "true"})),
            "terms_agreement", "The terms agreement field must be true or false."),
        rule("stage_as_number_is_not_a_string", p(json!({"stage": 3})),
            "stage", "The stage field must be a string."),
        rule("total_annual_income_as_string_is_not_a_number", p(json!({"total_annual_income": "52000"})),
            "total_annual_income", "The total annual income field must be a number."),
        rule("has_credit_issues_as_string_is_not_a_boolean", p(json!({"has_credit_issues": "false"})),
            "has_credit_issues", "The has credit issues field must be true or false."),
        rule("credit_check_consent_as_string_is_not_a_boolean", p(json!({"credit_check_consent": "yes"})),
            "credit_check_consent", "The credit check consent field must be true or false."),
        rule("deposit_amount_as_boolean_is_not_a_number", p(json!({"deposit_amount": true})),
            "deposit_amount", "The deposit amount field must be a number."),
        rule("credit_issues_must_be_an_array", p(json!({"credit_issues": "ccj"})),
            "credit_issues", "The credit issues field must be an array."),
        rule("addresses_must_be_an_array", p(json!({"addresses": address()})),
            "addresses", "The addresses field must be an array."),
        rule("address_must_be_an_object", p(json!({"addresses": [address(), "1 High Street"]})),
            "addresses.1", "The addresses.1 field must be an object."),
        // Enumerations.
        rule("brand_not_configured_is_rejected", p(json!({"brand": "brand_c"})),
            "brand", "The selected brand is invalid."),
        rule("brand_is_case_sensitive", p(json!({"brand": "Brand_A"})),
            "brand", "The selected brand is invalid."),
        rule("stage_outside_the_list_is_rejected", p(json!({"stage": "browsing"})),
            "stage", "The selected stage is invalid."),
        rule("application_type_outside_the_list_is_rejected", p(json!({"application_type": "joint"})),
            "application_type", "The selected application type is invalid."),
        rule("employment_status_outside_the_list_is_rejected", p(json!({"employment_status": "student"})),
            "employment_status", "The selected employment status is invalid."),
        rule("mortgage_purpose_outside_the_list_is_rejected", p(json!({"mortgage_purpose": "buy_to_let"})),
            "mortgage_purpose", "The selected mortgage purpose is invalid."),
        rule("credit_issue_outside_the_list_is_reported_at_its_index", p(json!({"credit_issues": ["ccj", "parking_fine"]})),
            "credit_issues.1", "The selected credit issues.1 is invalid."),
        rule("purchase_type_outside_the_list_is_rejected", p(json!({"purchase_type": "castle"})),
            "purchase_type", "The selected purchase type is invalid."),
        rule("mortgage_scheme_outside_the_list_is_rejected", p(json!({"mortgage_scheme": "help_to_buy"})),
            "mortgage_scheme", "The selected mortgage scheme is invalid."),
        rule("remortgage_reason_outside_the_list_is_rejected", r(json!({"remortgage_reason": "divorce"})),
            "remortgage_reason", "The selected remortgage reason is invalid."),
        // ISO 8601 dates.
        rule("date_of_birth_in_another_format_is_rejected", p(json!({"date_of_birth": "17/05/1990"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        rule("date_of_birth_unpadded_is_rejected", p(json!({"date_of_birth": "1990-5-17"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        rule("date_of_birth_on_the_30th_of_february_is_rejected", p(json!({"date_of_birth": "1990-02-30"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        rule("date_of_birth_on_the_29th_of_february_of_a_common_year_is_rejected", p(json!({"date_of_birth": "2023-02-29"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        rule("date_of_birth_in_month_13_is_rejected", p(json!({"date_of_birth": "1990-13-01"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        rule("date_of_birth_with_a_time_is_rejected", p(json!({"date_of_birth": "1990-05-17T00:00:00Z"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        rule("date_of_birth_tomorrow_is_rejected", p(json!({"date_of_birth": tomorrow})),
            "date_of_birth", "The date of birth field must be a date before today."),
        rule("date_of_birth_far_in_the_future_is_rejected", p(json!({"date_of_birth": "2999-01-01"})),
            "date_of_birth", "The date of birth field must be a date before today."),
        rule("address_date_moved_in_not_on_the_calendar_is_rejected", a(json!({"date_moved_in": "2019-02-29"})),
            "addresses.0.date_moved_in", "The addresses.0.date moved in field must be a valid date in the format YYYY-MM-DD."),
        rule("address_date_moved_out_not_on_the_calendar_is_rejected", a(json!({"date_moved_out": "2020-04-31"})),
            "addresses.0.date_moved_out", "The addresses.0.date moved out field must be a valid date in the format YYYY-MM-DD."),
        // E-mail, phone and UUID formats.
        rule("email_without_at_sign_is_rejected", p(json!({"email": "jane.example.com"})),
            "email", "The email field must be a valid email address."),
        rule("email_with_two_at_signs_is_rejected", p(json!({"email": "jane@doe@example.com"})),
            "email", "The email field must be a valid email address."),
        rule("email_without_local_part_is_rejected", p(json!({"email": "@example.com"})),
            "email", "The email field must be a valid email address."),
        rule("email_domain_without_dot_is_rejected", p(json!({"email": "jane@localhost"})),
            "email", "The email field must be a valid email address."),
        rule("email_with_inner_whitespace_is_rejected", p(json!({"email": "jane doe@example.com"})),
            "email", "The email field must be a valid email address."),
        rule("mobile_number_with_6_digits_is_rejected", p(json!({"mobile_number": "123 456"})),
            "mobile_number", "The mobile number field must be a valid phone number."),
        rule("mobile_number_with_letters_is_rejected", p(json!({"mobile_number": "07700 90012a"})),
            "mobile_number", "The mobile number field must be a valid phone number."),
        rule("product_uuid_that_is_not_a_uuid_is_rejected", p(json!({"product_uuid": "not-a-uuid"})),
            "product_uuid", "The product uuid field must be a valid UUID."),
        rule("product_uuid_without_hyphens_is_rejected", p(json!({"product_uuid": "67e5504410b1426f9247bb680e5fe0c8"})),
            "product_uuid", "The product uuid field must be a valid UUID."),
        rule("product_uuid_in_braces_is_rejected", p(json!({"product_uuid": "{67e55044-10b1-426f-9247-bb680e5fe0c8}"})),
            "product_uuid", "The product uuid field must be a valid UUID."),
        // Amounts are never negative.
        rule("total_annual_income_negative_is_rejected", p(json!({"total_annual_income": -1})),
            "total_annual_income", "The total annual income field must be at least 0."),
        rule("new_property_value_negative_is_rejected", p(json!({"new_property_value": -1})),
            "new_property_value", "The new property value field must be at least 0."),
        rule("deposit_amount_negative_is_rejected", p(json!({"deposit_amount": -0.01})),
            "deposit_amount", "The deposit amount field must be at least 0."),
        rule("current_property_value_negative_is_rejected", r(json!({"current_property_value": -400000})),
            "current_property_value", "The current property value field must be at least 0."),
        rule("outstanding_mortgage_amount_negative_is_rejected", r(json!({"outstanding_mortgage_amount": -1})),
            "outstanding_mortgage_amount", "The outstanding mortgage amount field must be at least 0."),
        rule("additional_borrowing_amount_negative_is_rejected", r(json!({"additional_borrowing_amount": -5})),
            "additional_borrowing_amount", "The additional borrowing amount field must be at least 0."),
        rule("release_borrowing_amount_negative_is_rejected", r(json!({"remortgage_reason": "release_money", "release_borrowing_amount": -5})),
            "release_borrowing_amount", "The release borrowing amount field must be at least 0."),
        // Terms must be agreed.
        rule("terms_agreement_false_is_not_accepted", p(json!({"terms_agreement": false})),
            "terms_agreement", "The terms agreement field must be accepted."),
        // Conditionally required fields.
        rule("credit_issues_required_when_has_credit_issues", without(p(json!({})), "credit_issues"),
            "credit_issues", "The credit issues field is required when has credit issues is true."),
        rule("credit_issues_empty_when_has_credit_issues_is_rejected", p(json!({"credit_issues": []})),
            "credit_issues", "The credit issues field must have at least 1 items."),
        rule("purchase_type_required_for_a_purchase", without(p(json!({})), "purchase_type"),
            "purchase_type", "The purchase type field is required when mortgage purpose is purchase."),
        rule("new_property_value_required_for_a_purchase", without(p(json!({})), "new_property_value"),
            "new_property_value", "The new property value field is required when mortgage purpose is purchase."),
        rule("deposit_amount_required_for_a_purchase", without(p(json!({})), "deposit_amount"),
            "deposit_amount", "The deposit amount field is required when mortgage purpose is purchase."),
        rule("mortgage_scheme_required_for_a_first_time_buyer", without(p(json!({})), "mortgage_scheme"),
            "mortgage_scheme", "The mortgage scheme field is required when purchase type is first_time_buyer."),
        rule("remortgage_reason_required_for_a_remortgage", without(r(json!({})), "remortgage_reason"),
            "remortgage_reason", "The remortgage reason field is required when mortgage purpose is remortgage."),
        rule("current_property_value_required_for_a_remortgage", without(r(json!({})), "current_property_value"),
            "current_property_value", "The current property value field is required when mortgage purpose is remortgage."),
        rule("outstanding_mortgage_amount_required_for_a_remortgage", without(r(json!({})), "outstanding_mortgage_amount"),
            "outstanding_mortgage_amount", "The outstanding mortgage amount field is required when mortgage purpose is remortgage."),
        rule("additional_borrowing_amount_required_when_borrowing_more_money", without(r(json!({})), "additional_borrowing_amount"),
            "additional_borrowing_amount", "The additional borrowing amount field is required when remortgage reason is borrow_more_money."),
        rule("release_borrowing_amount_required_when_releasing_money", r(json!({"remortgage_reason": "release_money"})),
            "release_borrowing_amount", "The release borrowing amount field is required when remortgage reason is release_money."),
        // Addresses.
        rule("addresses_empty_is_rejected", p(json!({"addresses": []})),
            "addresses", "The addresses field must have at least 1 items."),
        rule("address_without_line_1_is_rejected", a(json!({"line_1": null})),
            "addresses.0.line_1", "The addresses.0.line 1 field is required."),
        rule("second_address_without_postcode_is_reported_at_its_index", p(json!({"addresses": [address(), {"line_1": "2 Low Road"}]})),
            "addresses.1.postcode", "The addresses.1.postcode field is required."),
        rule("address_moved_out_before_moved_in_is_rejected", a(json!({"date_moved_out": "2014-12-31"})),
            "addresses.0.date_moved_out", "The addresses.0.date moved out field must be a date after or equal to addresses.0.date moved in."),
    ]);
    rules
}

async fn each_rule_of_the_enquiry_is_answered_422_with_exactly_its_own_error(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let rules = rules();
    let names: std::collections::HashSet<_> = rules.iter().map(|r| r.0.as_str()).collect();
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
            "addresses.1.date_moved_in": ["The addresses.1.date moved in field must be a valid date in the format YYYY-MM-DD."],
            "addresses.1.line_1": ["The addresses.1.line 1 field is required."],
            "addresses.1.postcode": ["The addresses.1.postcode field is required."],
            "credit_issues.1": ["The selected credit issues.1 is invalid."],
            "credit_issues.3": ["The selected credit issues.3 is invalid."],
            "deposit_amount": ["The deposit amount field must be at least 0."],
            "email": ["The email field must be a valid email address."],
            "first_name": ["The first name field is required."],
        }))
    );
}

async fn a_wrong_type_is_reported_on_its_own_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = p(json!({
        "first_name": ["Jane"],
        "stage": 3,
        "terms_agreement": 1,
        "new_property_value": "250000",
        "credit_issues": {"0": "ccj"},
        "addresses": [{"line_1": 1, "postcode": false}]
    }));
    let reply = app.enquiry(&body).await;
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.body,
        invalid(json!({
            "addresses.0.line_1": ["The addresses.0.line 1 field must be a string."],
            "addresses.0.postcode": ["The addresses.0.postcode field must be a string."],
            "credit_issues": ["The credit issues field must be an array."],
            "first_name": ["The first name field must be a string."],
            "new_property_value": ["The new property value field must be a number."],
            "stage": ["The stage field must be a string."],
            "terms_agreement": ["The terms agreement field must be true or false."],
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
    let body = r(json!({
        "remortgage_reason": "get_better_rate",
        "additional_borrowing_amount": "lots",
        "release_borrowing_amount": -1,
        "purchase_type": "castle",
        "mortgage_scheme": 3,
        "new_property_value": -1,
        "deposit_amount": "none",
        "credit_issues": ["not_a_credit_issue"]
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
    each_rule_of_the_enquiry_is_answered_422_with_exactly_its_own_error,
    several_errors_are_all_reported_at_once,
    a_wrong_type_is_reported_on_its_own_field,
    a_json_body_that_is_not_an_object_reports_every_required_field,
    a_body_that_is_not_json_gets_400_with_a_json_message,
    a_body_over_64_kib_gets_413_and_one_of_64_kib_is_accepted,
);

on_both_backends!(conditional_fields_whose_condition_does_not_hold_are_accepted);
