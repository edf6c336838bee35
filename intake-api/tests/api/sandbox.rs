//! Sandbox clients over HTTP: their cases live apart from real ones both ways, activate after
//! their own short delay, stay out of operators' lists and production counts, and go after
//! their retention; the trigger addresses make the failures the contract names, for sandbox
//! clients only; a portal redeeming a sandbox case's link is told so.

use std::time::Duration;

use chrono::Utc;

use intake_api::cli::{CaseCommand, WebhookCommand};
use intake_api::config::Config;
use serde_json::{Value, json};
use test_support::on_both_backends;

use crate::helpers::{
    ATTACH, Backend, ENQUIRY, INTAKE, PRODUCT, Reply, TestApp, eventually, fresh_email, message,
    metric, purchase_enquiry, token_of,
};
use crate::webhooks::Receiver;

/// A sandbox partner of `app`: its own client, its token saying `sandbox`.
struct Sandbox {
    client_id: String,
    bearer: String,
}

impl Sandbox {
    async fn of(app: &TestApp) -> Self {
        let (client_id, secret) = app.auth.create_sandbox_client(INTAKE).await;
        let token = app.auth.token(&client_id, &secret, INTAKE).await;
        let claims = crate::helpers::claims_of(&token);
        assert_eq!(claims["sandbox"], true, "{claims}");
        Self {
            client_id,
            bearer: format!("Bearer {token}"),
        }
    }

    async fn enquiry(&self, app: &TestApp, body: &Value, key: Option<&str>) -> Reply {
        app.post_keyed(ENQUIRY, &self.bearer, body, key).await
    }

    async fn attach(&self, app: &TestApp, email: &str) -> Reply {
        self.attach_product(app, email, PRODUCT).await
    }

    async fn attach_product(&self, app: &TestApp, email: &str, product: &str) -> Reply {
        let body = json!({"email": email, "product_uuid": product});
        app.post(ATTACH, Some(&self.bearer), &body).await
    }
}

async fn cases(config: &Config, command: CaseCommand) -> Vec<String> {
    let listed = intake_api::cli::case(config, command)
        .await
        .expect("case command");
    listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| c["reference"].as_str().expect("reference").to_owned())
        .collect()
}

fn reference(reply: &Reply) -> String {
    reply.body["reference"]
        .as_str()
        .unwrap_or_else(|| panic!("no reference: {reply:?}"))
        .to_owned()
}

async fn sandbox_and_real_cases_live_apart(backend: Backend) {
    // A brand of this test's own: the metrics are the test process's, shared with the
    // tests running beside it.
    let brand = format!("sandbox_{backend:?}").to_lowercase();
    let brands = format!(
        "{brand}=https://portal.sandbox.example/continue,brand_b=https://portal.brand-b.example/continue"
    );
    let app = TestApp::spawn_with(backend, |c| c.brands = brands).await;
    let sandbox = Sandbox::of(&app).await;
    let base = app.intake.base_url();
    let email = fresh_email();
    let enquiry = purchase_enquiry(&brand, &email);

    let real = app.enquiry(&enquiry).await;
    assert_eq!(real.status, 201, "{real:?}");
    // The same customer from the sandbox is a case of its own, and stays one.
    let first = sandbox.enquiry(&app, &enquiry, None).await;
    assert_eq!(first.status, 201, "{first:?}");
    let again = sandbox.enquiry(&app, &enquiry, None).await;
    assert_eq!(again.status, 200, "{again:?}");
    let (real_ref, sandbox_ref) = (reference(&real), reference(&first));
    assert_ne!(real_ref, sandbox_ref);
    assert_eq!(reference(&again), sandbox_ref);
    assert_eq!(app.enquiry(&enquiry).await.status, 200);

    // Neither side sees the other's case.
    assert_eq!(
        app.case_status(&real_ref, Some(&sandbox.bearer))
            .await
            .status,
        404
    );
    assert_eq!(
        app.case_status(&sandbox_ref, Some(&app.bearer()))
            .await
            .status,
        404
    );
    let product = uuid::Uuid::new_v4().to_string();
    let attached = sandbox.attach_product(&app, &email, &product).await;
    assert_eq!(attached.status, 200, "{attached:?}");
    // The brand's portal redeems a sandbox case's link as any other.
    let token = token_of(&attached.body, "https://portal.sandbox.example/continue");
    let portal = app.portal_bearer_of(&brand).await;
    let redeemed = app.redeem(&portal, &token).await;
    assert_eq!(redeemed.status, 200, "{redeemed:?}");
    assert_eq!(
        redeemed.body["reference"],
        sandbox_ref.as_str(),
        "{redeemed:?}"
    );
    let sandbox_case = app.case_status(&sandbox_ref, Some(&sandbox.bearer)).await;
    assert_eq!(sandbox_case.body["product_uuid"], product.as_str());
    let real_case = app.case_status(&real_ref, Some(&app.bearer())).await;
    assert_eq!(real_case.body["product_uuid"], PRODUCT, "{real_case:?}");

    // Operators see sandbox cases only when they ask.
    let config = &app.intake.config;
    let find = |sandbox| CaseCommand::Find {
        email: email.clone(),
        sandbox,
    };
    assert_eq!(
        cases(config, find(false)).await,
        std::slice::from_ref(&real_ref)
    );
    assert_eq!(
        cases(config, find(true)).await,
        std::slice::from_ref(&sandbox_ref)
    );
    let list = |sandbox| CaseCommand::List {
        status: vec![],
        since: None,
        limit: 50,
        sandbox,
    };
    assert_eq!(cases(config, list(false)).await, [real_ref]);
    assert_eq!(cases(config, list(true)).await, [sandbox_ref]);

    // The production counts have the real enquiries only.
    assert_eq!(
        metric(&app.http, &base, "intake_cases_total", &brand).await,
        2.0
    );
    assert_eq!(
        metric(&app.http, &base, "intake_sandbox_cases_total", &brand).await,
        2.0
    );
    assert_eq!(
        metric(
            &app.http,
            &base,
            "intake_sandbox_products_attached_total",
            &brand
        )
        .await,
        1.0
    );
}

async fn a_sandbox_case_activates_after_its_own_delay(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.activation_delay_secs = 3600;
        c.sandbox_activation_delay_secs = 1;
        c.activation_poll_ms = 100;
    })
    .await;
    let sandbox = Sandbox::of(&app).await;
    let enquiry = purchase_enquiry("brand_a", &fresh_email());
    let real_ref = app.submit(&enquiry).await;
    let sandbox_ref = reference(&sandbox.enquiry(&app, &enquiry, None).await);
    let active = eventually(Duration::from_secs(20), || async {
        let case = app.case_status(&sandbox_ref, Some(&sandbox.bearer)).await;
        (case.body["status"] == "active").then_some(case)
    })
    .await
    .expect("the sandbox case activated");
    assert!(active.body["activated_at"].is_string(), "{active:?}");
    let real = app.case_status(&real_ref, Some(&app.bearer())).await;
    assert_eq!(real.body["status"], "pending_activation", "{real:?}");
}

async fn sandbox_cases_go_after_their_retention(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sandbox = Sandbox::of(&app).await;
    let email = fresh_email();
    let enquiry = purchase_enquiry("brand_a", &email);
    let real_ref = app.submit(&enquiry).await;
    let sandbox_ref = reference(&sandbox.enquiry(&app, &enquiry, None).await);
    assert_eq!(sandbox.attach(&app, &email).await.status, 200);

    let store = crate::helpers::store_of(&app).await;
    // Nothing is older than a retention that ended an hour ago.
    assert_eq!(
        store
            .purge_sandbox(Utc::now() - chrono::Duration::hours(1))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .purge_sandbox(Utc::now() + chrono::Duration::seconds(1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        app.case_status(&sandbox_ref, Some(&sandbox.bearer))
            .await
            .status,
        404
    );
    let left = app
        .intake_column("SELECT CAST(count(*) AS TEXT) AS n FROM submissions", "n")
        .await;
    assert_eq!(left, ["1"], "the sandbox case's submission went with it");
    let real = app.case_status(&real_ref, Some(&app.bearer())).await;
    assert_eq!(real.status, 200, "{real:?}");
}

/// An address of the trigger named `local`, new to this run.
fn trigger(local: &str) -> String {
    format!("{local}+{}@sandbox.example", uuid::Uuid::new_v4().simple())
}

async fn attach_triggers_answer_the_specs_404_and_500(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sandbox = Sandbox::of(&app).await;
    for (local, status, body) in [
        ("attach-not-found", 404, message("Case not found")),
        (
            "attach-fails",
            500,
            message("Failed to generate redirect link"),
        ),
    ] {
        let email = trigger(local);
        let enquiry = purchase_enquiry("brand_a", &email);
        assert_eq!(sandbox.enquiry(&app, &enquiry, None).await.status, 201);
        let reply = sandbox.attach(&app, &email).await;
        assert_eq!((reply.status, &reply.body), (status, &body), "{local}");
        // For a real client the address is an address.
        app.submit(&enquiry).await;
        assert_eq!(app.attach(&email, PRODUCT).await.status, 200, "{local}");
        let base = app.intake.base_url();
        let rehearsed = metric(&app.http, &base, "intake_sandbox_rehearsals_total", local).await;
        assert!(rehearsed >= 1.0, "{local} is not counted as a rehearsal");
    }
}

async fn a_submission_answers_503_before_or_after_storing_on_request(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sandbox = Sandbox::of(&app).await;
    let config = &app.intake.config;
    let stored = |email: &str, sandbox| {
        let email = email.to_owned();
        async move { cases(config, CaseCommand::Find { email, sandbox }).await }
    };

    // Before: nothing stored; the retry with the same key makes the case.
    let email = trigger("unavailable-before-storing");
    let enquiry = purchase_enquiry("brand_a", &email);
    let key = uuid::Uuid::new_v4().to_string();
    let first = sandbox.enquiry(&app, &enquiry, Some(&key)).await;
    assert_eq!(first.status, 503, "{first:?}");
    assert!(first.retry_after.is_some(), "{first:?}");
    assert!(stored(&email, true).await.is_empty());
    let retried = sandbox.enquiry(&app, &enquiry, Some(&key)).await;
    assert_eq!(retried.status, 201, "{retried:?}");
    assert_eq!(stored(&email, true).await, [reference(&retried)]);

    // After: stored; the retry with the same key gets the stored answer.
    let email = trigger("unavailable-after-storing");
    let enquiry = purchase_enquiry("brand_a", &email);
    let key = uuid::Uuid::new_v4().to_string();
    let first = sandbox.enquiry(&app, &enquiry, Some(&key)).await;
    assert_eq!(first.status, 503, "{first:?}");
    assert!(first.retry_after.is_some(), "{first:?}");
    let made = stored(&email, true).await;
    assert_eq!(made.len(), 1, "the case was stored before the 503");
    let retried = sandbox.enquiry(&app, &enquiry, Some(&key)).await;
    assert_eq!(retried.status, 201, "{retried:?}");
    assert_eq!(retried.replayed.as_deref(), Some("true"), "{retried:?}");
    assert_eq!(reference(&retried), made[0]);

    // For a real client both are addresses.
    for local in ["unavailable-before-storing", "unavailable-after-storing"] {
        let reply = app
            .enquiry(&purchase_enquiry("brand_a", &trigger(local)))
            .await;
        assert_eq!(reply.status, 201, "{local}: {reply:?}");
    }
}

async fn a_webhook_fails_a_few_tries_on_request(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.webhooks.insecure.allow = true;
        c.webhooks.poll = Duration::from_millis(50);
        c.webhooks.backoff = Duration::from_millis(100);
    })
    .await;
    let sandbox = Sandbox::of(&app).await;
    let receiver = Receiver::start().await;
    for client_id in [&sandbox.client_id, &app.client_id] {
        intake_api::cli::webhook(
            &app.intake.config,
            WebhookCommand::Set {
                client_id: client_id.clone(),
                url: receiver.url.clone(),
                show_secret: false,
            },
        )
        .await
        .expect("webhook set");
    }
    let email = trigger("webhook-fails");
    let enquiry = purchase_enquiry("brand_a", &email);
    assert_eq!(sandbox.enquiry(&app, &enquiry, None).await.status, 201);
    app.submit(&enquiry).await;
    receiver.wait_for(2).await;
    let tries = |client_id: &str| {
        let client_id = client_id.to_owned();
        async {
            let listed = intake_api::cli::webhook(
                &app.intake.config,
                WebhookCommand::Deliveries {
                    client_id,
                    failed: false,
                    limit: 10,
                },
            )
            .await
            .expect("webhook deliveries");
            let event = &listed.as_array().expect("a list")[0];
            assert_eq!(event["state"], "delivered", "{listed}");
            event["attempts"].as_i64().expect("attempts")
        }
    };
    assert_eq!(
        tries(&sandbox.client_id).await,
        i64::from(intake_api::sandbox::WEBHOOK_FAILURES) + 1
    );
    assert_eq!(tries(&app.client_id).await, 1, "a real client's event");
    // The failures were ours: the receiver heard each event once.
    assert_eq!(receiver.got().len(), 2);
}

async fn a_portal_is_told_a_sandbox_cases_link_is_sandbox_and_a_real_ones_is_not(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sandbox = Sandbox::of(&app).await;
    let portal = app.portal_bearer().await;
    // A real customer's address, used from the sandbox as well.
    let email = fresh_email();
    let enquiry = purchase_enquiry("brand_a", &email);
    assert_eq!(app.enquiry(&enquiry).await.status, 201);
    assert_eq!(sandbox.enquiry(&app, &enquiry, None).await.status, 201);
    let portal_url = "https://portal.brand-a.example/continue";
    let real = app.attach(&email, PRODUCT).await;
    let practice = sandbox.attach(&app, &email).await;
    for (attached, expected) in [(&real, false), (&practice, true)] {
        assert_eq!(attached.status, 200, "{attached:?}");
        let redeemed = app
            .redeem(&portal, &token_of(&attached.body, portal_url))
            .await;
        assert_eq!(redeemed.status, 200, "{redeemed:?}");
        assert_eq!(redeemed.body["sandbox"], expected, "{redeemed:?}");
        assert_eq!(redeemed.body["email"], email.as_str(), "{redeemed:?}");
    }
}

on_both_backends!(
    sandbox_and_real_cases_live_apart,
    a_sandbox_case_activates_after_its_own_delay,
    sandbox_cases_go_after_their_retention,
    attach_triggers_answer_the_specs_404_and_500,
    a_submission_answers_503_before_or_after_storing_on_request,
    a_webhook_fails_a_few_tries_on_request,
    a_portal_is_told_a_sandbox_cases_link_is_sandbox_and_a_real_ones_is_not,
);
