//! The rule table: one named case per rule, and the parser's behaviour around them.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{parse_attach, parse_enquiry, parse_redeem, parse_referral};
use crate::domain::*;
use crate::examples::{self, with};
const BRANDS: &[&str] = &["brand_a", "brand_b"];

fn day(iso: &str) -> NaiveDate {
    iso.parse().expect("test dates are valid")
}

fn today() -> NaiveDate {
    day("2025-06-15")
}

fn parse(body: &Value) -> Result<Enquiry, ValidationErrors> {
    parse_enquiry(body, BRANDS, today())
}

fn errors(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
    let mut map = BTreeMap::<String, Vec<String>>::new();
    for (path, message) in entries {
        map.entry(path.to_string())
            .or_default()
            .push(with_allowed_values(path, message));
    }
    map
}

/// A choice's message as the table writes it ("The selected stage is invalid.") with the
/// allowed values the parser adds, taken from the types rather than written out again.
fn with_allowed_values(path: &str, message: &str) -> String {
    let Some(stem) = message.strip_suffix(" is invalid.") else {
        return message.to_owned();
    };
    let field = path.split('.').find(|part| part.parse::<usize>().is_err());
    let allowed = match field.unwrap_or_default() {
        "brand" => BRANDS.iter().map(|b| b.to_string()).collect(),
        "stage" => wire_names::<Stage>(),
        "application_type" => wire_names::<ApplicationType>(),
        "employment_status" => wire_names::<EmploymentStatus>(),
        "mortgage_purpose" => wire_names::<MortgagePurpose>(),
        "credit_issues" => wire_names::<CreditIssue>(),
        "purchase_type" => wire_names::<PurchaseType>(),
        "mortgage_scheme" => wire_names::<MortgageScheme>(),
        "remortgage_reason" => wire_names::<RemortgageReason>(),
        _ => return message.to_owned(),
    };
    format!("{stem} is invalid; allowed values: {}.", allowed.join(", "))
}

#[test]
fn a_choice_names_every_allowed_value() {
    assert_eq!(
        error_map(&with(purchase_body(), json!({"stage": "dreaming"}))),
        BTreeMap::from([(
            "stage".to_owned(),
            vec![
                "The selected stage is invalid; allowed values: viewing_properties, researching, ready_to_make_an_offer, offer_accepted.".to_owned()
            ]
        )])
    );
}

fn error_map(body: &Value) -> BTreeMap<String, Vec<String>> {
    parse(body)
        .err()
        .map(ValidationErrors::into_map)
        .unwrap_or_default()
}

/// The address fixture, with text to trim and a blank line to drop.
fn address() -> Value {
    with(
        examples::address(),
        json!({"line_1": " 1 High Street ", "line_2": ""}),
    )
}

/// The purchase fixture, with values to normalise and a field the parser ignores.
fn purchase_body() -> Value {
    with(
        examples::purchase_enquiry("brand_a", " Jane.Doe@Example.COM "),
        json!({
            "first_name": " Jane ",
            "mobile_number": "+44 (0)7700-900123",
            "employment_status": "cis_worker",
            "addresses": [address()],
            "utm_source": "unknown fields are ignored"
        }),
    )
}

fn remortgage_body() -> Value {
    examples::remortgage_enquiry("brand_b", "john@example.co.uk")
}

fn brand(id: &str) -> Brand {
    Brand::parse(id, BRANDS).expect("a configured brand")
}

fn email(raw: &str) -> Email {
    Email::parse(raw).expect("a valid e-mail address")
}

fn mobile(raw: &str) -> MobileNumber {
    MobileNumber::parse(raw).expect("a valid mobile number")
}

/// A valid purchase enquiry, every field set.
fn purchase_enquiry() -> Enquiry {
    Enquiry {
        brand: brand("brand_a"),
        first_name: "Jane".into(),
        last_name: "Doe".into(),
        email: email("jane.doe@example.com"),
        mobile_number: mobile("+4407700900123"),
        date_of_birth: day("1990-05-17"),
        stage: Stage::OfferAccepted,
        application_type: ApplicationType::Single,
        employment_status: EmploymentStatus::CisWorker,
        total_annual_income: 52000.5,
        mortgage: Purpose::Purchase(Purchase {
            purchase_type: PurchaseType::FirstTimeBuyer,
            mortgage_scheme: Some(MortgageScheme::SharedOwnership),
            new_property_value: 250000.0,
            deposit_amount: 25000.0,
        }),
        credit_issues: Some(vec![CreditIssue::Ccj, CreditIssue::LatePaymentsNonMortgage]),
        product_uuid: Some(Uuid::from_u128(0x67e55044_10b1_426f_9247_bb680e5fe0c8)),
        credit_check_consent: true,
        addresses: Some(vec![Address {
            line_1: "1 High Street".into(),
            line_2: None,
            line_3: None,
            town_city: Some("Leeds".into()),
            county: None,
            country: None,
            postcode: "LS1 1AA".into(),
            date_moved_in: Some(day("2015-01-01")),
            date_moved_out: Some(day("2020-01-01")),
        }]),
    }
}

/// One case per rule: a valid body broken in exactly one way, and the one error it must give.
#[rustfmt::skip]
fn rule_cases() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let p = |patch: Value| with(purchase_body(), patch);
    let r = |patch: Value| with(remortgage_body(), patch);
    let a = |patch: Value| p(json!({"addresses": [with(address(), patch)]}));
    vec![
        ("brand_is_required", p(json!({"brand": null})),
            "brand", "The brand field is required."),
        ("brand_not_configured_is_rejected", p(json!({"brand": "brand_c"})),
            "brand", "The selected brand is invalid."),
        ("brand_is_case_sensitive", p(json!({"brand": "Brand_A"})),
            "brand", "The selected brand is invalid."),
        ("first_name_null_counts_as_missing", p(json!({"first_name": null})),
            "first_name", "The first name field is required."),
        ("first_name_blank_counts_as_missing", p(json!({"first_name": "   "})),
            "first_name", "The first name field is required."),
        ("first_name_longer_than_255_characters_is_rejected", p(json!({"first_name": "é".repeat(256)})),
            "first_name", "The first name field must not be greater than 255 characters."),
        ("last_name_must_be_a_string", p(json!({"last_name": 42})),
            "last_name", "The last name field must be a string."),
        ("last_name_with_a_nul_is_rejected", p(json!({"last_name": "a\u{0}b"})),
            "last_name", "The last name field must not contain control characters."),
        ("first_name_with_a_tab_is_rejected", p(json!({"first_name": "Ja\tne"})),
            "first_name", "The first name field must not contain control characters."),
        ("first_name_with_a_c1_control_is_rejected", p(json!({"first_name": "Ja\u{85}ne"})),
            "first_name", "The first name field must not contain control characters."),
        ("email_with_a_nul_is_rejected", p(json!({"email": "x\u{0}@example.com"})),
            "email", "The email field must not contain control characters."),
        ("address_line_1_with_delete_is_rejected", a(json!({"line_1": "1 High\u{7f} Street"})),
            "addresses.0.line_1", "The addresses.0.line_1 field must not contain control characters."),
        ("brand_with_a_nul_is_rejected", p(json!({"brand": "brand_a\u{0}"})),
            "brand", "The brand field must not contain control characters."),
        ("email_is_required", p(json!({"email": ""})),
            "email", "The email field is required."),
        ("email_without_at_sign_is_rejected", p(json!({"email": "jane.example.com"})),
            "email", "The email field must be a valid email address."),
        ("email_with_two_at_signs_is_rejected", p(json!({"email": "jane@doe@example.com"})),
            "email", "The email field must be a valid email address."),
        ("email_with_empty_local_part_is_rejected", p(json!({"email": "@example.com"})),
            "email", "The email field must be a valid email address."),
        ("email_domain_without_dot_is_rejected", p(json!({"email": "jane@localhost"})),
            "email", "The email field must be a valid email address."),
        ("email_domain_with_empty_label_is_rejected", p(json!({"email": "jane@example..com"})),
            "email", "The email field must be a valid email address."),
        ("email_with_inner_whitespace_is_rejected", p(json!({"email": "jane doe@example.com"})),
            "email", "The email field must be a valid email address."),
        ("email_longer_than_254_characters_is_rejected", p(json!({"email": format!("{}@example.com", "a".repeat(243))})),
            "email", "The email field must be a valid email address."),
        ("mobile_number_with_6_digits_is_rejected", p(json!({"mobile_number": "123 456"})),
            "mobile_number", "The mobile number field must be a valid phone number: an optional leading + and 7 to 15 digits."),
        ("mobile_number_longer_than_32_characters_is_rejected", p(json!({"mobile_number": format!("+44 {}", " ".repeat(40)) + "7700900123"})),
            "mobile_number", "The mobile number field must not be greater than 32 characters."),
        ("mobile_number_padded_past_32_characters_is_rejected", p(json!({"mobile_number": format!("07700900123{}", " ".repeat(6000))})),
            "mobile_number", "The mobile number field must not be greater than 32 characters."),
        ("first_name_padded_past_255_characters_is_rejected", p(json!({"first_name": format!(" Jane{}", " ".repeat(255))})),
            "first_name", "The first name field must not be greater than 255 characters."),
        ("email_padded_past_254_characters_is_rejected", p(json!({"email": format!("jane@example.com{}", " ".repeat(240))})),
            "email", "The email field must be a valid email address."),
        ("mobile_number_with_16_digits_is_rejected", p(json!({"mobile_number": "+1234567890123456"})),
            "mobile_number", "The mobile number field must be a valid phone number: an optional leading + and 7 to 15 digits."),
        ("mobile_number_with_letters_is_rejected", p(json!({"mobile_number": "07700 90012a"})),
            "mobile_number", "The mobile number field must be a valid phone number: an optional leading + and 7 to 15 digits."),
        ("mobile_number_plus_not_leading_is_rejected", p(json!({"mobile_number": "44+7700900123"})),
            "mobile_number", "The mobile number field must be a valid phone number: an optional leading + and 7 to 15 digits."),
        ("mobile_number_as_json_number_is_rejected", p(json!({"mobile_number": 7700900123_u64})),
            "mobile_number", "The mobile number field must be a string."),
        ("date_of_birth_is_required", p(json!({"date_of_birth": null})),
            "date_of_birth", "The date of birth field is required."),
        ("date_of_birth_unpadded_is_rejected", p(json!({"date_of_birth": "1990-5-17"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        ("date_of_birth_not_on_the_calendar_is_rejected", p(json!({"date_of_birth": "1990-02-30"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        ("date_of_birth_in_month_13_is_rejected", p(json!({"date_of_birth": "1990-13-01"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        ("date_of_birth_on_day_0_is_rejected", p(json!({"date_of_birth": "1990-05-00"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        ("date_of_birth_with_a_time_is_rejected", p(json!({"date_of_birth": "1990-05-17T00:00:00Z"})),
            "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
        ("date_of_birth_today_is_rejected", p(json!({"date_of_birth": "2025-06-15"})),
            "date_of_birth", "The date of birth field must be a date before today."),
        ("date_of_birth_in_the_future_is_rejected", p(json!({"date_of_birth": "2030-01-01"})),
            "date_of_birth", "The date of birth field must be a date before today."),
        ("date_of_birth_before_1900_is_rejected", p(json!({"date_of_birth": "1899-12-31"})),
            "date_of_birth", "The date of birth field must be a date after or equal to 1900-01-01."),
        ("terms_agreement_is_required", p(json!({"terms_agreement": null})),
            "terms_agreement", "The terms agreement field is required."),
        ("terms_agreement_false_is_not_accepted", p(json!({"terms_agreement": false})),
            "terms_agreement", "The terms agreement field must be accepted."),
        ("terms_agreement_as_string_is_not_a_boolean", p(json!({"terms_agreement": "true"})),
            "terms_agreement", "The terms agreement field must be true or false."),
        ("stage_is_required", p(json!({"stage": null})),
            "stage", "The stage field is required."),
        ("stage_outside_the_list_is_rejected", p(json!({"stage": "browsing"})),
            "stage", "The selected stage is invalid."),
        ("application_type_outside_the_list_is_rejected", p(json!({"application_type": "joint"})),
            "application_type", "The selected application type is invalid."),
        ("employment_status_outside_the_list_is_rejected", p(json!({"employment_status": "student"})),
            "employment_status", "The selected employment status is invalid."),
        ("employment_status_is_case_sensitive", p(json!({"employment_status": "Employed"})),
            "employment_status", "The selected employment status is invalid."),
        ("total_annual_income_is_required", p(json!({"total_annual_income": null})),
            "total_annual_income", "The total annual income field is required."),
        ("total_annual_income_negative_is_rejected", p(json!({"total_annual_income": -1})),
            "total_annual_income", "The total annual income field must be at least 0."),
        ("total_annual_income_as_string_is_not_a_number", p(json!({"total_annual_income": "52000"})),
            "total_annual_income", "The total annual income field must be a number."),
        ("mortgage_purpose_is_required", p(json!({"mortgage_purpose": null})),
            "mortgage_purpose", "The mortgage purpose field is required."),
        ("mortgage_purpose_outside_the_list_is_rejected", p(json!({"mortgage_purpose": "buy_to_let"})),
            "mortgage_purpose", "The selected mortgage purpose is invalid."),
        ("has_credit_issues_is_required", p(json!({"has_credit_issues": null})),
            "has_credit_issues", "The has credit issues field is required."),
        ("has_credit_issues_as_string_is_not_a_boolean", p(json!({"has_credit_issues": "false"})),
            "has_credit_issues", "The has credit issues field must be true or false."),
        ("credit_issues_required_when_has_credit_issues", p(json!({"credit_issues": null})),
            "credit_issues", "The credit issues field is required when has credit issues is true."),
        ("credit_issues_empty_is_rejected", p(json!({"credit_issues": []})),
            "credit_issues", "The credit issues field must have at least 1 item."),
        ("credit_issues_must_be_an_array", p(json!({"credit_issues": "ccj"})),
            "credit_issues", "The credit issues field must be an array."),
        ("credit_issues_more_than_20_are_rejected", p(json!({"credit_issues": vec!["ccj"; 21]})),
            "credit_issues", "The credit issues field must not have more than 20 items."),
        ("credit_issue_outside_the_list_is_reported_at_its_index", p(json!({"credit_issues": ["ccj", "parking_fine"]})),
            "credit_issues.1", "The selected credit_issues.1 is invalid."),
        ("credit_issue_of_wrong_type_is_reported_at_its_index", p(json!({"credit_issues": [7]})),
            "credit_issues.0", "The credit_issues.0 field must be a string."),
        ("purchase_type_required_for_a_purchase", p(json!({"purchase_type": null})),
            "purchase_type", "The purchase type field is required when mortgage purpose is purchase."),
        ("purchase_type_outside_the_list_is_rejected", p(json!({"purchase_type": "buy_to_let"})),
            "purchase_type", "The selected purchase type is invalid."),
        ("mortgage_scheme_required_for_a_first_time_buyer", p(json!({"mortgage_scheme": null})),
            "mortgage_scheme", "The mortgage scheme field is required when purchase type is first_time_buyer."),
        ("mortgage_scheme_outside_the_list_is_rejected", p(json!({"mortgage_scheme": "help_to_buy"})),
            "mortgage_scheme", "The selected mortgage scheme is invalid."),
        ("new_property_value_required_for_a_purchase", p(json!({"new_property_value": null})),
            "new_property_value", "The new property value field is required when mortgage purpose is purchase."),
        ("new_property_value_as_boolean_is_not_a_number", p(json!({"new_property_value": true})),
            "new_property_value", "The new property value field must be a number."),
        ("deposit_amount_required_for_a_purchase", p(json!({"deposit_amount": null})),
            "deposit_amount", "The deposit amount field is required when mortgage purpose is purchase."),
        ("deposit_amount_negative_is_rejected", p(json!({"deposit_amount": -0.01})),
            "deposit_amount", "The deposit amount field must be at least 0."),
        ("remortgage_reason_required_for_a_remortgage", r(json!({"remortgage_reason": null})),
            "remortgage_reason", "The remortgage reason field is required when mortgage purpose is remortgage."),
        ("remortgage_reason_outside_the_list_is_rejected", r(json!({"remortgage_reason": "divorce"})),
            "remortgage_reason", "The selected remortgage reason is invalid."),
        ("current_property_value_required_for_a_remortgage", r(json!({"current_property_value": null})),
            "current_property_value", "The current property value field is required when mortgage purpose is remortgage."),
        ("outstanding_mortgage_amount_required_for_a_remortgage", r(json!({"outstanding_mortgage_amount": null})),
            "outstanding_mortgage_amount", "The outstanding mortgage amount field is required when mortgage purpose is remortgage."),
        ("additional_borrowing_amount_required_when_borrowing_more", r(json!({"additional_borrowing_amount": null})),
            "additional_borrowing_amount", "The additional borrowing amount field is required when remortgage reason is borrow_more_money."),
        ("additional_borrowing_amount_negative_is_rejected", r(json!({"additional_borrowing_amount": -5})),
            "additional_borrowing_amount", "The additional borrowing amount field must be at least 0."),
        ("release_borrowing_amount_required_when_releasing_money", r(json!({"remortgage_reason": "release_money"})),
            "release_borrowing_amount", "The release borrowing amount field is required when remortgage reason is release_money."),
        ("product_uuid_that_is_not_a_uuid_is_rejected", p(json!({"product_uuid": "not-a-uuid"})),
            "product_uuid", "The product uuid field must be a valid UUID."),
        ("product_uuid_without_hyphens_is_rejected", p(json!({"product_uuid": "67e5504410b1426f9247bb680e5fe0c8"})),
            "product_uuid", "The product uuid field must be a valid UUID."),
        ("product_uuid_as_number_is_not_a_string", p(json!({"product_uuid": 123})),
            "product_uuid", "The product uuid field must be a string."),
        ("credit_check_consent_as_string_is_not_a_boolean", p(json!({"credit_check_consent": "yes"})),
            "credit_check_consent", "The credit check consent field must be true or false."),
        ("addresses_empty_is_rejected", p(json!({"addresses": []})),
            "addresses", "The addresses field must have at least 1 item."),
        ("addresses_as_object_is_not_an_array", p(json!({"addresses": address()})),
            "addresses", "The addresses field must be an array."),
        ("addresses_more_than_20_are_rejected", p(json!({"addresses": vec![address(); 21]})),
            "addresses", "The addresses field must not have more than 20 items."),
        ("address_that_is_not_an_object_is_reported_at_its_index", p(json!({"addresses": [address(), "1 High Street"]})),
            "addresses.1", "The addresses.1 field must be an object."),
        ("address_line_1_is_required", a(json!({"line_1": " "})),
            "addresses.0.line_1", "The addresses.0.line_1 field is required."),
        ("address_postcode_is_required", a(json!({"postcode": null})),
            "addresses.0.postcode", "The addresses.0.postcode field is required."),
        ("address_postcode_longer_than_16_characters_is_rejected", a(json!({"postcode": "LS1 1AA LS1 1AA X"})),
            "addresses.0.postcode", "The addresses.0.postcode field must not be greater than 16 characters."),
        ("address_postcode_padded_past_16_characters_is_rejected", a(json!({"postcode": "LS1 1AA          "})),
            "addresses.0.postcode", "The addresses.0.postcode field must not be greater than 16 characters."),
        ("address_line_2_blank_past_255_characters_is_rejected", a(json!({"line_2": " ".repeat(256)})),
            "addresses.0.line_2", "The addresses.0.line_2 field must not be greater than 255 characters."),
        ("address_line_2_must_be_a_string", a(json!({"line_2": ["Flat 2"]})),
            "addresses.0.line_2", "The addresses.0.line_2 field must be a string."),
        ("address_town_city_longer_than_255_characters_is_rejected", a(json!({"town_city": "L".repeat(256)})),
            "addresses.0.town_city", "The addresses.0.town_city field must not be greater than 255 characters."),
        ("address_date_moved_in_must_be_a_valid_date", a(json!({"date_moved_in": "01/01/2015"})),
            "addresses.0.date_moved_in", "The addresses.0.date_moved_in field must be a valid date in the format YYYY-MM-DD."),
        ("address_date_moved_out_before_date_moved_in_is_rejected", a(json!({"date_moved_out": "2014-12-31"})),
            "addresses.0.date_moved_out", "The addresses.0.date_moved_out field must be a date after or equal to addresses.0.date_moved_in."),
        ("address_problem_is_reported_at_its_own_index", p(json!({"addresses": [address(), {"line_1": "2 Low Road"}]})),
            "addresses.1.postcode", "The addresses.1.postcode field is required."),
    ]
}

#[test]
fn each_rule_reports_exactly_its_own_error() {
    let cases = rule_cases();
    let names: std::collections::HashSet<_> = cases.iter().map(|case| case.0).collect();
    assert_eq!(names.len(), cases.len(), "case names must be unique");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, body, path, message)| {
            let actual = error_map(body);
            (actual != errors(&[(path, message)])).then(|| format!("{name}: got {actual:?}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "failing cases:\n{}",
        failures.join("\n")
    );
}

#[test]
fn valid_purchase_enquiry_parses_into_typed_values() {
    assert_eq!(parse(&purchase_body()), Ok(purchase_enquiry()));
}

#[test]
fn valid_remortgage_enquiry_parses_into_typed_values() {
    let expected = Enquiry {
        brand: brand("brand_b"),
        first_name: "John".into(),
        last_name: "Smith".into(),
        email: email("john@example.co.uk"),
        mobile_number: mobile("07700900123"),
        date_of_birth: day("1980-12-31"),
        stage: Stage::Researching,
        application_type: ApplicationType::MultiApplicant,
        employment_status: EmploymentStatus::SelfEmployed,
        total_annual_income: 0.0,
        mortgage: Purpose::Remortgage(Remortgage {
            remortgage_reason: RemortgageReason::BorrowMoreMoney,
            current_property_value: 400000.0,
            outstanding_mortgage_amount: 150000.75,
            additional_borrowing_amount: Some(30000.0),
            release_borrowing_amount: None,
        }),
        credit_issues: None,
        product_uuid: None,
        credit_check_consent: false,
        addresses: None,
    };
    let enquiry = parse(&remortgage_body());
    assert_eq!(enquiry, Ok(expected));
    assert_eq!(
        enquiry.map(|e| (e.has_credit_issues(), e.mortgage.purpose())),
        Ok((false, MortgagePurpose::Remortgage))
    );
}

#[test]
fn a_body_that_is_not_an_object_reports_every_required_field() {
    let expected = errors(&[
        (
            "application_type",
            "The application type field is required.",
        ),
        ("brand", "The brand field is required."),
        ("date_of_birth", "The date of birth field is required."),
        ("email", "The email field is required."),
        (
            "employment_status",
            "The employment status field is required.",
        ),
        ("first_name", "The first name field is required."),
        (
            "has_credit_issues",
            "The has credit issues field is required.",
        ),
        ("last_name", "The last name field is required."),
        ("mobile_number", "The mobile number field is required."),
        (
            "mortgage_purpose",
            "The mortgage purpose field is required.",
        ),
        ("stage", "The stage field is required."),
        ("terms_agreement", "The terms agreement field is required."),
        (
            "total_annual_income",
            "The total annual income field is required.",
        ),
    ]);
    for body in [
        json!({}),
        json!([1, 2]),
        json!("enquiry"),
        json!(null),
        json!(7),
    ] {
        assert_eq!(error_map(&body), expected, "body {body}");
    }
}

#[test]
fn several_errors_are_all_reported_at_once() {
    let body = with(
        purchase_body(),
        json!({
            "first_name": null,
            "email": "nope",
            "deposit_amount": -1,
            "credit_issues": ["ccj", "x", "iva", "y"],
            "addresses": [{"line_1": "1 High Street", "postcode": "LS1 1AA"}, {"date_moved_in": "2020-02-30"}]
        }),
    );
    assert_eq!(
        error_map(&body),
        errors(&[
            (
                "addresses.1.date_moved_in",
                "The addresses.1.date_moved_in field must be a valid date in the format YYYY-MM-DD."
            ),
            (
                "addresses.1.line_1",
                "The addresses.1.line_1 field is required."
            ),
            (
                "addresses.1.postcode",
                "The addresses.1.postcode field is required."
            ),
            (
                "credit_issues.1",
                "The selected credit_issues.1 is invalid."
            ),
            (
                "credit_issues.3",
                "The selected credit_issues.3 is invalid."
            ),
            (
                "deposit_amount",
                "The deposit amount field must be at least 0."
            ),
            ("email", "The email field must be a valid email address."),
            ("first_name", "The first name field is required."),
        ])
    );
}

#[test]
fn wrong_types_are_reported_on_their_own_fields() {
    let body = with(
        purchase_body(),
        json!({
            "first_name": ["Jane"],
            "stage": 3,
            "terms_agreement": 1,
            "new_property_value": "250000",
            "credit_issues": {"0": "ccj"},
            "addresses": [{"line_1": 1, "postcode": false}]
        }),
    );
    assert_eq!(
        error_map(&body),
        errors(&[
            (
                "addresses.0.line_1",
                "The addresses.0.line_1 field must be a string."
            ),
            (
                "addresses.0.postcode",
                "The addresses.0.postcode field must be a string."
            ),
            ("credit_issues", "The credit issues field must be an array."),
            ("first_name", "The first name field must be a string."),
            (
                "new_property_value",
                "The new property value field must be a number."
            ),
            ("stage", "The stage field must be a string."),
            (
                "terms_agreement",
                "The terms agreement field must be true or false."
            ),
        ])
    );
}

#[test]
fn the_other_purposes_fields_are_ignored() {
    let garbage = json!({
        "remortgage_reason": "get_better_rate",
        "purchase_type": "castle",
        "mortgage_scheme": 3,
        "new_property_value": -1,
        "deposit_amount": "none",
    });
    let enquiry = parse(&with(remortgage_body(), garbage));
    let expected = Purpose::Remortgage(Remortgage {
        remortgage_reason: RemortgageReason::GetBetterRate,
        current_property_value: 400000.0,
        outstanding_mortgage_amount: 150000.75,
        additional_borrowing_amount: None,
        release_borrowing_amount: None,
    });
    assert_eq!(enquiry.map(|e| e.mortgage), Ok(expected));
}

/// A conditional field of the enquiry's own purpose is checked whenever it is sent, as the
/// document types it, and kept only when its condition holds.
#[test]
fn conditional_fields_are_checked_when_sent_and_kept_only_when_their_condition_holds() {
    let valid_but_moot = json!({
        "remortgage_reason": "get_better_rate",
        "additional_borrowing_amount": 1000,
        "release_borrowing_amount": 2000,
        "has_credit_issues": false,
        "credit_issues": ["ccj"],
    });
    let enquiry = parse(&with(remortgage_body(), valid_but_moot)).map(|e| {
        let Purpose::Remortgage(r) = e.mortgage else {
            return (None, None, e.credit_issues);
        };
        (
            r.additional_borrowing_amount,
            r.release_borrowing_amount,
            e.credit_issues,
        )
    });
    assert_eq!(enquiry, Ok((None, None, None)));

    let invalid = json!({
        "remortgage_reason": "get_better_rate",
        "additional_borrowing_amount": "lots",
        "has_credit_issues": false,
        "credit_issues": ["not_a_credit_issue"],
    });
    assert_eq!(
        error_map(&with(remortgage_body(), invalid)),
        errors(&[
            (
                "additional_borrowing_amount",
                "The additional borrowing amount field must be a number."
            ),
            (
                "credit_issues.0",
                "The selected credit_issues.0 is invalid."
            ),
        ])
    );

    let not_first_time = json!({"purchase_type": "home_mover", "mortgage_scheme": "no"});
    let scheme = parse(&with(purchase_body(), not_first_time)).map(|e| match e.mortgage {
        Purpose::Purchase(purchase) => (purchase.purchase_type, purchase.mortgage_scheme),
        Purpose::Remortgage(_) => (PurchaseType::AdditionalProperty, None),
    });
    assert_eq!(scheme, Ok((PurchaseType::HomeMover, None)));
    let bogus = json!({"purchase_type": "home_mover", "mortgage_scheme": "bogus"});
    assert_eq!(
        error_map(&with(purchase_body(), bogus)),
        errors(&[(
            "mortgage_scheme",
            "The selected mortgage scheme is invalid."
        )])
    );
    // No credit issues: an empty list is fine; with credit issues it needs one.
    let empty = json!({"has_credit_issues": false, "credit_issues": []});
    assert!(parse(&with(purchase_body(), empty)).is_ok());
}

#[test]
fn dependent_fields_are_not_reported_when_their_condition_is_invalid() {
    let body = with(
        purchase_body(),
        json!({
            "mortgage_purpose": "buy_to_let",
            "purchase_type": null,
            "new_property_value": null,
            "has_credit_issues": "yes",
            "credit_issues": null
        }),
    );
    assert_eq!(
        error_map(&body),
        errors(&[
            (
                "has_credit_issues",
                "The has credit issues field must be true or false."
            ),
            (
                "mortgage_purpose",
                "The selected mortgage purpose is invalid."
            ),
        ])
    );
    let body = with(
        remortgage_body(),
        json!({"remortgage_reason": "x", "additional_borrowing_amount": null}),
    );
    assert_eq!(
        error_map(&body),
        errors(&[(
            "remortgage_reason",
            "The selected remortgage reason is invalid."
        )])
    );
}

#[test]
fn optional_fields_may_be_omitted_or_null() {
    let body = with(
        purchase_body(),
        json!({"product_uuid": null, "credit_check_consent": null, "addresses": null}),
    );
    let enquiry = parse(&body).map(|e| (e.product_uuid, e.credit_check_consent, e.addresses));
    assert_eq!(enquiry, Ok((None, false, None)));
}

#[test]
fn limits_are_inclusive() {
    let body = with(
        purchase_body(),
        json!({
            "first_name": "n".repeat(255),
            "date_of_birth": "2025-06-14",
            "mobile_number": "+123456789012345",
            "credit_issues": vec!["iva"; 20],
            "addresses": vec![with(address(), json!({"postcode": "p".repeat(16), "date_moved_out": "2015-01-01"})); 20],
            "email": format!("{}@example.com", "a".repeat(242))
        }),
    );
    assert_eq!(
        parse(&body).map(|e| e.addresses.map(|a| a.len())),
        Ok(Some(20))
    );
}

#[test]
fn email_is_trimmed_and_lower_cased() {
    assert_eq!(
        Email::parse("  Jane.Doe@Example.COM\t").map(|e| e.to_string()),
        Ok("jane.doe@example.com".to_owned())
    );
    assert_eq!(Email::parse("jane@localhost"), Err(InvalidEmail));
    assert_eq!(
        parse(&purchase_body()).map(|e| e.email.as_str().to_owned()),
        Ok("jane.doe@example.com".to_owned())
    );
    // Deserializing goes through the same constructor, so stored data stays normalised.
    assert_eq!(
        serde_json::from_value::<Email>(json!("A@B.CO")).ok(),
        Some(email("a@b.co"))
    );
    assert!(serde_json::from_value::<Email>(json!("not an email")).is_err());
}

#[test]
fn mobile_number_is_reduced_to_plus_and_digits() {
    assert_eq!(
        MobileNumber::parse(" +44 (0) 7700-900 123 ").map(|m| m.as_str().to_owned()),
        Ok("+4407700900123".to_owned())
    );
    assert_eq!(
        MobileNumber::parse("++447700900123"),
        Err(InvalidMobileNumber)
    );
}

#[test]
fn enquiry_serializes_in_the_wire_shape_and_round_trips() {
    let enquiry = purchase_enquiry();
    let wire = serde_json::to_value(&enquiry).unwrap_or_default();
    assert_eq!(wire["mortgage_purpose"], json!("purchase"));
    assert_eq!(wire["purchase_type"], json!("first_time_buyer"));
    assert_eq!(wire["mortgage_scheme"], json!("shared_ownership"));
    assert_eq!(
        wire["credit_issues"],
        json!(["ccj", "late_payments_non_mortgage"])
    );
    assert_eq!(wire["email"], json!("jane.doe@example.com"));
    assert_eq!(wire["date_of_birth"], json!("1990-05-17"));
    assert_eq!(serde_json::from_value::<Enquiry>(wire).ok(), Some(enquiry));
}

/// What an enquiry keeps leaves out what was not sent, as partners send it; an enquiry kept
/// with `null`s for those (as stored before) reads the same.
#[test]
fn a_kept_enquiry_leaves_out_what_was_not_sent_and_reads_nulls_as_before() {
    let body = with(
        examples::remortgage_enquiry("brand_a", "john@example.com"),
        json!({"addresses": [{"line_1": "1 High Street", "postcode": "LS1 1AA"}]}),
    );
    let enquiry = parse(&body).expect("a valid enquiry");
    let kept = serde_json::to_value(&enquiry).unwrap_or_default();
    assert_eq!(kept["additional_borrowing_amount"], json!(30000.0));
    assert!(kept.get("release_borrowing_amount").is_none(), "{kept}");
    assert_eq!(
        kept["addresses"],
        json!([{"line_1": "1 High Street", "postcode": "LS1 1AA"}])
    );

    let mut with_nulls = kept.clone();
    with_nulls["release_borrowing_amount"] = Value::Null;
    with_nulls["addresses"][0]["county"] = Value::Null;
    assert_eq!(
        serde_json::from_value::<Enquiry>(with_nulls).ok(),
        Some(enquiry)
    );
}

#[test]
fn attach_request_parses_email_and_product() {
    let body = json!({"email": " John@Example.com ", "product_uuid": "67e55044-10b1-426f-9247-bb680e5fe0c8"});
    assert_eq!(
        parse_attach(&body),
        Ok(AttachRequest {
            email: email("john@example.com"),
            product_uuid: Uuid::from_u128(0x67e55044_10b1_426f_9247_bb680e5fe0c8),
        })
    );
}

#[test]
fn attach_request_reports_both_fields() {
    let map = |body: Value| parse_attach(&body).err().map(ValidationErrors::into_map);
    assert_eq!(
        map(json!([])),
        Some(errors(&[
            ("email", "The email field is required."),
            ("product_uuid", "The product uuid field is required."),
        ]))
    );
    assert_eq!(
        map(json!({"email": "john", "product_uuid": "{67e55044-10b1-426f-9247-bb680e5fe0c8}"})),
        Some(errors(&[
            ("email", "The email field must be a valid email address."),
            (
                "product_uuid",
                "The product uuid field must be a valid UUID."
            ),
        ]))
    );
}

#[test]
fn control_characters_are_refused_in_every_request_and_line_breaks_only_in_a_note() {
    let refused = |body: Value| {
        parse_referral(&body, &["brand_a", "brand_b"])
            .err()
            .map(ValidationErrors::into_map)
    };
    let referral = json!({
        "brand": "brand_a", "first_name": "Jane", "last_name": "Doe",
        "email": "jane@example.com", "mobile_number": "07700900123", "contact_consent": true,
        "note": "Call after six.\r\nPrefers e-mail.\tThanks",
    });
    let parsed = parse_referral(&referral, &["brand_a", "brand_b"]).expect("a valid referral");
    assert_eq!(
        parsed.note.as_deref(),
        Some("Call after six.\r\nPrefers e-mail.\tThanks")
    );
    for (field, value) in [
        ("note", "a\u{0}b"),
        ("note", "bell\u{7}"),
        ("partner_reference", "ref\n1"),
        ("first_name", "Ja\u{0}ne"),
    ] {
        assert_eq!(
            refused(with(referral.clone(), json!({ field: value }))),
            Some(errors(&[(
                field,
                &format!(
                    "The {} field must not contain control characters.",
                    field.replace('_', " ")
                )
            )])),
            "{field}: {value:?}"
        );
    }
    assert_eq!(
        parse_attach(&json!({"email": "x\u{0}@example.com", "product_uuid": "67e55044-10b1-426f-9247-bb680e5fe0c8"}))
            .err()
            .map(ValidationErrors::into_map),
        Some(errors(&[("email", "The email field must not contain control characters.")]))
    );
    assert!(parse_redeem(&json!({"token": "abc\u{0}"})).is_err());
    assert!(
        Email::parse("x\u{0}@example.com").is_err(),
        "the domain type refuses it too"
    );
}
