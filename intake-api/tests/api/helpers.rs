//! Starting a real auth-server and intake-api on fresh databases, talking to them over HTTP,
//! building enquiries, and forging tokens and key servers for the attacks the verifier must stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use intake_api::cli::CaseCommand;
use intake_api::config::Config;
pub use intake_api::examples::{address, purchase_enquiry, remortgage_enquiry, with};
use poem::web::Data;
use poem::{EndpointExt, IntoResponse, Response, Route, get, handler};
use sea_orm::{
    ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, Statement, TransactionTrait,
};
use serde_json::{Value, json};
pub use test_support::{AuthServer, Backend, IntakeServer, Running, TestDb, eventually, kid_of};
use tokio::task::JoinSet;

/// The scope the intake endpoints require.
pub const INTAKE: &str = "enquiry:case:intake:create";
/// The scope of referrals, which does not open the enquiry endpoints.
pub const REFERRAL: &str = "enquiry:referral:create";
/// The enquiry endpoint.
pub const ENQUIRY: &str = "/partners/external/intake";
/// The attach endpoint.
pub const ATTACH: &str = "/partners/external/intake/attach";
/// The scope brands' customer portals redeem links with.
pub const PORTAL: &str = "portal:redirect:redeem";
/// The portal's redeem endpoint.
pub const REDEEM: &str = "/portal/redirect-tokens/redeem";
/// The referral endpoint.
pub const REFERRALS: &str = "/partners/external/referrals";
/// Brand A's portal, as the test apps configure it.
pub const PORTAL_A: &str = "https://portal.brand-a.example/continue";
/// A well-formed product identifier.
pub const PRODUCT: &str = intake_api::examples::PRODUCT_UUID;

/// Status, body and challenge of one HTTP answer.
#[derive(Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body as JSON (a JSON string holding the raw text when it is not JSON).
    pub body: Value,
    /// The `WWW-Authenticate` header, if any.
    pub challenge: Option<String>,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
    /// The `Idempotent-Replayed` header, if any.
    pub replayed: Option<String>,
    /// The `Date` header, if any.
    pub date: Option<String>,
    /// The `Cache-Control` header, if any.
    pub cache_control: Option<String>,
}

impl Reply {
    /// Reads a response to the end.
    pub async fn read(resp: reqwest::Response) -> Self {
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .map(|v| v.to_str().expect("ASCII header").to_owned())
        };
        let (challenge, retry_after) = (header("www-authenticate"), header("retry-after"));
        let (replayed, date) = (header("idempotent-replayed"), header("date"));
        let cache_control = header("cache-control");
        let text = resp.text().await.expect("response body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Self {
            status,
            body,
            challenge,
            retry_after,
            replayed,
            date,
            cache_control,
        }
    }
}

/// The auth-server and the intake-api, each on a fresh database, with a partner holding the
/// intake scope and a token for it.
pub struct TestApp {
    /// The auth-server.
    pub auth: AuthServer,
    /// The intake-api.
    pub intake: IntakeServer,
    /// The auth-server's database (kept alive for the test).
    pub auth_db: TestDb,
    /// The intake-api's database (kept alive for the test).
    pub intake_db: TestDb,
    /// The partner's client id.
    pub client_id: String,
    /// The partner's client secret.
    pub client_secret: String,
    /// A token with the intake scope.
    pub token: String,
    /// An HTTP client.
    pub http: reqwest::Client,
    /// The counting relay the intake-api fetches the JWKS through, when started with one.
    pub relay: Option<KeyServer>,
}

impl TestApp {
    /// Starts both services with the default configuration.
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, |_| {}).await
    }

    /// Starts both services, with `configure` applied to the intake-api's configuration.
    pub async fn spawn_with(backend: Backend, configure: impl FnOnce(&mut Config)) -> Self {
        Self::build(backend, false, |_| {}, configure).await
    }

    /// Starts both services, the intake-api fetching the JWKS through a counting relay.
    pub async fn spawn_with_relay(backend: Backend) -> Self {
        Self::build(backend, true, |_| {}, |_| {}).await
    }

    /// Starts both services with `configure_auth` applied to the auth-server's configuration
    /// and `configure` to the intake-api's.
    pub async fn spawn_configured(
        backend: Backend,
        configure_auth: impl FnOnce(&mut auth_server::config::Config),
        configure: impl FnOnce(&mut Config),
    ) -> Self {
        Self::build(backend, false, configure_auth, configure).await
    }

    async fn build(
        backend: Backend,
        relay: bool,
        configure_auth: impl FnOnce(&mut auth_server::config::Config),
        configure: impl FnOnce(&mut Config),
    ) -> Self {
        let auth_db = TestDb::auth(backend).await;
        let auth = AuthServer::start(&auth_db.url, configure_auth)
            .await
            .expect("auth-server starts");
        let relay = if relay {
            let upstream = format!("{}/.well-known/jwks.json", auth.base_url());
            Some(KeyServer::start(KeySource::Upstream(upstream)).await)
        } else {
            None
        };
        let relay_url = relay.as_ref().map(|r| r.url.clone());
        let intake_db = TestDb::intake(backend).await;
        let intake = IntakeServer::start(&intake_db.url, &auth, |c| {
            if let Some(url) = relay_url {
                c.auth_server.jwks_url = url.parse().expect("a URL");
                // Only fetches a test causes reach the relay: the periodic poll waits.
                c.auth_server.keys_poll = Duration::from_millis(60_000);
                c.auth_server.revocations_url = Some(
                    format!("{}/revocations", auth.base_url())
                        .parse()
                        .expect("a URL"),
                );
            }
            configure(c);
        })
        .await
        .expect("intake-api starts");
        assert!(intake.wait_ready().await, "intake-api never became ready");
        let (client_id, client_secret) = auth.create_client(&format!("{INTAKE} {REFERRAL}")).await;
        let token = auth.token(&client_id, &client_secret, INTAKE).await;
        Self {
            auth,
            intake,
            auth_db,
            intake_db,
            client_id,
            client_secret,
            token,
            http: reqwest::Client::new(),
            relay,
        }
    }

    /// Another intake-api on the same database and auth-server, `configure` applied.
    pub async fn second_intake(&self, configure: impl FnOnce(&mut Config)) -> IntakeServer {
        let intake = IntakeServer::start(&self.intake_db.url, &self.auth, configure)
            .await
            .expect("second intake-api starts");
        assert!(intake.wait_ready().await, "second intake-api never ready");
        intake
    }

    /// `Bearer <token>` for a new customer portal of `brand_a`, holding only the redeem scope.
    pub async fn portal_bearer(&self) -> String {
        self.portal_bearer_of("brand_a").await
    }

    /// `Bearer <token>` for a new customer-portal client bound to `brands` (comma-separated).
    pub async fn portal_bearer_of(&self, brands: &str) -> String {
        let (id, secret) = self.auth.create_portal(brands).await;
        format!("Bearer {}", self.auth.token(&id, &secret, PORTAL).await)
    }

    /// Makes portal client `id` bound to no brand, as every portal client registered by
    /// 0.1.0 is after the upgrade, and waits until the auth-server has seen the change.
    pub async fn unbind_portal(&self, id: &str) {
        let conn = Database::connect(self.auth_db.url.as_str())
            .await
            .expect("database");
        for sql in [
            format!("UPDATE clients SET brands = NULL WHERE client_id = '{id}'"),
            "UPDATE revision SET value = value + 1 WHERE id = 1".to_owned(),
        ] {
            conn.execute_raw(Statement::from_string(conn.get_database_backend(), sql))
                .await
                .expect("client unbound");
        }
        let _ = conn.close().await;
        tokio::time::sleep(auth_server::registry::PROPAGATION).await;
    }

    /// Redeems a redirect link's `token` with `bearer` as the `Authorization` header.
    pub async fn redeem(&self, bearer: &str, token: &str) -> Reply {
        self.post(REDEEM, Some(bearer), &json!({ "token": token }))
            .await
    }

    /// `Bearer <token>` for this app's token.
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// The intake-api URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.intake.base_url())
    }

    /// POSTs raw bytes as JSON to the intake-api with the given `Authorization` header.
    pub async fn post_raw(&self, path: &str, authorization: Option<&str>, body: Vec<u8>) -> Reply {
        post_raw(&self.http, &self.url(path), authorization, body).await
    }

    /// POSTs a JSON body to the intake-api with the given `Authorization` header.
    pub async fn post(&self, path: &str, authorization: Option<&str>, body: &Value) -> Reply {
        self.post_raw(path, authorization, body.to_string().into_bytes())
            .await
    }

    /// POSTs a JSON body with `bearer` as the `Authorization` header and, when given, an
    /// `Idempotency-Key`.
    pub async fn post_keyed(
        &self,
        path: &str,
        bearer: &str,
        body: &Value,
        key: Option<&str>,
    ) -> Reply {
        let mut request = self
            .http
            .post(self.url(path))
            .header("content-type", "application/json")
            .header("authorization", bearer)
            .body(body.to_string());
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        Reply::read(request.send().await.expect("request sent")).await
    }

    /// Submits an enquiry with this app's token.
    pub async fn enquiry(&self, body: &Value) -> Reply {
        self.post(ENQUIRY, Some(&self.bearer()), body).await
    }

    /// Submits an enquiry to another intake-api instance with this app's token.
    pub async fn enquiry_on(&self, intake: &IntakeServer, body: &Value) -> Reply {
        let url = format!("{}{ENQUIRY}", intake.base_url());
        let body = body.to_string().into_bytes();
        post_raw(&self.http, &url, Some(&self.bearer()), body).await
    }

    /// Attaches a product with this app's token.
    pub async fn attach(&self, email: &str, product: &str) -> Reply {
        let body = json!({"email": email, "product_uuid": product});
        self.post(ATTACH, Some(&self.bearer()), &body).await
    }

    /// Reads case `reference` back with `bearer` as the `Authorization` header.
    pub async fn case_status(&self, reference: &str, bearer: Option<&str>) -> Reply {
        let mut request = self
            .http
            .get(self.url(&format!("/partners/external/cases/{reference}")));
        if let Some(bearer) = bearer {
            request = request.header("Authorization", bearer);
        }
        Reply::read(request.send().await.expect("the intake-api answers")).await
    }

    /// Submits an enquiry that must be accepted; returns its reference.
    pub async fn submit(&self, body: &Value) -> String {
        let reply = self.enquiry(body).await;
        assert!(
            reply.status == 201 || reply.status == 200,
            "enquiry refused: {reply:?}"
        );
        reply.body["reference"]
            .as_str()
            .expect("reference")
            .to_owned()
    }

    /// What `intake-api case show REFERENCE` prints.
    pub async fn case_show(&self, reference: &str) -> Value {
        case_show(&self.intake.config, reference).await
    }

    /// Runs `sql` on the intake-api's database; returns `column` of every row as text.
    pub async fn intake_column(&self, sql: &str, column: &str) -> Vec<String> {
        query_column(&self.intake_db.url, sql, column).await
    }

    /// The auth-server's current signing key, able to sign whatever a test needs.
    pub async fn real_signer(&self) -> Signer {
        Signer::from_auth_db(&self.auth, &self.auth_db.url, &kid_of(&self.token)).await
    }

    /// Claims of a valid access token for this app's partner, issued now.
    pub fn claims(&self) -> Value {
        let now = chrono::Utc::now().timestamp();
        json!({
            "iss": self.auth.config.issuer(),
            "sub": self.client_id,
            "client_id": self.client_id,
            "aud": self.auth.config.audience,
            "scope": INTAKE,
            "iat": now,
            "nbf": now,
            "exp": now + 900,
            "jti": uuid::Uuid::new_v4().simple().to_string(),
        })
    }
}

impl TestApp {
    /// `n` POSTs of `body` to `path` with the partner's token, all sent at once.
    pub fn all_at_once(&self, path: &str, body: &str, n: usize) -> JoinSet<Reply> {
        let mut requests = JoinSet::new();
        for _ in 0..n {
            let (http, url, bearer, body) = (
                self.http.clone(),
                self.url(path),
                self.bearer(),
                body.to_owned(),
            );
            requests.spawn(
                async move { post_raw(&http, &url, Some(&bearer), body.into_bytes()).await },
            );
        }
        requests
    }
}

/// The statuses of requests sent with [`TestApp::all_at_once`], once all have answered.
pub async fn statuses(requests: JoinSet<Reply>) -> Vec<u16> {
    requests.join_all().await.iter().map(|r| r.status).collect()
}

/// A case's row held locked by a transaction of the test's own (PostgreSQL), as a slow
/// writer would hold it, to see how many of the service's sessions queue behind it.
pub struct CaseRowLock {
    db: DatabaseConnection,
    txn: DatabaseTransaction,
}

impl CaseRowLock {
    /// Locks the row of the case with `reference`.
    pub async fn take(app: &TestApp, reference: &str) -> Self {
        let db = Database::connect(app.intake_db.url.as_str())
            .await
            .expect("database");
        let txn = db.begin().await.expect("transaction");
        let sql = format!("SELECT id FROM cases WHERE reference = '{reference}' FOR UPDATE");
        txn.execute_raw(Statement::from_string(db.get_database_backend(), sql))
            .await
            .expect("row locked");
        Self { db, txn }
    }

    /// Sessions of this database waiting for a lock (a row lock is waited for as its
    /// holder's transaction id, which names no database).
    pub async fn waiters(&self) -> i64 {
        let sql = "SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                   WHERE NOT l.granted AND a.datname = current_database()";
        let row = self
            .db
            .query_one_raw(Statement::from_string(self.db.get_database_backend(), sql))
            .await
            .expect("pg_locks");
        row.expect("one row")
            .try_get::<i64>("", "n")
            .expect("count")
    }

    /// The waiters once there is at least one (or 0 after two seconds without).
    pub async fn first_waiters(&self) -> i64 {
        eventually(std::time::Duration::from_secs(2), || async {
            let n = self.waiters().await;
            (n > 0).then_some(n)
        })
        .await
        .unwrap_or(0)
    }

    /// Lets the queue through.
    pub async fn release(self) {
        self.txn.commit().await.expect("lock released");
    }
}

/// The token of a redirect link, after checking the link is `portal` with only a `token`.
pub fn token_of(body: &Value, portal: &str) -> String {
    let keys: Vec<&String> = body.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["redirect"], "{body}");
    let url = reqwest::Url::parse(body["redirect"].as_str().expect("redirect is a string"))
        .expect("redirect is a URL");
    let mut bare = url.clone();
    bare.set_query(None);
    assert_eq!(bare.as_str(), portal);
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    assert_eq!(pairs.len(), 1, "{url}");
    assert_eq!(pairs[0].0, "token", "{url}");
    let token = pairs[0].1.clone();
    assert!(
        token.len() >= 32
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "token {token:?} is not a long base64url string"
    );
    token
}

/// POSTs raw bytes as `application/json` to `url` with the given `Authorization` header.
pub async fn post_raw(
    http: &reqwest::Client,
    url: &str,
    authorization: Option<&str>,
    body: Vec<u8>,
) -> Reply {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    Reply::read(request.send().await.expect("request sent")).await
}

/// What `intake-api case show REFERENCE` prints, run in-process with `config`.
pub async fn case_show(config: &Config, reference: &str) -> Value {
    intake_api::cli::case(
        config,
        CaseCommand::Show {
            reference: reference.to_owned(),
        },
    )
    .await
    .expect("case show")
}

/// The kinds of a case's events, oldest first, from `case show` output.
pub fn event_kinds(case: &Value) -> Vec<String> {
    case["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind").to_owned())
        .collect()
}

/// Runs `sql` on the database at `url`; returns `column` of every row as text.
pub async fn query_column(url: &str, sql: &str, column: &str) -> Vec<String> {
    let conn = Database::connect(url).await.expect("database");
    let rows = conn
        .query_all_raw(Statement::from_string(conn.get_database_backend(), sql))
        .await
        .expect("query");
    let values = rows
        .iter()
        .map(|row| row.try_get::<String>("", column).expect("text column"))
        .collect();
    let _ = conn.close().await;
    values
}

/// A scrape of the `/metrics` of the service at `base_url`.
pub async fn metrics_text(http: &reqwest::Client, base_url: &str) -> String {
    http.get(format!("{base_url}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text")
}

/// The sum of the samples of metric `name` that carry a label with value `label_value`, from
/// a scrape of the `/metrics` of the service at `base_url`.
pub async fn metric(http: &reqwest::Client, base_url: &str, name: &str, label_value: &str) -> f64 {
    let text = metrics_text(http, base_url).await;
    let wanted = format!("\"{label_value}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&wanted))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The claims of a JWT, unverified.
pub fn claims_of(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON")
}

/// The intake-api's store on `app`'s database, for what no endpoint or command reaches.
pub async fn store_of(app: &TestApp) -> intake_api::store::CaseStore {
    let db = Database::connect(app.intake_db.url.as_str())
        .await
        .expect("database");
    intake_api::store::CaseStore::new(db, 4, app.intake.config.timing())
}

/// `{"message": text}`.
pub fn message(text: &str) -> Value {
    json!({ "message": text })
}

/// The 422 body listing `errors`.
pub fn invalid(errors: Value) -> Value {
    json!({"message": "The given data was invalid.", "errors": errors})
}

/// A fresh e-mail address, so tests never share a case by accident.
pub fn fresh_email() -> String {
    format!("applicant-{}@example.com", uuid::Uuid::new_v4().simple())
}

/// base64url without padding, as JWS uses it.
pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A compact JWS from its three parts.
pub fn compact(header: &Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(signature)
    )
}

/// An RSA key that signs JWS with any header: the auth-server's own (read from its database)
/// or a foreign one.
pub struct Signer {
    /// The kid the key is published under, or its thumbprint for a foreign key.
    pub kid: String,
    pair: KeyPair,
}

impl Signer {
    /// The auth-server's key `kid`, read from `signing_keys` and decrypted with the
    /// auth-server's key-encryption key.
    pub async fn from_auth_db(auth: &AuthServer, auth_db_url: &str, kid: &str) -> Self {
        let sql = format!("SELECT private_key FROM signing_keys WHERE kid = '{kid}'");
        let stored = query_column(auth_db_url, &sql, "private_key").await;
        let stored = stored.first().expect("the signing key is stored");
        let kek = auth.config.kek().expect("the test key-encryption key");
        let pkcs8 = auth_server::keys::open_private_key(&kek, kid, stored).expect("the key opens");
        Self {
            kid: kid.to_owned(),
            pair: KeyPair::from_pkcs8(&pkcs8).expect("PKCS#8 key"),
        }
    }

    /// A new RSA-2048 key that the auth-server has never seen, under its thumbprint.
    pub fn foreign() -> Self {
        let pair = KeyPair::generate(KeySize::Rsa2048).expect("RSA key generation");
        let mut signer = Self {
            kid: String::new(),
            pair,
        };
        let jwk: auth_server::keys::Jwk =
            serde_json::from_value(signer.jwk()).expect("a JWK the auth-server reads");
        signer.kid = jwk.thumbprint();
        signer
    }

    /// The public key as a JWK with this signer's kid.
    pub fn jwk(&self) -> Value {
        let public = self.pair.public_key();
        json!({
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.kid,
            "n": b64(public.modulus().big_endian_without_leading_zero()),
            "e": b64(public.exponent().big_endian_without_leading_zero()),
        })
    }

    /// The public key's DER bytes (PKCS#1 RSAPublicKey).
    pub fn public_key_der(&self) -> Vec<u8> {
        self.pair.public_key().as_ref().to_vec()
    }

    /// The header the auth-server puts on its tokens, with this signer's kid.
    pub fn header(&self) -> Value {
        json!({"alg": "RS256", "typ": "at+jwt", "kid": self.kid})
    }

    /// Signs `header` and `claims` with RS256 whatever the header says.
    pub fn sign(&self, header: &Value, claims: &Value) -> String {
        let signing_input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let mut signature = vec![0u8; self.pair.public_modulus_len()];
        self.pair
            .sign(
                &RSA_PKCS1_SHA256,
                &aws_lc_rs::rand::SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .expect("RSA signature");
        format!("{signing_input}.{}", b64(&signature))
    }
}

/// The port of a listener that was bound and closed: nothing answers there until a test
/// starts a server on it.
pub fn unused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// What a [`KeyServer`] answers with.
#[derive(Clone)]
pub enum KeySource {
    /// Forwards every request to this JWKS URL and relays status, `Cache-Control` and body.
    Upstream(String),
    /// Always answers this JWKS.
    Fixed(Value),
}

struct KeyServerState {
    source: KeySource,
    hits: AtomicUsize,
    http: reqwest::Client,
}

#[handler]
async fn serve_jwks(state: Data<&Arc<KeyServerState>>) -> Response {
    state.hits.fetch_add(1, Ordering::SeqCst);
    match &state.source {
        KeySource::Fixed(jwks) => Response::builder()
            .header("cache-control", "public, max-age=300")
            .content_type("application/json")
            .body(jwks.to_string()),
        KeySource::Upstream(url) => match state.http.get(url).send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let cache_control = resp
                    .headers()
                    .get("cache-control")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let body = resp.bytes().await.unwrap_or_default();
                Response::builder()
                    .status(poem::http::StatusCode::from_u16(status).expect("status"))
                    .header("cache-control", cache_control)
                    .content_type("application/json")
                    .body(body.to_vec())
            }
            Err(_) => poem::http::StatusCode::BAD_GATEWAY.into_response(),
        },
    }
}

/// A JWKS endpoint started by a test, counting the requests it receives: a relay in front of
/// the auth-server, or a key server of an attacker's.
pub struct KeyServer {
    /// Its JWKS URL.
    pub url: String,
    state: Arc<KeyServerState>,
    _server: Running,
}

impl KeyServer {
    /// Starts one on port 0.
    pub async fn start(source: KeySource) -> Self {
        let state = Arc::new(KeyServerState {
            source,
            hits: AtomicUsize::new(0),
            http: reqwest::Client::new(),
        });
        let app = Route::new()
            .at("/.well-known/jwks.json", get(serve_jwks))
            .data(state.clone());
        let server = Running::serve_locally(app).await;
        let port = server.port;
        Self {
            url: format!("http://127.0.0.1:{port}/.well-known/jwks.json"),
            state,
            _server: server,
        }
    }

    /// How many requests it has received.
    pub fn hits(&self) -> usize {
        self.state.hits.load(Ordering::SeqCst)
    }
}

/// A referral of `email` to brand A, with every field.
pub fn referral(email: &str) -> Value {
    json!({
        "brand": "brand_a",
        "first_name": "Jane",
        "last_name": "Doe",
        "email": email,
        "mobile_number": "+44 7700 900123",
        "contact_consent": true,
        "partner_reference": "CRM-1",
        "note": "Prefers a call after 6pm.",
    })
}
