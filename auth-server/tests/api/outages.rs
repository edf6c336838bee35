//! A dependency that stops answering shows in `/readyz` and on `/metrics` while it is away,
//! requests that need it fail closed, and the server recovers by itself once it is back,
//! without a restart: the PKCS#11 token the keys live in, and the replay store.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::Value;
use test_support::proxy::TcpProxy;
use test_support::softhsm::{self, IsolatedToken};
use test_support::{create_client_offline, on_both_backends};

use crate::helpers::{AuthServer, Backend, INTAKE, ProofKey, TestDb, eventually, sample};

/// `auth-server serve` as a process of its own, as an operator runs it: a PKCS#11 library
/// is initialised once per process, and the token's outage is the process's.
struct ServeProcess {
    child: Child,
    base: String,
    log: PathBuf,
}

impl ServeProcess {
    /// Starts the server on `db` with `env` besides the database, the key-encryption key
    /// and limits out of the way; returns once `/healthz` answers.
    async fn start(db: &TestDb, env: &[(&str, String)]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::env::temp_dir().join(format!(
            "partner-intake-outage-{}.log",
            uuid::Uuid::new_v4().simple()
        ));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_auth-server"))
            .arg("serve")
            .env("AUTH_DATABASE_URL", &db.url)
            .env(
                "AUTH_KEY_ENCRYPTION_KEY",
                test_support::TEST_KEY_ENCRYPTION_KEY,
            )
            .env("AUTH_BIND", format!("127.0.0.1:{port}"))
            .env("AUTH_TOKEN_RATE_LIMIT", "1000000")
            .env("AUTH_SOURCE_RATE_LIMIT", "1000000")
            .env_remove("AUTH_KEY_STORE")
            .env_remove("REDIS_URL")
            .env_remove("RUST_LOG")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("auth-server serve runs");
        let server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let up = eventually(Duration::from_secs(30), || async {
            reqwest::get(format!("{}/healthz", server.base))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        assert!(up.is_some(), "the server never answered: {}", server.said());
        server
    }

    /// What the server logged so far.
    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The status of a token request for `id`.
    async fn token_status(&self, id: &str, secret: &str) -> u16 {
        reqwest::Client::new()
            .post(format!("{}/oauth/token", self.base))
            .json(&serde_json::json!({
                "grant_type": "client_credentials",
                "client_id": id,
                "client_secret": secret,
                "scope": INTAKE,
            }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// `/readyz`: status and body.
    async fn readyz(&self) -> (u16, Value) {
        let answer = reqwest::get(format!("{}/readyz", self.base)).await.unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap())
    }

    /// The value of the gauge `name` on `/metrics`.
    async fn gauge(&self, name: &str) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| sample(&text, name, &[]))
    }

    /// Waits until `/readyz` answers `status` with `check` saying `value`.
    async fn readiness_becomes(&self, status: u16, check: &str, value: &str) -> bool {
        eventually(Duration::from_secs(30), || async {
            let (now, body) = self.readyz().await;
            (now == status && body["checks"][check] == value).then_some(())
        })
        .await
        .is_some()
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The environment that keeps a server's keys in `token`.
fn token_env(token: &IsolatedToken) -> Vec<(&'static str, String)> {
    vec![
        ("SOFTHSM2_CONF", token.conf().display().to_string()),
        ("AUTH_KEY_STORE", "pkcs11".to_owned()),
        (
            "AUTH_PKCS11_MODULE",
            softhsm::module().display().to_string(),
        ),
        ("AUTH_PKCS11_TOKEN_LABEL", token.label.clone()),
        ("AUTH_PKCS11_PIN", softhsm::PIN.to_owned()),
    ]
}

async fn a_token_away_for_a_second_is_reported_and_signs_again_without_a_restart(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let token = IsolatedToken::new("outage-tests");
    let server = ServeProcess::start(&db, &token_env(&token)).await;
    let (id, secret) = create_client_offline(&db.url, INTAKE).await;
    let served = eventually(Duration::from_secs(10), || async {
        (server.token_status(&id, &secret).await == 200).then_some(())
    })
    .await;
    assert!(
        served.is_some(),
        "no token before the outage: {}",
        server.said()
    );
    assert!(server.readiness_becomes(200, "signing_key", "ok").await);
    assert_eq!(server.gauge("auth_signing_available").await, 1.0);

    // Away: tokens are refused (never signed elsewhere), and the server says it cannot sign.
    token.take_away();
    assert_eq!(server.token_status(&id, &secret).await, 500);
    assert!(
        server
            .readiness_becomes(503, "signing_key", "failing")
            .await,
        "/readyz still ready while nothing signs: {:?}",
        server.readyz().await
    );
    assert_eq!(server.gauge("auth_signing_available").await, 0.0);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Back: the server signs again, and says so, with no restart.
    token.bring_back();
    let signs_again = eventually(Duration::from_secs(30), || async {
        (server.token_status(&id, &secret).await == 200).then_some(())
    })
    .await;
    assert!(
        signs_again.is_some(),
        "the server never signed again: {}",
        server.said()
    );
    assert!(server.readiness_becomes(200, "signing_key", "ok").await);
    assert_eq!(server.gauge("auth_signing_available").await, 1.0);

    // With no partner asking, the probe alone notices the token leave and return.
    token.take_away();
    assert!(
        server
            .readiness_becomes(503, "signing_key", "failing")
            .await,
        "an idle server never noticed: {:?}",
        server.readyz().await
    );
    token.bring_back();
    assert!(
        server.readiness_becomes(200, "signing_key", "ok").await,
        "an idle server never noticed the token's return: {}",
        server.said()
    );
    assert_eq!(server.token_status(&id, &secret).await, 200);
}

on_both_backends!(a_token_away_for_a_second_is_reported_and_signs_again_without_a_restart);

/// The test Redis's address (`TEST_REDIS_URL`).
fn redis_addr() -> std::net::SocketAddr {
    std::env::var("TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .replace("localhost", "127.0.0.1")
        .parse()
        .expect("TEST_REDIS_URL as redis://HOST:PORT")
}

/// `/readyz` of `server`: status and body.
async fn readyz_of(server: &AuthServer) -> (u16, Value) {
    let answer = reqwest::get(format!("{}/readyz", server.base_url()))
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

/// Waits until `server`'s `/readyz` answers `status`, saying `said` with the replay store's
/// check `check`.
async fn replay_readiness_becomes(
    server: &AuthServer,
    status: u16,
    said: &str,
    check: &str,
) -> bool {
    eventually(Duration::from_secs(20), || async {
        let (now, body) = readyz_of(server).await;
        (now == status && body["status"] == said && body["checks"]["replay_store"] == check)
            .then_some(())
    })
    .await
    .is_some()
}

async fn redis_away_refuses_proofs_says_so_and_takes_them_again_once_back(backend: Backend) {
    let proxy = TcpProxy::start(redis_addr()).await.unwrap();
    let through_proxy: service_kit::Secret<String> =
        format!("redis://127.0.0.1:{}", proxy.port).parse().unwrap();
    let db = TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |c| {
        c.redis_url = Some(through_proxy.clone());
        c.token_rate_limit = 1_000_000;
        c.source_rate_limit = 1_000_000;
    })
    .await
    .unwrap();
    // Under FAPI 2.0 every token request carries a proof: nothing is served without the store.
    let fapi2 = AuthServer::start(&db.url, |c| {
        c.redis_url = Some(through_proxy.clone());
        c.fapi2 = true;
        c.dpop_nonce = Some(false);
    })
    .await
    .unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    let key = ProofKey::generate();
    let endpoint = format!("{}/oauth/token", auth.config.issuer());
    let token_status = |proof: Option<String>| {
        let (base, id, secret) = (auth.base_url(), id.clone(), secret.clone());
        async move {
            let mut request = reqwest::Client::new()
                .post(format!("{base}/oauth/token"))
                .json(&serde_json::json!({
                    "grant_type": "client_credentials",
                    "client_id": id,
                    "client_secret": secret,
                    "scope": INTAKE,
                }));
            if let Some(proof) = proof {
                request = request.header("dpop", proof);
            }
            request.send().await.unwrap().status().as_u16()
        }
    };
    let proof = || Some(key.proof("POST", &endpoint, None, 0));
    assert_eq!(token_status(proof()).await, 200);
    assert!(replay_readiness_becomes(&auth, 200, "ready", "ok").await);
    assert!(replay_readiness_becomes(&fapi2, 200, "ready", "ok").await);

    // Away: a proof that cannot be recorded is refused; what needs no proof is served, and
    // both servers say the store fails, whether or not a request found out.
    proxy.cut();
    assert_eq!(token_status(proof()).await, 503);
    assert_eq!(token_status(None).await, 200);
    assert!(
        replay_readiness_becomes(&auth, 200, "degraded", "failing").await,
        "{:?}",
        readyz_of(&auth).await
    );
    assert!(
        replay_readiness_becomes(&fapi2, 503, "not_ready", "failing").await,
        "{:?}",
        readyz_of(&fapi2).await
    );
    let metrics = crate::helpers::metrics_text(&auth.base_url()).await;
    assert!(
        metrics.contains("replay_store_available{service=\"auth-server\",store=\"redis\"}"),
        "no gauge of the store's state"
    );

    // Back: proofs are taken again and both servers are ready, with no restart.
    proxy.restore();
    let taken_again = eventually(Duration::from_secs(30), || async {
        (token_status(proof()).await == 200).then_some(())
    })
    .await;
    assert!(taken_again.is_some(), "proofs never taken again");
    assert!(replay_readiness_becomes(&auth, 200, "ready", "ok").await);
    assert!(replay_readiness_becomes(&fapi2, 200, "ready", "ok").await);
}

on_both_backends!(redis_away_refuses_proofs_says_so_and_takes_them_again_once_back);
