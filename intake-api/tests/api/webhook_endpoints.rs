//! Partners' webhook endpoints through the API (`/partners/external/webhooks/endpoints`):
//! made with a secret shown once and sealed at rest, several per partner, each receiving
//! its chosen event types; changed, disabled and enabled, rotated with both secrets signing
//! during the grace, removed. Another partner can neither read nor change them, nor tell
//! them from ids that name nothing; bad requests get a 4xx saying what is wrong.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use shared::claims::scopes::WEBHOOKS_MANAGE;

use crate::helpers::{
    Backend, ENQUIRY, INTAKE, Reply, TestApp, eventually, fresh_email, metric, purchase_enquiry,
};
use crate::webhooks::{Receiver, expected_signature, webhook_settings};
use test_support::document::Served;
use test_support::{on_both_backends, on_sqlite};

const ENDPOINTS: &str = "/partners/external/webhooks/endpoints";

/// A partner holding `webhooks:manage` and the enquiry scope.
pub(crate) struct Partner {
    pub(crate) bearer: String,
    pub(crate) client_id: String,
}

impl Partner {
    pub(crate) async fn new(app: &TestApp) -> Self {
        Self::with_scopes(app, &format!("{INTAKE} {WEBHOOKS_MANAGE}"), false).await
    }

    pub(crate) async fn with_scopes(app: &TestApp, scopes: &str, sandbox: bool) -> Self {
        let (client_id, secret) = if sandbox {
            app.auth.create_sandbox_client(scopes).await
        } else {
            app.auth.create_client(scopes).await
        };
        let token = app.auth.token(&client_id, &secret, scopes).await;
        Self {
            bearer: format!("Bearer {token}"),
            client_id,
        }
    }

    pub(crate) async fn send(
        &self,
        app: &TestApp,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        let mut request = app
            .http
            .request(method, app.url(path))
            .header("authorization", &self.bearer);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        Reply::read(request.send().await.expect("the intake-api answers")).await
    }

    pub(crate) async fn create(&self, app: &TestApp, body: Value) -> Reply {
        self.send(app, Method::POST, ENDPOINTS, Some(body)).await
    }

    async fn read(&self, app: &TestApp, id: &str) -> Reply {
        self.send(app, Method::GET, &format!("{ENDPOINTS}/{id}"), None)
            .await
    }

    pub(crate) async fn change(&self, app: &TestApp, id: &str, body: Value) -> Reply {
        self.send(app, Method::PATCH, &format!("{ENDPOINTS}/{id}"), Some(body))
            .await
    }

    pub(crate) async fn rotate(&self, app: &TestApp, id: &str, body: Value) -> Reply {
        let path = format!("{ENDPOINTS}/{id}/rotate-secret");
        self.send(app, Method::POST, &path, Some(body)).await
    }

    pub(crate) async fn delete(&self, app: &TestApp, id: &str) -> Reply {
        self.send(app, Method::DELETE, &format!("{ENDPOINTS}/{id}"), None)
            .await
    }

    async fn list(&self, app: &TestApp) -> Vec<Value> {
        let reply = self.send(app, Method::GET, ENDPOINTS, None).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.body["data"].as_array().expect("a list").clone()
    }

    pub(crate) async fn enquire(&self, app: &TestApp, email: &str) {
        let reply = app
            .post(
                ENQUIRY,
                Some(&self.bearer),
                &purchase_enquiry("brand_a", email),
            )
            .await;
        assert!([200, 201].contains(&reply.status), "{}", reply.body);
    }
}

pub(crate) fn id_of(reply: &Reply) -> String {
    reply.body["id"].as_str().expect("an id").to_owned()
}

fn secret_of(reply: &Reply) -> String {
    reply.body["secret"].as_str().expect("a secret").to_owned()
}

async fn a_partner_manages_its_endpoints_through_the_api(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let partner = Partner::new(&app).await;
    let (every, activations) = (Receiver::start().await, Receiver::start().await);

    let made = partner.create(&app, json!({"url": every.url})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.cache_control.as_deref(), Some("no-store"));
    let (every_id, every_secret) = (id_of(&made), secret_of(&made));
    assert!(
        every_id.starts_with("ep_") && every_id.len() == 35,
        "{every_id}"
    );
    assert!(every_secret.starts_with("whsec_"), "{}", made.body);
    assert_eq!(made.body["event_types"], Value::Null);
    assert_eq!(made.body["status"], "enabled");
    let chosen = partner
        .create(
            &app,
            json!({"url": activations.url, "event_types": ["case.activated"]}),
        )
        .await;
    assert_eq!(chosen.status, 201, "{}", chosen.body);
    let (chosen_id, chosen_secret) = (id_of(&chosen), secret_of(&chosen));
    assert_eq!(chosen.body["event_types"], json!(["case.activated"]));

    // Listed and read without their secrets, which are sealed at rest.
    let listed = partner.list(&app).await;
    let ids: Vec<&str> = listed.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [every_id.as_str(), chosen_id.as_str()]);
    let read = partner.read(&app, &every_id).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body["url"], every.url.as_str());
    for shown in [Value::Array(listed), read.body] {
        let text = shown.to_string();
        assert!(
            !text.contains("whsec_") && !text.contains("secret\""),
            "{text}"
        );
    }
    let stored = app
        .intake_column("SELECT secret FROM webhook_endpoints", "secret")
        .await;
    assert_eq!(stored.len(), 2);
    for secret in stored {
        assert!(secret.starts_with("sealed1:"), "{secret}");
        assert!(!secret.contains(&every_secret[6..]) && !secret.contains(&chosen_secret[6..]));
    }

    // Each endpoint gets the types it chose, signed with its own secret.
    partner.enquire(&app, &fresh_email()).await;
    let got = every.wait_for(1).await;
    assert_eq!(every.delivered(), ["case.created"]);
    assert_eq!(
        got[0].signatures(),
        [expected_signature(&every_secret, &got[0])]
    );

    // Every type for the second one too; the first one disabled by the partner.
    let widened = partner
        .change(&app, &chosen_id, json!({"event_types": null}))
        .await;
    assert_eq!(widened.status, 200, "{}", widened.body);
    assert_eq!(widened.body["event_types"], Value::Null);
    let paused = partner
        .change(&app, &every_id, json!({"enabled": false}))
        .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    assert_eq!(paused.body["status"], "disabled");
    assert_eq!(paused.body["disabled_reason"], "disabled by the partner");
    assert!(paused.body["disabled_at"].is_string());
    let second = fresh_email();
    partner.enquire(&app, &second).await;
    activations.wait_for(1).await;
    assert_eq!(activations.delivered(), ["case.created"]);

    // A rotation: both secrets sign during the grace; the answer shows the new one once.
    let rotated = partner
        .rotate(&app, &chosen_id, json!({"grace_period_secs": 3600}))
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    assert_eq!(rotated.cache_control.as_deref(), Some("no-store"));
    let new_secret = secret_of(&rotated);
    assert_ne!(new_secret, chosen_secret);
    let expires = rotated.body["previous_secret_expires_at"]
        .as_str()
        .expect("the grace's end");
    let expires = chrono::DateTime::parse_from_rfc3339(expires).unwrap();
    let left = expires
        .signed_duration_since(chrono::Utc::now())
        .num_seconds();
    assert!((3500..=3600).contains(&left), "{left}");
    partner.enquire(&app, &second).await;
    let got = activations.wait_for(2).await;
    assert_eq!(activations.delivered(), ["case.created", "case.updated"]);
    assert_eq!(
        got[1].signatures(),
        [
            expected_signature(&new_secret, &got[1]),
            expected_signature(&chosen_secret, &got[1])
        ]
    );
    let ended = partner
        .rotate(&app, &chosen_id, json!({"grace_period_secs": 0}))
        .await;
    assert_eq!(ended.status, 200, "{}", ended.body);
    assert_eq!(ended.body["previous_secret_expires_at"], Value::Null);

    // Enabled again, the first one gets what comes next; removed, it is gone.
    let enabled = partner
        .change(&app, &every_id, json!({"enabled": true}))
        .await;
    assert_eq!(
        (
            enabled.body["status"].as_str(),
            &enabled.body["disabled_reason"]
        ),
        (Some("enabled"), &Value::Null)
    );
    assert_eq!(partner.delete(&app, &every_id).await.status, 204);
    assert_eq!(partner.read(&app, &every_id).await.status, 404);
    assert_eq!(partner.delete(&app, &every_id).await.status, 404);
    assert_eq!(partner.list(&app).await.len(), 1);
    assert_eq!(
        every.delivered(),
        ["case.created"],
        "nothing while disabled"
    );
}

/// Another partner's endpoint is answered as one that does not exist, whatever it asks,
/// and stays as it was; a sandbox client's endpoints are its own.
async fn partners_see_and_change_only_their_own_endpoints(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let (owner, other) = (Partner::new(&app).await, Partner::new(&app).await);
    let sandbox = Partner::with_scopes(&app, WEBHOOKS_MANAGE, true).await;
    let made = owner
        .create(&app, json!({"url": "http://127.0.0.1:9/owner"}))
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = id_of(&made);
    let nothing = "ep_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d";

    for intruder in [&other, &sandbox] {
        assert!(intruder.list(&app).await.is_empty());
        for target in [id.as_str(), nothing] {
            let answers = [
                intruder.read(&app, target).await,
                intruder
                    .change(&app, target, json!({"enabled": false}))
                    .await,
                intruder.rotate(&app, target, json!({})).await,
                intruder.delete(&app, target).await,
            ];
            for answer in answers {
                assert_eq!(answer.status, 404, "{}", answer.body);
                assert_eq!(
                    answer.body,
                    json!({"message": "Webhook endpoint not found"})
                );
            }
        }
    }
    let kept = owner.read(&app, &id).await;
    assert_eq!(
        (
            kept.body["status"].as_str(),
            kept.body["previous_secret_expires_at"].clone()
        ),
        (Some("enabled"), Value::Null),
        "unchanged: {}",
        kept.body
    );
    let own = sandbox
        .create(&app, json!({"url": "http://127.0.0.1:9/sandbox"}))
        .await;
    assert_eq!(own.status, 201, "{}", own.body);
    assert_eq!(sandbox.list(&app).await.len(), 1);
    assert_eq!(owner.list(&app).await.len(), 1);
}

/// Partners making and removing endpoints in a random interleaving each list exactly their
/// own, and reach no other's by its id.
async fn isolation_holds_under_random_interleavings(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let partners = [
        Partner::new(&app).await,
        Partner::new(&app).await,
        Partner::new(&app).await,
    ];
    let mut held: Vec<Vec<String>> = vec![Vec::new(); partners.len()];
    // A fixed sequence from a small linear congruential generator: the same every run.
    let mut seed: u64 = 0x5eed_1234_abcd;
    let mut next = |bound: usize| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        ((seed >> 33) as usize) % bound
    };
    for step in 0..24 {
        let who = next(partners.len());
        let partner = &partners[who];
        if held[who].len() < 3 && next(3) > 0 {
            let url = format!("http://127.0.0.1:9/{who}/{step}");
            let made = partner.create(&app, json!({"url": url})).await;
            assert_eq!(made.status, 201, "{}", made.body);
            held[who].push(id_of(&made));
        } else if !held[who].is_empty() {
            let pick = next(held[who].len());
            let gone = held[who].remove(pick);
            assert_eq!(partner.delete(&app, &gone).await.status, 204);
        }
        // Someone else tries one of this partner's ids.
        let intruder = &partners[(who + 1 + next(partners.len() - 1)) % partners.len()];
        if let Some(id) = held[who].first() {
            assert_eq!(intruder.delete(&app, id).await.status, 404);
        }
        for (index, p) in partners.iter().enumerate() {
            let listed: Vec<String> = p
                .list(&app)
                .await
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(listed, held[index], "partner {index} after step {step}");
        }
    }
}

/// An endpoint whose every try fails for the deployment's period is disabled: the partner
/// reads why and since when, operators count it; enabled again, its events go.
async fn an_endpoint_failing_for_the_period_is_disabled_and_says_why(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        webhook_settings(c);
        c.webhooks.disable_after = Duration::from_secs(1);
    })
    .await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    receiver.answer(500);
    let made = partner.create(&app, json!({"url": receiver.url})).await;
    let id = id_of(&made);
    partner.enquire(&app, &fresh_email()).await;

    let disabled = eventually(Duration::from_secs(30), || async {
        let read = partner.read(&app, &id).await;
        (read.body["status"] == "disabled").then_some(read.body)
    })
    .await
    .expect("disabled after failing for a second");
    let reason = disabled["disabled_reason"].as_str().unwrap();
    assert!(
        reason.starts_with("every delivery failed for 1 second (since "),
        "{reason}"
    );
    assert!(disabled["failing_since"].is_string(), "{disabled}");
    // The recorder is the test process's: the other database's run may have counted too.
    let counted = metric(
        &app.http,
        &app.intake.base_url(),
        "intake_webhook_endpoints_disabled_total",
        "failing",
    )
    .await;
    assert!(counted >= 1.0, "{counted}");
    let tries = receiver.got().len();
    assert!(tries >= 2, "{tries} tries");

    // Fixed and enabled: what waited is sent, and it is failing no more.
    receiver.answer(200);
    let enabled = partner.change(&app, &id, json!({"enabled": true})).await;
    assert_eq!(
        enabled.body["failing_since"],
        Value::Null,
        "{}",
        enabled.body
    );
    receiver.wait_for(1).await;
    assert_eq!(receiver.delivered(), ["case.created"]);
}

/// A 429 or 503 with `Retry-After` is tried again no sooner than it asks, however short the
/// back-off.
async fn retry_after_is_waited_for(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    receiver.answer(429);
    receiver.ask_to_wait(2);
    partner.create(&app, json!({"url": receiver.url})).await;
    partner.enquire(&app, &fresh_email()).await;
    eventually(Duration::from_secs(10), || async {
        (!receiver.got().is_empty()).then_some(())
    })
    .await
    .expect("a first try");
    receiver.ask_to_wait(0);
    receiver.answer(200);
    let got = receiver.wait_for(1).await;
    let all = receiver.got();
    let waited = got[0].at.duration_since(all[0].at);
    assert!(
        waited >= Duration::from_millis(1900),
        "tried again after {waited:?}"
    );
}

/// A rate limit spaces an endpoint's deliveries; lifted, they go as fast as it answers.
/// Operators see who changed the endpoint last.
async fn a_rate_limit_paces_deliveries(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    let made = partner
        .create(&app, json!({"url": receiver.url, "rate_limit": 4}))
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.body["rate_limit"], 4);
    let id = id_of(&made);
    for _ in 0..6 {
        partner.enquire(&app, &fresh_email()).await;
    }
    let got = receiver.wait_for(6).await;
    // Four a second: six sends span five gaps of a quarter second, as sent; as they
    // arrive, the first may come late on a busy machine, so at least four gaps (unpaced,
    // six arrive within milliseconds).
    let span = got[5].at.duration_since(got[0].at);
    assert!(
        span >= Duration::from_millis(1000),
        "six sends within {span:?}"
    );

    let lifted = partner.change(&app, &id, json!({"rate_limit": null})).await;
    assert_eq!(lifted.status, 200, "{}", lifted.body);
    assert_eq!(lifted.body["rate_limit"], Value::Null);
    assert!(
        lifted.body.get("changed_by").is_none(),
        "operators' business"
    );
    let listed = intake_api::cli::webhook(
        &app.intake.config,
        intake_api::cli::WebhookCommand::List { client_id: None },
    )
    .await
    .expect("webhook list");
    assert_eq!(listed[0]["changed_by"], "partner", "{listed}");
    assert_eq!(listed[0]["rate_limit"], Value::Null, "{listed}");
}

/// A test event goes at once, signed with the endpoint's secret, whether or not it is
/// enabled, and says how it went; it is neither queued nor in the history. Only the
/// endpoint's partner can send one.
async fn a_test_event_is_sent_at_once_and_answered(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let (partner, other) = (Partner::new(&app).await, Partner::new(&app).await);
    let receiver = Receiver::start().await;
    let made = partner.create(&app, json!({"url": receiver.url})).await;
    let (id, secret) = (id_of(&made), secret_of(&made));
    let test = format!("{ENDPOINTS}/{id}/test");

    let sent = partner
        .send(
            &app,
            Method::POST,
            &test,
            Some(json!({"event_type": "case.activated"})),
        )
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    assert_eq!(sent.body["delivered"], true, "{}", sent.body);
    assert_eq!(sent.body["status"], 200);
    assert_eq!(sent.body["error"], Value::Null);
    let got = receiver.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, sent.body["id"].as_str().unwrap());
    assert_eq!(got[0].event()["type"], "case.activated");
    assert_eq!(got[0].signatures(), [expected_signature(&secret, &got[0])]);

    // Disabled, and failing: still sent, and the answer says so.
    partner.change(&app, &id, json!({"enabled": false})).await;
    receiver.answer(503);
    let failed = partner
        .send(&app, Method::POST, &test, Some(json!({})))
        .await;
    assert_eq!(failed.status, 200, "{}", failed.body);
    assert_eq!(failed.body["delivered"], false);
    assert_eq!(failed.body["status"], 503);
    assert_eq!(failed.body["error"], "the endpoint answered 503");
    assert_ne!(failed.body["id"], sent.body["id"], "a new id each time");
    assert_eq!(receiver.got()[1].event()["type"], "case.created");
    let history = partner
        .send(
            &app,
            Method::GET,
            "/partners/external/webhooks/deliveries",
            None,
        )
        .await;
    assert_eq!(
        history.body["data"],
        json!([]),
        "tests are not in the history"
    );

    // Another partner's, or nobody's: the same 404, and nothing sent.
    let theirs = other.send(&app, Method::POST, &test, Some(json!({}))).await;
    let nobody = other
        .send(
            &app,
            Method::POST,
            &format!("{ENDPOINTS}/ep_00000000000000000000000000000000/test"),
            Some(json!({})),
        )
        .await;
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    assert_eq!((theirs.status, &theirs.body), (nobody.status, &nobody.body));
    for (body, field) in [
        (json!({"event_type": "case.deleted"}), "event_type"),
        (json!({"event_type": "case.created\u{0}"}), "event_type"),
        (json!({"event_type": 7}), "event_type"),
        (json!({"event_type": ""}), "event_type"),
        (json!({"event_type": "case.referred"}), "event_type"),
        (json!({"url": "https://elsewhere.example/"}), "url"),
        (json!([]), "body"),
    ] {
        let refused = partner
            .send(&app, Method::POST, &test, Some(body.clone()))
            .await;
        assert_eq!(refused.status, 422, "{body}: {}", refused.body);
        assert!(
            refused.body["errors"].get(field).is_some(),
            "{body}: {}",
            refused.body
        );
    }
    assert_eq!(receiver.got().len(), 2, "nothing else was sent");
}

on_both_backends!(
    a_test_event_is_sent_at_once_and_answered,
    a_test_event_needs_no_body_as_the_document_says,
    a_rate_limit_paces_deliveries,
    an_endpoint_failing_for_the_period_is_disabled_and_says_why,
    retry_after_is_waited_for,
    a_partner_manages_its_endpoints_through_the_api,
    partners_see_and_change_only_their_own_endpoints,
    isolation_holds_under_random_interleavings,
    bad_requests_are_refused_with_what_is_wrong,
);

on_sqlite!(a_refused_url_tells_nothing_of_what_its_host_resolves_to);

/// The test event's body is optional in the served document, and a request without one
/// (no body at all, or an empty one) sends `case.created`'s example, as `{}` does; a body
/// that is not JSON is still refused.
async fn a_test_event_needs_no_body_as_the_document_says(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let doc = Served::fetch(&app.http, &app.intake.base_url()).await.doc;
    let body = &doc["paths"][format!("{ENDPOINTS}/{{endpoint_id}}/test")]["post"]["requestBody"];
    assert!(body.is_object(), "the body is documented: {body}");
    assert_ne!(body["required"], true, "the body is optional: {body}");
    assert!(
        body["description"]
            .as_str()
            .is_some_and(|d| d.contains("without a body") && d.contains("case.created")),
        "what no body means: {body}"
    );

    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    let made = partner.create(&app, json!({"url": receiver.url})).await;
    let test = format!("{ENDPOINTS}/{}/test", id_of(&made));
    let none = partner.send(&app, Method::POST, &test, None).await;
    assert_eq!(none.status, 200, "{}", none.body);
    assert_eq!(none.body["delivered"], true, "{}", none.body);
    let empty = app
        .http
        .post(app.url(&test))
        .header("authorization", &partner.bearer)
        .header("content-type", "application/json")
        .send()
        .await
        .expect("answered");
    assert_eq!(empty.status(), 200);
    let got = receiver.got();
    assert_eq!(got.len(), 2);
    for sent in &got {
        assert_eq!(sent.event()["type"], "case.created");
    }
    let garbled = app
        .post_raw(&test, Some(&partner.bearer), b"event".to_vec())
        .await;
    assert_eq!(garbled.status, 400, "{}", garbled.body);
    assert_eq!(receiver.got().len(), 2, "nothing sent for a garbled body");
}

/// What is wrong is answered with a 4xx saying so, on both databases (a NUL is refused
/// before PostgreSQL could refuse it), and nothing is made.
async fn bad_requests_are_refused_with_what_is_wrong(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| c.webhooks.endpoints_per_partner = 2).await;
    let partner = Partner::new(&app).await;
    let refused = [
        (json!({"url": "http://partner.example/hooks"}), "url"),
        (json!({"url": "https://10.0.0.8/hooks"}), "url"),
        (json!({"url": "https://127.0.0.1/hooks"}), "url"),
        (json!({"url": "https://partner.example/a\u{0}b"}), "url"),
        (json!({"url": "https://partner.example/\u{1b}[31m"}), "url"),
        (json!({"url": "not a url"}), "url"),
        (json!({"url": "   "}), "url"),
        (json!({"url": 12}), "url"),
        (json!({}), "url"),
        (
            json!({"url": format!("https://partner.example/{}", "a".repeat(2100))}),
            "url",
        ),
        (
            json!({"url": "https://partner.example/h", "event_types": []}),
            "event_types",
        ),
        (
            json!({"url": "https://partner.example/h", "event_types": ["case.deleted"]}),
            "event_types.0",
        ),
        (
            json!({"url": "https://partner.example/h", "secret": "whsec_mine"}),
            "secret",
        ),
        (json!([1, 2]), "body"),
        (
            json!({"url": "https://partner.example/h", "rate_limit": 0}),
            "rate_limit",
        ),
        (
            json!({"url": "https://partner.example/h", "rate_limit": 10_001}),
            "rate_limit",
        ),
        (
            json!({"url": "https://partner.example/h", "rate_limit": 2.5}),
            "rate_limit",
        ),
        (
            json!({"url": "https://partner.example/h", "rate_limit": "5"}),
            "rate_limit",
        ),
        (
            json!({"url": "https://partner.example/h", "rate_limit": 1e300}),
            "rate_limit",
        ),
        (
            json!({"url": "https://partner.example/h", "rate_limit": ""}),
            "rate_limit",
        ),
    ];
    for (body, field) in refused {
        let reply = partner.create(&app, body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.body);
        assert!(
            reply.body["errors"].get(field).is_some(),
            "{body}: {}",
            reply.body
        );
    }
    let not_json = app
        .post_raw(ENDPOINTS, Some(&partner.bearer), b"{\"url\":".to_vec())
        .await;
    assert_eq!(not_json.status, 400, "{}", not_json.body);
    let huge = app
        .post_raw(ENDPOINTS, Some(&partner.bearer), vec![b' '; 70_000])
        .await;
    assert_eq!(huge.status, 413, "{}", huge.body);
    assert!(partner.list(&app).await.is_empty(), "nothing was made");

    // At the limit: a clear 409, and room again once one is removed.
    let mut made = Vec::new();
    for n in 0..2 {
        let reply = partner
            .create(
                &app,
                json!({"url": format!("https://93.184.215.{n}/hooks")}),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        made.push(id_of(&reply));
    }
    let over = partner
        .create(&app, json!({"url": "https://93.184.215.9/hooks"}))
        .await;
    assert_eq!(over.status, 409, "{}", over.body);
    assert!(
        over.body["message"]
            .as_str()
            .unwrap()
            .contains("remove one first"),
        "{}",
        over.body
    );

    // Changes and rotations are read as strictly, and ids that name nothing are not found.
    for (body, field) in [
        (json!({"enabled": "no"}), "enabled"),
        (json!({"url": "http://partner.example/"}), "url"),
        (json!({"event_types": "case.created"}), "event_types"),
        (json!({"status": "disabled"}), "status"),
    ] {
        let reply = partner.change(&app, &made[0], body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.body);
        assert!(reply.body["errors"].get(field).is_some(), "{}", reply.body);
    }
    for grace in [
        json!(86_401),
        json!(-5),
        json!(1e300),
        json!("60"),
        json!(""),
    ] {
        let reply = partner
            .rotate(&app, &made[0], json!({"grace_period_secs": grace}))
            .await;
        assert_eq!(reply.status, 422, "{grace}: {}", reply.body);
    }
    for id in [
        "ep_xyz",
        "nothing",
        "ep_0192F3C4D5E67A8B9C0D1E2F3A4B5C6D",
        "ep_0192f3c4-d5e6-7a8b-9c0d-1e2f3a4b5c6d",
        "%00",
    ] {
        let reply = partner.read(&app, id).await;
        assert_eq!(reply.status, 404, "{id}: {}", reply.body);
    }

    // Without the scope, or a token, nothing is shown or changed.
    let enquirer = Partner::with_scopes(&app, INTAKE, false).await;
    assert_eq!(enquirer.read(&app, &made[0]).await.status, 403);
    assert_eq!(
        enquirer
            .create(&app, json!({"url": "https://93.184.215.7/"}))
            .await
            .status,
        403
    );
    let anonymous = app
        .http
        .get(app.url(ENDPOINTS))
        .send()
        .await
        .expect("answers");
    assert_eq!(anonymous.status(), 401);
    assert_eq!(partner.list(&app).await.len(), 2);
}

/// A URL refused at create or update says only what its own text shows: a host that
/// resolves to a private address and one that does not resolve get the same answer, so no
/// partner learns through it what our network resolves. Only http and https are ever
/// taken, even where http is allowed; the length bound is the stored, percent-encoded one.
async fn a_refused_url_tells_nothing_of_what_its_host_resolves_to(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let partner = Partner::new(&app).await;
    let mut answers = Vec::new();
    for url in [
        "https://localhost/hook",
        "https://no-such-host.invalid/hook",
        "https://10.0.0.8/hook",
    ] {
        let refused = partner.create(&app, json!({"url": url})).await;
        assert_eq!(refused.status, 422, "{url}: {}", refused.body);
        let told = refused.body.to_string();
        for secret in ["127.0.0.1", "::1", "resolve", "10.0.0.8", "INTAKE_"] {
            assert!(!told.contains(secret), "{url}: {told}");
        }
        answers.push(refused.body);
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    let long = format!("https://93.184.216.34/{}", "é".repeat(350));
    let refused = partner.create(&app, json!({"url": long})).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body["errors"]["url"][0]
            .as_str()
            .unwrap()
            .contains("percent-encoded")
    );

    let insecure = TestApp::spawn_with(backend, webhook_settings).await;
    let partner = Partner::new(&insecure).await;
    for url in [
        "ftp://partner.example/hook",
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/",
    ] {
        let refused = partner.create(&insecure, json!({"url": url})).await;
        assert_eq!(refused.status, 422, "{url}: {}", refused.body);
        assert!(
            refused.body["errors"].get("url").is_some(),
            "{}",
            refused.body
        );
    }
    assert!(partner.list(&insecure).await.is_empty());
}
