//! The intake-api's JWKS cache: new keys are picked up on first sight, unknown kids never cause
//! a stampede, and the auth-server being down neither breaks valid tokens nor readiness.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use auth_server::commands::KeyCommand;
use intake_api::jwks::UNKNOWN_KID_COOLDOWN;
use serde_json::json;
use shared::claims::TokenAlgorithm;
use shared::claims::scopes::REVOCATIONS_READ;
use tokio::task::JoinSet;

use crate::helpers::{
    AuthServer, Backend, ENQUIRY, INTAKE, IntakeServer, KeyServer, KeySource, TestApp, TestDb, b64,
    eventually, fresh_email, kid_of, message, post_raw, purchase_enquiry, unused_port,
};
use test_support::{alg_of, on_both_backends};

/// Rotates the signing key with no publish-ahead; returns the new kid and a token it signed.
async fn rotate_now(app: &TestApp) -> (String, String) {
    let rotated = app.auth.rotate_key(None, Some(0)).await;
    let new_kid = rotated["kid"].as_str().expect("kid").to_owned();
    let new_token = eventually(Duration::from_secs(5), || async {
        let t = app
            .auth
            .token(&app.client_id, &app.client_secret, INTAKE)
            .await;
        (kid_of(&t) == new_kid).then_some(t)
    })
    .await
    .expect("the auth-server signs with the new key");
    (new_kid, new_token)
}

/// A rotation switches to the standby key, which the intake-api fetched with the JWKS long
/// before: the new key's tokens are accepted at once without a fetch of their own. (The
/// periodic poll is slowed down here so that every fetch the relay counts is explained.)
async fn a_rotated_key_is_known_before_it_signs_so_its_tokens_need_no_fetch(backend: Backend) {
    let app = TestApp::spawn_with_relay(backend).await;
    let relay = app.relay.as_ref().expect("relay");
    let fetches_at_start = relay.hits();
    assert_eq!(fetches_at_start, 1, "one scheduled fetch at start-up");
    let old_kid = kid_of(&app.token);
    let (new_kid, new_token) = rotate_now(&app).await;
    assert_ne!(new_kid, old_kid);

    let bearer = format!("Bearer {new_token}");
    let body = purchase_enquiry("brand_a", &fresh_email());
    let reply = app.post(ENQUIRY, Some(&bearer), &body).await;
    assert_eq!(reply.status, 201, "new key refused: {:?}", reply.body);
    assert_eq!(relay.hits(), fetches_at_start, "the new key needed a fetch");
    // Tokens of the old key still work.
    let reply = app
        .enquiry(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    assert_eq!(reply.status, 201, "old key refused: {:?}", reply.body);
}

/// Verified tokens are remembered, but never past their key: once the signing key is revoked,
/// a token it signed is refused within seconds even though it was accepted before, and the
/// standby key that took over is accepted at once.
async fn a_revoked_keys_tokens_are_refused_within_seconds_even_after_being_accepted(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let old_kid = kid_of(&app.token);
    for _ in 0..2 {
        let reply = app
            .enquiry(&purchase_enquiry("brand_a", &fresh_email()))
            .await;
        assert_eq!(reply.status, 201, "{:?}", reply.body);
    }
    let started = Instant::now();
    let revoked = app
        .auth
        .key_cmd(KeyCommand::Revoke {
            kid: old_kid.clone(),
        })
        .await
        .expect("key revoke");
    let refused = eventually(Duration::from_secs(5), || async {
        let reply = app
            .enquiry(&purchase_enquiry("brand_a", &fresh_email()))
            .await;
        (reply.status == 401).then_some(reply)
    })
    .await
    .expect("the revoked key's token was still accepted after 5 s");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(refused.body, message("Unauthenticated."));
    let replacement = revoked["replacement_kid"].as_str().expect("replacement");
    let new_token = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    assert_eq!(kid_of(&new_token), replacement);
    let bearer = format!("Bearer {new_token}");
    let body = purchase_enquiry("brand_a", &fresh_email());
    let reply = app.post(ENQUIRY, Some(&bearer), &body).await;
    assert_eq!(
        reply.status, 201,
        "the replacement was refused: {:?}",
        reply.body
    );
}

/// A token whose header names `kid` (and is otherwise plausible), with a garbage signature.
fn token_with_kid(kid: &str) -> String {
    let header = json!({"alg": "RS256", "typ": "at+jwt", "kid": kid});
    let claims = json!({"sub": "nobody"});
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(&[7u8; 256])
    )
}

/// Sends 50 requests at once, each with a new random kid; all must get 401 invalid_token.
async fn unknown_kid_storm(app: &TestApp) {
    let mut requests = JoinSet::new();
    for _ in 0..50 {
        let kid = uuid::Uuid::new_v4().to_string();
        let (http, url) = (app.http.clone(), app.url(ENQUIRY));
        let bearer = format!("Bearer {}", token_with_kid(&kid));
        let body = purchase_enquiry("brand_a", &fresh_email())
            .to_string()
            .into_bytes();
        requests.spawn(async move { post_raw(&http, &url, Some(&bearer), body).await });
    }
    for reply in requests.join_all().await {
        assert_eq!(reply.status, 401, "{:?}", reply.body);
        assert_eq!(reply.body, message("Unauthenticated."));
        assert_eq!(
            reply.challenge.as_deref(),
            Some(
                r#"Bearer error="invalid_token", error_description="The access token is signed with an unknown key""#
            )
        );
    }
}

async fn a_storm_of_unknown_kids_causes_at_most_one_jwks_fetch_per_cooldown(backend: Backend) {
    let app = TestApp::spawn_with_relay(backend).await;
    let relay = app.relay.as_ref().expect("relay");
    let before = relay.hits();
    // At most one fetch per cooldown since the storms began: one, where they take less
    // than the cooldown, as they do on a quiet machine; on a busy one they may take longer.
    let started = Instant::now();
    let at_most = || 1 + started.elapsed().as_millis() / UNKNOWN_KID_COOLDOWN.as_millis();
    unknown_kid_storm(&app).await;
    let first = (relay.hits() - before) as u128;
    assert!(
        first >= 1 && first <= at_most(),
        "{first} fetches for the first storm"
    );
    unknown_kid_storm(&app).await;
    let both = (relay.hits() - before) as u128;
    assert!(
        both <= at_most(),
        "{both} fetches for two storms in {:?}",
        started.elapsed()
    );
    // Known keys are unaffected.
    let reply = app
        .enquiry(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
}

async fn tokens_already_issued_are_accepted_while_the_auth_server_is_down(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let bearer = app.bearer();
    let second = format!(
        "Bearer {}",
        app.auth
            .token(&app.client_id, &app.client_secret, INTAKE)
            .await
    );
    let auth_url = app.auth.base_url();
    app.auth.server.stop().await;
    assert!(
        app.http.get(&auth_url).send().await.is_err(),
        "the auth-server still answers"
    );
    let url = format!("{}{ENQUIRY}", app.intake.base_url());
    for bearer in [&bearer, &second] {
        let body = purchase_enquiry("brand_a", &fresh_email()).to_string();
        let reply = post_raw(&app.http, &url, Some(bearer), body.into_bytes()).await;
        assert_eq!(reply.status, 201, "{:?}", reply.body);
    }
    // An unknown kid now makes a fetch that fails; the keys in hand stay in use.
    let unknown = format!("Bearer {}", token_with_kid("unknown"));
    let body = purchase_enquiry("brand_a", &fresh_email()).to_string();
    let reply = post_raw(&app.http, &url, Some(&unknown), body.into_bytes()).await;
    assert_eq!(reply.status, 401);
    let body = purchase_enquiry("brand_a", &fresh_email()).to_string();
    let reply = post_raw(&app.http, &url, Some(&bearer), body.into_bytes()).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let ready = app
        .http
        .get(format!("{}/readyz", app.intake.base_url()))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200);
}

async fn an_intake_api_started_before_the_auth_server_is_ready_once_it_answers(backend: Backend) {
    let port = unused_port();
    let intake_db = TestDb::intake(backend).await;
    // The intake-api's own client is made before any auth-server runs, as an operator would.
    let auth_db = TestDb::auth(backend).await;
    let (reader, reader_secret) =
        test_support::create_client_offline(&auth_db.url, REVOCATIONS_READ).await;
    // The keys are fetched through a counting relay, to see the fetches fail while nothing
    // answers behind it.
    let upstream = format!("http://127.0.0.1:{port}/.well-known/jwks.json");
    let relay = KeyServer::start(KeySource::Upstream(upstream)).await;
    let intake = IntakeServer::start_with_jwks(&intake_db.url, &relay.url, |c| {
        c.auth_server.revocations_url = Some(
            format!("http://127.0.0.1:{port}/revocations")
                .parse()
                .expect("a URL"),
        );
        c.auth_server.token_url = Some(
            format!("http://127.0.0.1:{port}/oauth/token")
                .parse()
                .expect("a URL"),
        );
        c.auth_server.client_id = Some(reader);
        c.auth_server.client_secret = Some(reader_secret.parse().expect("infallible"));
    })
    .await
    .expect("intake-api starts");
    let readyz = format!("{}/readyz", intake.base_url());
    let http = reqwest::Client::new();
    let retried = eventually(Duration::from_secs(10), || async {
        (relay.hits() >= 3).then_some(())
    })
    .await;
    assert!(retried.is_some(), "the first fetch was not retried");
    let resp = http.get(&readyz).send().await.expect("readyz");
    assert_eq!(resp.status(), 503);
    let body: serde_json::Value = resp.json().await.expect("JSON body");
    assert_eq!(
        body,
        json!({"status": "not_ready", "profile": "standard", "checks": {"database": "ok", "jwks": "failing", "revocations": "failing", "replay_store": "ok"}})
    );

    let auth = AuthServer::start(&auth_db.url, |c| {
        c.listen.bind = format!("127.0.0.1:{port}")
    })
    .await
    .expect("auth-server starts on the reserved port");
    assert!(intake.wait_ready().await, "never became ready");
    let resp = http.get(&readyz).send().await.expect("readyz");
    assert_eq!(resp.status(), 200);
    let (id, secret) = auth.create_client(INTAKE).await;
    let bearer = format!("Bearer {}", auth.token(&id, &secret, INTAKE).await);
    let body = purchase_enquiry("brand_a", &fresh_email()).to_string();
    let url = format!("{}{ENQUIRY}", intake.base_url());
    let reply = post_raw(&http, &url, Some(&bearer), body.into_bytes()).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
}

/// A security team moves the deployment to ES256 while partners submit: the new key is
/// published before it signs, so no valid token of either algorithm is refused on the way;
/// the intake-api verifies the ES256 key by its JWK, and a token naming that key with
/// another algorithm is refused.
async fn moving_to_es256_under_load_refuses_no_valid_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let stop = AtomicBool::new(false);
    let es256_accepted = AtomicUsize::new(0);
    let load = async {
        let mut refused = Vec::new();
        let mut accepted = 0usize;
        while !stop.load(Ordering::Acquire) {
            let token = app
                .auth
                .token(&app.client_id, &app.client_secret, INTAKE)
                .await;
            let bearer = format!("Bearer {token}");
            let body = purchase_enquiry("brand_a", &fresh_email());
            let reply = app.post(ENQUIRY, Some(&bearer), &body).await;
            if reply.status == 201 {
                accepted += 1;
                if alg_of(&token) == "ES256" {
                    es256_accepted.fetch_add(1, Ordering::Release);
                }
            } else {
                refused.push((alg_of(&token), reply.status, reply.body));
            }
        }
        (accepted, refused)
    };
    let drive = async {
        let rotated = app
            .auth
            .rotate_key(Some(TokenAlgorithm::Es256), Some(2))
            .await;
        let es_kid = rotated["kid"].as_str().expect("kid").to_owned();
        // Enquiries keep going after the switch until a good number used ES256 tokens.
        let switched = eventually(Duration::from_secs(30), || async {
            (es256_accepted.load(Ordering::Acquire) >= 20).then_some(())
        })
        .await;
        stop.store(true, Ordering::Release);
        (es_kid, switched)
    };
    let ((accepted, refused), (es_kid, switched)) = tokio::join!(load, drive);
    assert!(refused.is_empty(), "valid tokens refused: {refused:?}");
    assert!(switched.is_some(), "no ES256 token was accepted");
    assert!(accepted > 20);

    // A token naming the ES256 key with any other algorithm is refused, whatever it carries.
    let es_token = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    assert_eq!(kid_of(&es_token), es_kid);
    let (_, rest) = es_token.split_once('.').expect("a JWS");
    for alg in ["RS256", "PS256", "HS256", "none"] {
        let header = json!({"alg": alg, "typ": "at+jwt", "kid": es_kid});
        let forged = format!("{}.{rest}", b64(header.to_string().as_bytes()));
        let reply = app
            .post(
                ENQUIRY,
                Some(&format!("Bearer {forged}")),
                &purchase_enquiry("brand_a", &fresh_email()),
            )
            .await;
        assert_eq!(reply.status, 401, "alg {alg}: {:?}", reply.body);
    }
}

on_both_backends!(
    moving_to_es256_under_load_refuses_no_valid_token,
    a_rotated_key_is_known_before_it_signs_so_its_tokens_need_no_fetch,
    a_revoked_keys_tokens_are_refused_within_seconds_even_after_being_accepted,
    a_storm_of_unknown_kids_causes_at_most_one_jwks_fetch_per_cooldown,
    tokens_already_issued_are_accepted_while_the_auth_server_is_down,
    an_intake_api_started_before_the_auth_server_is_ready_once_it_answers,
);
