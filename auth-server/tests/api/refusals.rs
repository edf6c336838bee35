//! Refused token requests: every failed client authentication is answered the same
//! `invalid_client`, while `auth_token_requests_failed_total` tells operators which failure it
//! was, naming the client only when the id is a registered one.

use auth_server::commands::ClientCommand;
use base64::Engine;
use serde_json::{Value, json};

use crate::helpers::{AuthServer, Backend, INTAKE, TestApp, TestDb, metrics_text, sample, series};
use test_support::on_both_backends;

const FAILED: &str = "auth_token_requests_failed_total";

fn invalid_client() -> Value {
    json!({"error": "invalid_client", "error_description": "Client authentication failed", "message": "Client authentication failed"})
}

fn basic(id: &str, secret: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    )
}

fn made_up_id() -> String {
    format!("made-up-{}", uuid::Uuid::new_v4())
}

/// One refused request and what it must be counted as.
struct Case {
    name: &'static str,
    body: Value,
    authorization: Option<String>,
    status: u16,
    /// The OAuth error code on the wire.
    error: &'static str,
    /// The `reason` label.
    reason: &'static str,
    /// The `client_id` label; `None`: the series has no such label.
    client_id: Option<String>,
}

/// The failed-requests count with `reason` and, when given, `client_id`.
fn failed(metrics: &str, reason: &str, client_id: Option<&str>) -> f64 {
    match client_id {
        Some(id) => sample(metrics, FAILED, &[("reason", reason), ("client_id", id)]),
        None => sample(metrics, FAILED, &[("reason", reason)]),
    }
}

async fn each_refusal_is_counted_under_its_reason_and_answered_as_before(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (id, secret) = (app.client_id.clone(), app.client_secret.clone());
    let (rotated, old_secret) = app.auth.create_client(INTAKE).await;
    app.auth
        .client_cmd(ClientCommand::RotateSecret {
            client_id: rotated.clone(),
            grace_secs: 0,
        })
        .await
        .unwrap();
    let (disabled, disabled_secret) = app.auth.create_client(INTAKE).await;
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: disabled.clone(),
        })
        .await
        .unwrap();
    let request = |client_id: &str, client_secret: &str| json!({"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret, "scope": INTAKE});
    let unauthorized = |name, body, authorization, reason, client_id| Case {
        name,
        body,
        authorization,
        status: 401,
        error: "invalid_client",
        reason,
        client_id,
    };
    let bad_request = |name, body, error, reason, client_id| Case {
        name,
        body,
        authorization: None,
        status: 400,
        error,
        reason,
        client_id,
    };
    let cases = [
        unauthorized(
            "unknown id",
            request(&made_up_id(), &secret),
            None,
            "unknown_client",
            None,
        ),
        unauthorized(
            "wrong secret",
            request(&id, "wrong"),
            None,
            "wrong_secret",
            Some(id.clone()),
        ),
        unauthorized(
            "wrong secret in a Basic header",
            json!({"grant_type": "client_credentials", "scope": INTAKE}),
            Some(basic(&id, "wrong")),
            "wrong_secret",
            Some(id.clone()),
        ),
        unauthorized(
            "no secret",
            json!({"grant_type": "client_credentials", "client_id": id, "scope": INTAKE}),
            None,
            "wrong_secret",
            Some(id.clone()),
        ),
        unauthorized(
            "secret past its grace",
            request(&rotated, &old_secret),
            None,
            "expired_secret",
            Some(rotated.clone()),
        ),
        unauthorized(
            "disabled client",
            request(&disabled, &disabled_secret),
            None,
            "disabled_client",
            Some(disabled.clone()),
        ),
        unauthorized(
            "unreadable Basic header",
            json!({"grant_type": "client_credentials", "scope": INTAKE}),
            Some("Basic %%%".into()),
            "malformed_credentials",
            None,
        ),
        bad_request(
            "scope not granted",
            json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret, "scope": "enquiry:referral:create"}),
            "invalid_scope",
            "invalid_scope",
            Some(id.clone()),
        ),
        bad_request(
            "no scope",
            json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret}),
            "invalid_request",
            "invalid_request",
            Some(id.clone()),
        ),
        bad_request(
            "password grant",
            json!({"grant_type": "password", "client_id": id, "client_secret": secret, "scope": INTAKE}),
            "unsupported_grant_type",
            "unsupported_grant_type",
            Some(id.clone()),
        ),
        bad_request(
            "no client id",
            json!({"grant_type": "client_credentials", "client_secret": secret, "scope": INTAKE}),
            "invalid_request",
            "invalid_request",
            None,
        ),
    ];
    let base = app.auth.base_url();
    for case in &cases {
        let before = metrics_text(&base).await;
        let mut req = app.http.post(app.url("/oauth/token")).json(&case.body);
        if let Some(a) = &case.authorization {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        let name = case.name;
        assert_eq!(resp.status().as_u16(), case.status, "{name}");
        let challenge = resp
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = resp.json().await.unwrap();
        if case.status == 401 {
            assert_eq!(body, invalid_client(), "{name}");
            assert_eq!(
                challenge.as_deref(),
                case.authorization
                    .as_ref()
                    .map(|_| r#"Basic realm="OAuth""#),
                "{name}"
            );
        } else {
            assert_eq!(body["error"], case.error, "{name}");
        }
        let after = metrics_text(&base).await;
        let (was, is) = (
            failed(&before, case.reason, case.client_id.as_deref()),
            failed(&after, case.reason, case.client_id.as_deref()),
        );
        match &case.client_id {
            // The client's own series: this test alone adds to it.
            Some(_) => assert_eq!(is, was + 1.0, "{name}: {after}"),
            // Shared with every other test's servers in this process.
            None => assert!(is > was, "{name}: {after}"),
        }
    }

    let metrics = metrics_text(&base).await;
    let help = metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("# HELP {FAILED} ")))
        .expect("the metric's HELP line");
    for reason in cases.iter().map(|c| c.reason).chain(["too_many_requests"]) {
        assert!(help.contains(reason), "HELP does not list {reason}: {help}");
    }
}

async fn made_up_client_ids_never_become_label_values(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let made_up: Vec<String> = (0..20).map(|_| made_up_id()).collect();
    // A partner that swaps the fields sends its secret as the id.
    let sent = made_up.iter().chain([&app.client_secret]);
    for id in sent.clone() {
        let (status, body) = app.try_token(id, "whatever").await;
        assert_eq!((status, body), (401, invalid_client()), "{id}");
    }
    let metrics = metrics_text(&app.auth.base_url()).await;
    for id in sent {
        assert!(!metrics.contains(id.as_str()), "{id} reached /metrics");
    }
    let unknown: Vec<_> = series(&metrics, FAILED)
        .into_iter()
        .filter(|(labels, _)| labels["reason"] == "unknown_client")
        .collect();
    assert!(!unknown.is_empty(), "unknown ids not counted: {metrics}");
    for (labels, _) in unknown {
        assert!(!labels.contains_key("client_id"), "{labels:?}");
    }
}

async fn a_locked_out_client_is_counted_as_too_many_requests_under_its_id(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |c| c.failed_auth_limit = 2)
        .await
        .unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    let base = auth.base_url();
    let post = |client_id: String, client_secret: String| {
        let url = format!("{base}/oauth/token");
        async move {
            let resp = reqwest::Client::new()
                .post(url)
                .json(&json!({"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret, "scope": INTAKE}))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap()["error"].clone())
        }
    };
    let before = metrics_text(&base).await;
    for guess in ["guess-1", "guess-2"] {
        assert_eq!(post(id.clone(), guess.into()).await.0, 401);
    }
    let locked_out = post(id.clone(), secret.clone()).await;
    assert_eq!(locked_out, (429, json!("too_many_requests")));
    // Made-up ids share one lockout per source; counted, never named.
    let stranger = made_up_id();
    for _ in 0..2 {
        assert_eq!(post(stranger.clone(), "guess".into()).await.0, 401);
    }
    assert_eq!(post(stranger.clone(), "guess".into()).await.0, 429);

    let after = metrics_text(&base).await;
    let delta =
        |reason, client_id| failed(&after, reason, client_id) - failed(&before, reason, client_id);
    assert_eq!(delta("wrong_secret", Some(&id)), 2.0, "{after}");
    assert_eq!(delta("too_many_requests", Some(&id)), 1.0, "{after}");
    assert!(delta("too_many_requests", None) >= 1.0, "{after}");
    assert!(!after.contains(&stranger), "{stranger} reached /metrics");
}

on_both_backends!(
    each_refusal_is_counted_under_its_reason_and_answered_as_before,
    made_up_client_ids_never_become_label_values,
    a_locked_out_client_is_counted_as_too_many_requests_under_its_id,
);
