//! Hostile request bodies: whatever JSON arrives, the enquiry, attach and webhook endpoint
//! parsers must answer without panicking, and their answers must keep the promises the rest
//! of the service relies on.

#![no_main]

use chrono::NaiveDate;
use intake_api::domain::{
    ADDRESS_FIELDS, ENQUIRY_FIELDS, EndpointRequest, Enquiry, MAX_URL_CHARS, PurchaseType, Purpose,
    RemortgageReason, ValidationErrors, parse_attach, parse_endpoint_change, parse_enquiry,
    parse_new_endpoint, parse_recover, parse_secret_rotation, parse_test_event,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use shared::intake::webhooks::EventType;

const BRANDS: &[&str] = &["brand_a", "brand_b"];
/// Mirrors the parser's own cap on arrays; an error path with a larger index means it read past it.
const MAX_ITEMS: usize = 20;

fuzz_target!(|data: &[u8]| {
    // Bytes that are not JSON never reach the parsers: the HTTP layer refuses them first.
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let today = NaiveDate::from_ymd_opt(2025, 6, 15).expect("a calendar date");
    match parse_enquiry(&body, BRANDS, today) {
        Ok(enquiry) => check_enquiry(&enquiry, &body, today),
        Err(errors) => check_errors(&errors, is_enquiry_path),
    }
    match parse_attach(&body) {
        Ok(request) => {
            let sent = body["product_uuid"]
                .as_str()
                .expect("product_uuid was a string");
            // Only the hyphenated form is accepted, so the canonical form is what was sent.
            assert_eq!(
                request.product_uuid.hyphenated().to_string(),
                sent.trim().to_ascii_lowercase()
            );
            let wire = serde_json::to_value(&request).expect("an attach request serializes");
            assert_eq!(serde_json::from_value(wire).ok(), Some(request));
        }
        Err(errors) => check_errors(&errors, |path| path == "email" || path == "product_uuid"),
    }
    check_webhook_bodies(&body);
});

/// The webhook endpoint bodies: an accepted one holds a URL fit to check and store, or none
/// for a change, and problems are reported at the fields sent or the ones the body needs.
fn check_webhook_bodies(body: &Value) {
    // A field sent (a key may hold dots itself), an element of one, or the body itself.
    let sent = |path: &str| {
        let field = path.split('.').next().unwrap_or_default();
        path == "body" || body.get(path).is_some() || body.get(field).is_some()
    };
    let check_request = |request: &EndpointRequest| {
        if let Some(url) = &request.url {
            assert!(!url.is_empty() && url.chars().count() <= MAX_URL_CHARS);
            assert!(!url.chars().any(char::is_control), "{url:?}");
            assert_eq!(url.trim(), url);
        }
        if let Some(Some(types)) = &request.event_types {
            assert!(!types.is_empty());
        }
        if let Some(Some(rate)) = request.rate_limit {
            assert!((1..=10_000).contains(&rate), "{rate}");
        }
    };
    match parse_new_endpoint(body) {
        Ok(request) => {
            assert!(request.url.is_some() && request.event_types.is_some());
            assert_eq!(request.enabled, None);
            check_request(&request);
        }
        Err(errors) => check_errors(&errors, |path| path == "url" || sent(path)),
    }
    match parse_endpoint_change(body) {
        Ok(request) => check_request(&request),
        Err(errors) => check_errors(&errors, sent),
    }
    match parse_secret_rotation(body) {
        Ok(grace) => assert!(grace <= 86_400),
        Err(errors) => check_errors(&errors, sent),
    }
    match parse_test_event(body) {
        Ok(event_type) => assert!(EventType::SENT.contains(&event_type)),
        Err(errors) => check_errors(&errors, sent),
    }
    let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
    match parse_recover(body, now) {
        Ok((since, until)) => assert!(since < until, "{since} {until}"),
        Err(errors) => check_errors(&errors, |path| path == "since" || sent(path)),
    }
}

/// The promises an accepted enquiry makes to the code past the handler.
fn check_enquiry(enquiry: &Enquiry, body: &Value, today: NaiveDate) {
    assert_eq!(body["terms_agreement"], Value::Bool(true));
    assert!(BRANDS.contains(&enquiry.brand.as_str()));
    assert!(enquiry.date_of_birth < today);
    for name in [&enquiry.first_name, &enquiry.last_name] {
        assert!(!name.is_empty() && name.trim() == name && name.chars().count() <= 255);
    }
    let mut amounts = vec![enquiry.total_annual_income];
    match &enquiry.mortgage {
        Purpose::Purchase(p) => {
            let first_time = p.purchase_type == PurchaseType::FirstTimeBuyer;
            assert_eq!(p.mortgage_scheme.is_some(), first_time);
            amounts.extend([p.new_property_value, p.deposit_amount]);
        }
        Purpose::Remortgage(r) => {
            let borrowing = r.remortgage_reason == RemortgageReason::BorrowMoreMoney;
            let releasing = r.remortgage_reason == RemortgageReason::ReleaseMoney;
            assert_eq!(r.additional_borrowing_amount.is_some(), borrowing);
            assert_eq!(r.release_borrowing_amount.is_some(), releasing);
            amounts.extend([r.current_property_value, r.outstanding_mortgage_amount]);
            amounts.extend(r.additional_borrowing_amount);
            amounts.extend(r.release_borrowing_amount);
        }
    }
    assert!(amounts.iter().all(|a| a.is_finite() && *a >= 0.0));
    if let Some(issues) = &enquiry.credit_issues {
        assert!((1..=MAX_ITEMS).contains(&issues.len()));
    }
    assert_eq!(
        enquiry.has_credit_issues(),
        body["has_credit_issues"] == true
    );
    if let Some(addresses) = &enquiry.addresses {
        assert!((1..=MAX_ITEMS).contains(&addresses.len()));
        for address in addresses {
            assert!(!address.line_1.is_empty() && !address.postcode.is_empty());
            assert!(address.postcode.chars().count() <= 16);
            if let (Some(moved_in), Some(moved_out)) =
                (address.date_moved_in, address.date_moved_out)
            {
                assert!(moved_in <= moved_out);
            }
        }
    }
    // Stored enquiries are read back with serde, so what was accepted must survive the trip.
    let wire = serde_json::to_value(enquiry).expect("an enquiry serializes");
    let back: Enquiry = serde_json::from_value(wire).expect("a serialized enquiry deserializes");
    assert_eq!(&back, enquiry);
}

/// A rejection always names at least one field, only fields the schema has, each with a message.
fn check_errors(errors: &ValidationErrors, known: impl Fn(&str) -> bool) {
    assert!(!errors.is_empty());
    for (path, messages) in errors.as_map() {
        assert!(known(path), "unexpected error path {path:?}");
        assert!(!messages.is_empty(), "no message for {path:?}");
        for message in messages {
            // Messages are built from the path alone, never from the value that was sent.
            assert!(
                message.starts_with("The ") && message.ends_with('.'),
                "{message:?}"
            );
            // A field of the body is named as words, a nested one by its whole path.
            let name = if path.contains('.') {
                path.clone()
            } else {
                path.replace('_', " ")
            };
            assert!(message.contains(&name), "{path:?}: {message:?}");
        }
    }
}

/// `field`, `credit_issues.N`, `addresses.N` or `addresses.N.field`, with N below the array cap.
fn is_enquiry_path(path: &str) -> bool {
    let index = |n: &str| n.parse::<usize>().is_ok_and(|n| n < MAX_ITEMS);
    match path.split('.').collect::<Vec<_>>()[..] {
        [field] => ENQUIRY_FIELDS.contains(&field),
        ["credit_issues", n] | ["addresses", n] => index(n),
        ["addresses", n, field] => index(n) && ADDRESS_FIELDS.contains(&field),
        _ => false,
    }
}
