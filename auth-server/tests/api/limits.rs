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

/// A token request with `client_id`, sent as coming from `forwarded_for` when given.
async fn post_from(base: &str, id: &str, secret: &str, forwarded_for: Option<&str>) -> u16 {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/oauth/token"))
        .json(&json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret, "scope": INTAKE}));
    if let Some(address) = forwarded_for {
        request = request.header("x-forwarded-for", address);
    }
    request.send().await.unwrap().status().as_u16()
}

/// The value of an unlabelled-but-for-service gauge in a scrape.
fn gauge(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_client_ids_get_no_state_of_their_own_and_meet_the_per_source_limit_first() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |c| {
        c.source_rate_limit = 300;
        c.failed_auth_limit = 1_000_000;
        // The 301 requests must fall in one window however slowly a busy machine answers
        // them (each made-up id costs a hash, as a wrong secret does).
        c.rate_window_secs = 3600;
    })
    .await
    .unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    let base = auth.base_url();
    let mut statuses = Vec::new();
    for _ in 0..300 {
        let made_up = uuid::Uuid::new_v4().to_string();
        statuses.push(post(&base, &made_up, "whatever").await.0);
    }
    assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    // Three hundred ids, and the counters hold the source's and one shared pair, not one
    // each. (The gauge is the process's, which other tests' servers also set, with a few
    // keys of their own.)
    let keys = gauge(&metrics_text(&base).await, "ratelimit_local_keys");
    assert!(keys < 50.0, "{keys} counters for 300 made-up ids");
    // The source is now at its limit: even a real client's request from it waits.
    assert_eq!(post(&base, &id, &secret).await.0, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_counts_only_through_a_trusted_proxy() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let trusting = AuthServer::start(&db.url, |c| {
        c.failed_auth_limit = 2;
        c.trusted_proxies = "127.0.0.1/32".parse().unwrap();
    })
    .await
    .unwrap();
    let (id, secret) = trusting.create_client(INTAKE).await;
    let base = trusting.base_url();
    // An attacker behind the proxy locks out the partner's id for its own address only.
    for _ in 0..2 {
        assert_eq!(
            post_from(&base, &id, "guess", Some("203.0.113.66")).await,
            401
        );
    }
    assert_eq!(
        post_from(&base, &id, &secret, Some("203.0.113.66")).await,
        429
    );
    assert_eq!(
        post_from(&base, &id, &secret, Some("198.51.100.7")).await,
        200
    );
    // What a client writes left of the proxy's own entry is not believed.
    assert_eq!(
        post_from(&base, &id, &secret, Some("198.51.100.7, 203.0.113.66")).await,
        429
    );

    // Without trusted proxies the header is ignored: every request is the TCP peer's.
    let db = TestDb::auth(Backend::Sqlite).await;
    let plain = AuthServer::start(&db.url, |c| c.failed_auth_limit = 2)
        .await
        .unwrap();
    let (id, secret) = plain.create_client(INTAKE).await;
    let base = plain.base_url();
    for address in ["203.0.113.66", "203.0.113.67"] {
        assert_eq!(post_from(&base, &id, "guess", Some(address)).await, 401);
    }
    assert_eq!(
        post_from(&base, &id, &secret, Some("198.51.100.7")).await,
        429
    );
}

/// An unknown id and a wrong secret get the same answer, headers and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_client_id_is_answered_exactly_as_a_wrong_secret() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (id, _) = auth.create_client(INTAKE).await;
    let base = auth.base_url();
    let unknown = post(&base, "no-such-client", "s3cret").await;
    let wrong = post(&base, &id, "s3cret").await;
    assert_eq!(unknown, wrong);
    assert_eq!(unknown.0, 401);
}

/// A thousand connections that send one byte of a request and stall: the server keeps
/// answering, and closes them once the header read timeout passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_stalled_connections_do_not_stop_the_server_and_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let address = format!("127.0.0.1:{}", auth.server.port);
    let mut stalled = Vec::new();
    for _ in 0..1000 {
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        stream.write_all(b"P").await.expect("one byte");
        stalled.push(stream);
    }
    let answered = tokio::time::timeout(
        Duration::from_secs(3),
        reqwest::get(format!("{}/healthz", auth.base_url())),
    )
    .await
    .expect("the server stopped answering")
    .expect("healthz");
    assert_eq!(answered.status(), 200);
    // Each stalled connection is closed by the server: a read sees the end (or a reset).
    let closed = tokio::time::timeout(Duration::from_secs(15), async {
        for stream in &mut stalled {
            let mut buf = [0u8; 256];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "stalled connections were left open");
}

/// With an admin listener configured, `/metrics` is served there and not on the main one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_to_the_admin_listener_when_one_is_configured() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |c| {
        c.listen.admin_bind = Some("127.0.0.1:0".into())
    })
    .await
    .unwrap();
    let admin = format!(
        "http://127.0.0.1:{}",
        auth.admin_port.expect("an admin port")
    );
    let main = reqwest::get(format!("{}/metrics", auth.base_url()))
        .await
        .unwrap();
    assert_eq!(main.status(), 404, "metrics still on the main listener");
    let scraped = reqwest::get(format!("{admin}/metrics")).await.unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(
        scraped
            .text()
            .await
            .unwrap()
            .contains("http_requests_total")
    );
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            reqwest::get(format!("{admin}{path}"))
                .await
                .unwrap()
                .status(),
            200
        );
        let on_main = reqwest::get(format!("{}{path}", auth.base_url()))
            .await
            .unwrap();
        assert_eq!(on_main.status(), 200, "{path} left the main listener");
    }
}
