//! The webhook address guard from the outside: `webhook set` refuses every address that is
//! not public, an endpoint stored at such an address is never connected to, and proxy
//! variables cannot carry events past the guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use intake_api::cli::{Settings, WebhookCommand};
use intake_api::config::AllowInsecure;
use serde_json::Value;
use service_kit::command_line::Database;
use test_support::{on_both_backends, on_sqlite};

use crate::cli::intake_api;
use crate::helpers::{
    AuthServer, Backend, ENQUIRY, INTAKE, TestApp, TestDb, eventually, fresh_email, post_raw,
    purchase_enquiry, unused_port,
};
use crate::webhooks::Receiver;

/// The addresses the security review got past `webhook set`, and more of each kind.
const REFUSED: [&str; 14] = [
    "https://[::127.0.0.1]/hook",
    "https://[::ffff:0:7f00:1]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[64:ff9b::a9fe:a9fe]/hook",
    "https://[64:ff9b:1::a00:1]/hook",
    "https://[2002:7f00:1::1]/hook",
    "https://[2001:0:7f00:1::]/hook",
    "https://[fec0::1]/hook",
    "https://[100::1]/hook",
    "https://[2001:2::1]/hook",
    "https://198.18.0.1/hook",
    "https://240.0.0.1/hook",
    "https://192.0.0.1/hook",
    "https://2130706433/hook",
];

/// A TCP listener on the loopback that counts the connections it is offered and closes
/// each at once: it stands for whatever a webhook must not reach.
struct Listener {
    port: u16,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(socket);
            }
        });
        Self {
            port,
            connections,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Stores `url` as `client_id`'s endpoint past the guard, as `webhook set` did before it
/// knew the address was not public (or with the escape hatch on by mistake).
async fn store_unchecked(database_url: &str, client_id: &str, url: String) {
    let settings = Settings {
        database: Database::new(database_url),
        actor: None,
        webhook_insecure: AllowInsecure { allow: true },
        key_encryption_key: Some(
            test_support::TEST_INTAKE_KEY_ENCRYPTION_KEY
                .parse()
                .unwrap(),
        ),
    };
    let command = WebhookCommand::Set {
        client_id: client_id.to_owned(),
        url,
        show_secret: false,
    };
    intake_api::cli::webhook(settings, command)
        .await
        .expect("stored");
}

async fn webhook_set_refuses_addresses_that_reach_the_host_or_internal_networks(backend: Backend) {
    let db = TestDb::intake(backend).await;
    let url = db.url.as_str();
    for target in REFUSED {
        let refused = intake_api(url, &["webhook", "set", "partner-1", target]);
        assert_eq!(
            refused.code,
            Some(1),
            "{target} accepted: {}",
            refused.stdout
        );
        assert_eq!(refused.stdout, "", "{target}");
        assert!(
            refused.stderr.contains("is not a public address"),
            "{target}: {}",
            refused.stderr
        );
    }
    let listed = intake_api(url, &["webhook", "list"]).json();
    assert_eq!(listed, Value::Array(Vec::new()));
}

async fn an_endpoint_stored_at_a_refused_literal_is_never_connected_to(backend: Backend) {
    // The guard on, as in production.
    let app = TestApp::spawn_with(backend, |c| {
        c.webhooks.poll = Duration::from_millis(50);
        c.webhooks.backoff = Duration::from_millis(100);
    })
    .await;
    let listener = Listener::start().await;
    let (other_id, other_secret) = app.auth.create_client(INTAKE).await;
    let other = format!(
        "Bearer {}",
        app.auth.token(&other_id, &other_secret, INTAKE).await
    );
    let port = listener.port;
    let endpoints = [
        (
            app.client_id.clone(),
            format!("https://127.0.0.1:{port}/hook"),
        ),
        (other_id, format!("https://[::ffff:127.0.0.1]:{port}/hook")),
    ];
    for (client_id, url) in &endpoints {
        store_unchecked(&app.intake_db.url, client_id, url.clone()).await;
    }
    app.submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    let theirs = post_raw(
        &app.http,
        &app.url(ENQUIRY),
        Some(&other),
        purchase_enquiry("brand_b", &fresh_email())
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(theirs.status, 201, "{:?}", theirs.body);

    for (client_id, url) in &endpoints {
        let deliveries = || async {
            intake_api::cli::webhook(
                &app.intake.config,
                WebhookCommand::Deliveries {
                    client_id: client_id.clone(),
                    failed: false,
                    limit: 10,
                },
            )
            .await
            .expect("deliveries")
        };
        let tried = eventually(Duration::from_secs(20), || async {
            let all = deliveries().await;
            let first = all.as_array()?.first()?.clone();
            first["last_error"].is_string().then_some(first)
        })
        .await
        .unwrap_or_else(|| panic!("{url} was never tried"));
        assert_eq!(listener.connections(), 0, "{url} was connected to");
        assert_eq!(tried["state"], "failed", "{url}: {tried}");
        let error = tried["last_error"].as_str().unwrap();
        assert!(error.contains("is not a public address"), "{url}: {error}");
    }
    // The endpoints say why they stopped, so the operator sets them right.
    let list =
        intake_api::cli::webhook(&app.intake.config, WebhookCommand::List { client_id: None })
            .await
            .expect("list");
    for endpoint in list.as_array().unwrap() {
        let reason = endpoint["disabled_reason"].as_str().unwrap_or_default();
        assert!(reason.contains("is not a public address"), "{endpoint}");
    }
    assert_eq!(listener.connections(), 0);
}

on_sqlite!(webhook_set_refuses_addresses_that_reach_the_host_or_internal_networks);
on_both_backends!(an_endpoint_stored_at_a_refused_literal_is_never_connected_to);

/// The variables a proxy is taken from, in both spellings.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// A real `intake-api serve` process, started with every proxy variable pointing at a
/// listener: events reach the receiver directly and the proxy is offered nothing. (Through
/// a proxy, the proxy resolves the name and the address guard is never asked.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_ignore_proxy_variables() {
    let auth_db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&auth_db.url, |_| {})
        .await
        .expect("auth-server starts");
    let (client_id, secret) = auth.create_client(INTAKE).await;
    let token = auth.token(&client_id, &secret, INTAKE).await;
    let intake_db = TestDb::intake(Backend::Sqlite).await;
    let proxy = Listener::start().await;
    let receiver = Receiver::start().await;
    store_unchecked(&intake_db.url, &client_id, receiver.url.clone()).await;

    // The auth-server is reached by a name exempt from the proxy, so the webhook client is
    // the only one the proxy could be offered.
    let keys = auth.base_url().replace("127.0.0.1", "localhost");
    let (reader, reader_secret) = auth.resource_client().await;
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let port = unused_port();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_intake-api"));
    command
        .arg("serve")
        .env("INTAKE_BIND", format!("127.0.0.1:{port}"))
        .env("INTAKE_DATABASE_URL", &intake_db.url)
        .env("INTAKE_JWKS_URL", format!("{keys}/.well-known/jwks.json"))
        .env(
            "INTAKE_KEY_ENCRYPTION_KEY",
            test_support::TEST_INTAKE_KEY_ENCRYPTION_KEY,
        )
        .env("INTAKE_REVOCATIONS_CLIENT_ID", &reader)
        .env("INTAKE_REVOCATIONS_CLIENT_SECRET", &reader_secret)
        .env("INTAKE_WEBHOOK_ALLOW_INSECURE", "true")
        .env("INTAKE_WEBHOOK_POLL_MS", "50")
        .env("NO_PROXY", "localhost")
        .env_remove("no_proxy")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    for variable in PROXY_VARIABLES {
        command.env(variable, &proxy_url);
    }
    let _child = command.spawn().expect("intake-api starts");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let ready = eventually(Duration::from_secs(20), || async {
        let r = http.get(format!("{base}/readyz")).send().await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    assert!(ready.is_some(), "intake-api did not become ready");

    let body = purchase_enquiry("brand_a", &fresh_email()).to_string();
    let bearer = format!("Bearer {token}");
    let reply = post_raw(
        &http,
        &format!("{base}{ENQUIRY}"),
        Some(&bearer),
        body.into(),
    )
    .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    receiver.wait_for(1).await;
    assert_eq!(proxy.connections(), 0, "the proxy was used");
}
