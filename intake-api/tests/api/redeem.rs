//! `POST /portal/redirect-tokens/redeem`: a brand's customer portal trades the token of the
//! link attach handed out, once, for the case and product it continues with.

use serde_json::json;

use crate::helpers::{
    Backend, PORTAL, REDEEM, TestApp, event_kinds, fresh_email, invalid, message, metrics_text,
    purchase_enquiry, token_of,
};
use test_support::on_both_backends;

const PORTAL_URL: &str = "https://portal.brand-a.example/continue";
const OTHER_PRODUCT: &str = "0b0f5d3e-3c1a-4c5e-9d7e-2f6a1b8c9d01";

/// A new customer of this app's partner with a product attached: its e-mail, its case's
/// reference and the link's token.
async fn customer_with_link(app: &TestApp) -> (String, String, String) {
    customer_of_brand_with_link(app, "brand_a").await
}

/// As [`customer_with_link`], the case in `brand`.
async fn customer_of_brand_with_link(app: &TestApp, brand: &str) -> (String, String, String) {
    let email = fresh_email();
    let reference = app.submit(&purchase_enquiry(brand, &email)).await;
    let attached = app.attach(&email, OTHER_PRODUCT).await;
    assert_eq!(attached.status, 200, "{:?}", attached.body);
    let portal_url = format!(
        "https://portal.{}.example/continue",
        brand.replace('_', "-")
    );
    (email, reference, token_of(&attached.body, &portal_url))
}

fn gone() -> serde_json::Value {
    message("Link expired or already used")
}

async fn a_link_redeems_once_for_its_case_and_product(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let portal = app.portal_bearer().await;
    let (email, reference, token) = customer_with_link(&app).await;

    let first = app.redeem(&portal, &token).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(
        first.body,
        json!({
            "reference": reference,
            "brand": "brand_a",
            "continue_with": "product",
            "product_uuid": OTHER_PRODUCT,
            "email": email,
            "sandbox": false,
        })
    );
    let again = app.redeem(&portal, &token).await;
    assert_eq!((again.status, again.body), (410, gone()));

    let case = app.case_show(&reference).await;
    assert_eq!(
        event_kinds(&case),
        ["created", "product_attached", "redirect_redeemed"]
    );
}

async fn a_newer_link_for_the_case_retires_the_older_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let portal = app.portal_bearer().await;
    let (email, reference, older) = customer_with_link(&app).await;
    let newer = app.attach(&email, OTHER_PRODUCT).await;
    let newer = token_of(&newer.body, PORTAL_URL);

    let refused = app.redeem(&portal, &older).await;
    assert_eq!((refused.status, refused.body), (410, gone()));
    let redeemed = app.redeem(&portal, &newer).await;
    assert_eq!(redeemed.status, 200, "{:?}", redeemed.body);
    assert_eq!(redeemed.body["reference"], reference.as_str());
}

async fn two_redeems_of_one_link_at_once_give_exactly_one_success(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let portal = app.portal_bearer().await;
    for _ in 0..3 {
        let (_, _, token) = customer_with_link(&app).await;
        let (a, b) = tokio::join!(app.redeem(&portal, &token), app.redeem(&portal, &token));
        let mut statuses = [a.status, b.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 410], "{:?} / {:?}", a.body, b.body);
    }
}

async fn an_expired_or_unknown_link_is_gone(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| c.redirect_ttl_secs = 0).await;
    let portal = app.portal_bearer().await;
    let (_, _, token) = customer_with_link(&app).await;
    let expired = app.redeem(&portal, &token).await;
    assert_eq!((expired.status, expired.body), (410, gone()));
    let unknown = app
        .redeem(&portal, "q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM")
        .await;
    assert_eq!((unknown.status, unknown.body), (410, gone()));
}

async fn only_a_portal_token_redeems_and_bad_bodies_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, _, token) = customer_with_link(&app).await;
    let body = json!({ "token": token });

    let anonymous = app.post(REDEEM, None, &body).await;
    assert_eq!(
        (anonymous.status, anonymous.body),
        (401, message("Unauthenticated."))
    );
    let partner = app.post(REDEEM, Some(&app.bearer()), &body).await;
    assert_eq!(
        (partner.status, &partner.body),
        (403, &message("Invalid scope(s) provided.")),
    );
    assert_eq!(
        partner.challenge.as_deref(),
        Some(r#"Bearer error="insufficient_scope", scope="portal:redirect:redeem""#)
    );

    let portal = app.portal_bearer().await;
    let cases = [
        (
            json!({}),
            invalid(json!({"token": ["The token field is required."]})),
        ),
        (
            json!({"token": 42}),
            invalid(json!({"token": ["The token field must be a string."]})),
        ),
        (
            json!({"token": "x".repeat(129)}),
            invalid(json!({"token": ["The token field must not be greater than 128 characters."]})),
        ),
    ];
    for (body, expected) in cases {
        let reply = app.post(REDEEM, Some(&portal), &body).await;
        assert_eq!((reply.status, &reply.body), (422, &expected), "{body}");
    }
    let not_json = app
        .post_raw(REDEEM, Some(&portal), b"{token".to_vec())
        .await;
    assert_eq!(not_json.status, 400, "{:?}", not_json.body);
    // None of that used the link up.
    let redeemed = app.redeem(&portal, &token).await;
    assert_eq!(redeemed.status, 200, "{:?}", redeemed.body);
}

async fn a_portal_redeems_only_its_own_brands_links(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let brand_a = app.portal_bearer_of("brand_a").await;
    let brand_b = app.portal_bearer_of("brand_b").await;
    let (_, _, own) = customer_of_brand_with_link(&app, "brand_a").await;
    let (email, reference, other) = customer_of_brand_with_link(&app, "brand_b").await;

    let redeemed = app.redeem(&brand_a, &own).await;
    assert_eq!(redeemed.status, 200, "{:?}", redeemed.body);
    // Another brand's link is answered exactly as a link that never existed.
    let refused = app.redeem(&brand_a, &other).await;
    let unknown = app
        .redeem(&brand_a, "q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM")
        .await;
    assert_eq!((refused.status, &refused.body), (410, &gone()));
    assert_eq!(
        (refused.status, refused.body, refused.challenge),
        (unknown.status, unknown.body, unknown.challenge)
    );
    // And it is not used up: its own brand's portal still redeems it, once.
    let theirs = app.redeem(&brand_b, &other).await;
    assert_eq!(theirs.status, 200, "{:?}", theirs.body);
    assert_eq!(theirs.body["email"], email.as_str());
    assert_eq!(theirs.body["brand"], "brand_b");
    let case = app.case_show(&reference).await;
    assert_eq!(
        event_kinds(&case),
        ["created", "product_attached", "redirect_redeemed"]
    );
}

async fn a_portal_of_several_brands_redeems_each_brands_links(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let both = app.portal_bearer_of("brand_a,brand_b").await;
    for brand in ["brand_a", "brand_b"] {
        let (_, reference, token) = customer_of_brand_with_link(&app, brand).await;
        let redeemed = app.redeem(&both, &token).await;
        assert_eq!(redeemed.status, 200, "{brand}: {:?}", redeemed.body);
        assert_eq!(redeemed.body["reference"], reference.as_str());
        assert_eq!(redeemed.body["brand"], brand);
    }
}

/// A portal client registered before clients were bound to brands holds the scope and no
/// brand: it redeems nothing, told so by a 403 rather than a 410, until an operator binds it.
async fn a_portal_bound_to_no_brand_redeems_nothing_until_bound(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (id, secret) = app.auth.create_portal("brand_a").await;
    app.unbind_portal(&id).await;
    let unbound = format!("Bearer {}", app.auth.token(&id, &secret, PORTAL).await);
    let (_, _, token) = customer_with_link(&app).await;

    let refused = app.redeem(&unbound, &token).await;
    assert_eq!(
        (refused.status, &refused.body),
        (403, &message("Invalid scope(s) provided.")),
    );
    assert_eq!(
        refused.challenge.as_deref(),
        Some(r#"Bearer error="insufficient_scope", scope="portal:redirect:redeem""#)
    );

    app.auth.set_brands(&id, "brand_a").await;
    let bound = format!("Bearer {}", app.auth.token(&id, &secret, PORTAL).await);
    let redeemed = app.redeem(&bound, &token).await;
    assert_eq!(redeemed.status, 200, "{:?}", redeemed.body);
}

/// A brand the intake-api is not configured with (a typo at `client create --brands`)
/// redeems nothing, and the metrics say so.
async fn a_portal_bound_to_an_unknown_brand_is_counted(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let misspelt = app.portal_bearer_of("brnad_a").await;
    let (_, _, token) = customer_with_link(&app).await;
    let refused = app.redeem(&misspelt, &token).await;
    assert_eq!((refused.status, refused.body), (410, gone()));
    let metrics = metrics_text(&app.http, &app.intake.base_url()).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("intake_portal_unknown_brand_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
}

on_both_backends!(
    a_portal_redeems_only_its_own_brands_links,
    a_portal_of_several_brands_redeems_each_brands_links,
    a_portal_bound_to_no_brand_redeems_nothing_until_bound,
    a_portal_bound_to_an_unknown_brand_is_counted,
    a_link_redeems_once_for_its_case_and_product,
    a_newer_link_for_the_case_retires_the_older_one,
    two_redeems_of_one_link_at_once_give_exactly_one_success,
    an_expired_or_unknown_link_is_gone,
    only_a_portal_token_redeems_and_bad_bodies_are_refused,
);
