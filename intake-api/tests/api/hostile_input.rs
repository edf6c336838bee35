//! Hostile bytes against every operation that reads partner text, on both databases: NUL and
//! other control characters, lone surrogates, numbers no float holds, nesting past any
//! depth a body needs, and case references that are no reference. Each gets a 4xx with a
//! body saying why, never a 500 (PostgreSQL refuses U+0000 where SQLite stores it, so a
//! value that reached the database would tell the two apart), and the service goes on
//! answering.

use serde_json::{Value, json};

use crate::helpers::{
    ATTACH, Backend, ENQUIRY, INTAKE, PRODUCT, REFERRAL, REFERRALS, Reply, TestApp, address,
    fresh_email, purchase_enquiry, referral, with,
};
use test_support::on_both_backends;

/// `Bearer` of a token holding both partner scopes.
async fn partner(app: &TestApp) -> String {
    let scopes = format!("{REFERRAL} {INTAKE}");
    let token = app
        .auth
        .token(&app.client_id, &app.client_secret, &scopes)
        .await;
    format!("Bearer {token}")
}

/// Asserts a refusal the partner can act on: 400 or 422, with a JSON body that says why.
fn refused(reply: &Reply, case: &str) {
    assert!(
        matches!(reply.status, 400 | 422),
        "{case}: {} {:?}",
        reply.status,
        reply.body
    );
    assert!(
        reply.body.get("message").is_some_and(Value::is_string),
        "{case}: {:?}",
        reply.body
    );
}

/// Raw bodies the JSON encoder would never write: lone surrogates, numbers past f64, deep
/// nesting.
fn raw_enquiries() -> Vec<(&'static str, Vec<u8>)> {
    let enquiry = purchase_enquiry("brand_a", &fresh_email()).to_string();
    let replace = |from: &str, to: &str| enquiry.replacen(from, to, 1).into_bytes();
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    vec![
        (
            "a lone high surrogate in a name",
            replace(r#""first_name":"#, r#""first_name":"\ud800","x":"#),
        ),
        (
            "a lone low surrogate in the e-mail",
            replace(r#""email":""#, r#""email":"\udc00"#),
        ),
        (
            "a deposit past any float",
            replace(r#""deposit_amount":"#, r#""deposit_amount":1e400,"y":"#),
        ),
        (
            "a deposit of four hundred digits",
            replace(
                r#""deposit_amount":"#,
                &format!(r#""deposit_amount":{},"y":"#, "9".repeat(400)),
            ),
        ),
        ("nesting ten thousand deep", deep.into_bytes()),
        (
            "a nested address ten thousand deep",
            replace(
                r#""addresses":"#,
                &format!(
                    r#""addresses":{}{},"z":"#,
                    "[".repeat(10_000),
                    "]".repeat(10_000)
                ),
            ),
        ),
    ]
}

async fn hostile_bytes_get_a_4xx_on_every_operation_and_nothing_is_stored(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let bearer = partner(&app).await;
    let enquiry = |patch: Value| with(purchase_enquiry("brand_a", &fresh_email()), patch);
    let nul_address = with(address(), json!({"line_1": "1 High\u{0} Street"}));
    let json_cases = [
        (
            "a NUL in the e-mail",
            ENQUIRY,
            enquiry(json!({"email": "x\u{0}@example.com"})),
        ),
        (
            "a NUL in the last name",
            ENQUIRY,
            enquiry(json!({"last_name": "a\u{0}b"})),
        ),
        (
            "a bell in the first name",
            ENQUIRY,
            enquiry(json!({"first_name": "Jane\u{7}"})),
        ),
        (
            "DEL in the postcode",
            ENQUIRY,
            enquiry(json!({"addresses": [with(address(), json!({"postcode": "AB1\u{7f} 2CD"}))]})),
        ),
        (
            "a NUL in an address line",
            ENQUIRY,
            enquiry(json!({"addresses": [nul_address]})),
        ),
        (
            "a NUL in the attach e-mail",
            ATTACH,
            json!({"email": "x\u{0}@example.com", "product_uuid": PRODUCT}),
        ),
        (
            "a NUL in a referral's name",
            REFERRALS,
            with(referral(&fresh_email()), json!({"first_name": "Ja\u{0}ne"})),
        ),
        (
            "a NUL in a referral's note",
            REFERRALS,
            with(referral(&fresh_email()), json!({"note": "call\u{0}me"})),
        ),
        (
            "a line feed in a referral's partner reference",
            REFERRALS,
            with(
                referral(&fresh_email()),
                json!({"partner_reference": "CRM\n1"}),
            ),
        ),
    ];
    for (case, path, body) in &json_cases {
        let reply = app.post(path, Some(&bearer), body).await;
        refused(&reply, case);
        if reply.status == 422 {
            assert!(
                reply.body.to_string().contains("control characters"),
                "{case}: {:?}",
                reply.body
            );
        }
    }
    for (case, body) in raw_enquiries() {
        refused(&app.post_raw(ENQUIRY, Some(&bearer), body).await, case);
    }
    // None of it made a case or a referral.
    assert_eq!(
        app.intake_column("SELECT CAST(COUNT(*) AS TEXT) AS n FROM cases", "n")
            .await,
        vec!["0".to_owned()]
    );
    // Free text keeps its line breaks, and the service still answers.
    let note = with(
        referral(&fresh_email()),
        json!({"note": "Call after six.\r\nPrefers e-mail."}),
    );
    let kept = app.post(REFERRALS, Some(&bearer), &note).await;
    assert_eq!(kept.status, 201, "{:?}", kept.body);
    let created = app
        .enquiry(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
}

async fn a_case_reference_that_is_not_twelve_digits_answers_404(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let reference = app
        .submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    let bearer = app.bearer();
    assert_eq!(app.case_status(&reference, Some(&bearer)).await.status, 200);
    for raw in [
        "1%00",
        &format!("{reference}%00"),
        &format!("{}%00", &reference[..11]),
        &format!("{}a", &reference[..11]),
        &format!("{reference}0"),
        &"9".repeat(64),
    ] {
        let reply = app.case_status(raw, Some(&bearer)).await;
        assert_eq!(reply.status, 404, "{raw}: {:?}", reply.body);
        assert_eq!(reply.body, json!({"message": "Case not found"}), "{raw}");
    }
    // A path that is not UTF-8 never becomes a reference at all.
    for raw in ["%C0%80", "%FF"] {
        assert_eq!(
            app.case_status(raw, Some(&bearer)).await.status,
            400,
            "{raw}"
        );
    }
}

on_both_backends!(
    hostile_bytes_get_a_4xx_on_every_operation_and_nothing_is_stored,
    a_case_reference_that_is_not_twelve_digits_answers_404,
);
