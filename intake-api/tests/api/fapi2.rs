//! The FAPI 2.0 profile end to end: an auth-server with `AUTH_FAPI2` and an intake-api with
//! `INTAKE_FAPI2`. The intake-api reads the revocation list with its own private_key_jwt
//! client and DPoP-bound tokens; a partner with a key and the partner client's DPoP calls
//! it; nothing is taken as a bearer token, and no proof signed outside the profile's
//! algorithms.

use std::time::Duration;

use auth_server::commands::ClientCommand;
use auth_server::store::AuthMethod as Registration;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use partner_client::{
    AccessToken, AssertionAlgorithm, AssertionKey, AuthMethod, Credentials, DEFAULT_RENEW_BEFORE,
    DpopKey, TokenSource,
};
use serde_json::{Value, json};
use shared::claims::scopes::REVOCATIONS_READ;
use test_support::on_both_backends;

use crate::helpers::{
    AuthServer, Backend, ENQUIRY, IntakeServer, Reply, TestDb, eventually, fresh_email, metric,
    purchase_enquiry,
};

const INTAKE: &str = "enquiry:case:intake:create";

/// A P-256 private key as a PEM file, and its public JWK; the file is removed when dropped.
struct KeyFile {
    path: std::path::PathBuf,
    pem: Vec<u8>,
    jwk: Value,
}

impl KeyFile {
    fn generate() -> Self {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = pair.public_key().as_ref();
        let body = STANDARD.encode(pkcs8.as_ref());
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        );
        let path = std::env::temp_dir().join(format!("key-{}.pem", uuid::Uuid::new_v4()));
        std::fs::write(&path, &pem).unwrap();
        Self {
            path,
            pem: pem.into_bytes(),
            jwk: json!({
                "kty": "EC", "crv": "P-256",
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..]),
            }),
        }
    }

    fn assertion_key(&self) -> AssertionKey {
        AssertionKey::from_pem(AssertionAlgorithm::ES256, &self.pem).unwrap()
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Registers a private_key_jwt client granted `scope`, whose key is `key`'s; its id.
async fn register(auth: &AuthServer, key: &KeyFile, scope: &str) -> String {
    let jwks = std::env::temp_dir().join(format!("jwks-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&jwks, json!({"keys": [key.jwk]}).to_string()).unwrap();
    let created = auth
        .client_cmd(ClientCommand::Create {
            name: format!("FAPI client {}", uuid::Uuid::new_v4().simple()),
            scopes: scope.into(),
            brands: None,
            auth_method: Registration::PrivateKeyJwt,
            jwks_file: Some(jwks.clone()),
            jwks_uri: None,
            sandbox: false,
        })
        .await
        .expect("client create");
    let _ = std::fs::remove_file(&jwks);
    created["client_id"].as_str().unwrap().to_owned()
}

/// Both services with the profile on, and a keyed partner.
struct Fapi2 {
    auth: AuthServer,
    intake: IntakeServer,
    partner: String,
    partner_key: KeyFile,
    /// The partner's DPoP key: it keeps the nonces the services hand out.
    dpop: DpopKey,
    _reader_key: KeyFile,
    _dbs: (TestDb, TestDb),
}

impl Fapi2 {
    async fn start(backend: Backend) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let auth_db = TestDb::auth(backend).await;
        let auth = AuthServer::start(&auth_db.url, |c| {
            c.listen.bind = format!("127.0.0.1:{port}");
            c.issuer = format!("http://127.0.0.1:{port}");
            c.fapi2 = true;
        })
        .await
        .expect("auth-server starts");
        let reader_key = KeyFile::generate();
        let reader = register(&auth, &reader_key, REVOCATIONS_READ).await;
        let intake_db = TestDb::intake(backend).await;
        let jwks_url = format!("{}/.well-known/jwks.json", auth.base_url());
        let intake = IntakeServer::start_with_jwks(&intake_db.url, &jwks_url, |c| {
            c.issuer = auth.config.issuer().to_owned();
            c.audience = auth.config.audience.clone();
            c.auth_server.client_id = Some(reader);
            c.auth_server.client_secret = None;
            c.auth_server.client_key_file = Some(reader_key.path.clone());
            c.auth_server.client_key_alg = AssertionAlgorithm::ES256;
            c.fapi2 = true;
        })
        .await
        .expect("intake-api starts");
        let partner_key = KeyFile::generate();
        let partner = register(&auth, &partner_key, INTAKE).await;
        Self {
            auth,
            intake,
            partner,
            partner_key,
            dpop: DpopKey::generate().unwrap(),
            _reader_key: reader_key,
            _dbs: (auth_db, intake_db),
        }
    }

    /// The partner client's token source: private_key_jwt and DPoP.
    fn tokens(&self) -> TokenSource {
        TokenSource::new(
            reqwest::Client::new(),
            format!("{}/oauth/token", self.auth.base_url())
                .parse()
                .unwrap(),
            Credentials::with_key(&self.partner, self.partner_key.assertion_key()),
            AuthMethod::Post,
            INTAKE.to_owned(),
            DEFAULT_RENEW_BEFORE,
        )
        .with_dpop(self.dpop.clone())
    }

    fn enquiry_url(&self) -> String {
        format!("{}{ENQUIRY}", self.intake.base_url())
    }

    /// An enquiry sent with `authorization` and `proof`.
    async fn send(&self, authorization: Option<&str>, proof: Option<&str>) -> Reply {
        let mut request = reqwest::Client::new()
            .post(self.enquiry_url())
            .json(&purchase_enquiry("brand_a", &fresh_email()));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        if let Some(proof) = proof {
            request = request.header("dpop", proof);
        }
        let resp = request.send().await.unwrap();
        self.dpop
            .remember_nonce(&self.enquiry_url(), resp.headers());
        Reply::read(resp).await
    }

    /// An enquiry with `token` and a fresh proof for it.
    async fn send_bound(&self, tokens: &TokenSource, token: &AccessToken) -> Reply {
        let proof = tokens.proof("POST", &self.enquiry_url(), token).unwrap();
        let proof = proof.expect("a bound token");
        let header = token.header();
        self.send(
            Some(header.to_str().unwrap()),
            Some(proof.to_str().unwrap()),
        )
        .await
    }
}

/// A proof for `POST` on `url` beside `token`, whose header names `alg` over an EC key:
/// refused by its algorithm before its key or signature is looked at.
fn proof_naming(alg: &str, url: &str, token: &str) -> String {
    let key = KeyFile::generate();
    let header = json!({"typ": "dpop+jwt", "alg": alg, "jwk": key.jwk});
    let claims = json!({
        "jti": uuid::Uuid::new_v4().to_string(),
        "htm": "POST",
        "htu": url,
        "iat": chrono::Utc::now().timestamp(),
        "ath": shared::dpop::token_hash(token),
    });
    format!(
        "{}.{}.c2lnbmF0dXJl",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

async fn a_fapi2_deployment_takes_only_dpop_bound_tokens_with_its_algorithms(backend: Backend) {
    // Ready: its own client got a DPoP-bound token with an assertion, and read the list.
    let app = Fapi2::start_ready(backend).await;
    let health: Value = reqwest::get(format!("{}/healthz", app.intake.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["profile"], "fapi2", "{health}");
    // The served document tells a partner's tools what the deployment takes.
    let doc: Value = reqwest::get(format!("{}/openapi.json", app.intake.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let scheme = &doc["components"]["securitySchemes"]["partnerOAuth"];
    assert_eq!(
        scheme["x-dpop"],
        json!({"required": true, "signingAlgorithms": ["PS256", "ES256", "EdDSA"], "nonce": true}),
        "{scheme}"
    );
    let described = scheme["description"].as_str().unwrap();
    assert!(
        described.contains("FAPI 2.0") && described.contains("use_dpop_nonce"),
        "{described}"
    );

    // The token endpoint asks for its nonce first (400 use_dpop_nonce), and the token
    // source sends the request again with it.
    let tokens = app.tokens();
    let token = tokens.current().await.expect("a DPoP-bound token");
    let bound = token.bound_token().expect("bound").to_owned();
    let token_url = format!("{}/oauth/token", app.auth.base_url());
    assert!(app.dpop.nonce_for(&token_url).is_some());
    // The intake-api's nonces are its own: a first proof carries none and is refused with
    // the challenge RFC 9449 section 9 names, and the answer hands one out.
    assert!(app.dpop.nonce_for(&app.enquiry_url()).is_none());
    let first = app.send_bound(&tokens, &token).await;
    assert_eq!(first.status, 401, "{:?}", first.body);
    let challenge = first.challenge.unwrap_or_default();
    assert!(
        challenge.starts_with(r#"DPoP error="use_dpop_nonce""#),
        "{challenge}"
    );
    assert!(app.dpop.nonce_for(&app.enquiry_url()).is_some());
    let created = app.send_bound(&tokens, &token).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    // A nonce the intake-api never gave is refused alike.
    let made_up = DpopKey::generate().unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("dpop-nonce", "bm90LWEtbm9uY2U".parse().unwrap());
    made_up.remember_nonce(&app.enquiry_url(), &headers);
    let wrong = made_up
        .proof("POST", &app.enquiry_url(), Some(&bound))
        .unwrap();
    let refused = app.send(Some(&format!("DPoP {bound}")), Some(&wrong)).await;
    assert_eq!(refused.status, 401, "{:?}", refused.body);

    // The partner client, given nothing but its keys, meets both nonces on its own.
    let client = partner_client::Client::builder(
        Credentials::with_key(&app.partner, app.partner_key.assertion_key()),
        token_url.clone(),
        app.intake.base_url(),
    )
    .dpop(DpopKey::generate().unwrap())
    .build()
    .unwrap();
    let enquiry: partner_client::Enquiry =
        serde_json::from_value(purchase_enquiry("brand_a", &fresh_email())).unwrap();
    let answer = client.submit(&enquiry, None).await.expect("submitted");
    assert!(answer.created(), "{}", answer.status);
    let reference = answer.body.reference.clone();
    client.case(&reference).await.expect("read back");

    let algs = r#"algs="PS256 ES256 EdDSA""#;
    let as_bearer = app.send(Some(&format!("Bearer {bound}")), None).await;
    assert_eq!(as_bearer.status, 401, "{:?}", as_bearer.body);
    let challenge = as_bearer.challenge.unwrap_or_default();
    assert!(
        challenge.starts_with(r#"DPoP error="invalid_token""#) && challenge.contains(algs),
        "{challenge}"
    );
    let anonymous = app.send(None, None).await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(
        anonymous.challenge.as_deref(),
        Some(r#"DPoP algs="PS256 ES256 EdDSA""#)
    );
    let rs256 = proof_naming("RS256", &app.enquiry_url(), &bound);
    let refused = app.send(Some(&format!("DPoP {bound}")), Some(&rs256)).await;
    assert_eq!(refused.status, 401, "{:?}", refused.body);
    let challenge = refused.challenge.unwrap_or_default();
    assert!(
        challenge.starts_with(r#"DPoP error="invalid_dpop_proof""#) && challenge.contains(algs),
        "{challenge}"
    );
    let http = reqwest::Client::new();
    let base = app.intake.base_url();
    for reason in ["bearer_not_accepted", "proof_alg"] {
        let counted = metric(&http, &base, "intake_auth_failures_total", reason).await;
        assert!(counted >= 1.0, "{reason} not counted");
    }

    // The revocation list keeps coming through DPoP: a disabled partner is refused within
    // seconds, though its token still verifies.
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: app.partner.clone(),
        })
        .await
        .unwrap();
    let refused = eventually(Duration::from_secs(10), || async {
        let reply = app.send_bound(&tokens, &token).await;
        (reply.status == 401).then_some(reply)
    })
    .await;
    assert!(refused.is_some(), "the disabled partner was still served");
}

/// The profile needs the intake-api's own client to use a key: with a secret, the
/// auth-server would refuse it, so the intake-api does not start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_fapi2_the_intake_api_does_not_start_with_a_client_secret() {
    let db = TestDb::intake(Backend::Sqlite).await;
    let refused = IntakeServer::start_with_jwks(&db.url, "http://127.0.0.1:9/jwks.json", |c| {
        c.fapi2 = true;
    })
    .await
    .err()
    .expect("no start with a secret under FAPI 2.0");
    assert!(
        refused
            .to_string()
            .contains("INTAKE_REVOCATIONS_CLIENT_KEY_FILE"),
        "{refused}"
    );
}

/// A change to a proof's claims before it is signed.
type ClaimsEdit = Box<dyn Fn(&mut Value)>;

/// A proof by `key` for `method` on `htu`, beside `token` when given, carrying `nonce`
/// when given; `edit` changes its claims before it is signed, as a conformance suite's
/// tests do.
fn proof_by(
    key: &KeyFile,
    method: &str,
    htu: &str,
    token: Option<&str>,
    nonce: Option<&str>,
    edit: impl FnOnce(&mut Value),
) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.typ = Some("dpop+jwt".into());
    header.jwk = Some(serde_json::from_value(key.jwk.clone()).unwrap());
    let mut claims = json!({
        "jti": uuid::Uuid::new_v4().to_string(),
        "htm": method,
        "htu": htu,
        "iat": chrono::Utc::now().timestamp(),
    });
    if let Some(token) = token {
        claims["ath"] = json!(shared::dpop::token_hash(token));
    }
    if let Some(nonce) = nonce {
        claims["nonce"] = json!(nonce);
    }
    edit(&mut claims);
    let signer = jsonwebtoken::EncodingKey::from_ec_pem(&key.pem).unwrap();
    jsonwebtoken::encode(&header, &claims, &signer).unwrap()
}

impl Fapi2 {
    /// [`Fapi2::start`], once the intake-api is ready.
    async fn start_ready(backend: Backend) -> Self {
        let app = Self::start(backend).await;
        assert!(
            app.intake.wait_ready().await,
            "intake-api never became ready"
        );
        app
    }

    /// A new DPoP key of the partner's, and a token bound to it.
    async fn partner_token(&self) -> (KeyFile, String) {
        let dpop_key = KeyFile::generate();
        let token = self
            .token_bound_to(&self.partner, &self.partner_key, &dpop_key)
            .await;
        (dpop_key, token)
    }

    /// A token for `client` (its assertion signed by `client_key`) bound to `dpop_key`,
    /// asked for as a conformance suite does: a first proof without a nonce, refused with
    /// `use_dpop_nonce`, then one with the nonce that answer gave.
    async fn token_bound_to(
        &self,
        client: &str,
        client_key: &KeyFile,
        dpop_key: &KeyFile,
    ) -> String {
        let token_url = format!("{}/oauth/token", self.auth.base_url());
        let mut nonce: Option<String> = None;
        for attempt in 0..2 {
            let now = chrono::Utc::now().timestamp();
            let assertion = jsonwebtoken::encode(
                &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
                &json!({
                    "iss": client, "sub": client, "aud": self.auth.config.issuer(),
                    "iat": now, "exp": now + 60, "jti": uuid::Uuid::new_v4().to_string(),
                }),
                &jsonwebtoken::EncodingKey::from_ec_pem(&client_key.pem).unwrap(),
            )
            .unwrap();
            let proof = proof_by(dpop_key, "POST", &token_url, None, nonce.as_deref(), |_| {});
            let resp = reqwest::Client::new()
                .post(&token_url)
                .header("dpop", proof)
                .form(&[
                    ("grant_type", "client_credentials"),
                    ("scope", INTAKE),
                    (
                        "client_assertion_type",
                        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    ),
                    ("client_assertion", &assertion),
                ])
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            nonce = resp
                .headers()
                .get("dpop-nonce")
                .map(|v| v.to_str().unwrap().to_owned());
            let body: Value = resp.json().await.unwrap();
            match (attempt, status) {
                (0, 400) => assert_eq!(body["error"], "use_dpop_nonce", "{body}"),
                (1, 200) => return body["access_token"].as_str().unwrap().to_owned(),
                _ => panic!("token request {attempt}: {status} {body}"),
            }
        }
        unreachable!()
    }

    /// The intake-api's current nonce, fetched from any answer when none is kept yet.
    async fn intake_nonce(&self) -> String {
        if self.dpop.nonce_for(&self.enquiry_url()).is_none() {
            let resp = reqwest::get(format!("{}/healthz", self.intake.base_url()))
                .await
                .unwrap();
            self.dpop
                .remember_nonce(&self.enquiry_url(), resp.headers());
        }
        self.dpop
            .nonce_for(&self.enquiry_url())
            .expect("the intake-api hands out nonces")
    }
}

/// The resource-server checks of the conformance suite's FAPI 2.0 plan (client credentials,
/// private_key_jwt, DPoP), black-box, with two partners: what must pass passes (`DPOP` in
/// capitals, an `htu` with a query and a fragment, extra claims such as `nbf` and `exp`, an
/// `iat` ten seconds either side), what must not is refused with its challenge, and neither
/// partner reads the other's case.
async fn the_conformance_plans_dpop_checks_hold_at_the_intake_api(backend: Backend) {
    let app = Fapi2::start_ready(backend).await;
    let url = app.enquiry_url();
    let (dpop_key, token) = app.partner_token().await;
    let second_key = KeyFile::generate();
    let second = register(&app.auth, &second_key, INTAKE).await;
    let second_dpop = KeyFile::generate();
    let second_token = app.token_bound_to(&second, &second_key, &second_dpop).await;

    let must_pass: Vec<(&str, String, ClaimsEdit)> = vec![
        (
            "DPOP in capitals",
            format!("DPOP {token}"),
            Box::new(|_| {}),
        ),
        (
            "htu with a query and a fragment",
            format!("DPoP {token}"),
            Box::new(|c| {
                c["htu"] = json!(format!("{}?x=1#part", c["htu"].as_str().unwrap()));
            }),
        ),
        (
            "nbf, exp and a claim of its own",
            format!("DPoP {token}"),
            Box::new(|c| {
                let now = chrono::Utc::now().timestamp();
                c["nbf"] = json!(now - 5);
                c["exp"] = json!(now + 60);
                c["x-partner"] = json!("extra");
            }),
        ),
        (
            "iat 10 s behind",
            format!("DPoP {token}"),
            Box::new(|c| {
                c["iat"] = json!(c["iat"].as_i64().unwrap() - 10);
            }),
        ),
        (
            "iat 10 s ahead",
            format!("DPoP {token}"),
            Box::new(|c| {
                c["iat"] = json!(c["iat"].as_i64().unwrap() + 10);
            }),
        ),
    ];
    let mut reference = String::new();
    for (case, authorization, edit) in must_pass {
        let nonce = app.intake_nonce().await;
        let proof = proof_by(&dpop_key, "POST", &url, Some(&token), Some(&nonce), edit);
        let reply = app.send(Some(&authorization), Some(&proof)).await;
        assert_eq!(reply.status, 201, "{case}: {:?}", reply.body);
        reference = reply.body["reference"].as_str().unwrap().to_owned();
    }

    let nonce = app.intake_nonce().await;
    let reused = proof_by(&dpop_key, "POST", &url, Some(&token), Some(&nonce), |_| {});
    let reply = app
        .send(Some(&format!("DPoP {token}")), Some(&reused))
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let must_fail: Vec<(&str, String, Option<String>, &str)> = vec![
        (
            "no proof",
            format!("DPoP {token}"),
            None,
            "invalid_dpop_proof",
        ),
        (
            "no nonce",
            format!("DPoP {token}"),
            Some(proof_by(
                &dpop_key,
                "POST",
                &url,
                Some(&token),
                None,
                |_| {},
            )),
            "use_dpop_nonce",
        ),
        (
            "a nonce never given",
            format!("DPoP {token}"),
            Some(proof_by(
                &dpop_key,
                "POST",
                &url,
                Some(&token),
                Some("bm9uY2U"),
                |_| {},
            )),
            "use_dpop_nonce",
        ),
        (
            "the proof again",
            format!("DPoP {token}"),
            Some(reused.clone()),
            "invalid_dpop_proof",
        ),
        (
            "another token's ath",
            format!("DPoP {token}"),
            Some(proof_by(
                &dpop_key,
                "POST",
                &url,
                Some(&second_token),
                Some(&nonce),
                |_| {},
            )),
            "invalid_dpop_proof",
        ),
        (
            "another method",
            format!("DPoP {token}"),
            Some(proof_by(
                &dpop_key,
                "GET",
                &url,
                Some(&token),
                Some(&nonce),
                |_| {},
            )),
            "invalid_dpop_proof",
        ),
        (
            "another URL",
            format!("DPoP {token}"),
            Some(proof_by(
                &dpop_key,
                "POST",
                &format!("{url}/attach"),
                Some(&token),
                Some(&nonce),
                |_| {},
            )),
            "invalid_dpop_proof",
        ),
        (
            "iat five minutes behind",
            format!("DPoP {token}"),
            Some(proof_by(
                &dpop_key,
                "POST",
                &url,
                Some(&token),
                Some(&nonce),
                |c| {
                    c["iat"] = json!(c["iat"].as_i64().unwrap() - 301);
                },
            )),
            "invalid_dpop_proof",
        ),
        (
            "a proof by another partner's key",
            format!("DPoP {token}"),
            Some(proof_by(
                &second_dpop,
                "POST",
                &url,
                Some(&token),
                Some(&nonce),
                |_| {},
            )),
            "invalid_token",
        ),
        (
            "the token as Bearer",
            format!("Bearer {token}"),
            Some(proof_by(
                &dpop_key,
                "POST",
                &url,
                Some(&token),
                Some(&nonce),
                |_| {},
            )),
            "invalid_token",
        ),
    ];
    for (case, authorization, proof, error) in must_fail {
        let reply = app.send(Some(&authorization), proof.as_deref()).await;
        assert_eq!(reply.status, 401, "{case}: {:?}", reply.body);
        let challenge = reply.challenge.unwrap_or_default();
        assert!(
            challenge.starts_with(&format!(r#"DPoP error="{error}""#)),
            "{case}: {challenge}"
        );
    }

    // Each partner reads its own case, and the other's is not found.
    let read = |token: &str, key: &KeyFile, nonce: String| {
        let case_url = format!(
            "{}/partners/external/cases/{reference}",
            app.intake.base_url()
        );
        let proof = proof_by(key, "GET", &case_url, Some(token), Some(&nonce), |_| {});
        let request = reqwest::Client::new()
            .get(case_url)
            .header("authorization", format!("DPoP {token}"))
            .header("dpop", proof);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(read(&token, &dpop_key, app.intake_nonce().await).await, 200);
    assert_eq!(
        read(&second_token, &second_dpop, app.intake_nonce().await).await,
        404
    );
}

/// A proof written member by member, as a conformance suite malforms one: `header` and
/// `claims` as given, signed ES256 by `key` over them (whatever `alg` the header names).
fn raw_proof(key: &KeyFile, header: &Value, claims: &Value) -> String {
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signer = jsonwebtoken::EncodingKey::from_ec_pem(&key.pem).unwrap();
    let signature =
        jsonwebtoken::crypto::sign(input.as_bytes(), &signer, jsonwebtoken::Algorithm::ES256)
            .unwrap();
    format!("{input}.{signature}")
}

/// The conformance suite's DPoP negative tests that take a proof apart (FAPI2SPFinal
/// DpopNegativeTests): each member it leaves out or spoils is refused with
/// `invalid_dpop_proof`, whatever else in the proof is right (nonce included); the
/// liberties it must take (a header member of its own, an `htu` whose scheme and host are
/// in capitals) pass. Every answer carries a `Date`, which the suite reads in each call.
async fn a_proof_the_conformance_suite_takes_apart_is_refused_member_by_member(backend: Backend) {
    let app = Fapi2::start_ready(backend).await;
    let url = app.enquiry_url();
    let (dpop_key, token) = app.partner_token().await;
    let authorization = format!("DPoP {token}");
    let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": dpop_key.jwk});
    let claims = |nonce: &str| {
        json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "htm": "POST",
            "htu": url,
            "iat": chrono::Utc::now().timestamp(),
            "ath": shared::dpop::token_hash(&token),
            "nonce": nonce,
        })
    };
    type Edit = Box<dyn Fn(&mut Value, &mut Value)>;
    let without = |member: &'static str, in_header: bool| -> Edit {
        Box::new(move |h: &mut Value, c: &mut Value| {
            let from = if in_header { h } else { c };
            from.as_object_mut().unwrap().remove(member);
        })
    };
    let stranger = KeyFile::generate().jwk.clone();
    let must_fail: Vec<(&str, Edit)> = vec![
        ("no typ", without("typ", true)),
        ("no alg", without("alg", true)),
        ("no jwk", without("jwk", true)),
        ("no jti", without("jti", false)),
        ("no htm", without("htm", false)),
        ("no htu", without("htu", false)),
        ("no iat", without("iat", false)),
        ("no ath", without("ath", false)),
        ("typ JWT", Box::new(|h, _| h["typ"] = json!("JWT"))),
        ("alg none", Box::new(|h, _| h["alg"] = json!("none"))),
        (
            "a private key in the jwk",
            Box::new(|h, _| h["jwk"]["d"] = json!(URL_SAFE_NO_PAD.encode([7u8; 32]))),
        ),
        (
            "a jwk that did not sign it",
            Box::new(move |h, _| h["jwk"] = stranger.clone()),
        ),
    ];
    for (case, edit) in must_fail {
        let (mut h, mut c) = (header.clone(), claims(&app.intake_nonce().await));
        edit(&mut h, &mut c);
        let proof = raw_proof(&dpop_key, &h, &c);
        let reply = app.send(Some(&authorization), Some(&proof)).await;
        assert_eq!(reply.status, 401, "{case}: {:?}", reply.body);
        let challenge = reply.challenge.unwrap_or_default();
        assert!(
            challenge.starts_with(r#"DPoP error="invalid_dpop_proof""#),
            "{case}: {challenge}"
        );
        assert!(reply.date.is_some(), "{case}: no Date header");
    }
    // A signature that is not the signing input's.
    let good = raw_proof(&dpop_key, &header, &claims(&app.intake_nonce().await));
    let (input, signature) = good.rsplit_once('.').unwrap();
    let mut bytes = URL_SAFE_NO_PAD.decode(signature).unwrap();
    bytes[10] ^= 1;
    let spoilt = format!("{input}.{}", URL_SAFE_NO_PAD.encode(bytes));
    let reply = app.send(Some(&authorization), Some(&spoilt)).await;
    assert_eq!(reply.status, 401, "a spoilt signature: {:?}", reply.body);

    let upper = url.replacen("http://127.0.0.1", "HTTP://127.0.0.1", 1);
    assert_ne!(upper, url);
    let must_pass: Vec<(&str, Edit)> = vec![
        (
            "a header member of its own",
            Box::new(|h, _| h["x-partner"] = json!("extra")),
        ),
        (
            "htu's scheme in capitals",
            Box::new(move |_, c| c["htu"] = json!(upper)),
        ),
    ];
    for (case, edit) in must_pass {
        let (mut h, mut c) = (header.clone(), claims(&app.intake_nonce().await));
        edit(&mut h, &mut c);
        let reply = app
            .send(Some(&authorization), Some(&raw_proof(&dpop_key, &h, &c)))
            .await;
        assert_eq!(reply.status, 201, "{case}: {:?}", reply.body);
        assert!(reply.date.is_some(), "{case}: no Date header");
    }
}

on_both_backends!(
    a_fapi2_deployment_takes_only_dpop_bound_tokens_with_its_algorithms,
    a_proof_the_conformance_suite_takes_apart_is_refused_member_by_member,
    the_conformance_plans_dpop_checks_hold_at_the_intake_api,
);
