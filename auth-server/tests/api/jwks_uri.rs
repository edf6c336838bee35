//! private_key_jwt clients registered by JWKS URL, over HTTP: the auth-server fetches the
//! partner's keys from a stand-in partner server on 127.0.0.1 (with the switch that allows
//! http and loopback on), caches them by `max-age`, fetches again for a new `kid`, and keeps
//! the last good keys when the partner's server is down.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use auth_server::client_jwks::FetchPolicy;
use auth_server::commands::ClientCommand;
use auth_server::store::clients::AuthMethod;
use serde_json::{Value, json};
use test_support::{Running, on_both_backends};

use crate::helpers::{AuthServer, Backend, INTAKE, TestDb, eventually, metrics_text, sample};
use crate::private_key_jwt::{
    JwksFile, PartnerKey, claims, invalid_client, jwks_of, refused, register, token_with,
};

/// What the stand-in partner serves, and how often it was asked.
struct Served {
    body: String,
    cache_control: Option<String>,
    hits: usize,
}

/// A partner's server publishing its JWKS; every path answers it.
struct Partner {
    server: Option<Running>,
    served: Arc<Mutex<Served>>,
    url: String,
}

impl Partner {
    async fn start(keys: &[&PartnerKey]) -> Self {
        let served = Arc::new(Mutex::new(Served {
            body: jwks_of(keys).to_string(),
            cache_control: None,
            hits: 0,
        }));
        let shared = served.clone();
        let app = poem::endpoint::make_sync(move |_| {
            let mut s = shared.lock().unwrap();
            s.hits += 1;
            let mut resp = poem::Response::builder().content_type("application/json");
            if let Some(cc) = &s.cache_control {
                resp = resp.header("cache-control", cc.clone());
            }
            resp.body(s.body.clone())
        });
        let server = Running::serve_locally(app).await;
        let url = format!("{}/jwks.json", server.base_url());
        Self {
            server: Some(server),
            served,
            url,
        }
    }

    fn publish(&self, keys: &[&PartnerKey]) {
        self.serve(jwks_of(keys).to_string());
    }

    fn serve(&self, body: String) {
        self.served.lock().unwrap().body = body;
    }

    fn cache_control(&self, value: &str) {
        self.served.lock().unwrap().cache_control = Some(value.to_owned());
    }

    fn hits(&self) -> usize {
        self.served.lock().unwrap().hits
    }

    async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }
}

/// An auth-server that may fetch from loopback over http, fetching as `policy` says.
async fn server(db: &TestDb, policy: FetchPolicy) -> AuthServer {
    AuthServer::start(&db.url, |c| {
        c.token_rate_limit = 1_000_000;
        c.source_rate_limit = 1_000_000;
        c.failed_auth_limit = 1_000_000;
        c.client_jwks_allow_insecure = true;
        c.client_jwks_fetch = policy;
    })
    .await
    .expect("auth-server starts")
}

/// Registers a private_key_jwt partner by JWKS URL.
async fn register_by_url(auth: &AuthServer, url: &str) -> anyhow::Result<Value> {
    auth.client_cmd(ClientCommand::Create {
        name: format!("URL partner {}", uuid::Uuid::new_v4().simple()),
        scopes: INTAKE.into(),
        brands: None,
        auth_method: AuthMethod::PrivateKeyJwt,
        jwks_file: None,
        jwks_uri: Some(url.to_owned()),
        sandbox: false,
    })
    .await
}

/// Status of a token request with an assertion `key` signs for `id`.
async fn token_status(auth: &AuthServer, key: &PartnerKey, id: &str) -> u16 {
    token_with(auth, &key.sign(&claims(auth, id))).await.0
}

/// How many of `id`'s JWKS fetches for `trigger` ended in `outcome`.
async fn fetches(auth: &AuthServer, id: &str, trigger: &str, outcome: &str) -> f64 {
    sample(
        &metrics_text(&auth.base_url()).await,
        "auth_client_jwks_fetches_total",
        &[
            ("client_id", id),
            ("trigger", trigger),
            ("outcome", outcome),
        ],
    )
}

async fn a_client_registered_by_jwks_url_gets_tokens_from_keys_fetched_once(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, FetchPolicy::default()).await;
    let key = PartnerKey::ed25519("p1");
    let partner = Partner::start(&[&key]).await;
    let created = register_by_url(&auth, &partner.url).await.unwrap();
    // Registration fetched and checked the keys, and says which it found.
    assert_eq!(partner.hits(), 1);
    assert_eq!(created["jwks_uri"], partner.url.as_str());
    assert_eq!(created["keys"][0]["kid"], "p1");
    assert!(created.get("client_secret").is_none(), "{created}");
    let id = created["client_id"].as_str().unwrap().to_owned();
    for _ in 0..3 {
        assert_eq!(token_status(&auth, &key, &id).await, 200);
    }
    // One fetch by the server, then its cache (five minutes without a max-age).
    assert_eq!(partner.hits(), 2);
    assert_eq!(fetches(&auth, &id, "first", "ok").await, 1.0);
    let shown = auth
        .client_cmd(ClientCommand::Show {
            client_id: id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(shown["auth_method"], "private_key_jwt");
    assert_eq!(shown["jwks_uri"], partner.url.as_str());
    // The registration is in the audit trail with its URL and the keys it served.
    let entries = auth
        .audit_cmd(auth_server::commands::AuditCommand::List { since: None })
        .await
        .unwrap();
    let entry = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "client.create" && e["subject"] == id.as_str())
        .expect("an audit entry");
    assert_eq!(entry["detail"]["jwks_uri"], partner.url.as_str(), "{entry}");
    assert_eq!(entry["detail"]["keys"][0]["kid"], "p1", "{entry}");
    // A key the partner never published is refused, as a forgery.
    let stranger = PartnerKey::ed25519("p1");
    let (status, body) = token_with(&auth, &stranger.sign(&claims(&auth, &id))).await;
    assert_eq!((status, body), (401, invalid_client()));
}

async fn a_new_kid_is_fetched_at_once_and_a_second_only_after_the_interval(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, FetchPolicy::default()).await;
    let (k1, k2, k3) = (
        PartnerKey::ed25519("k1"),
        PartnerKey::ed25519("k2"),
        PartnerKey::ed25519("k3"),
    );
    let partner = Partner::start(&[&k1]).await;
    let created = register_by_url(&auth, &partner.url).await.unwrap();
    let id = created["client_id"].as_str().unwrap().to_owned();
    assert_eq!(token_status(&auth, &k1, &id).await, 200);
    assert_eq!(partner.hits(), 2);
    // The partner rolls over: publishes k2 beside k1 and signs with it at once.
    partner.publish(&[&k1, &k2]);
    assert_eq!(token_status(&auth, &k2, &id).await, 200);
    assert_eq!(partner.hits(), 3);
    assert_eq!(fetches(&auth, &id, "unknown_kid", "ok").await, 1.0);
    // Another unknown kid within the interval is not fetched for: refused, unasked.
    partner.publish(&[&k1, &k2, &k3]);
    let before = refused(&auth, &id, "assertion_signature").await;
    assert_eq!(token_status(&auth, &k3, &id).await, 401);
    assert_eq!(partner.hits(), 3);
    assert_eq!(
        refused(&auth, &id, "assertion_signature").await,
        before + 1.0
    );
    // The keys already known keep working meanwhile.
    assert_eq!(token_status(&auth, &k1, &id).await, 200);
    assert_eq!(token_status(&auth, &k2, &id).await, 200);
    assert_eq!(partner.hits(), 3);
}

/// Short bounds, to see a `max-age` of seconds honoured.
fn short_cache() -> FetchPolicy {
    FetchPolicy {
        min_cache: Duration::from_secs(1),
        ..FetchPolicy::default()
    }
}

async fn a_jwks_is_fetched_again_once_its_max_age_has_passed(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, short_cache()).await;
    let key = PartnerKey::ed25519("k1");
    let partner = Partner::start(&[&key]).await;
    partner.cache_control("public, max-age=2");
    let id = register_by_url(&auth, &partner.url).await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token_status(&auth, &key, &id).await, 200);
    let fetched_at = Instant::now();
    assert_eq!(partner.hits(), 2);
    let refetched = eventually(Duration::from_secs(10), || async {
        assert_eq!(token_status(&auth, &key, &id).await, 200);
        (partner.hits() == 3).then(Instant::now)
    })
    .await
    .expect("fetched again");
    // Not before its max-age (two seconds, above the one-second least).
    assert!(
        refetched.duration_since(fetched_at) >= Duration::from_millis(1900),
        "fetched again after {:?}",
        refetched.duration_since(fetched_at)
    );
    // The fetch runs beside the requests: counted once it is done.
    let counted = eventually(Duration::from_secs(10), || async {
        (fetches(&auth, &id, "expired", "ok").await == 1.0).then_some(())
    })
    .await;
    assert!(counted.is_some(), "the fetch again was not counted");
}

async fn the_last_good_keys_serve_while_the_partners_server_is_down(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, short_cache()).await;
    let key = PartnerKey::ed25519("k1");
    let mut partner = Partner::start(&[&key]).await;
    partner.cache_control("max-age=1");
    let id = register_by_url(&auth, &partner.url).await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token_status(&auth, &key, &id).await, 200);
    partner.stop().await;
    // Once the keys are stale, each request tries the server; none fails for it.
    let tried = eventually(Duration::from_secs(10), || async {
        assert_eq!(token_status(&auth, &key, &id).await, 200);
        (fetches(&auth, &id, "expired", "error").await >= 1.0).then_some(())
    })
    .await;
    assert!(tried.is_some(), "the stale keys were never fetched again");
    assert_eq!(token_status(&auth, &key, &id).await, 200);
    // A server that answers garbage is no different.
    let garbage = Partner::start(&[]).await;
    garbage.serve("<html>maintenance</html>".into());
    let created = register_by_url(&auth, &garbage.url).await;
    let message = format!("{:#}", created.unwrap_err());
    assert!(message.contains("not JSON"), "{message}");
}

async fn a_partner_serving_garbage_after_a_good_fetch_leaves_the_good_keys(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, short_cache()).await;
    let key = PartnerKey::ed25519("k1");
    let partner = Partner::start(&[&key]).await;
    partner.cache_control("max-age=1");
    let id = register_by_url(&auth, &partner.url).await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token_status(&auth, &key, &id).await, 200);
    partner.serve(r#"{"keys": []}"#.into());
    let tried = eventually(Duration::from_secs(10), || async {
        assert_eq!(token_status(&auth, &key, &id).await, 200);
        (fetches(&auth, &id, "expired", "error").await >= 1.0).then_some(())
    })
    .await;
    assert!(tried.is_some(), "the stale keys were never fetched again");
}

async fn registration_refuses_http_and_private_addresses_without_the_switch(backend: Backend) {
    let db = TestDb::auth(backend).await;
    // The switch off, as in production.
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let key = PartnerKey::ed25519("k1");
    let partner = Partner::start(&[&key]).await;
    let port = partner
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let cases = [
        ("http", partner.url.clone(), "must be https"),
        (
            "a loopback literal",
            format!("https://127.0.0.1:{port}/jwks.json"),
            "not a public address",
        ),
        (
            "an IPv6 loopback literal",
            format!("https://[::1]:{port}/jwks.json"),
            "not a public address",
        ),
        (
            "cloud metadata",
            "https://169.254.169.254/jwks.json".to_owned(),
            "not a public address",
        ),
        (
            "a name of a loopback address",
            format!("https://localhost:{port}/jwks.json"),
            "not a public address",
        ),
        (
            "credentials in the URL",
            "https://user:pw@partner.example/jwks.json".to_owned(),
            "user name or password",
        ),
    ];
    for (rule, url, expected) in &cases {
        let message = format!("{:#}", register_by_url(&auth, url).await.unwrap_err());
        assert!(message.contains(expected), "{rule}: {message}");
        assert!(
            message.contains("AUTH_CLIENT_JWKS_ALLOW_INSECURE") || *expected != "must be https",
            "{rule}: the refusal names the switch: {message}"
        );
    }
    // set-keys checks the same way.
    let id = register(&auth, &[&key]).await;
    let set = auth
        .client_cmd(ClientCommand::SetKeys {
            client_id: id,
            jwks_file: None,
            jwks_uri: Some(format!("https://127.0.0.1:{port}/jwks.json")),
        })
        .await;
    let message = format!("{:#}", set.unwrap_err());
    assert!(message.contains("not a public address"), "{message}");
    // None of them was ever called.
    assert_eq!(partner.hits(), 0);
}

async fn an_oversize_or_unusable_jwks_is_refused_at_registration_and_at_first_fetch(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, FetchPolicy::default()).await;
    let key = PartnerKey::ed25519("k1");
    let partner = Partner::start(&[&key]).await;
    let oversize = json!({"keys": [key.jwk.clone()], "padding": "x".repeat(70 * 1024)}).to_string();
    partner.serve(oversize.clone());
    let message = format!(
        "{:#}",
        register_by_url(&auth, &partner.url).await.unwrap_err()
    );
    assert!(message.contains("larger than 65536 bytes"), "{message}");
    let mut private = key.jwk.clone();
    private["d"] = json!("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A");
    partner.serve(json!({"keys": [private]}).to_string());
    let message = format!(
        "{:#}",
        register_by_url(&auth, &partner.url).await.unwrap_err()
    );
    assert!(message.contains("private key material"), "{message}");
    assert!(!message.contains("nWGxne"), "{message}");
    // Registered while good; oversize by the server's first fetch: refused, not a 500.
    partner.publish(&[&key]);
    let id = register_by_url(&auth, &partner.url).await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    partner.serve(oversize);
    let (status, body) = token_with(&auth, &key.sign(&claims(&auth, &id))).await;
    assert_eq!((status, body), (401, invalid_client()));
    assert_eq!(refused(&auth, &id, "jwks_unavailable").await, 1.0);
    assert_eq!(fetches(&auth, &id, "first", "error").await, 1.0);
}

async fn set_keys_switches_between_inline_keys_and_a_url_either_way(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, FetchPolicy::default()).await;
    let (inline, published) = (PartnerKey::ed25519("inline"), PartnerKey::ed25519("url"));
    let file = JwksFile::of(&[&inline]);
    let id = register(&auth, &[&inline]).await;
    assert_eq!(token_status(&auth, &inline, &id).await, 200);
    let partner = Partner::start(&[&published]).await;
    let set = auth
        .client_cmd(ClientCommand::SetKeys {
            client_id: id.clone(),
            jwks_file: None,
            jwks_uri: Some(partner.url.clone()),
        })
        .await
        .unwrap();
    assert_eq!(set["jwks_uri"], partner.url.as_str(), "{set}");
    assert_eq!(set["keys"][0]["kid"], "url", "{set}");
    assert_eq!(set["previous_keys"][0]["kid"], "inline", "{set}");
    assert_eq!(token_status(&auth, &published, &id).await, 200);
    assert_eq!(token_status(&auth, &inline, &id).await, 401);
    // And back: the URL is dropped, the file's keys are the client's again.
    let set = auth
        .client_cmd(ClientCommand::SetKeys {
            client_id: id.clone(),
            jwks_file: Some(file.0.clone()),
            jwks_uri: None,
        })
        .await
        .unwrap();
    assert_eq!(set["previous_jwks_uri"], partner.url.as_str(), "{set}");
    assert!(set.get("jwks_uri").is_none(), "{set}");
    let hits = partner.hits();
    assert_eq!(token_status(&auth, &inline, &id).await, 200);
    assert_eq!(token_status(&auth, &published, &id).await, 401);
    assert_eq!(
        partner.hits(),
        hits,
        "a client with inline keys fetches nothing"
    );
    let entries = auth
        .audit_cmd(auth_server::commands::AuditCommand::List { since: None })
        .await
        .unwrap();
    let set_keys: Vec<&Value> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "client.set_keys" && e["subject"] == id.as_str())
        .collect();
    assert_eq!(set_keys.len(), 2);
    assert_eq!(set_keys[0]["detail"]["jwks_uri"], partner.url.as_str());
    assert_eq!(
        set_keys[1]["detail"]["previous_jwks_uri"],
        partner.url.as_str()
    );
}

/// A partner's server that holds its answers while stalled: how many requests it has
/// received, and the switch that lets held answers go.
struct SlowPartner {
    _server: Running,
    url: String,
    body: Arc<Mutex<String>>,
    stalled: Arc<std::sync::atomic::AtomicBool>,
    received: tokio::sync::watch::Receiver<usize>,
    release: tokio::sync::watch::Sender<bool>,
}

impl SlowPartner {
    async fn start(keys: &[&PartnerKey]) -> Self {
        let body = Arc::new(Mutex::new(jwks_of(keys).to_string()));
        let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (count, received) = tokio::sync::watch::channel(0usize);
        let (release, released) = tokio::sync::watch::channel(false);
        let count = Arc::new(count);
        let (b, st) = (body.clone(), stalled.clone());
        let app = poem::endpoint::make(move |_| {
            let (body, stalled, count) = (b.clone(), st.clone(), count.clone());
            let mut released = released.clone();
            async move {
                count.send_modify(|n| *n += 1);
                if stalled.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = released.wait_for(|go| *go).await;
                }
                let body = body.lock().unwrap().clone();
                poem::Response::builder()
                    .content_type("application/json")
                    .body(body)
            }
        });
        let server = Running::serve_locally(app).await;
        let url = format!("{}/jwks.json", server.base_url());
        Self {
            _server: server,
            url,
            body,
            stalled,
            received,
            release,
        }
    }
}

/// While the partner's server sits on a fetch for an unknown `kid`, an assertion signed by
/// a key already cached is answered, the fetch still under way; the request that named the
/// new kid gets its token once the server answers.
async fn a_stalled_jwks_fetch_never_holds_up_an_assertion_by_a_cached_key(backend: Backend) {
    let db = TestDb::auth(backend).await;
    // A fetch that would give up only long after this test: the server's stall is what the
    // test controls.
    let auth = server(
        &db,
        FetchPolicy {
            timeout: Duration::from_secs(60),
            ..FetchPolicy::default()
        },
    )
    .await;
    let (k1, k2) = (PartnerKey::ed25519("k1"), PartnerKey::ed25519("k2"));
    let partner = SlowPartner::start(&[&k1]).await;
    let id = register_by_url(&auth, &partner.url).await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token_status(&auth, &k1, &id).await, 200);
    let mut received = partner.received.clone();
    assert_eq!(
        *received.borrow_and_update(),
        2,
        "registration and the first fetch"
    );

    // The partner rolls over to k2, and its server stalls.
    *partner.body.lock().unwrap() = jwks_of(&[&k1, &k2]).to_string();
    partner
        .stalled
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let new_kid = k2.sign(&claims(&auth, &id));
    let url = format!("{}/oauth/token", auth.base_url());
    let waiting = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .form(&[
                ("grant_type", "client_credentials"),
                ("scope", INTAKE),
                ("client_assertion_type", crate::private_key_jwt::JWT_BEARER),
                ("client_assertion", new_kid.as_str()),
            ])
            .send()
            .await
            .expect("token request")
            .status()
            .as_u16()
    });
    tokio::time::timeout(Duration::from_secs(30), received.wait_for(|n| *n >= 3))
        .await
        .expect("the partner's server was asked for the new kid")
        .unwrap();

    // The server holds its answer until released: a cached key's assertion is answered now.
    let cached = tokio::time::timeout(Duration::from_secs(30), token_status(&auth, &k1, &id))
        .await
        .expect("the cached key's assertion was held up by the fetch");
    assert_eq!(cached, 200);
    assert!(!waiting.is_finished(), "the new kid's request did not wait");
    assert_eq!(fetches(&auth, &id, "unknown_kid", "ok").await, 0.0);
    assert_eq!(fetches(&auth, &id, "unknown_kid", "error").await, 0.0);
    assert_eq!(*partner.received.borrow(), 3, "one fetch, still held");

    partner.release.send(true).unwrap();
    assert_eq!(waiting.await.unwrap(), 200);
    assert_eq!(fetches(&auth, &id, "unknown_kid", "ok").await, 1.0);
    assert_eq!(*partner.received.borrow(), 3);
}

on_both_backends!(
    a_stalled_jwks_fetch_never_holds_up_an_assertion_by_a_cached_key,
    a_client_registered_by_jwks_url_gets_tokens_from_keys_fetched_once,
    a_new_kid_is_fetched_at_once_and_a_second_only_after_the_interval,
    a_jwks_is_fetched_again_once_its_max_age_has_passed,
    the_last_good_keys_serve_while_the_partners_server_is_down,
    a_partner_serving_garbage_after_a_good_fetch_leaves_the_good_keys,
    registration_refuses_http_and_private_addresses_without_the_switch,
    an_oversize_or_unusable_jwks_is_refused_at_registration_and_at_first_fetch,
    set_keys_switches_between_inline_keys_and_a_url_either_way,
);
