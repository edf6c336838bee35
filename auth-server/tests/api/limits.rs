//! Rate limits on the token endpoint: per client and address, failed authentications more
//! tightly, shared between replicas through Redis, and still enforced when Redis fails.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{AuthServer, Backend, INTAKE, TestApp, TestDb, eventually};

fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

async fn post(base: &str, id: &str, secret: &str) -> (u16, Option<String>, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{base}/oauth/token"))
        .json(&json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret, "scope": INTAKE}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, resp.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_over_the_limit_get_429_with_retry_after() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |c| c.token_rate_limit = 3)
        .await
        .unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    for _ in 0..3 {
        assert_eq!(post(&auth.base_url(), &id, &secret).await.0, 200);
    }
    let (status, retry, body) = post(&auth.base_url(), &id, &secret).await;
    assert_eq!(status, 429);
    let retry: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(body["error"], "too_many_requests");
    assert_eq!(body["message"], "Too Many Attempts.");
    assert_eq!(body["error_description"], body["message"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentications_lock_out_even_the_right_secret() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |c| c.failed_auth_limit = 2)
        .await
        .unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    assert_eq!(post(&auth.base_url(), &id, "guess-1").await.0, 401);
    assert_eq!(post(&auth.base_url(), &id, "guess-2").await.0, 401);
    assert_eq!(post(&auth.base_url(), &id, "guess-3").await.0, 429);
    assert_eq!(
        post(&auth.base_url(), &id, &secret).await.0,
        429,
        "guard must hold for the right secret too"
    );
}

async fn replicas_sharing_redis_enforce_one_limit(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let redis: service_kit::Secret<String> = redis_url().parse().unwrap();
    let a = AuthServer::start(&app.db.url, |c| {
        c.token_rate_limit = 4;
        c.redis_url = Some(redis.clone());
    })
    .await
    .unwrap();
    let b = AuthServer::start(&app.db.url, |c| {
        c.token_rate_limit = 4;
        c.redis_url = Some(redis.clone());
    })
    .await
    .unwrap();
    let mut statuses = Vec::new();
    for i in 0..6 {
        let base = if i % 2 == 0 {
            a.base_url()
        } else {
            b.base_url()
        };
        statuses.push(post(&base, &app.client_id, &app.client_secret).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_unreachable_the_limit_is_kept_in_process() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |c| {
        c.token_rate_limit = 2;
        c.redis_url = Some("redis://127.0.0.1:1".parse().unwrap());
    })
    .await
    .unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    assert_eq!(post(&auth.base_url(), &id, &secret).await.0, 200);
    assert_eq!(post(&auth.base_url(), &id, &secret).await.0, 200);
    assert_eq!(post(&auth.base_url(), &id, &secret).await.0, 429);
    let metrics = metrics_text(&auth.base_url()).await;
    assert!(
        metrics.contains("ratelimit_redis_errors_total"),
        "Redis failure not counted"
    );
}

test_support::on_both_backends!(replicas_sharing_redis_enforce_one_limit);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_redis_fails_mid_run_limits_go_local_and_come_back_to_redis_when_it_returns() {
    let redis_addr: std::net::SocketAddr = redis_url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .replace("localhost", "127.0.0.1")
        .parse()
        .expect("TEST_REDIS_URL as redis://HOST:PORT");
    let proxy = test_support::proxy::TcpProxy::start(redis_addr)
        .await
        .unwrap();
    let through_proxy: service_kit::Secret<String> =
        format!("redis://127.0.0.1:{}", proxy.port).parse().unwrap();
    let db = TestDb::auth(Backend::Sqlite).await;
    let limited = |c: &mut auth_server::config::Config| {
        c.token_rate_limit = 3;
        c.redis_url = Some(through_proxy.clone());
    };
    let a = AuthServer::start(&db.url, limited).await.unwrap();
    let b = AuthServer::start(&db.url, limited).await.unwrap();
    let (id, secret) = a.create_client(INTAKE).await;

    // Shared through Redis: two on one replica and one on the other spend the limit.
    assert_eq!(post(&a.base_url(), &id, &secret).await.0, 200);
    assert_eq!(post(&a.base_url(), &id, &secret).await.0, 200);
    assert_eq!(post(&b.base_url(), &id, &secret).await.0, 200);
    assert_eq!(post(&b.base_url(), &id, &secret).await.0, 429);

    // Redis gone: each replica keeps serving under its own in-process limit.
    proxy.cut();
    let (id2, secret2) = a.create_client(INTAKE).await;
    let on_a: Vec<u16> = statuses(&a.base_url(), &id2, &secret2, 4).await;
    let on_b: Vec<u16> = statuses(&b.base_url(), &id2, &secret2, 4).await;
    assert_eq!(on_a, [200, 200, 200, 429], "replica a without Redis");
    assert_eq!(on_b, [200, 200, 200, 429], "replica b without Redis");
    let metrics = metrics_text(&a.base_url()).await;
    assert!(
        metrics.contains("ratelimit_redis_errors_total"),
        "Redis failure not counted"
    );

    // Redis back: once each replica's retry period (5 s) has passed, they count together
    // again. Each try is a new client; only a shared count refuses its fourth request.
    proxy.restore();
    let shared_again = eventually(Duration::from_secs(20), || async {
        let (id, secret) = a.create_client(INTAKE).await;
        let mut statuses = Vec::new();
        for base in [a.base_url(), b.base_url(), a.base_url(), b.base_url()] {
            statuses.push(post(&base, &id, &secret).await.0);
        }
        (statuses == [200, 200, 200, 429]).then_some(())
    })
    .await;
    assert!(shared_again.is_some(), "limit not shared again");
}

/// What the server's `/metrics` shows now.
async fn metrics_text(base: &str) -> String {
    reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Statuses of `n` token requests in a row.
async fn statuses(base: &str, id: &str, secret: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(post(base, id, secret).await.0);
    }
    out
}
