//! Starting a fresh auth-server per test and talking to it.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
pub use test_support::{AuthServer, Backend, TestDb, eventually, kid_of};

/// The intake scope, which test clients are given.
pub const INTAKE: &str = "enquiry:case:intake:create";

/// A server on a fresh database, with a client holding the intake scope.
pub struct TestApp {
    /// The server.
    pub auth: AuthServer,
    /// Its database (kept alive for the test).
    pub db: TestDb,
    /// A registered client's id.
    pub client_id: String,
    /// That client's secret.
    pub client_secret: String,
    /// An HTTP client.
    pub http: reqwest::Client,
}

impl TestApp {
    /// Starts the server on a fresh database and registers the client.
    pub async fn spawn(backend: Backend) -> Self {
        let db = TestDb::auth(backend).await;
        // Limits out of the way: the tests that poll would otherwise trip them under load;
        // the limits have tests of their own.
        let auth = AuthServer::start(&db.url, |c| {
            c.token_rate_limit = 1_000_000;
            c.source_rate_limit = 1_000_000;
            c.failed_auth_limit = 1_000_000;
        })
        .await
        .expect("auth-server starts");
        let (client_id, client_secret) = auth.create_client(INTAKE).await;
        Self {
            auth,
            db,
            client_id,
            client_secret,
            http: reqwest::Client::new(),
        }
    }

    /// The server's URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.auth.base_url())
    }

    /// POSTs a JSON body to the token endpoint.
    pub async fn token_json(&self, body: Value) -> reqwest::Response {
        self.http
            .post(self.url("/oauth/token"))
            .json(&body)
            .send()
            .await
            .expect("request")
    }

    /// The body of a client_secret_post request for this app's client.
    pub fn post_body(&self, scope: &str) -> Value {
        serde_json::json!({
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "scope": scope,
        })
    }

    /// Status and body of a token request with the given credentials.
    pub async fn try_token(&self, id: &str, secret: &str) -> (u16, Value) {
        let resp = self
            .token_json(serde_json::json!({
                "grant_type": "client_credentials",
                "client_id": id,
                "client_secret": secret,
                "scope": INTAKE,
            }))
            .await;
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("JSON body"))
    }

    /// The JWKS the server publishes now.
    pub async fn jwks(&self) -> Value {
        self.http
            .get(self.url("/.well-known/jwks.json"))
            .send()
            .await
            .expect("jwks")
            .json()
            .await
            .expect("jwks json")
    }

    /// The kids of the keys the server publishes now.
    pub async fn published_kids(&self) -> Vec<String> {
        self.jwks().await["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["kid"].as_str().expect("kid").to_owned())
            .collect()
    }

    /// Verifies `jwt` against the JWKS the server publishes now, the way a resource server would.
    pub async fn verify(&self, jwt: &str) -> Result<Value, String> {
        verify_with(&self.auth, &jwks_of(&self.auth).await, jwt)
    }

    /// Waits until new tokens are signed with `kid`.
    pub async fn wait_for_signing_kid(&self, kid: &str) -> bool {
        eventually(Duration::from_secs(3), || async {
            let t = self
                .auth
                .token(&self.client_id, &self.client_secret, INTAKE)
                .await;
            (kid_of(&t) == kid).then_some(())
        })
        .await
        .is_some()
    }
}

/// What `/metrics` at `base_url` shows now. The recorder is the process's, so the scrape
/// holds the series of every server this test binary runs.
pub async fn metrics_text(base_url: &str) -> String {
    reqwest::get(format!("{base_url}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text")
}

/// The label sets and values of `name`'s series in a scrape.
pub fn series(metrics: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let prefix = format!("{name}{{");
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(|rest| {
            let (labels, value) = rest.rsplit_once("} ").expect("a sample line");
            let value = value.trim().parse().expect("a number");
            (parse_labels(labels), value)
        })
        .collect()
}

/// The value of `name`'s series with exactly `labels`, in any order; 0 when absent.
pub fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    series(metrics, name)
        .into_iter()
        .find(|(labels, _)| *labels == wanted)
        .map_or(0.0, |(_, value)| value)
}

/// A sample's labels, `a="x",b="y"`, as a map; values unescaped.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert_eq!(chars.next(), Some('"'), "a quoted value in {text}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').to_owned(), value);
    }
    labels
}

/// A partner's DPoP key (P-256), making proofs as a client library would, with the `iat`
/// the test chooses.
pub struct ProofKey {
    encoding: jsonwebtoken::EncodingKey,
    jwk: Value,
}

impl ProofKey {
    /// A fresh key.
    pub fn generate() -> Self {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;

        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("a key");
        let point = pair.public_key().as_ref();
        Self {
            jwk: serde_json::json!({
                "kty": "EC",
                "crv": "P-256",
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..]),
            }),
            encoding: jsonwebtoken::EncodingKey::from_ec_der(
                pair.to_pkcs8v1().expect("pkcs8").as_ref(),
            ),
        }
    }

    /// A proof for `method` on `url` made `ahead_secs` after now (negative: before), beside
    /// `access_token` when one is sent.
    pub fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        ahead_secs: i64,
    ) -> String {
        self.proof_with_nonce(method, url, access_token, ahead_secs, None)
    }

    /// [`Self::proof`] carrying the server nonce `nonce`, when given.
    pub fn proof_with_nonce(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        ahead_secs: i64,
        nonce: Option<&str>,
    ) -> String {
        let mut extra = serde_json::json!({});
        if let Some(token) = access_token {
            extra["ath"] = serde_json::json!(shared::dpop::token_hash(token));
        }
        if let Some(nonce) = nonce {
            extra["nonce"] = serde_json::json!(nonce);
        }
        self.signed(method, url, ahead_secs, &extra)
    }

    /// [`Self::proof`] made now, with claims of its own besides (say `nbf` and `exp`).
    pub fn proof_with_claims(&self, method: &str, url: &str, extra: &Value) -> String {
        self.signed(method, url, 0, extra)
    }

    /// A proof for `method` on `url` made `ahead_secs` after now, with the claims in
    /// `extra` besides.
    fn signed(&self, method: &str, url: &str, ahead_secs: i64, extra: &Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.typ = Some(shared::dpop::PROOF_TYP.to_owned());
        header.jwk = Some(serde_json::from_value(self.jwk.clone()).expect("a JWK"));
        let mut claims = serde_json::json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "htm": method,
            "htu": url,
            "iat": chrono::Utc::now().timestamp() + ahead_secs,
        });
        for (name, value) in extra.as_object().expect("claims") {
            claims[name] = value.clone();
        }
        jsonwebtoken::encode(&header, &claims, &self.encoding).expect("a proof")
    }
}

impl TestApp {
    /// Asks for a token for `client_id` with `proof` as its `DPoP` header: status and body.
    pub async fn token_with_proof(
        &self,
        client_id: &str,
        client_secret: &str,
        scope: &str,
        proof: &str,
    ) -> (u16, Value) {
        let resp = self
            .http
            .post(self.url("/oauth/token"))
            .header("dpop", proof)
            .json(&serde_json::json!({
                "grant_type": "client_credentials",
                "client_id": client_id,
                "client_secret": client_secret,
                "scope": scope,
            }))
            .send()
            .await
            .expect("token request");
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("a JSON body"))
    }
}

/// The JWKS `server` publishes now.
pub async fn jwks_of(server: &AuthServer) -> jsonwebtoken::jwk::JwkSet {
    reqwest::get(format!("{}/.well-known/jwks.json", server.base_url()))
        .await
        .expect("jwks")
        .json()
        .await
        .expect("a JWKS")
}

/// Verifies `jwt`, a token of `server`'s, against `jwks`, the way a resource server holding
/// that JWKS would.
pub fn verify_with(
    server: &AuthServer,
    jwks: &jsonwebtoken::jwk::JwkSet,
    jwt: &str,
) -> Result<Value, String> {
    let kid = kid_of(jwt);
    let jwk = jwks
        .find(&kid)
        .ok_or_else(|| format!("kid {kid} not published"))?;
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    // The algorithm the key's JWK names, never the token's header.
    let alg: jsonwebtoken::Algorithm = jwk
        .common
        .key_algorithm
        .ok_or("the JWK names no alg")?
        .to_string()
        .parse()
        .map_err(|e: jsonwebtoken::errors::Error| e.to_string())?;
    let mut v = jsonwebtoken::Validation::new(alg);
    v.set_audience(&[server.config.audience.as_str()]);
    v.set_issuer(&[server.config.issuer()]);
    jsonwebtoken::decode::<Value>(jwt, &key, &v)
        .map(|d| d.claims)
        .map_err(|e| e.to_string())
}

/// What one run of the binary did.
pub struct Run {
    /// Its exit code.
    pub code: Option<i32>,
    /// What it printed.
    pub stdout: String,
    /// What it said on stderr.
    pub stderr: String,
}

impl Run {
    /// Stdout as JSON; null when empty or on failure.
    pub fn json(&self) -> Value {
        if self.code == Some(0) && !self.stdout.trim().is_empty() {
            serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
                panic!("stdout is not one JSON document ({e}): {}", self.stdout)
            })
        } else {
            Value::Null
        }
    }
}

/// Runs the binary on the database at `url` with `env` and no other log settings, its
/// stdout a pipe, as scripts run it.
pub fn run(url: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .args(args)
        .env("AUTH_DATABASE_URL", url)
        .env(
            "AUTH_KEY_ENCRYPTION_KEY",
            test_support::TEST_KEY_ENCRYPTION_KEY,
        )
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("auth-server runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// `auth-server serve` in a process of its own, as an operator runs it: its logs and its
/// metrics are its own, where in-process servers share the test binary's. Stopped when
/// dropped.
pub struct Served {
    child: std::process::Child,
    log: std::path::PathBuf,
    /// Where it answers.
    pub base_url: String,
}

impl Served {
    /// Serves the database at `url` (the test key-encryption key, JSON logs at the default
    /// level, any port) with `env` besides; waits until it listens.
    pub async fn start(url: &str, env: &[(&str, &str)]) -> Self {
        let log = std::env::temp_dir().join(format!("served-{}.log", uuid::Uuid::new_v4()));
        let file = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_auth-server"))
            .arg("serve")
            .env("AUTH_DATABASE_URL", url)
            .env(
                "AUTH_KEY_ENCRYPTION_KEY",
                test_support::TEST_KEY_ENCRYPTION_KEY,
            )
            .env("AUTH_BIND", "127.0.0.1:0")
            .env("LOG_FORMAT", "json")
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdout(file.try_clone().expect("a log file"))
            .stderr(file)
            .spawn()
            .expect("auth-server serve starts");
        let mut served = Self {
            child,
            log,
            base_url: String::new(),
        };
        let port = eventually(Duration::from_secs(30), || async {
            served.log_lines().into_iter().find_map(|l| {
                (l["message"] == "auth-server listening").then(|| l["port"].as_u64())?
            })
        })
        .await;
        let Some(port) = port else {
            panic!("the server never listened: {}", served.logs());
        };
        served.base_url = format!("http://127.0.0.1:{port}");
        served
    }

    /// Everything it logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its log lines so far, each as JSON.
    pub fn log_lines(&self) -> Vec<Value> {
        self.logs()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Status and body of `GET path`.
    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let resp = reqwest::get(format!("{}{path}", self.base_url))
            .await
            .expect("a request");
        (
            resp.status().as_u16(),
            resp.json().await.expect("a JSON body"),
        )
    }

    /// What its `/metrics` shows now: its own series alone.
    pub async fn metrics(&self) -> String {
        metrics_text(&self.base_url).await
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Runs `command`, an `auth-server` that must refuse to start: it must exit, failing, within
/// 30 seconds. Its stderr; `what` says in a failure which run it was.
pub fn exits_failing(mut command: std::process::Command, what: &str) -> String {
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("auth-server runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("auth-server started {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{what}: {stderr}");
    stderr
}
