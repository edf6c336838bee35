//! Attaching a product: a redirect link on the brand's portal carrying a fresh token that is
//! stored only as a hash, and every error with its exact body.

use serde_json::{Value, json};

use crate::helpers::{
    ATTACH, Backend, CaseRowLock, ENQUIRY, INTAKE, PRODUCT, TestApp, event_kinds, fresh_email,
    invalid, message, remortgage_enquiry, statuses, token_of,
};
use test_support::on_both_backends;

const OTHER_PRODUCT: &str = "0b0f5d3e-3c1a-4c5e-9d7e-2f6a1b8c9d01";

async fn attach_answers_a_portal_link_with_a_fresh_token_stored_only_as_a_hash(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let reference = app.submit(&remortgage_enquiry("brand_a", &email)).await;
    let portal = "https://portal.brand-a.example/continue";

    let first = app
        .attach(&format!("  {}  ", email.to_uppercase()), OTHER_PRODUCT)
        .await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let first = token_of(&first.body, portal);
    let second = app.attach(&email, OTHER_PRODUCT).await;
    assert_eq!(second.status, 200, "{:?}", second.body);
    let second = token_of(&second.body, portal);
    assert_ne!(first, second, "a token was reused");

    let case = app.case_show(&reference).await;
    assert_eq!(case["product_uuid"], OTHER_PRODUCT);
    assert_eq!(
        event_kinds(&case),
        ["created", "product_attached", "product_attached"]
    );

    let details = app
        .intake_column(
            "SELECT CAST(detail AS TEXT) AS detail FROM case_events WHERE kind = 'product_attached'",
            "detail",
        )
        .await;
    assert_eq!(details.len(), 2);
    for detail in details {
        let detail: Value = serde_json::from_str(&detail).expect("the event's detail is JSON");
        assert_eq!(detail, json!({"product_uuid": OTHER_PRODUCT}));
    }

    // An update without a product leaves the attached one in place.
    app.submit(&remortgage_enquiry("brand_a", &email)).await;
    let case = app.case_show(&reference).await;
    assert_eq!(case["product_uuid"], OTHER_PRODUCT);

    let mut stored = app
        .intake_column("SELECT token_hash FROM redirect_tokens", "token_hash")
        .await;
    stored.sort();
    for token in [&first, &second] {
        assert!(
            stored.iter().all(|s| !s.contains(token.as_str())),
            "raw token stored"
        );
    }
    let mut hashes = [&first, &second].map(|t| intake_api::domain::redirect::hash_token(t));
    hashes.sort();
    assert_eq!(stored, hashes);
}

async fn attach_uses_the_most_recently_updated_case_of_any_brand(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    app.submit(&remortgage_enquiry("brand_a", &email)).await;
    app.submit(&remortgage_enquiry("brand_b", &email)).await;
    let reply = app.attach(&email, PRODUCT).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    token_of(&reply.body, "https://portal.brand-b.example/continue");
    app.submit(&remortgage_enquiry("brand_a", &email)).await;
    let reply = app.attach(&email, PRODUCT).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    token_of(&reply.body, "https://portal.brand-a.example/continue");
}

async fn attach_for_an_email_without_a_case_is_404(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.submit(&remortgage_enquiry("brand_a", "known@example.com"))
        .await;
    let reply = app.attach("unknown@example.com", PRODUCT).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.body, message("Case not found"));
}

async fn a_partner_attaches_only_to_cases_it_submitted_on(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (b_id, b_secret) = app.auth.create_client(INTAKE).await;
    let b_token = app.auth.token(&b_id, &b_secret, INTAKE).await;
    let b = format!("Bearer {b_token}");
    let attach_body = |email: &str| json!({"email": email, "product_uuid": PRODUCT});
    let email = fresh_email();
    let a_reference = app.submit(&remortgage_enquiry("brand_a", &email)).await;

    // Partner A's customer is, to partner B, an unknown e-mail address.
    let reply = app.post(ATTACH, Some(&b), &attach_body(&email)).await;
    assert_eq!(reply.status, 404, "{:?}", reply.body);
    assert_eq!(reply.body, message("Case not found"));
    assert_eq!(event_kinds(&app.case_show(&a_reference).await), ["created"]);

    // The customer comes to B for brand_b: B finds that case, never A's brand_a one, even
    // once A's is the more recently updated.
    let b_enquiry = remortgage_enquiry("brand_b", &email);
    let reply = app.post(ENQUIRY, Some(&b), &b_enquiry).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    app.submit(&remortgage_enquiry("brand_a", &email)).await;
    let reply = app.post(ATTACH, Some(&b), &attach_body(&email)).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    token_of(&reply.body, "https://portal.brand-b.example/continue");
    assert_eq!(
        event_kinds(&app.case_show(&a_reference).await),
        ["created", "updated"]
    );

    // A submission by B on A's case lets B attach to it too: the case is B's customer now.
    app.post(ENQUIRY, Some(&b), &remortgage_enquiry("brand_a", &email))
        .await;
    let reply = app.post(ATTACH, Some(&b), &attach_body(&email)).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    token_of(&reply.body, "https://portal.brand-a.example/continue");
}

async fn attach_with_a_bad_email_or_product_uuid_is_422(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    app.submit(&remortgage_enquiry("brand_a", &email)).await;
    let bad_email = "The email field must be a valid email address.";
    let bad_uuid = "The product uuid field must be a valid UUID.";
    let cases = [
        (
            "email without at sign",
            json!({"email": "john", "product_uuid": PRODUCT}),
            json!({"email": [bad_email]}),
        ),
        (
            "product uuid that is no uuid",
            json!({"email": email, "product_uuid": "nope"}),
            json!({"product_uuid": [bad_uuid]}),
        ),
        (
            "product uuid without hyphens",
            json!({"email": email, "product_uuid": PRODUCT.replace('-', "")}),
            json!({"product_uuid": [bad_uuid]}),
        ),
        (
            "product uuid as a number",
            json!({"email": email, "product_uuid": 7}),
            json!({"product_uuid": ["The product uuid field must be a string."]}),
        ),
        (
            "both missing",
            json!({}),
            json!({
                "email": ["The email field is required."],
                "product_uuid": ["The product uuid field is required."],
            }),
        ),
    ];
    for (name, body, errors) in cases {
        let reply = app.post(ATTACH, Some(&app.bearer()), &body).await;
        assert_eq!(reply.status, 422, "{name}: {:?}", reply.body);
        assert_eq!(reply.body, invalid(errors), "{name}");
    }
    let reply = app
        .post_raw(ATTACH, Some(&app.bearer()), b"email=x".to_vec())
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body, message("The request body must be valid JSON."));
    let stored = app
        .intake_column("SELECT token_hash FROM redirect_tokens", "token_hash")
        .await;
    assert!(stored.is_empty(), "a refused attach stored a token");
}

async fn attach_for_a_brand_without_a_portal_url_is_500_and_stores_nothing(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.brands = "brand_a=https://portal.brand-a.example/continue,brand_b=".into();
    })
    .await;
    let email = fresh_email();
    let reference = app.submit(&remortgage_enquiry("brand_b", &email)).await;
    let reply = app.attach(&email, PRODUCT).await;
    assert_eq!(reply.status, 500);
    assert_eq!(reply.body, message("Failed to generate redirect link"));
    let case = app.case_show(&reference).await;
    assert_eq!(case["product_uuid"], Value::Null);
    assert_eq!(event_kinds(&case), ["created"]);
    let stored = app
        .intake_column("SELECT token_hash FROM redirect_tokens", "token_hash")
        .await;
    assert!(stored.is_empty(), "a failed attach stored a token");

    // The other brand is unaffected.
    let email = fresh_email();
    app.submit(&remortgage_enquiry("brand_a", &email)).await;
    let reply = app.attach(&email, PRODUCT).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    token_of(&reply.body, "https://portal.brand-a.example/continue");
}

/// Attaches take turns with each other and with the case's submissions inside the service,
/// so a burst of them for a case whose row is locked holds one pool connection, not all:
/// another case's attach still goes through.
#[tokio::test]
async fn a_burst_of_attaches_for_one_locked_case_leaves_connections_to_other_cases() {
    let app = TestApp::spawn_with(Backend::Postgres, |c| c.database_max_connections = 8).await;
    let busy = remortgage_enquiry("brand_a", "burst@example.com");
    let reference = app.submit(&busy).await;
    app.submit(&remortgage_enquiry("brand_b", "someone.else@example.com"))
        .await;
    let lock = CaseRowLock::take(&app, &reference).await;

    let attach = json!({"email": "burst@example.com", "product_uuid": PRODUCT}).to_string();
    let burst = app.all_at_once(ATTACH, &attach, 20);
    assert_eq!(
        lock.first_waiters().await,
        1,
        "the burst's attaches waiting on the row lock"
    );
    // A submission for the same case waits its turn behind them, not on the lock.
    let submission = app.all_at_once(ENQUIRY, &busy.to_string(), 1);
    let other = app.attach("someone.else@example.com", PRODUCT).await;
    assert_eq!(other.status, 200, "{:?}", other.body);
    assert_eq!(
        lock.waiters().await,
        1,
        "the case's writes waiting on the row lock"
    );

    lock.release().await;
    assert_eq!(statuses(burst).await, [200; 20]);
    assert_eq!(statuses(submission).await, [200]);
    let kinds = event_kinds(&app.case_show(&reference).await);
    assert_eq!(
        kinds.iter().filter(|k| *k == "product_attached").count(),
        20,
        "{kinds:?}"
    );
}

on_both_backends!(
    attach_answers_a_portal_link_with_a_fresh_token_stored_only_as_a_hash,
    attach_uses_the_most_recently_updated_case_of_any_brand,
    attach_for_an_email_without_a_case_is_404,
    a_partner_attaches_only_to_cases_it_submitted_on,
    attach_with_a_bad_email_or_product_uuid_is_422,
    attach_for_a_brand_without_a_portal_url_is_500_and_stores_nothing,
);
