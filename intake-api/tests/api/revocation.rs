//! Revocation reaches every replica within seconds: a disabled client's tokens are refused
//! and work again once it is enabled; key rotations and revokes under load refuse no valid
//! token and fail no token request; an auth-server outage keeps the last known state.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use auth_server::config::{ClientCommand, KeyCommand};
use tokio::sync::Mutex;

use crate::helpers::{
    Backend, ENQUIRY, INTAKE, IntakeServer, TestApp, b64, eventually, fresh_email, kid_of, metric,
    post_raw, purchase_enquiry,
};
use test_support::on_both_backends;

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
        app.auth
            .key_cmd(KeyCommand::Rotate {
                publish_ahead_secs: Some(0),
            })
            .await
            .expect("key rotate");
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
    let keys = app.auth.key_cmd(KeyCommand::List).await.expect("key list");
    assert!(
        wrongly_refused.is_empty(),
        "valid tokens refused (status, kid: count): {wrongly_refused:?}; revoked: {revoked:?}; keys: {keys}"
    );
}

on_both_backends!(
    a_disabled_clients_tokens_are_refused_at_every_replica_within_seconds_and_work_again_once_enabled,
    a_disabled_client_stays_refused_and_others_accepted_while_the_auth_server_is_down,
    rotations_and_revokes_under_load_refuse_no_valid_token_and_fail_no_token_request,
);
