//! Revocation reaches every replica within seconds: a disabled client's tokens are refused
//! and work again once it is enabled; key rotations and revokes under load refuse no valid
//! token and fail no token request; an auth-server outage keeps the last known state for a
//! bounded time, and a replica that cannot vouch for its list refuses tokens and says it is
//! not ready.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use auth_server::commands::{ClientCommand, KeyCommand};
use tokio::sync::Mutex;

use crate::helpers::{
    Backend, ENQUIRY, INTAKE, IntakeServer, TestApp, b64, eventually, fresh_email, kid_of, metric,
    metrics_text, post_raw, purchase_enquiry, unused_port,
};
use serde_json::{Value, json};
use test_support::on_both_backends;
use test_support::proxy::TcpProxy;

/// What a bearer token gets at an intake-api replica.
async fn status_at(app: &TestApp, intake: &IntakeServer, bearer: &str) -> u16 {
    status_with(&app.http, intake, bearer).await
}

/// [`status_at`], for a test whose `TestApp` is no longer whole.
async fn status_with(http: &reqwest::Client, intake: &IntakeServer, bearer: &str) -> u16 {
    let url = format!("{}{ENQUIRY}", intake.base_url());
    let body = purchase_enquiry("brand_a", &fresh_email()).to_string();
    post_raw(http, &url, Some(bearer), body.into_bytes())
        .await
        .status
}

/// Waits until every replica answers `bearer` with `status`; returns how long it took.
async fn until_every_replica_answers(
    app: &TestApp,
    replicas: &[&IntakeServer],
    bearer: &str,
    status: u16,
) -> Option<Duration> {
    let started = Instant::now();
    for intake in replicas {
        eventually(Duration::from_secs(5), || async {
            (status_at(app, intake, bearer).await == status).then_some(())
        })
        .await?;
    }
    Some(started.elapsed())
}

async fn a_disabled_clients_tokens_are_refused_at_every_replica_within_seconds_and_work_again_once_enabled(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let second = app.second_intake(|_| {}).await;
    let replicas = [&app.intake, &second];
    let bearer = app.bearer();
    let (other_id, other_secret) = app.auth.create_client(INTAKE).await;
    let other = format!(
        "Bearer {}",
        app.auth.token(&other_id, &other_secret, INTAKE).await
    );
    for intake in replicas {
        assert_eq!(status_at(&app, intake, &bearer).await, 201);
    }

    let disabled = app
        .auth
        .client_cmd(ClientCommand::Disable {
            client_id: app.client_id.clone(),
        })
        .await
        .expect("client disable");
    assert_eq!(disabled["changed"], true);
    let took = until_every_replica_answers(&app, &replicas, &bearer, 401)
        .await
        .expect("a replica still accepted the disabled client's token after 5 s");
    assert!(took < Duration::from_secs(5), "{took:?}");
    for intake in replicas {
        assert_eq!(
            status_at(&app, intake, &other).await,
            201,
            "another client refused"
        );
    }

    app.auth
        .client_cmd(ClientCommand::Enable {
            client_id: app.client_id.clone(),
        })
        .await
        .expect("client enable");
    let took = until_every_replica_answers(&app, &replicas, &bearer, 201)
        .await
        .expect("a replica still refused the enabled client's token after 5 s");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

async fn a_disabled_client_stays_refused_and_others_accepted_while_the_auth_server_is_down(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let bearer = app.bearer();
    let (other_id, other_secret) = app.auth.create_client(INTAKE).await;
    let other = format!(
        "Bearer {}",
        app.auth.token(&other_id, &other_secret, INTAKE).await
    );
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: app.client_id.clone(),
        })
        .await
        .expect("client disable");
    until_every_replica_answers(&app, &[&app.intake], &bearer, 401)
        .await
        .expect("disable never reached the intake-api");
    app.auth.server.stop().await;
    // Several polls fail while the auth-server is away; the last list stays in force.
    let refusing = eventually(Duration::from_secs(3), || async {
        let failed = metric(
            &app.http,
            &app.intake.base_url(),
            "intake_revocation_refreshes_total",
            "error",
        )
        .await;
        (failed >= 2.0).then_some(())
    })
    .await;
    assert!(refusing.is_some(), "the poll never failed");
    assert_eq!(status_with(&app.http, &app.intake, &bearer).await, 401);
    assert_eq!(status_with(&app.http, &app.intake, &other).await, 201);
}

/// `/readyz` of `intake`: its status and body.
async fn readiness(http: &reqwest::Client, intake: &IntakeServer) -> (u16, Value) {
    let resp = http
        .get(format!("{}/readyz", intake.base_url()))
        .send()
        .await
        .expect("readyz");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("readyz JSON"))
}

/// Waits until `/readyz` of `intake` reports `revocations` as `state` with the JWKS loaded.
async fn until_revocations_are(http: &reqwest::Client, intake: &IntakeServer, state: &str) -> bool {
    eventually(Duration::from_secs(15), || async {
        let (_, body) = readiness(http, intake).await;
        (body["checks"]["revocations"] == state && body["checks"]["jwks"] == "ok").then_some(())
    })
    .await
    .is_some()
}

/// The 503 a replica answers when it cannot vet a token.
async fn assert_unvetted(app: &TestApp, intake: &IntakeServer, bearer: &str) {
    let url = format!("{}{ENQUIRY}", intake.base_url());
    let body = purchase_enquiry("brand_a", &fresh_email()).to_string();
    let resp = app
        .http
        .post(&url)
        .header("Authorization", bearer)
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .expect("enquiry");
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"), "{resp:?}");
}

async fn a_replica_that_never_loaded_the_revocation_list_is_not_ready_and_refuses_every_token(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    // A typo in INTAKE_REVOCATIONS_URL: nothing answers there.
    let nowhere = format!("http://127.0.0.1:{}/revocations", unused_port());
    let blind = IntakeServer::start(&app.intake_db.url, &app.auth, |c| {
        c.auth_server.revocations_url = Some(nowhere.parse().expect("a URL"));
    })
    .await
    .expect("intake-api starts");
    assert!(
        until_revocations_are(&app.http, &blind, "failing").await,
        "readiness never reported the revocation list"
    );
    let (status, body) = readiness(&app.http, &blind).await;
    assert_eq!(status, 503);
    assert_eq!(
        body,
        json!({"status": "not_ready", "profile": "standard", "checks": {"database": "ok", "jwks": "ok", "revocations": "failing", "replay_store": "ok"}})
    );

    // A valid token is refused, whether its client is enabled or not, while the replica
    // with the list answers as usual.
    assert_unvetted(&app, &blind, &app.bearer()).await;
    assert_eq!(status_at(&app, &app.intake, &app.bearer()).await, 201);
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: app.client_id.clone(),
        })
        .await
        .expect("client disable");
    until_every_replica_answers(&app, &[&app.intake], &app.bearer(), 401)
        .await
        .expect("disable never reached the replica with the list");
    assert_unvetted(&app, &blind, &app.bearer()).await;

    let refused = metric(
        &app.http,
        &blind.base_url(),
        "intake_auth_failures_total",
        "revocations_not_loaded",
    )
    .await;
    assert!(refused >= 2.0, "{refused}");
    // The gauge's value is the process's (every replica of a test shares one registry),
    // so only its presence is checked here.
    let text = metrics_text(&app.http, &blind.base_url()).await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("intake_revocation_list_age_seconds ")),
        "no age gauge: {text}"
    );
}

async fn a_replica_whose_revocation_list_grows_too_old_refuses_tokens_until_it_loads_again(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let auth_addr = app
        .auth
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .expect("auth-server address");
    let path = TcpProxy::start(auth_addr).await.expect("proxy starts");
    let replica = IntakeServer::start(&app.intake_db.url, &app.auth, |c| {
        c.auth_server.revocations_url = Some(
            format!("http://127.0.0.1:{}/revocations", path.port)
                .parse()
                .expect("a URL"),
        );
        c.auth_server.revocations_max_age = Duration::from_secs(5);
        c.auth_server.keys_poll = Duration::from_millis(200);
    })
    .await
    .expect("intake-api starts");
    assert!(replica.wait_ready().await, "never ready");
    assert_eq!(status_at(&app, &replica, &app.bearer()).await, 201);

    // Cut off from the list, the replica keeps the one it has for the bound, then stops
    // vouching for it; a client disabled meanwhile is not let in.
    path.cut();
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: app.client_id.clone(),
        })
        .await
        .expect("client disable");
    assert!(
        until_revocations_are(&app.http, &replica, "failing").await,
        "the list never went stale"
    );
    assert_unvetted(&app, &replica, &app.bearer()).await;
    let stale = metric(
        &app.http,
        &replica.base_url(),
        "intake_auth_failures_total",
        "revocations_stale",
    )
    .await;
    assert!(stale >= 1.0, "{stale}");

    path.restore();
    assert!(replica.wait_ready().await, "never ready again");
    assert_eq!(status_at(&app, &replica, &app.bearer()).await, 401);
    let (other_id, other_secret) = app.auth.create_client(INTAKE).await;
    let other = format!(
        "Bearer {}",
        app.auth.token(&other_id, &other_secret, INTAKE).await
    );
    assert_eq!(status_at(&app, &replica, &other).await, 201);
}

async fn a_replica_whose_revocation_client_is_refused_is_not_ready_and_refuses_every_token(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    // A client the auth-server knows, but without revocations:read; and one it does not.
    let (partner_id, partner_secret) = app.auth.create_client(INTAKE).await;
    for (id, secret) in [
        (partner_id, partner_secret),
        ("no-such-client".to_owned(), "no-such-secret".to_owned()),
    ] {
        let replica = IntakeServer::start(&app.intake_db.url, &app.auth, |c| {
            c.auth_server.client_id = Some(id.clone());
            c.auth_server.client_secret = Some(secret.parse().expect("infallible"));
        })
        .await
        .expect("intake-api starts");
        assert!(
            until_revocations_are(&app.http, &replica, "failing").await,
            "{id}: readiness never reported the revocation list"
        );
        assert_unvetted(&app, &replica, &app.bearer()).await;
        let mut refusals = 0.0;
        for reason in ["invalid_scope", "unknown_client"] {
            let auth = app.auth.base_url();
            refusals += metric(&app.http, &auth, "auth_token_requests_failed_total", reason).await;
        }
        assert!(
            refusals >= 1.0,
            "{id}: the auth-server saw no refused token request"
        );
    }
    assert_eq!(status_at(&app, &app.intake, &app.bearer()).await, 201);
}

/// The token the list is read with is signed by the key an emergency revoke withdraws: the
/// replica gets a new one and keeps its list current, so a client disabled after the revoke
/// is refused.
async fn the_revocation_list_is_still_read_after_the_key_that_signed_its_token_is_revoked(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let (resource_id, _) = app.auth.resource_client().await;
    let issued = |http: reqwest::Client, base: String, id: String| async move {
        metric(&http, &base, "auth_tokens_issued_total", &id).await
    };
    let auth_base = app.auth.base_url();
    assert!(app.intake.wait_ready().await);
    let before = issued(app.http.clone(), auth_base.clone(), resource_id.clone()).await;
    assert!(before >= 1.0, "the list was read without a token");

    let keys = app.auth.key_list().await;
    let active = keys
        .as_array()
        .expect("key list is an array")
        .iter()
        .find(|k| k["state"] == "active")
        .expect("an active key")["kid"]
        .as_str()
        .expect("kid")
        .to_owned();
    app.auth
        .key_cmd(KeyCommand::Revoke { kid: active })
        .await
        .expect("key revoke");
    // A partner's token from the new key, then its client disabled.
    let (id, secret) = app.auth.create_client(INTAKE).await;
    let bearer = format!("Bearer {}", app.auth.token(&id, &secret, INTAKE).await);
    assert_eq!(status_at(&app, &app.intake, &bearer).await, 201);
    app.auth
        .client_cmd(ClientCommand::Disable { client_id: id })
        .await
        .expect("client disable");
    until_every_replica_answers(&app, &[&app.intake], &bearer, 401)
        .await
        .expect("the disable never reached the replica");
    let after = issued(app.http.clone(), auth_base, resource_id).await;
    assert!(
        after > before,
        "no new token for the list: {before} then {after}"
    );
    assert!(app.intake.wait_ready().await, "not ready after the revoke");
}

/// A token whose header names `kid`, with a garbage signature: a stranger's.
fn stranger_token(kid: &str) -> String {
    let header = serde_json::json!({"alg": "RS256", "typ": "at+jwt", "kid": kid});
    let claims = serde_json::json!({"sub": "stranger"});
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(&[7u8; 256])
    )
}

/// Sets its flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The drill: tokens issued and used without pause while keys are rotated (with no
/// publish-ahead) and revoked, and a stranger sends tokens with made-up kids. No token
/// request fails, and no token is refused unless its key was revoked.
async fn rotations_and_revokes_under_load_refuse_no_valid_token_and_fail_no_token_request(
    backend: Backend,
) {
    // The load asks for tokens, and sends enquiries, far more often than a partner would.
    let app = Arc::new(
        TestApp::spawn_configured(
            backend,
            |c| {
                c.token_rate_limit = 1_000_000;
                c.source_rate_limit = 1_000_000;
            },
            |c| c.rate_limit = 1_000_000,
        )
        .await,
    );
    let stop = Arc::new(AtomicBool::new(false));
    // Stops the load however the test ends, so a failed assertion cannot leave it running.
    let _stop_on_exit = StopOnDrop(stop.clone());
    let issued = Arc::new(AtomicUsize::new(0));
    let token_failures = Arc::new(AtomicUsize::new(0));
    let refused: Arc<Mutex<Vec<(u16, String)>>> = Arc::default();
    let mut load = Vec::new();
    for _ in 0..3 {
        let (app, stop, issued, token_failures, refused) = (
            app.clone(),
            stop.clone(),
            issued.clone(),
            token_failures.clone(),
            refused.clone(),
        );
        load.push(tokio::spawn(async move {
            let token_url = format!("{}/oauth/token", app.auth.base_url());
            while !stop.load(Ordering::Relaxed) {
                let resp = app
                    .http
                    .post(&token_url)
                    .json(&serde_json::json!({
                        "grant_type": "client_credentials",
                        "client_id": app.client_id,
                        "client_secret": app.client_secret,
                        "scope": INTAKE,
                    }))
                    .send()
                    .await
                    .expect("token request sent");
                if resp.status() != 200 {
                    token_failures.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let body: serde_json::Value = resp.json().await.expect("token body");
                let token = body["access_token"].as_str().expect("token").to_owned();
                issued.fetch_add(1, Ordering::Relaxed);
                let status = status_at(&app, &app.intake, &format!("Bearer {token}")).await;
                if status != 201 {
                    refused.lock().await.push((status, kid_of(&token)));
                }
            }
        }));
    }
    let stranger = {
        let (app, stop) = (app.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let kid = uuid::Uuid::new_v4().simple().to_string();
                let status = status_at(
                    &app,
                    &app.intake,
                    &format!("Bearer {}", stranger_token(&kid)),
                )
                .await;
                assert_eq!(status, 401);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let mut revoked = HashSet::new();
    for round in 0..3 {
        app.auth.rotate_key(None, Some(0)).await;
        let signing = kid_of(
            &app.auth
                .token(&app.client_id, &app.client_secret, INTAKE)
                .await,
        );
        let out = app
            .auth
            .key_cmd(KeyCommand::Revoke {
                kid: signing.clone(),
            })
            .await
            .expect("key revoke");
        assert!(out["replacement_kid"].is_string(), "round {round}: {out}");
        revoked.insert(signing);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.expect("load task");
    }
    stranger.await.expect("stranger task");

    assert_eq!(
        token_failures.load(Ordering::Relaxed),
        0,
        "token requests failed"
    );
    assert!(
        issued.load(Ordering::Relaxed) > 50,
        "too little load to mean anything"
    );
    let mut wrongly_refused = std::collections::BTreeMap::<(u16, String), usize>::new();
    for (status, kid) in refused.lock().await.iter() {
        if *status != 401 || !revoked.contains(kid) {
            *wrongly_refused.entry((*status, kid.clone())).or_default() += 1;
        }
    }
    let keys = app.auth.key_list().await;
    assert!(
        wrongly_refused.is_empty(),
        "valid tokens refused (status, kid: count): {wrongly_refused:?}; revoked: {revoked:?}; keys: {keys}"
    );
}

on_both_backends!(
    a_disabled_clients_tokens_are_refused_at_every_replica_within_seconds_and_work_again_once_enabled,
    a_disabled_client_stays_refused_and_others_accepted_while_the_auth_server_is_down,
    rotations_and_revokes_under_load_refuse_no_valid_token_and_fail_no_token_request,
    a_replica_that_never_loaded_the_revocation_list_is_not_ready_and_refuses_every_token,
    a_replica_whose_revocation_list_grows_too_old_refuses_tokens_until_it_loads_again,
    a_replica_whose_revocation_client_is_refused_is_not_ready_and_refuses_every_token,
    the_revocation_list_is_still_read_after_the_key_that_signed_its_token_is_revoked,
);
