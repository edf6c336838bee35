//! DPoP-bound tokens at the intake-api: good only under the `DPoP` scheme, beside a fresh
//! proof for the request made with the key the token is bound to, each proof once, at every
//! replica (through their database, or their Redis), failing closed when that cannot be told. The bound tokens are signed with the auth-server's real key
//! (read from its database), and the proofs are made by the partner client's `DpopKey`.

use partner_client::DpopKey;
use serde_json::{Value, json};

use crate::helpers::{
    ATTACH, Backend, ENQUIRY, Reply, TestApp, fresh_email, metric, purchase_enquiry,
};
use test_support::on_both_backends;

/// A token of the app's partner bound to `key`, signed by the auth-server's key.
async fn bound_token(app: &TestApp, key: &DpopKey) -> String {
    let signer = app.real_signer().await;
    let mut claims = app.claims();
    claims["cnf"] = json!({"jkt": key.thumbprint()});
    signer.sign(&signer.header(), &claims)
}

/// POSTs `body` to `path` with `authorization` and each of `proofs` as a `DPoP` header.
async fn post(
    app: &TestApp,
    path: &str,
    authorization: &str,
    proofs: &[&str],
    body: &Value,
) -> Reply {
    let mut request = app
        .http
        .post(app.url(path))
        .header("content-type", "application/json")
        .header("authorization", authorization)
        .body(body.to_string());
    for proof in proofs {
        request = request.header("dpop", *proof);
    }
    Reply::read(request.send().await.expect("request sent")).await
}

/// Asserts a 401 whose `DPoP` challenge carries `error` and the accepted algorithms.
fn refused(reply: &Reply, error: &str, case: &str) {
    assert_eq!(reply.status, 401, "{case}: {:?}", reply.body);
    assert_eq!(reply.body, json!({"message": "Unauthenticated."}), "{case}");
    let challenge = reply.challenge.as_deref().unwrap_or_default();
    assert!(
        challenge.starts_with(&format!(r#"DPoP error="{error}""#)),
        "{case}: {challenge}"
    );
    assert!(
        challenge.contains(r#"algs="ES256 PS256 RS256 EdDSA""#),
        "{case}: {challenge}"
    );
}

async fn a_bound_token_works_only_with_a_fresh_proof_by_its_key(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    let dpop = format!("DPoP {token}");
    let url = app.url(ENQUIRY);
    let body = purchase_enquiry("brand_a", &fresh_email());

    let proof = key.proof("POST", &url, Some(&token)).unwrap();
    let accepted = post(&app, ENQUIRY, &dpop, &[&proof], &body).await;
    assert_eq!(accepted.status, 201, "{:?}", accepted.body);
    // The same proof again: a replay.
    refused(
        &post(&app, ENQUIRY, &dpop, &[&proof], &body).await,
        "invalid_dpop_proof",
        "a replayed proof",
    );
    // A new proof for the next request goes through.
    let next = key.proof("POST", &url, Some(&token)).unwrap();
    assert_eq!(
        post(&app, ENQUIRY, &dpop, &[&next], &body).await.status,
        200
    );

    let thief = DpopKey::generate().unwrap();
    let fresh = || key.proof("POST", &url, Some(&token)).unwrap();
    let other_token = app.token.clone();
    let cases: Vec<(&str, String, Vec<String>, &str)> = vec![
        (
            "the bound token as Bearer",
            format!("Bearer {token}"),
            vec![],
            "invalid_token",
        ),
        (
            "the bound token as Bearer, with a proof",
            format!("Bearer {token}"),
            vec![fresh()],
            "invalid_token",
        ),
        (
            "a proof by another key",
            dpop.clone(),
            vec![thief.proof("POST", &url, Some(&token)).unwrap()],
            "invalid_token",
        ),
        ("no proof", dpop.clone(), vec![], "invalid_dpop_proof"),
        (
            "two proofs",
            dpop.clone(),
            vec![fresh(), fresh()],
            "invalid_dpop_proof",
        ),
        (
            "a proof for another URL",
            dpop.clone(),
            vec![key.proof("POST", &app.url(ATTACH), Some(&token)).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "a proof for another method",
            dpop.clone(),
            vec![key.proof("GET", &url, Some(&token)).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "a proof without the token's hash",
            dpop.clone(),
            vec![key.proof("POST", &url, None).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "a proof for another token",
            dpop.clone(),
            vec![key.proof("POST", &url, Some(&other_token)).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "not a proof",
            dpop.clone(),
            vec!["a.b.c".into()],
            "invalid_dpop_proof",
        ),
        (
            "a token that is not bound, under DPoP",
            format!("DPoP {other_token}"),
            vec![key.proof("POST", &url, Some(&other_token)).unwrap()],
            "invalid_token",
        ),
        (
            "DPoP and no token",
            "DPoP".into(),
            vec![fresh()],
            "invalid_token",
        ),
    ];
    for (case, authorization, proofs, error) in cases {
        let proofs: Vec<&str> = proofs.iter().map(String::as_str).collect();
        refused(
            &post(&app, ENQUIRY, &authorization, &proofs, &body).await,
            error,
            case,
        );
    }
    // Bearer tokens are as they were.
    assert_eq!(app.enquiry(&body).await.status, 200);
    let base = app.intake.base_url();
    for reason in [
        "proof_replayed",
        "bound_token_as_bearer",
        "proof_key_mismatch",
        "proof_htu",
    ] {
        let counted = metric(&app.http, &base, "intake_auth_failures_total", reason).await;
        assert!(counted >= 1.0, "{reason}: {counted}");
    }
}

/// Points a replica at the test Redis.
fn with_redis(c: &mut intake_api::config::Config) {
    c.redis_url = Some(
        std::env::var("TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
            .parse()
            .unwrap(),
    )
}

/// A proof used at one replica is refused at another configured by `configure` (sharing the
/// database, or the Redis too); a fresh proof there is not.
async fn proof_spent_at_one_replica_is_refused_at_another(
    backend: Backend,
    configure: fn(&mut intake_api::config::Config),
) {
    let app = TestApp::spawn_with(backend, configure).await;
    let replica = app.second_intake(configure).await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    let body = purchase_enquiry("brand_a", &fresh_email());
    // Each replica is called at its own address, which the proof must name.
    let first_url = app.url(ENQUIRY);
    let proof = key.proof("POST", &first_url, Some(&token)).unwrap();
    let dpop = format!("DPoP {token}");
    assert_eq!(
        post(&app, ENQUIRY, &dpop, &[&proof], &body).await.status,
        201
    );
    let host = first_url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    // Sent to the second replica as if through a proxy that keeps the Host it was called
    // with, so that the proof's URL matches there too.
    let at_replica = |proof: String| {
        app.http
            .post(format!("{}{ENQUIRY}", replica.base_url()))
            .header("content-type", "application/json")
            .header("authorization", &dpop)
            .header("dpop", proof)
            .header("host", &host)
            .body(body.to_string())
            .send()
    };
    let fresh = key.proof("POST", &first_url, Some(&token)).unwrap();
    let control = Reply::read(at_replica(fresh).await.expect("request sent")).await;
    assert_eq!(control.status, 200, "{:?}", control.body);
    let replayed = Reply::read(at_replica(proof).await.expect("request sent")).await;
    refused(
        &replayed,
        "invalid_dpop_proof",
        "replayed at a second replica",
    );
}

/// Without Redis the replicas' common database keeps the proofs used, not each process.
async fn a_proof_is_used_once_across_replicas_sharing_the_database(backend: Backend) {
    proof_spent_at_one_replica_is_refused_at_another(backend, |_| {}).await;
}

/// With Redis the proofs used are kept there, for every replica.
async fn a_proof_is_used_once_across_replicas_sharing_the_redis(backend: Backend) {
    proof_spent_at_one_replica_is_refused_at_another(backend, with_redis).await;
}

/// A proof's id is kept until the proof is too old to be accepted, and only then pruned:
/// a proof made now is refused for all of its 300 s, not for a window that ends sooner.
async fn a_used_proof_is_remembered_until_it_is_too_old_to_be_accepted(backend: Backend) {
    use service_kit::replay::{DPOP_PROOFS, ReplayStore};
    let app = TestApp::spawn(backend).await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    let made = chrono::Utc::now().timestamp();
    let proof = key.proof("POST", &app.url(ENQUIRY), Some(&token)).unwrap();
    let dpop = format!("DPoP {token}");
    let body = purchase_enquiry("brand_a", &fresh_email());
    assert_eq!(
        post(&app, ENQUIRY, &dpop, &[&proof], &body).await.status,
        201
    );
    let db = sea_orm::Database::connect(app.intake_db.url.as_str())
        .await
        .expect("database");
    let store = ReplayStore::new("test", db, None).unwrap();
    let at = |secs| chrono::DateTime::from_timestamp(secs, 0).unwrap();
    // Nothing is forgotten while the proof could still be sent (its iat is at most a
    // second after `made`).
    let max_age = shared::dpop::MAX_AGE_SECS;
    assert_eq!(
        store.prune(&DPOP_PROOFS, at(made + max_age)).await.unwrap(),
        0
    );
    refused(
        &post(&app, ENQUIRY, &dpop, &[&proof], &body).await,
        "invalid_dpop_proof",
        "replayed while it is kept",
    );
    assert_eq!(
        store
            .prune(&DPOP_PROOFS, at(made + max_age + 3))
            .await
            .unwrap(),
        1
    );
}

/// When the Redis that keeps used proofs cannot be reached, a DPoP request is refused for
/// now (503 with Retry-After), never let through on one replica's word; bearer tokens go on.
async fn dpop_requests_fail_closed_while_the_replay_store_is_down(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        let closed = crate::helpers::unused_port();
        c.redis_url = Some(format!("redis://127.0.0.1:{closed}").parse().unwrap());
    })
    .await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    let proof = key.proof("POST", &app.url(ENQUIRY), Some(&token)).unwrap();
    let body = purchase_enquiry("brand_a", &fresh_email());
    let reply = post(&app, ENQUIRY, &format!("DPoP {token}"), &[&proof], &body).await;
    assert_eq!(reply.status, 503, "{:?}", reply.body);
    assert_eq!(reply.retry_after.as_deref(), Some("5"), "{:?}", reply.body);
    let bearer = app
        .enquiry(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    assert_eq!(bearer.status, 201, "{:?}", bearer.body);
}

/// `/readyz` of `app`'s intake-api: status and body.
async fn readyz(app: &TestApp) -> (u16, Value) {
    let answer = app.http.get(app.url("/readyz")).send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

/// Whether `app`'s `/readyz` comes to say `said` with the replay store's check `check`
/// (200 either way: bearer tokens need no replay store).
async fn replay_readiness_becomes(app: &TestApp, said: &str, check: &str) -> bool {
    test_support::eventually(std::time::Duration::from_secs(20), || async {
        let (status, body) = readyz(app).await;
        (status == 200 && body["status"] == said && body["checks"]["replay_store"] == check)
            .then_some(())
    })
    .await
    .is_some()
}

/// The Redis that keeps used proofs going away shows in `/readyz` and on `/metrics`, with
/// no request needed to find out; once it is back, proofs are taken again without a restart.
async fn a_replay_store_outage_shows_in_readyz_and_ends_by_itself(backend: Backend) {
    let upstream: std::net::SocketAddr = std::env::var("TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .replace("localhost", "127.0.0.1")
        .parse()
        .expect("TEST_REDIS_URL as redis://HOST:PORT");
    let proxy = test_support::proxy::TcpProxy::start(upstream)
        .await
        .unwrap();
    let port = proxy.port;
    let app = TestApp::spawn_with(backend, |c| {
        c.redis_url = Some(format!("redis://127.0.0.1:{port}").parse().unwrap());
    })
    .await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    assert_eq!(bound_enquiry(&app, &key, &token).await, 201);
    assert!(replay_readiness_becomes(&app, "ready", "ok").await);

    proxy.cut();
    assert!(
        replay_readiness_becomes(&app, "degraded", "failing").await,
        "{:?}",
        readyz(&app).await
    );
    assert_eq!(bound_enquiry(&app, &key, &token).await, 503);
    let metrics = app
        .http
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"replay_store_available{service="intake-api",store="redis"}"#),
        "no gauge of the store's state"
    );

    proxy.restore();
    assert!(
        replay_readiness_becomes(&app, "ready", "ok").await,
        "{:?}",
        readyz(&app).await
    );
    assert_eq!(bound_enquiry(&app, &key, &token).await, 201);
}

/// The status of a new customer's enquiry with `token`, bound to `key`, and a fresh proof.
async fn bound_enquiry(app: &TestApp, key: &DpopKey, token: &str) -> u16 {
    let proof = key.proof("POST", &app.url(ENQUIRY), Some(token)).unwrap();
    let body = purchase_enquiry("brand_a", &fresh_email());
    post(app, ENQUIRY, &format!("DPoP {token}"), &[&proof], &body)
        .await
        .status
}

/// A P-256 key making proofs with the `iat` a test chooses, as a partner whose clock runs
/// ahead makes them; and its thumbprint, which a token bound to it names.
struct SkewedKey {
    encoding: jsonwebtoken::EncodingKey,
    jwk: jsonwebtoken::jwk::Jwk,
}

impl SkewedKey {
    fn generate() -> Self {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;

        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let point = pair.public_key().as_ref();
        let jwk = json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..]),
        });
        Self {
            encoding: jsonwebtoken::EncodingKey::from_ec_der(pair.to_pkcs8v1().unwrap().as_ref()),
            jwk: serde_json::from_value(jwk).unwrap(),
        }
    }

    fn thumbprint(&self) -> String {
        self.jwk
            .thumbprint(jsonwebtoken::jwk::ThumbprintHash::SHA256)
            .unwrap()
    }

    /// A proof for `POST` on `url` beside `token`, made `ahead_secs` from now.
    fn proof(&self, url: &str, token: &str, ahead_secs: i64) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.typ = Some(shared::dpop::PROOF_TYP.to_owned());
        header.jwk = Some(self.jwk.clone());
        let claims = json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "htm": "POST",
            "htu": url,
            "iat": chrono::Utc::now().timestamp() + ahead_secs,
            "ath": shared::dpop::token_hash(token),
        });
        jsonwebtoken::encode(&header, &claims, &self.encoding).unwrap()
    }
}

/// A partner's clock may run ahead of ours by up to a minute, as at the token endpoint: a
/// proof made 10 s or 60 s ahead is accepted, one 70 s ahead refused (past the minute, with
/// room for the seconds a slow machine takes between making it and the server reading it).
async fn a_proof_from_a_clock_ten_seconds_fast_is_accepted_and_one_over_a_minute_is_not(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = SkewedKey::generate();
    let signer = app.real_signer().await;
    let mut claims = app.claims();
    claims["cnf"] = json!({"jkt": key.thumbprint()});
    let token = signer.sign(&signer.header(), &claims);
    let dpop = format!("DPoP {token}");
    let url = app.url(ENQUIRY);
    let body = purchase_enquiry("brand_a", &fresh_email());

    let accepted = post(&app, ENQUIRY, &dpop, &[&key.proof(&url, &token, 10)], &body).await;
    assert_eq!(accepted.status, 201, "{:?}", accepted.body);
    // A full minute ahead is the most tolerated.
    let accepted = post(&app, ENQUIRY, &dpop, &[&key.proof(&url, &token, 60)], &body).await;
    assert_eq!(accepted.status, 200, "{:?}", accepted.body);
    refused(
        &post(&app, ENQUIRY, &dpop, &[&key.proof(&url, &token, 70)], &body).await,
        "invalid_dpop_proof",
        "a proof 70 s ahead",
    );
    let counted = metric(
        &app.http,
        &app.intake.base_url(),
        "intake_auth_failures_total",
        "proof_iat",
    )
    .await;
    assert!(counted >= 1.0, "proof_iat: {counted}");
}

/// How many proofs of `key` the replay store holds: rows in the database, or keys in Redis.
async fn proofs_kept(app: &TestApp, key: &DpopKey, redis: bool) -> i64 {
    use sea_orm::{ConnectionTrait, Statement};
    if redis {
        let url = std::env::var("TEST_REDIS_URL").unwrap_or("redis://127.0.0.1:6379".into());
        let client = redis::Client::open(url).expect("a Redis URL");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("Redis reachable");
        let pattern = format!("replay:dpop_proofs:{}:*", key.thumbprint());
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut conn)
            .await
            .unwrap();
        return keys.len() as i64;
    }
    let db = sea_orm::Database::connect(app.intake_db.url.as_str())
        .await
        .expect("database");
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            match db.get_database_backend() {
                sea_orm::DbBackend::Postgres => {
                    "SELECT COUNT(*) AS n FROM dpop_proofs WHERE jkt = $1"
                }
                _ => "SELECT COUNT(*) AS n FROM dpop_proofs WHERE jkt = ?",
            },
            [key.thumbprint().into()],
        ))
        .await
        .unwrap()
        .expect("a count");
    row.try_get::<i64>("", "n").unwrap()
}

/// A request refused at the partner's rate limit (429) writes nothing to the replay store,
/// which the limit therefore bounds, and leaves its proof unspent: the same proof is taken
/// once the limit allows (while it is fresh), and only once.
async fn requests_refused_at_the_rate_limit_leave_the_replay_store_as_it_was(
    backend: Backend,
    redis: bool,
) {
    let app = TestApp::spawn_with(backend, |c| {
        c.rate_limit = 1;
        c.rate_window_secs = 5;
        if redis {
            with_redis(c);
        }
    })
    .await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    let dpop = format!("DPoP {token}");
    let url = app.url(ENQUIRY);
    let body = purchase_enquiry("brand_a", &fresh_email());
    // Whatever the window has left, a request gets through first.
    let first = test_support::eventually(std::time::Duration::from_secs(10), || async {
        let proof = key.proof("POST", &url, Some(&token)).unwrap();
        let reply = post(&app, ENQUIRY, &dpop, &[&proof], &body).await;
        (reply.status != 429).then_some(reply)
    })
    .await
    .expect("a request within the limit");
    assert_eq!(first.status, 201, "{:?}", first.body);
    let kept = proofs_kept(&app, &key, redis).await;
    assert_eq!(kept, 1);
    let held = key.proof("POST", &url, Some(&token)).unwrap();
    let mut limited = 0;
    for _ in 0..5 {
        let proof = key.proof("POST", &url, Some(&token)).unwrap();
        for proof in [&proof, &held] {
            let reply = post(&app, ENQUIRY, &dpop, &[proof], &body).await;
            if reply.status == 429 {
                limited += 1;
            }
        }
    }
    assert!(limited >= 5, "only {limited} refused at the limit");
    assert_eq!(
        proofs_kept(&app, &key, redis).await,
        kept + 10 - limited,
        "a 429 wrote to the replay store"
    );
    // The proof refused at the limit is taken once the window allows it, then spent.
    let retried = test_support::eventually(std::time::Duration::from_secs(15), || async {
        let reply = post(&app, ENQUIRY, &dpop, &[&held], &body).await;
        (reply.status != 429).then_some(reply)
    })
    .await
    .expect("the limit lets a request through again");
    if limited == 10 {
        assert_eq!(retried.status, 200, "{:?}", retried.body);
    }
    let replayed = test_support::eventually(std::time::Duration::from_secs(15), || async {
        let reply = post(&app, ENQUIRY, &dpop, &[&held], &body).await;
        (reply.status != 429).then_some(reply)
    })
    .await
    .expect("the limit lets a request through again");
    refused(&replayed, "invalid_dpop_proof", "the proof taken once");
}

async fn requests_refused_at_the_rate_limit_write_no_proof_to_the_database(backend: Backend) {
    requests_refused_at_the_rate_limit_leave_the_replay_store_as_it_was(backend, false).await;
}

async fn requests_refused_at_the_rate_limit_write_no_proof_to_redis(backend: Backend) {
    requests_refused_at_the_rate_limit_leave_the_replay_store_as_it_was(backend, true).await;
}

test_support::on_sqlite!(requests_refused_at_the_rate_limit_write_no_proof_to_redis);

on_both_backends!(
    requests_refused_at_the_rate_limit_write_no_proof_to_the_database,
    a_bound_token_works_only_with_a_fresh_proof_by_its_key,
    a_proof_is_used_once_across_replicas_sharing_the_database,
    a_proof_is_used_once_across_replicas_sharing_the_redis,
    a_used_proof_is_remembered_until_it_is_too_old_to_be_accepted,
    dpop_requests_fail_closed_while_the_replay_store_is_down,
    a_replay_store_outage_shows_in_readyz_and_ends_by_itself,
    a_proof_from_a_clock_ten_seconds_fast_is_accepted_and_one_over_a_minute_is_not,
);
