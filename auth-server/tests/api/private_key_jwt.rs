//! private_key_jwt client authentication (RFC 7523) over HTTP: a partner registered with
//! its public keys signs an assertion instead of sending a secret.

use std::path::PathBuf;

use auth_server::commands::ClientCommand;
use auth_server::store::clients::AuthMethod;
use aws_lc_rs::signature::KeyPair;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use test_support::{on_both_backends, on_sqlite};

use crate::helpers::{AuthServer, Backend, INTAKE, TestApp, metrics_text, sample, series};

pub(crate) const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A partner's RSA key (2048 bits, PKCS#1): aws-lc-rs makes RSA keys only as PKCS#8,
/// which jsonwebtoken does not sign with.
const RSA_KEY: &str = include_str!("fixtures/partner-rsa-2048.pkcs1.b64");

/// One of a partner's key pairs: the private half signs, the public half is registered.
pub(crate) struct PartnerKey {
    kid: String,
    alg: Algorithm,
    signing: EncodingKey,
    pub(crate) jwk: Value,
}

impl PartnerKey {
    pub(crate) fn ed25519(kid: &str) -> Self {
        let pkcs8 = aws_lc_rs::signature::Ed25519KeyPair::generate_pkcs8(
            &aws_lc_rs::rand::SystemRandom::new(),
        )
        .unwrap();
        let pair = aws_lc_rs::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        Self {
            kid: kid.into(),
            alg: Algorithm::EdDSA,
            signing: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": x}),
        }
    }

    pub(crate) fn p256(kid: &str) -> Self {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            &aws_lc_rs::rand::SystemRandom::new(),
        )
        .unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        // The uncompressed point: 0x04, then x and y, 32 bytes each.
        let point = pair.public_key().as_ref();
        Self {
            kid: kid.into(),
            alg: Algorithm::ES256,
            signing: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk: json!({
                "kty": "EC", "crv": "P-256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..]),
            }),
        }
    }

    /// The fixture RSA key, signing with `alg` (RS256 or PS256).
    pub(crate) fn rsa(kid: &str, alg: Algorithm) -> Self {
        let der = STANDARD
            .decode(RSA_KEY.split_whitespace().collect::<String>())
            .unwrap();
        let pair = aws_lc_rs::rsa::KeyPair::from_der(&der).unwrap();
        let public = pair.public_key();
        Self {
            kid: kid.into(),
            alg,
            signing: EncodingKey::from_rsa_der(&der),
            jwk: json!({
                "kty": "RSA", "kid": kid,
                "n": URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero()),
                "e": URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero()),
            }),
        }
    }

    /// `claims`, signed, with this key's `kid` in the header.
    pub(crate) fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.signing).unwrap()
    }
}

/// A JWKS holding `keys`' public halves.
pub(crate) fn jwks_of(keys: &[&PartnerKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()})
}

/// A JWKS file holding `keys`' public halves; removed when dropped.
pub(crate) struct JwksFile(pub(crate) PathBuf);

impl JwksFile {
    pub(crate) fn of(keys: &[&PartnerKey]) -> Self {
        Self::with(&jwks_of(keys))
    }

    fn with(jwks: &Value) -> Self {
        let path = std::env::temp_dir().join(format!("jwks-{}.json", uuid::Uuid::new_v4()));
        std::fs::write(&path, jwks.to_string()).unwrap();
        Self(path)
    }
}

impl Drop for JwksFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Registers a private_key_jwt partner holding the intake scope with `keys`; its id.
pub(crate) async fn register(auth: &AuthServer, keys: &[&PartnerKey]) -> String {
    register_for(auth, keys, INTAKE).await
}

/// Registers a private_key_jwt client granted `scope` with `keys`; its id.
pub(crate) async fn register_for(auth: &AuthServer, keys: &[&PartnerKey], scope: &str) -> String {
    let file = JwksFile::of(keys);
    let created = auth
        .client_cmd(ClientCommand::Create {
            name: format!("Keyed partner {}", uuid::Uuid::new_v4().simple()),
            scopes: scope.into(),
            brands: None,
            auth_method: AuthMethod::PrivateKeyJwt,
            jwks_file: Some(file.0.clone()),
            jwks_uri: None,
            sandbox: false,
        })
        .await
        .expect("client create");
    assert!(created.get("client_secret").is_none(), "{created}");
    created["client_id"].as_str().unwrap().to_owned()
}

/// Good claims for `client_id`'s assertion to `auth`, with a fresh `jti`.
pub(crate) fn claims(auth: &AuthServer, client_id: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({
        "iss": client_id,
        "sub": client_id,
        "aud": auth.config.issuer(),
        "iat": now,
        "exp": now + 60,
        "jti": uuid::Uuid::new_v4().to_string(),
    })
}

/// Status and body of a form-encoded token request with `assertion`.
pub(crate) async fn token_with(auth: &AuthServer, assertion: &str) -> (u16, Value) {
    send(
        auth,
        &[
            ("grant_type", "client_credentials"),
            ("scope", INTAKE),
            ("client_assertion_type", JWT_BEARER),
            ("client_assertion", assertion),
        ],
        None,
    )
    .await
}

pub(crate) async fn send(
    auth: &AuthServer,
    form: &[(&str, &str)],
    basic: Option<String>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/oauth/token", auth.base_url()))
        .form(form);
    if let Some(basic) = basic {
        req = req.header("authorization", basic);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

pub(crate) fn invalid_client() -> Value {
    json!({"error": "invalid_client", "error_description": "Client authentication failed", "message": "Client authentication failed"})
}

/// How many of `client_id`'s token requests were refused for `reason`.
pub(crate) async fn refused(auth: &AuthServer, client_id: &str, reason: &str) -> f64 {
    sample(
        &metrics_text(&auth.base_url()).await,
        "auth_token_requests_failed_total",
        &[("client_id", client_id), ("reason", reason)],
    )
}

async fn an_assertion_signed_with_any_registered_key_gets_a_token_like_a_secret_does(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let keys = [
        PartnerKey::rsa("rsa", Algorithm::RS256),
        PartnerKey::rsa("rsa", Algorithm::PS256),
        PartnerKey::p256("ec"),
        PartnerKey::ed25519("ed"),
    ];
    // The RSA key is registered once: it signs RS256 and PS256 alike.
    let id = register(&app.auth, &[&keys[0], &keys[2], &keys[3]]).await;
    let secret_token = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    let secret_claims = app.verify(&secret_token).await.unwrap();
    let names = |c: &Value| {
        let mut n: Vec<String> = c.as_object().unwrap().keys().cloned().collect();
        n.sort();
        n
    };
    for key in &keys {
        let (status, body) = token_with(&app.auth, &key.sign(&claims(&app.auth, &id))).await;
        assert_eq!(status, 200, "{:?}: {body}", key.alg);
        assert_eq!(body["token_type"], "Bearer");
        assert_eq!(body["expires_in"], 900);
        let got = app
            .verify(body["access_token"].as_str().unwrap())
            .await
            .expect("the token verifies");
        assert_eq!(names(&got), names(&secret_claims));
        assert_eq!(got["sub"], id.as_str());
        assert_eq!(got["client_id"], id.as_str());
        assert_eq!(got["scope"], INTAKE);
        assert_eq!(got["aud"], secret_claims["aud"]);
        assert_eq!(got["iss"], secret_claims["iss"]);
    }
    // As JSON, naming the client, with the token endpoint's URL as the audience.
    let mut c = claims(&app.auth, &id);
    c["aud"] = json!([format!("{}/oauth/token", app.auth.config.issuer())]);
    let resp = app
        .token_json(json!({
            "grant_type": "client_credentials",
            "client_id": id,
            "client_assertion_type": JWT_BEARER,
            "client_assertion": keys[3].sign(&c),
            "scope": INTAKE,
        }))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
}

async fn each_bad_assertion_is_refused_as_invalid_client_with_its_own_reason(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let auth = &app.auth;
    let key = PartnerKey::ed25519("k1");
    let id = register(auth, &[&key]).await;
    let other_key = PartnerKey::ed25519("k1");
    let other_id = register(auth, &[&other_key]).await;
    let now = chrono::Utc::now().timestamp();
    let with = |member: &str, value: Value| {
        let mut c = claims(auth, &id);
        c[member] = value;
        c
    };
    let hs256 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(auth, &id),
        &EncodingKey::from_secret(app.client_secret.as_bytes()),
    )
    .unwrap();
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(claims(auth, &id).to_string())
    );
    let mut no_jti = claims(auth, &id);
    no_jti.as_object_mut().unwrap().remove("jti");
    let mut no_sub = claims(auth, &id);
    no_sub.as_object_mut().unwrap().remove("sub");
    let secret_clients = key.sign(&claims(auth, &app.client_id));
    // (name, assertion, the client it is counted against, reason)
    let cases = [
        (
            "expired",
            key.sign(&with("exp", json!(now - 30))),
            &id,
            "assertion_expired",
        ),
        (
            "exp over an hour ahead",
            key.sign(&with("exp", json!(now + 3700))),
            &id,
            "assertion_lifetime",
        ),
        (
            "iat in the future",
            key.sign(&with("iat", json!(now + 120))),
            &id,
            "assertion_not_yet_valid",
        ),
        (
            "aud elsewhere",
            key.sign(&with("aud", json!("https://elsewhere.example"))),
            &id,
            "assertion_audience",
        ),
        (
            "sub another than iss",
            key.sign(&with("sub", json!(other_id))),
            &id,
            "assertion_issuer",
        ),
        (
            "iss another client",
            key.sign(&with("iss", json!(other_id))),
            &other_id,
            "assertion_issuer",
        ),
        (
            "another client's claims, our key",
            {
                let mut c = claims(auth, &other_id);
                c["jti"] = json!("x");
                key.sign(&c)
            },
            &other_id,
            "assertion_signature",
        ),
        (
            "a key not registered",
            PartnerKey::ed25519("k1").sign(&claims(auth, &id)),
            &id,
            "assertion_signature",
        ),
        ("HS256 with a secret", hs256, &id, "assertion_algorithm"),
        ("alg none", unsigned, &id, "assertion_algorithm"),
        ("no jti", key.sign(&no_jti), &id, "assertion_malformed"),
        // The conformance suite's FAPI2SPFinalEnsureClientAssertionWithNoSubFails.
        ("no sub", key.sign(&no_sub), &id, "assertion_issuer"),
        (
            "not a JWT",
            "not.a.jwt".to_owned(),
            &id,
            "assertion_malformed",
        ),
        (
            "an assertion for a secret client",
            secret_clients,
            &app.client_id,
            "wrong_auth_method",
        ),
    ];
    for (name, assertion, counted, reason) in cases {
        let before = refused(auth, counted, reason).await;
        let (status, body) = if name == "not a JWT" {
            send(
                auth,
                &[
                    ("grant_type", "client_credentials"),
                    ("scope", INTAKE),
                    ("client_id", id.as_str()),
                    ("client_assertion_type", JWT_BEARER),
                    ("client_assertion", &assertion),
                ],
                None,
            )
            .await
        } else {
            token_with(auth, &assertion).await
        };
        assert_eq!((status, body), (401, invalid_client()), "{name}");
        assert_eq!(refused(auth, counted, reason).await, before + 1.0, "{name}");
    }
}

async fn a_client_uses_only_the_method_it_is_registered_for(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let auth = &app.auth;
    let key = PartnerKey::p256("k1");
    let id = register(auth, &[&key]).await;
    let basic =
        |id: &str, secret: &str| format!("Basic {}", STANDARD.encode(format!("{id}:{secret}")));
    // A secret for a keyed client: it has none, whatever is sent.
    let before = refused(auth, &id, "wrong_auth_method").await;
    let (status, body) = app.try_token(&id, &app.client_secret).await;
    assert_eq!((status, body), (401, invalid_client()));
    assert_eq!(refused(auth, &id, "wrong_auth_method").await, before + 1.0);
    // A secret and an assertion in one request, in the body or in a Basic header.
    let assertion = key.sign(&claims(auth, &id));
    let before = refused(auth, &id, "multiple_auth_methods").await;
    let (status, body) = send(
        auth,
        &[
            ("grant_type", "client_credentials"),
            ("scope", INTAKE),
            ("client_secret", "anything"),
            ("client_assertion_type", JWT_BEARER),
            ("client_assertion", &assertion),
        ],
        None,
    )
    .await;
    assert_eq!((status, body), (401, invalid_client()));
    let (status, body) = send(
        auth,
        &[
            ("grant_type", "client_credentials"),
            ("scope", INTAKE),
            ("client_assertion_type", JWT_BEARER),
            ("client_assertion", &assertion),
        ],
        Some(basic(&app.client_id, &app.client_secret)),
    )
    .await;
    assert_eq!((status, body), (401, invalid_client()));
    assert_eq!(
        refused(auth, &id, "multiple_auth_methods").await,
        before + 1.0,
        "the Basic request is counted against the id in its header"
    );
    // The assertion was never accepted, so it still works.
    assert_eq!(token_with(auth, &assertion).await.0, 200);
    // The parameters of the method must both be there: half of them is a failed client
    // authentication. A type other than JWT's is a request not understood.
    let fresh = key.sign(&claims(auth, &id));
    let before = refused(auth, &id, "assertion_malformed").await;
    for form in [
        vec![
            ("client_id", id.as_str()),
            ("client_assertion", fresh.as_str()),
        ],
        vec![
            ("client_id", id.as_str()),
            ("client_assertion_type", JWT_BEARER),
        ],
    ] {
        let mut form = form;
        form.extend([("grant_type", "client_credentials"), ("scope", INTAKE)]);
        let (status, body) = send(auth, &form, None).await;
        assert_eq!((status, body), (401, invalid_client()), "{form:?}");
    }
    assert_eq!(
        refused(auth, &id, "assertion_malformed").await,
        before + 2.0
    );
    let form = [
        (
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:saml2-bearer",
        ),
        ("client_assertion", fresh.as_str()),
        ("grant_type", "client_credentials"),
        ("scope", INTAKE),
    ];
    let (status, body) = send(auth, &form, None).await;
    assert_eq!(status, 400);
    assert_eq!(body["hint"], "Check the `client_assertion_type` parameter");
    // A secret client's secret still works as before.
    let (status, _) = app.try_token(&app.client_id, &app.client_secret).await;
    assert_eq!(status, 200);
}

async fn an_assertion_is_spent_at_every_replica_by_its_first_use(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = PartnerKey::ed25519("k1");
    let id = register(&app.auth, &[&key]).await;
    let second = AuthServer::start(&app.db.url, |c| c.failed_auth_limit = 1_000_000)
        .await
        .expect("a second replica starts");
    let assertion = key.sign(&claims(&app.auth, &id));
    assert_eq!(token_with(&app.auth, &assertion).await.0, 200);
    let before = refused(&app.auth, &id, "assertion_replayed").await;
    for replica in [&app.auth, &second] {
        let (status, body) = token_with(replica, &assertion).await;
        assert_eq!((status, body), (401, invalid_client()));
    }
    assert_eq!(
        refused(&app.auth, &id, "assertion_replayed").await,
        before + 2.0
    );
    // Another jti is another assertion, at either replica.
    assert_eq!(
        token_with(&second, &key.sign(&claims(&app.auth, &id)))
            .await
            .0,
        200
    );
    // Two replicas racing with one assertion: exactly one wins.
    let raced = key.sign(&claims(&app.auth, &id));
    let (a, b) = tokio::join!(token_with(&app.auth, &raced), token_with(&second, &raced));
    let mut statuses = [a.0, b.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 401]);
}

async fn new_keys_replace_the_old_ones_at_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let old = PartnerKey::ed25519("2026");
    let new = PartnerKey::rsa("2027", Algorithm::PS256);
    let id = register(&app.auth, &[&old]).await;
    assert_eq!(
        token_with(&app.auth, &old.sign(&claims(&app.auth, &id)))
            .await
            .0,
        200
    );
    let file = JwksFile::of(&[&new]);
    let set = app
        .auth
        .client_cmd(ClientCommand::SetKeys {
            client_id: id.clone(),
            jwks_file: Some(file.0.clone()),
            jwks_uri: None,
        })
        .await
        .expect("client set-keys");
    assert_eq!(set["keys"][0]["kid"], "2027");
    assert_eq!(set["previous_keys"][0]["kid"], "2026");
    let before = refused(&app.auth, &id, "assertion_signature").await;
    let (status, _) = token_with(&app.auth, &old.sign(&claims(&app.auth, &id))).await;
    assert_eq!(status, 401);
    assert_eq!(
        refused(&app.auth, &id, "assertion_signature").await,
        before + 1.0
    );
    assert_eq!(
        token_with(&app.auth, &new.sign(&claims(&app.auth, &id)))
            .await
            .0,
        200
    );
    // A disabled client's valid assertion says so, to operators only.
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: id.clone(),
        })
        .await
        .unwrap();
    let before = refused(&app.auth, &id, "disabled_client").await;
    let (status, body) = token_with(&app.auth, &new.sign(&claims(&app.auth, &id))).await;
    assert_eq!((status, body), (401, invalid_client()));
    assert_eq!(
        refused(&app.auth, &id, "disabled_client").await,
        before + 1.0
    );
}

async fn a_keyed_client_has_no_secret_to_rotate_and_a_secret_client_no_keys(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = PartnerKey::ed25519("k1");
    let id = register(&app.auth, &[&key]).await;
    let rotated = app
        .auth
        .client_cmd(ClientCommand::RotateSecret {
            client_id: id.clone(),
            grace_secs: 60,
        })
        .await;
    let message = format!("{:#}", rotated.unwrap_err());
    assert!(message.contains("no secret to rotate"), "{message}");
    let file = JwksFile::of(&[&key]);
    let set = app
        .auth
        .client_cmd(ClientCommand::SetKeys {
            client_id: app.client_id.clone(),
            jwks_file: Some(file.0.clone()),
            jwks_uri: None,
        })
        .await;
    let message = format!("{:#}", set.unwrap_err());
    assert!(message.contains("not private_key_jwt"), "{message}");
    let shown = app
        .auth
        .client_cmd(ClientCommand::Show { client_id: id })
        .await
        .unwrap();
    assert_eq!(shown["auth_method"], "private_key_jwt");
    assert_eq!(shown["secrets"], json!([]));
    assert_eq!(
        shown["keys"],
        json!([{"kid": "k1", "kind": "OKP Ed25519", "alg": null}])
    );
}

/// Failed assertions count towards the brute-force guard as failed secrets do.
async fn failed_assertions_trip_the_failure_limit(backend: Backend) {
    let db = crate::helpers::TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |c| c.failed_auth_limit = 2)
        .await
        .unwrap();
    let key = PartnerKey::ed25519("k1");
    let id = register(&auth, &[&key]).await;
    let stranger = PartnerKey::ed25519("k1");
    for _ in 0..2 {
        let (status, _) = token_with(&auth, &stranger.sign(&claims(&auth, &id))).await;
        assert_eq!(status, 401);
    }
    let (status, body) = token_with(&auth, &key.sign(&claims(&auth, &id))).await;
    assert_eq!(status, 429, "{body}");
}

/// A partner's clock may run ahead of ours by up to a minute (FAPI 2.0 asks for 10 s at
/// least, 60 s at most): an assertion whose `iat` and `nbf` are 10 s ahead gets a token, as
/// does a DPoP proof 10 s ahead; 70 s ahead (past the minute, with room for the
/// seconds a slow test machine takes between making it and the server reading it), either is
/// refused with its reason.
async fn a_partner_clock_ten_seconds_fast_is_accepted_and_one_over_a_minute_is_not(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = PartnerKey::p256("ec");
    let id = register(&app.auth, &[&key]).await;
    let ahead = |secs: i64| {
        let mut c = claims(&app.auth, &id);
        let now = chrono::Utc::now().timestamp();
        c["iat"] = json!(now + secs);
        c["nbf"] = json!(now + secs);
        c["exp"] = json!(now + secs + 60);
        key.sign(&c)
    };
    let (status, body) = token_with(&app.auth, &ahead(10)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = token_with(&app.auth, &ahead(70)).await;
    assert_eq!((status, body), (401, invalid_client()));
    assert_eq!(
        refused(&app.auth, &id, "assertion_not_yet_valid").await,
        1.0
    );

    let proof_key = crate::helpers::ProofKey::generate();
    let endpoint = format!(
        "{}/oauth/token",
        app.auth.config.issuer.trim_end_matches('/')
    );
    let proof = proof_key.proof("POST", &endpoint, None, 10);
    let (status, body) = app
        .token_with_proof(&app.client_id, &app.client_secret, INTAKE, &proof)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_type"], "DPoP", "{body}");
    // A full minute ahead is the most tolerated, for proofs and assertions alike.
    let proof = proof_key.proof("POST", &endpoint, None, 60);
    let (status, body) = app
        .token_with_proof(&app.client_id, &app.client_secret, INTAKE, &proof)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = token_with(&app.auth, &ahead(60)).await;
    assert_eq!(status, 200, "{body}");
    let proof = proof_key.proof("POST", &endpoint, None, 70);
    let (status, body) = app
        .token_with_proof(&app.client_id, &app.client_secret, INTAKE, &proof)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "invalid_dpop_proof", "{body}");
}

on_both_backends!(
    a_partner_clock_ten_seconds_fast_is_accepted_and_one_over_a_minute_is_not,
    an_assertion_signed_with_any_registered_key_gets_a_token_like_a_secret_does,
    each_bad_assertion_is_refused_as_invalid_client_with_its_own_reason,
    a_client_uses_only_the_method_it_is_registered_for,
    an_assertion_is_spent_at_every_replica_by_its_first_use,
    new_keys_replace_the_old_ones_at_once,
    a_keyed_client_has_no_secret_to_rotate_and_a_secret_client_no_keys,
);

/// A `jti` is refused while its assertion could still be accepted, and forgotten after.
async fn a_spent_jti_is_kept_until_its_assertion_expires_then_pruned(backend: Backend) {
    use auth_server::store::assertions::CLIENT_ASSERTIONS;
    use chrono::{Duration, Utc};
    use service_kit::replay::ReplayStore;
    let db = crate::helpers::TestDb::auth(backend).await;
    let conn = sea_orm::Database::connect(&db.url).await.unwrap();
    let store = ReplayStore::new("test", conn, None).unwrap();
    let spend = |client: &'static str, until| {
        let store = &store;
        async move {
            let made = Utc::now();
            store
                .first_use(&CLIENT_ASSERTIONS, client, "j1", made, until)
                .await
                .unwrap()
                == service_kit::replay::Use::First
        }
    };
    let now = Utc::now();
    let live = now + Duration::minutes(1);
    assert!(spend("a", live).await);
    assert!(!spend("a", live).await, "a live jti is refused");
    // Another client's jti is its own.
    assert!(spend("b", live).await);
    // Once an assertion has expired, its jti may name a new one, once.
    let expired = now - Duration::minutes(1);
    assert!(spend("c", expired).await);
    assert!(spend("c", live).await);
    assert!(!spend("c", live).await);
    assert!(spend("d", expired).await);
    // Only d's expired row goes; the live ones stay and still refuse.
    assert_eq!(
        store.prune(&CLIENT_ASSERTIONS, Utc::now()).await.unwrap(),
        1
    );
    assert!(!spend("a", live).await);
    assert!(!spend("c", live).await);
}

on_both_backends!(a_spent_jti_is_kept_until_its_assertion_expires_then_pruned);

on_sqlite!(failed_assertions_trip_the_failure_limit);

/// `url` with its host and port those of a proxy on this machine.
fn via_port(url: &str, port: u16) -> String {
    let mut url = reqwest::Url::parse(url).expect("a database URL");
    url.set_host(Some("127.0.0.1")).expect("a host");
    url.set_port(Some(port)).expect("a port");
    url.into()
}

/// Where the test PostgreSQL listens.
fn postgres_addr() -> std::net::SocketAddr {
    let url = reqwest::Url::parse(&test_support::postgres_admin_url()).expect("a URL");
    let host = match url.host_str() {
        Some("localhost") | None => "127.0.0.1",
        Some(host) => host,
    };
    format!("{host}:{}", url.port().unwrap_or(5432))
        .parse()
        .expect("PostgreSQL address")
}

/// An assertion cannot be honoured without recording it, so with the database away it is
/// answered 503 at once; secrets, which need no database, keep working; and assertions work
/// again once the database is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_database_an_assertion_gets_a_quick_503_and_a_secret_still_a_token() {
    let db = crate::helpers::TestDb::auth(Backend::Postgres).await;
    let proxy = test_support::proxy::TcpProxy::start(postgres_addr())
        .await
        .unwrap();
    let auth = AuthServer::start(&via_port(&db.url, proxy.port), |_| {})
        .await
        .unwrap();
    let (secret_id, secret) = auth.create_client(INTAKE).await;
    let key = PartnerKey::ed25519("k1");
    let id = register(&auth, &[&key]).await;

    proxy.cut();
    let started = std::time::Instant::now();
    let (status, body) = token_with(&auth, &key.sign(&claims(&auth, &id))).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "temporarily_unavailable");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    auth.token(&secret_id, &secret, INTAKE).await;
    // The outage shows, the replay store (the database here) with it.
    let readyz = format!("{}/readyz", auth.base_url());
    let readiness = |status: u16, checks: serde_json::Value| {
        let readyz = readyz.clone();
        async move {
            test_support::eventually(std::time::Duration::from_secs(20), || async {
                let answer = reqwest::get(&readyz).await.ok()?;
                let now = answer.status().as_u16();
                let body: serde_json::Value = answer.json().await.ok()?;
                (now == status && body["checks"] == checks).then_some(())
            })
            .await
            .is_some()
        }
    };
    assert!(
        readiness(
            503,
            json!({"database": "failing", "signing_key": "ok", "replay_store": "failing"})
        )
        .await,
        "the database's outage does not show in /readyz"
    );

    proxy.restore();
    let recovered = test_support::eventually(std::time::Duration::from_secs(10), || async {
        let (status, _) = token_with(&auth, &key.sign(&claims(&auth, &id))).await;
        (status == 200).then_some(())
    })
    .await;
    assert!(recovered.is_some(), "assertions never worked again");
    assert!(
        readiness(
            200,
            json!({"database": "ok", "signing_key": "ok", "replay_store": "ok"})
        )
        .await,
        "/readyz never said ready again"
    );
}

/// The issuer of a server started with the default settings, as [`Served`] starts it.
const DEFAULT_ISSUER: &str = "http://127.0.0.1:8081";

/// A `jti` no store keeps alike (U+0000, which PostgreSQL refuses in text), an empty one or
/// one over 255 bytes is the client's mistake, never a store outage: an assertion carrying
/// one is refused as `invalid_client` saying what is wrong with its `jti`, and a DPoP proof
/// as `invalid_dpop_proof`, both before the replay store is asked, so its error counter
/// stays at nothing and the server stays ready. With the database as the store, or Redis.
async fn a_jti_no_store_can_keep_is_refused_as_the_clients_mistake(backend: Backend, redis: bool) {
    use crate::helpers::{ProofKey, Served, run};
    let db = crate::helpers::TestDb::auth(backend).await;
    let key = PartnerKey::ed25519("k1");
    let file = JwksFile::of(&[&key]);
    let made = run(
        &db.url,
        &[
            "client",
            "create",
            "--name",
            "Keyed partner",
            "--scopes",
            INTAKE,
            "--auth-method",
            "private_key_jwt",
            "--jwks-file",
            file.0.to_str().unwrap(),
            "-o",
            "json",
        ],
        &[],
    );
    let id = made.json()["client_id"]
        .as_str()
        .unwrap_or_else(|| panic!("client create: {}", made.stderr))
        .to_owned();
    let redis_url = std::env::var("TEST_REDIS_URL").unwrap_or("redis://127.0.0.1:6379".into());
    let env: Vec<(&str, &str)> = if redis {
        vec![("REDIS_URL", redis_url.as_str())]
    } else {
        Vec::new()
    };
    let served = Served::start(&db.url, &env).await;
    let assertion = |jti: &str| {
        let now = chrono::Utc::now().timestamp();
        key.sign(&json!({
            "iss": id, "sub": id, "aud": DEFAULT_ISSUER,
            "iat": now, "exp": now + 60, "jti": jti,
        }))
    };
    let http = reqwest::Client::new();
    let token = |assertion: String, proof: Option<String>| {
        let mut req = http
            .post(format!("{}/oauth/token", served.base_url))
            .form(&[
                ("grant_type", "client_credentials"),
                ("scope", INTAKE),
                ("client_assertion_type", JWT_BEARER),
                ("client_assertion", assertion.as_str()),
            ]);
        if let Some(proof) = proof {
            req = req.header("dpop", proof);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap())
        }
    };
    let bad = [
        ("a NUL", "id\u{0}1".to_owned()),
        ("a newline", "id\n1".to_owned()),
        ("empty", String::new()),
        ("over 255 bytes", "é".repeat(128)),
    ];
    for (name, jti) in &bad {
        let (status, body) = token(assertion(jti), None).await;
        assert_eq!(status, 401, "{name}: {body}");
        assert_eq!(body["error"], "invalid_client", "{name}: {body}");
        assert_eq!(
            body["error_description"],
            "Client authentication failed: the client assertion's jti must be 1 to 255 bytes with no control characters",
            "{name}"
        );
    }
    let proofs = ProofKey::generate();
    let endpoint = format!("{DEFAULT_ISSUER}/oauth/token");
    for (name, jti) in &bad {
        let proof = proofs.proof_with_claims("POST", &endpoint, &json!({ "jti": jti }));
        let fresh = assertion(&uuid::Uuid::new_v4().to_string());
        let (status, body) = token(fresh, Some(proof)).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(body["error"], "invalid_dpop_proof", "{name}: {body}");
        assert_eq!(
            body["error_description"],
            "The DPoP proof's jti must be 1 to 255 bytes with no control characters",
            "{name}"
        );
    }
    // The store works all along: a good assertion with a good proof gets its token.
    let proof = proofs.proof("POST", &endpoint, None, 0);
    let (status, body) = token(assertion(&uuid::Uuid::new_v4().to_string()), Some(proof)).await;
    assert_eq!(status, 200, "{body}");
    let metrics = served.metrics().await;
    assert!(
        series(&metrics, "replay_store_errors_total").is_empty(),
        "the replay store was asked and failed: {metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "auth_token_requests_failed_total",
            &[("client_id", &id), ("reason", "assertion_jti")]
        ),
        bad.len() as f64
    );
    let (status, ready) = served.get_json("/readyz").await;
    assert_eq!(
        (status, &ready["status"]),
        (200, &json!("ready")),
        "{ready}"
    );
    let logs = served.logs();
    assert!(!logs.contains("single-use check failed"), "{logs}");
}

async fn a_jti_no_store_can_keep_is_refused_with_the_database_as_the_store(backend: Backend) {
    a_jti_no_store_can_keep_is_refused_as_the_clients_mistake(backend, false).await;
}

async fn a_jti_no_store_can_keep_is_refused_with_redis_as_the_store(backend: Backend) {
    a_jti_no_store_can_keep_is_refused_as_the_clients_mistake(backend, true).await;
}

on_both_backends!(a_jti_no_store_can_keep_is_refused_with_the_database_as_the_store);
on_sqlite!(a_jti_no_store_can_keep_is_refused_with_redis_as_the_store);
