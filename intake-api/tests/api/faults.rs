//! Fault drills: the database path cut under write load, and SIGTERM under load. In both,
//! every request that was acknowledged must be in the database afterwards.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database, Statement};
use serde_json::Value;
use test_support::postgres_admin_url;
use test_support::proxy::TcpProxy;
use tokio::sync::Mutex;
use url::Url;

use crate::helpers::{
    AuthServer, Backend, INTAKE, IntakeServer, TestDb, eventually, remortgage_enquiry,
};

/// `url` with its host and port replaced by `127.0.0.1:port`.
fn via_port(url: &str, port: u16) -> String {
    let mut url = Url::parse(url).expect("a database URL");
    url.set_host(Some("127.0.0.1")).expect("a host");
    url.set_port(Some(port)).expect("a port");
    url.into()
}

fn postgres_addr() -> std::net::SocketAddr {
    let url = Url::parse(&postgres_admin_url()).expect("TEST_POSTGRES_URL is a URL");
    let host = match url.host_str() {
        Some("localhost") | None => "127.0.0.1",
        Some(host) => host,
    };
    format!("{host}:{}", url.port().unwrap_or(5432))
        .parse()
        .expect("PostgreSQL address")
}

async fn stored_references(db_url: &str) -> HashSet<String> {
    let db = Database::connect(db_url).await.unwrap();
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT reference FROM cases",
        ))
        .await
        .unwrap();
    rows.iter()
        .map(|r| r.try_get::<String>("", "reference").unwrap())
        .collect()
}

type Outcomes = Arc<Mutex<Vec<(u16, Option<String>, Duration)>>>;

/// Waits (at most 20 s) until the outcomes recorded from index `from` on hold at least `n`
/// with `status` (0 for a failed connection).
async fn seen(outcomes: &Outcomes, from: usize, status: u16, n: usize) -> bool {
    eventually(Duration::from_secs(20), || async {
        let outcomes = outcomes.lock().await;
        let count = outcomes[from..].iter().filter(|o| o.0 == status).count();
        (count >= n).then_some(())
    })
    .await
    .is_some()
}

/// How many outcomes are recorded so far.
async fn recorded(outcomes: &Outcomes) -> usize {
    outcomes.lock().await.len()
}

/// Sends unique enquiries from `workers` tasks until `stop` is set, recording every outcome.
async fn write_load(
    base: String,
    token: String,
    workers: usize,
    stop: Arc<AtomicBool>,
    outcomes: Outcomes,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (http, base, token, stop, outcomes) = (
            http.clone(),
            base.clone(),
            token.clone(),
            stop.clone(),
            outcomes.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let started = Instant::now();
                let resp = http
                    .post(format!("{base}/partners/external/intake"))
                    .bearer_auth(&token)
                    .json(&remortgage_enquiry(
                        "brand_a",
                        &format!("load-{w}-{i}@example.com"),
                    ))
                    .send()
                    .await;
                let outcome = match resp {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let body: Value = r.json().await.unwrap_or(Value::Null);
                        (
                            status,
                            body["reference"].as_str().map(str::to_owned),
                            started.elapsed(),
                        )
                    }
                    // A connection that failed was not acknowledged.
                    Err(_) => (0, None, started.elapsed()),
                };
                outcomes.lock().await.push(outcome);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cutting_the_database_path_under_load_answers_503_and_loses_nothing_acknowledged() {
    let auth_db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&auth_db.url, |_| {}).await.unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    let token = auth.token(&id, &secret, INTAKE).await;
    let intake_db = TestDb::intake(Backend::Postgres).await;
    let proxy = TcpProxy::start(postgres_addr()).await.unwrap();
    // The load is one partner's: its rate limit must not be what answers.
    let intake = IntakeServer::start(&via_port(&intake_db.url, proxy.port), &auth, |c| {
        c.rate_limit = 1_000_000
    })
    .await
    .unwrap();
    assert!(intake.wait_ready().await);

    let outcomes: Outcomes = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(write_load(
        intake.base_url(),
        token,
        6,
        stop.clone(),
        outcomes.clone(),
    ));
    // The cut lands on a load under way.
    assert!(
        seen(&outcomes, 0, 201, 20).await,
        "the load never got going"
    );
    proxy.cut();
    let readyz = format!("{}/readyz", intake.base_url());
    let ready_during_cut = eventually(Duration::from_secs(10), || async {
        let status = reqwest::get(&readyz).await.ok()?.status();
        (status == 503).then_some(status.as_u16())
    })
    .await;
    // The database stays away until the load has met the outage again and again.
    let cut_at = recorded(&outcomes).await;
    let noticed = seen(&outcomes, cut_at, 503, 12).await;
    proxy.restore();
    let restored_at = recorded(&outcomes).await;
    let recovered = seen(&outcomes, restored_at, 201, 12).await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();

    assert!(noticed, "the cut was not noticed");
    assert!(recovered, "no recovery after the database returned");
    assert_eq!(
        ready_during_cut,
        Some(503),
        "/readyz must say not ready while the database is away"
    );
    let outcomes = outcomes.lock().await.clone();
    let statuses: HashSet<u16> = outcomes.iter().map(|o| o.0).collect();
    assert!(
        statuses.is_subset(&HashSet::from([201, 503])),
        "unexpected statuses {statuses:?}"
    );
    assert!(
        outcomes.iter().any(|o| o.0 == 503),
        "the cut was not noticed"
    );
    let slowest = outcomes.iter().map(|o| o.2).max().unwrap();
    assert!(
        slowest < Duration::from_secs(15),
        "a request hung for {slowest:?}"
    );
    // Recovered by itself: the last requests succeeded again.
    assert_eq!(
        outcomes.last().unwrap().0,
        201,
        "no recovery after the database returned"
    );
    let acknowledged: HashSet<String> = outcomes
        .iter()
        .filter(|o| o.0 == 201)
        .filter_map(|o| o.1.clone())
        .collect();
    let stored = stored_references(&intake_db.url).await;
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
    assert!(acknowledged.len() > 10, "too little load to mean anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_under_load_finishes_in_flight_requests_and_loses_nothing_acknowledged() {
    let auth_db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&auth_db.url, |_| {}).await.unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    let token = auth.token(&id, &secret, INTAKE).await;
    let (reader, reader_secret) = auth.resource_client().await;
    let intake_db = TestDb::intake(Backend::Postgres).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_intake-api"))
        .arg("serve")
        .env("INTAKE_BIND", format!("127.0.0.1:{port}"))
        .env("INTAKE_DATABASE_URL", &intake_db.url)
        .env(
            "INTAKE_KEY_ENCRYPTION_KEY",
            test_support::TEST_INTAKE_KEY_ENCRYPTION_KEY,
        )
        .env(
            "INTAKE_JWKS_URL",
            format!("{}/.well-known/jwks.json", auth.base_url()),
        )
        .env("INTAKE_REVOCATIONS_CLIENT_ID", &reader)
        .env("INTAKE_REVOCATIONS_CLIENT_SECRET", &reader_secret)
        .env("RUST_LOG", "warn")
        .env("INTAKE_RATE_LIMIT", "1000000")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let ready = eventually(Duration::from_secs(20), || async {
        let r = reqwest::get(format!("{base}/readyz")).await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    assert!(ready.is_some(), "intake-api did not become ready");

    let outcomes: Outcomes = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(write_load(base, token, 6, stop.clone(), outcomes.clone()));
    // The signal lands on a load under way.
    assert!(
        seen(&outcomes, 0, 201, 20).await,
        "the load never got going"
    );
    let pid = child.id().unwrap().to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    // The load goes on until requests are being refused at the connection.
    let exited_at = recorded(&outcomes).await;
    let refused = seen(&outcomes, exited_at, 0, 6).await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();

    assert!(refused, "requests after the exit were not refused");
    assert!(status.success(), "intake-api exited with {status}");
    let outcomes = outcomes.lock().await.clone();
    let acknowledged: HashSet<String> = outcomes
        .iter()
        .filter(|o| o.0 == 201)
        .filter_map(|o| o.1.clone())
        .collect();
    assert!(acknowledged.len() > 10, "too little load to mean anything");
    let stored = stored_references(&intake_db.url).await;
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
    // After the signal, requests are refused at the connection (not answered with errors).
    let statuses: HashSet<u16> = outcomes.iter().map(|o| o.0).collect();
    assert!(
        statuses.is_subset(&HashSet::from([0, 201])),
        "unexpected statuses {statuses:?}"
    );
}
