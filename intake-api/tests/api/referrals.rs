//! Referrals over HTTP (`POST /partners/external/referrals`): a referred case made or
//! joined, its link redeemed once, completed by a later enquiry and then activated;
//! validation, scope, idempotency, webhooks, partner and sandbox isolation, and erasure.

use std::time::Duration;

use intake_api::cli::{CaseCommand, WebhookCommand};
use serde_json::{Value, json};
use test_support::on_both_backends;

use crate::helpers::{
    Backend, INTAKE, PRODUCT, REFERRAL, Reply, TestApp, event_kinds, eventually, fresh_email,
    message, purchase_enquiry,
};
use crate::webhooks::Receiver;

/// The referral endpoint.
const REFERRALS: &str = "/partners/external/referrals";

/// Brand A's portal, as the test apps configure it.
const PORTAL_A: &str = "https://portal.brand-a.example/continue";

/// A referral of `email` to brand A, with every field.
fn referral(email: &str) -> Value {
    json!({
        "brand": "brand_a",
        "first_name": "Jane",
        "last_name": "Doe",
        "email": email,
        "mobile_number": "+44 7700 900123",
        "contact_consent": true,
        "partner_reference": "CRM-1",
        "note": "Prefers a call after 6pm.",
    })
}

/// A partner that refers (and may also submit and attach): `Bearer` of its token.
async fn referrer(app: &TestApp, sandbox: bool) -> (String, String) {
    let scopes = format!("{REFERRAL} {INTAKE}");
    let (id, secret) = if sandbox {
        app.auth.create_sandbox_client(&scopes).await
    } else {
        app.auth.create_client(&scopes).await
    };
    let token = app.auth.token(&id, &secret, &scopes).await;
    (id, format!("Bearer {token}"))
}

async fn refer(app: &TestApp, bearer: &str, body: &Value, key: Option<&str>) -> Reply {
    app.post_keyed(REFERRALS, bearer, body, key).await
}

/// The token of a referral's link, after checking the answer's shape and the link.
fn link_token(reply: &Reply) -> String {
    let mut keys: Vec<&String> = reply.body.as_object().expect("object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["message", "redirect", "reference"], "{reply:?}");
    let url =
        reqwest::Url::parse(reply.body["redirect"].as_str().expect("redirect")).expect("a URL");
    assert!(url.as_str().starts_with(PORTAL_A), "{url}");
    let (name, token) = url.query_pairs().next().expect("a token");
    assert_eq!(name, "token");
    token.into_owned()
}

fn reference_of(reply: &Reply) -> String {
    reply.body["reference"]
        .as_str()
        .unwrap_or_else(|| panic!("no reference: {reply:?}"))
        .to_owned()
}

async fn a_referral_is_redeemed_once_and_completed_by_an_enquiry(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.activation_delay_secs = 1;
        c.activation_poll_ms = 100;
    })
    .await;
    let (_, partner) = referrer(&app, false).await;
    let email = fresh_email();

    let created = refer(&app, &partner, &referral(&email), None).await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.body["message"], "Referral created");
    let reference = reference_of(&created);
    assert_eq!(reference.len(), 12, "{created:?}");
    let first_link = link_token(&created);

    // Referred: no activation is due, and attach sends the partner to the enquiry form.
    let status = app.case_status(&reference, Some(&partner)).await;
    assert_eq!(status.status, 200, "{status:?}");
    assert_eq!(status.body["status"], "referred", "{status:?}");
    assert_eq!(status.body["activates_at"], Value::Null, "{status:?}");
    let body = json!({"email": email, "product_uuid": PRODUCT});
    let attach = app
        .post(crate::helpers::ATTACH, Some(&partner), &body)
        .await;
    assert_eq!(attach.status, 404, "{attach:?}");
    assert_eq!(attach.body, message("Case not found"));

    // A second referral joins the case with a newer link; the first no longer works.
    let added = refer(&app, &partner, &referral(&email), None).await;
    assert_eq!(added.status, 200, "{added:?}");
    assert_eq!(added.body["message"], "Referral added");
    assert_eq!(reference_of(&added), reference);
    let link = link_token(&added);
    let portal = app.portal_bearer().await;
    assert_eq!(app.redeem(&portal, &first_link).await.status, 410);
    let redeemed = app.redeem(&portal, &link).await;
    assert_eq!(redeemed.status, 200, "{redeemed:?}");
    assert_eq!(
        redeemed.body,
        json!({
            "reference": reference,
            "brand": "brand_a",
            "continue_with": "enquiry",
            "email": email,
        })
    );
    assert_eq!(app.redeem(&portal, &link).await.status, 410, "single use");

    // Another partner's enquiry for the same brand and e-mail completes the case.
    let enquiry = app.enquiry(&purchase_enquiry("brand_a", &email)).await;
    assert_eq!(enquiry.status, 200, "{enquiry:?}");
    assert_eq!(enquiry.body["reference"], reference.as_str());
    let active = eventually(Duration::from_secs(20), || async {
        let case = app.case_status(&reference, Some(&app.bearer())).await;
        (case.body["status"] == "active").then_some(case)
    })
    .await
    .expect("the completed case activated");
    assert!(active.body["activates_at"].is_string(), "{active:?}");
    // Now an enquiry exists, attach works for the referring partner too.
    let attach = app
        .post(crate::helpers::ATTACH, Some(&partner), &body)
        .await;
    assert_eq!(attach.status, 200, "{attach:?}");

    let shown = app.case_show(&reference).await;
    let kinds = event_kinds(&shown);
    assert_eq!(
        kinds[..4],
        ["referred", "referred", "redirect_redeemed", "updated"],
        "{shown}"
    );
    // A referral to a case that exists leaves its status alone.
    assert_eq!(
        refer(&app, &partner, &referral(&email), None).await.status,
        200
    );
    let status = app.case_status(&reference, Some(&partner)).await;
    assert_eq!(status.body["status"], "active", "{status:?}");
}

async fn referrals_are_validated_and_need_their_scope(backend: Backend) {
    // A brand of this test's own for the counts: the metrics are the test process's.
    let brand = format!("referrals_{backend:?}").to_lowercase();
    let brands = format!("brand_a={PORTAL_A},{brand}=https://portal.referrals.example/continue");
    let app = TestApp::spawn_with(backend, |c| c.brands = brands).await;
    let (_, partner) = referrer(&app, false).await;
    let email = fresh_email();

    let none = app.post(REFERRALS, None, &referral(&email)).await;
    assert_eq!(none.status, 401, "{none:?}");
    assert_eq!(none.body, message("Unauthenticated."));
    // The enquiry scope does not open referrals.
    let intake_only = refer(&app, &app.bearer(), &referral(&email), None).await;
    assert_eq!(intake_only.status, 403, "{intake_only:?}");
    assert_eq!(intake_only.body, message("Invalid scope(s) provided."));

    let bad = json!({
        "brand": "brand_z",
        "first_name": " ",
        "email": "not-an-address",
        "mobile_number": format!("07700900123{}", " ".repeat(40)),
        "contact_consent": false,
        "partner_reference": "x".repeat(65),
        "note": "n".repeat(2001),
    });
    let refused = refer(&app, &partner, &bad, None).await;
    assert_eq!(refused.status, 422, "{refused:?}");
    let mut fields: Vec<&String> = refused.body["errors"]
        .as_object()
        .expect("errors by field")
        .keys()
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "brand",
            "contact_consent",
            "email",
            "first_name",
            "last_name",
            "mobile_number",
            "note",
            "partner_reference"
        ],
        "{refused:?}"
    );
    assert_eq!(
        refused.body["errors"]["contact_consent"][0],
        "The contact consent field must be accepted."
    );
    let broken = app
        .post_raw(REFERRALS, Some(&partner), b"{\"brand\":".to_vec())
        .await;
    assert_eq!(broken.status, 400, "{broken:?}");
    // Blank optional fields count as not sent; nothing was stored by the refusals.
    let mut sparse = referral(&email);
    sparse["note"] = json!("  ");
    sparse["partner_reference"] = Value::Null;
    sparse["brand"] = json!(brand);
    let created = refer(&app, &partner, &sparse, None).await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(refer(&app, &partner, &sparse, None).await.status, 200);
    let base = app.intake.base_url();
    let counted = |outcome: &'static str| {
        let (http, base, brand) = (&app.http, &base, &brand);
        async move {
            let text = crate::helpers::metrics_text(http, base).await;
            let line =
                format!("intake_referrals_total{{brand=\"{brand}\",outcome=\"{outcome}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&line)?.parse::<f64>().ok())
                .unwrap_or(0.0)
        }
    };
    assert_eq!(
        (counted("created").await, counted("added").await),
        (1.0, 1.0)
    );
}

async fn a_keyed_referral_is_answered_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, partner) = referrer(&app, false).await;
    let email = fresh_email();
    let body = referral(&email);

    let first = refer(&app, &partner, &body, Some("ref-key-1")).await;
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(first.replayed, None);
    let again = refer(&app, &partner, &body, Some("ref-key-1")).await;
    assert_eq!(again.status, 201, "{again:?}");
    assert_eq!(again.replayed.as_deref(), Some("true"));
    assert_eq!(again.body, first.body, "the same reference and link");
    let other = refer(&app, &partner, &referral(&fresh_email()), Some("ref-key-1")).await;
    assert_eq!(other.status, 409, "{other:?}");
    assert_eq!(
        other.body,
        message("Idempotency-Key reused with a different request.")
    );
    let shown = app.case_show(&reference_of(&first)).await;
    assert_eq!(event_kinds(&shown), ["referred"], "{shown}");
    // The replayed link is the one stored: it redeems.
    let portal = app.portal_bearer().await;
    let redeemed = app.redeem(&portal, &link_token(&again)).await;
    assert_eq!(redeemed.status, 200, "{redeemed:?}");
}

async fn referrals_are_isolated_notified_and_erased(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.webhook_allow_insecure = true;
        c.webhook_poll_ms = 50;
        c.webhook_backoff_ms = 100;
    })
    .await;
    let (partner_id, partner) = referrer(&app, false).await;
    let (_, sandbox) = referrer(&app, true).await;
    let receiver = Receiver::start().await;
    intake_api::cli::webhook(
        &app.intake.config,
        WebhookCommand::Set {
            client_id: partner_id,
            url: receiver.url.clone(),
            show_secret: false,
        },
    )
    .await
    .expect("webhook set");
    let email = fresh_email();

    let real = refer(&app, &partner, &referral(&email), None).await;
    assert_eq!(real.status, 201, "{real:?}");
    let reference = reference_of(&real);
    let got = receiver.wait_for(1).await;
    let event = got[0].event();
    assert_eq!(event["type"], "case.referred", "{event}");
    assert_eq!(event["data"]["reference"], reference.as_str(), "{event}");
    assert_eq!(event["data"]["status"], "referred", "{event}");

    // Another partner, and the sandbox, see nothing of it.
    assert_eq!(
        app.case_status(&reference, Some(&app.bearer()))
            .await
            .status,
        404
    );
    assert_eq!(
        app.case_status(&reference, Some(&sandbox)).await.status,
        404
    );
    let practised = refer(&app, &sandbox, &referral(&email), None).await;
    assert_eq!(
        practised.status, 201,
        "a sandbox case of its own: {practised:?}"
    );
    assert_ne!(reference_of(&practised), reference);
    assert_eq!(
        app.case_status(&reference_of(&practised), Some(&partner))
            .await
            .status,
        404
    );

    // Erasure takes the referral as sent, and the link.
    let link = link_token(&real);
    let erased = intake_api::cli::case(
        &app.intake.config,
        CaseCommand::Erase {
            email: email.clone(),
            brand: None,
        },
    )
    .await
    .expect("case erase");
    assert_eq!(erased.as_array().map(Vec::len), Some(2), "{erased}");
    let kept = app
        .intake_column(
            &format!(
                "SELECT CAST(COUNT(*) AS TEXT) AS n FROM submissions WHERE payload LIKE '%{email}%'"
            ),
            "n",
        )
        .await;
    assert_eq!(kept, ["0"]);
    assert_eq!(
        app.case_status(&reference, Some(&partner)).await.status,
        404
    );
    let portal = app.portal_bearer().await;
    assert_eq!(app.redeem(&portal, &link).await.status, 410);
}

on_both_backends!(
    a_referral_is_redeemed_once_and_completed_by_an_enquiry,
    referrals_are_validated_and_need_their_scope,
    a_keyed_referral_is_answered_once,
    referrals_are_isolated_notified_and_erased,
);
