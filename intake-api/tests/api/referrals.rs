//! Referrals over HTTP (`POST /partners/external/referrals`): a referred case made or
//! joined, its link redeemed once, completed by a later enquiry and then activated;
//! validation, scope, idempotency, webhooks, partner and sandbox isolation (a referral
//! grants nothing and tells nothing of another partner's customer), and erasure.

use std::time::Duration;

use intake_api::cli::{CaseCommand, WebhookCommand};
use serde_json::{Value, json};
use test_support::on_both_backends;

use crate::helpers::{
    Backend, INTAKE, PORTAL_A, PRODUCT, REFERRAL, REFERRALS, Reply, TestApp, event_kinds,
    eventually, fresh_email, message, purchase_enquiry, referral,
};
use crate::webhooks::Receiver;

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

    // A referral grants nothing: the case is not the referrer's to read, and attach
    // sends the partner to the enquiry form.
    let status = app.case_status(&reference, Some(&partner)).await;
    assert_eq!(status.status, 404, "{status:?}");
    assert_eq!(status.body, message("Case not found"));
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
            "sandbox": false,
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
    // Another partner's enquiry opens nothing to the referrer; its own does.
    let attach = app
        .post(crate::helpers::ATTACH, Some(&partner), &body)
        .await;
    assert_eq!(attach.status, 404, "{attach:?}");
    assert_eq!(
        app.case_status(&reference, Some(&partner)).await.status,
        404
    );
    let own = app
        .post(
            crate::helpers::ENQUIRY,
            Some(&partner),
            &purchase_enquiry("brand_a", &email),
        )
        .await;
    assert_eq!(own.status, 200, "{own:?}");
    assert_eq!(reference_of(&own), reference);
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
    let status = app.case_status(&reference, Some(&app.bearer())).await;
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

async fn referrals_are_isolated_unannounced_and_erased(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.webhooks.insecure.allow = true;
        c.webhooks.poll = Duration::from_millis(50);
        c.webhooks.backoff = Duration::from_millis(100);
    })
    .await;
    let (partner_id, partner) = referrer(&app, false).await;
    let (_, sandbox) = referrer(&app, true).await;
    let receiver = Receiver::start().await;
    intake_api::cli::webhook(
        &app.intake.config,
        WebhookCommand::Set {
            client_id: partner_id.clone(),
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
    // A referral is heard of by no one, its own partner included: nothing was queued.
    let queued = app
        .intake_column(
            &format!(
                "SELECT CAST(COUNT(*) AS TEXT) AS n FROM webhook_deliveries WHERE client_id = '{partner_id}'"
            ),
            "n",
        )
        .await;
    assert_eq!(queued, ["0"]);

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

    // The partner's own enquiry puts it on the case: its first event is that enquiry's.
    let own = app
        .post(
            crate::helpers::ENQUIRY,
            Some(&partner),
            &purchase_enquiry("brand_a", &email),
        )
        .await;
    assert_eq!(own.status, 200, "{own:?}");
    let got = receiver.wait_for(1).await;
    let event = got[0].event();
    assert_eq!(event["type"], "case.updated", "{event}");
    assert_eq!(event["data"]["reference"], reference.as_str(), "{event}");
    assert_eq!(event["data"]["status"], "pending_activation", "{event}");

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

/// The partners' webhook deliveries queued for `client_id`, by event type, oldest first.
async fn queued_for(app: &TestApp, client_id: &str) -> Vec<String> {
    app.intake_column(
        &format!(
            "SELECT event_type FROM webhook_deliveries WHERE client_id = '{client_id}' ORDER BY created_at, id"
        ),
        "event_type",
    )
    .await
}

/// Sets `client_id`'s webhook endpoint to `receiver`.
async fn hear(app: &TestApp, client_id: &str, receiver: &Receiver) {
    intake_api::cli::webhook(
        &app.intake.config,
        WebhookCommand::Set {
            client_id: client_id.to_owned(),
            url: receiver.url.clone(),
            show_secret: false,
        },
    )
    .await
    .expect("webhook set");
}

async fn a_referral_of_another_partners_customer_opens_nothing_and_tells_nothing(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.webhooks.insecure.allow = true;
        c.webhooks.poll = Duration::from_millis(50);
        c.webhooks.backoff = Duration::from_millis(100);
    })
    .await;
    let (a_id, a) = (app.client_id.clone(), app.bearer());
    let (b_id, b) = referrer(&app, false).await;
    let (a_hears, b_hears) = (Receiver::start().await, Receiver::start().await);
    hear(&app, &a_id, &a_hears).await;
    hear(&app, &b_id, &b_hears).await;
    let victim = fresh_email();
    let attach = |email: &str| json!({"email": email, "product_uuid": PRODUCT});

    // Partner A's customer, with a live link.
    let a_case = app.enquiry(&purchase_enquiry("brand_a", &victim)).await;
    assert_eq!(a_case.status, 201, "{a_case:?}");
    let a_ref = reference_of(&a_case);
    let a_link = app.attach(&victim, PRODUCT).await;
    assert_eq!(a_link.status, 200, "{a_link:?}");
    let a_token = crate::helpers::token_of(&a_link.body, PORTAL_A);
    let a_before = app.case_status(&a_ref, Some(&a)).await;
    assert_eq!(a_before.status, 200, "{a_before:?}");
    // B knows nothing of it.
    assert_eq!(app.case_status(&a_ref, Some(&b)).await.status, 404);
    let b_attach = app
        .post(crate::helpers::ATTACH, Some(&b), &attach(&victim))
        .await;
    assert_eq!(b_attach.status, 404, "{b_attach:?}");

    // B refers the customer with the least a referral takes, the address in upper case,
    // and a customer nobody has, the same way.
    let least = |email: &str| {
        json!({
            "brand": "brand_a",
            "first_name": "Eve",
            "last_name": "Prober",
            "email": email,
            "mobile_number": "+44 7700 900999",
            "contact_consent": true,
        })
    };
    let stranger = fresh_email();
    let probe = refer(&app, &b, &least(&victim.to_uppercase()), None).await;
    let control = refer(&app, &b, &least(&stranger), None).await;
    for reply in [&probe, &control] {
        assert_eq!(reply.status, 201, "{reply:?}");
        assert_eq!(reply.body["message"], "Referral created", "{reply:?}");
        assert_eq!(reference_of(reply).len(), 12, "{reply:?}");
    }
    let b_ref = reference_of(&probe);
    assert_ne!(b_ref, a_ref, "A's reference is not B's to know");
    let (b_token, control_token) = (link_token(&probe), link_token(&control));

    // Nothing of A's case opened to B, whose own referrals read as unknown alike.
    for reference in [&a_ref, &b_ref, &reference_of(&control)] {
        let read = app.case_status(reference, Some(&b)).await;
        assert_eq!((read.status, read.body), (404, message("Case not found")));
    }
    for email in [&victim, &stranger] {
        let attached = app
            .post(crate::helpers::ATTACH, Some(&b), &attach(email))
            .await;
        assert_eq!(
            (attached.status, attached.body),
            (404, message("Case not found"))
        );
    }
    // B's second referral of each answers alike: 200, its own reference again.
    for (email, first) in [(&victim, &probe), (&stranger, &control)] {
        let again = refer(&app, &b, &least(email), None).await;
        assert_eq!(again.status, 200, "{again:?}");
        assert_eq!(again.body["message"], "Referral added", "{again:?}");
        assert_eq!(reference_of(&again), reference_of(first));
    }

    // A's case is as it was: its time, status and link untouched, and no event of B's.
    let a_after = app.case_status(&a_ref, Some(&a)).await;
    assert_eq!(a_after.body, a_before.body);
    let portal = app.portal_bearer().await;
    let redeemed = app.redeem(&portal, &a_token).await;
    assert_eq!(redeemed.status, 200, "A's link still works: {redeemed:?}");
    assert_eq!(redeemed.body["reference"], a_ref.as_str());
    assert_eq!(redeemed.body["continue_with"], "product");
    assert_eq!(
        queued_for(&app, &a_id).await,
        ["case.created", "product.attached"]
    );
    assert_eq!(queued_for(&app, &b_id).await, Vec::<String>::new());

    // B's links were replaced by its second referrals, like any partner's; nothing about
    // the customer's case reaches the portal through them.
    assert_eq!(app.redeem(&portal, &b_token).await.status, 410);
    assert_eq!(app.redeem(&portal, &control_token).await.status, 410);
    let b_again = refer(&app, &b, &least(&victim), None).await;
    let redeemed = app.redeem(&portal, &link_token(&b_again)).await;
    assert_eq!(redeemed.status, 200, "{redeemed:?}");
    assert_eq!(
        redeemed.body,
        json!({
            "reference": b_ref,
            "brand": "brand_a",
            "continue_with": "enquiry",
            "email": victim,
            "sandbox": false,
        })
    );

    // The referral is on the case's record, for the business, beside A's own history.
    let shown = app.case_show(&a_ref).await;
    assert_eq!(shown["status"], "pending_activation", "{shown}");
    let kinds = event_kinds(&shown);
    assert_eq!(
        kinds,
        [
            "created",
            "product_attached",
            "referred",
            "referred",
            "redirect_redeemed",
            "referred",
            "redirect_redeemed"
        ],
        "{shown}"
    );
}

on_both_backends!(
    a_referral_is_redeemed_once_and_completed_by_an_enquiry,
    referrals_are_validated_and_need_their_scope,
    a_keyed_referral_is_answered_once,
    referrals_are_isolated_unannounced_and_erased,
    a_referral_of_another_partners_customer_opens_nothing_and_tells_nothing,
);
