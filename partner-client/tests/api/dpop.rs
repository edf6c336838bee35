//! DPoP end to end: the partner client asks the real auth-server for a token bound to its
//! key and calls the real intake-api with a new proof each time; the token endpoint refuses
//! a proof used twice or made for another URL; the bound token is of no use as a bearer one.

use auth_server::commands::ClientCommand;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use partner_client::{
    AttachRequest, AuthMethod, Client, Credentials, DEFAULT_RENEW_BEFORE, DpopKey, TokenSource,
};
use serde_json::Value;
use test_support::on_both_backends;

use crate::helpers::{
    AuthServer, Backend, INTAKE, IntakeServer, TestDb, fresh_email, product, purchase,
};

/// An auth-server whose issuer is the address it is called at, as in production, where
/// the token endpoint's URL a proof names is the issuer's; an intake-api beside it; a
/// partner's credentials.
struct Bound {
    auth: AuthServer,
    intake: IntakeServer,
    client_id: String,
    client_secret: String,
    _dbs: (TestDb, TestDb),
}

impl Bound {
    async fn start(backend: Backend) -> Self {
        Self::start_with(backend, None).await
    }

    /// [`Self::start`] with both services' DPoP nonces set to `nonces` (their default
    /// when `None`: off).
    async fn start_with(backend: Backend, nonces: Option<bool>) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let auth_db = TestDb::auth(backend).await;
        let auth = AuthServer::start(&auth_db.url, |c| {
            c.listen.bind = format!("127.0.0.1:{port}");
            c.issuer = format!("http://127.0.0.1:{port}");
            c.dpop_nonce = nonces;
        })
        .await
        .expect("auth-server starts");
        let intake_db = TestDb::intake(backend).await;
        let intake = IntakeServer::start(&intake_db.url, &auth, |c| c.dpop_nonce = nonces)
            .await
            .expect("intake-api starts");
        assert!(intake.wait_ready().await, "intake-api never became ready");
        let (id, secret) = auth.create_client(INTAKE).await;
        Self {
            client_id: id,
            client_secret: secret,
            auth,
            intake,
            _dbs: (auth_db, intake_db),
        }
    }

    fn credentials(&self) -> Credentials {
        Credentials::new(&self.client_id, &self.client_secret)
    }

    fn token_url(&self) -> String {
        format!("{}/oauth/token", self.auth.base_url())
    }

    fn tokens(&self, key: DpopKey) -> TokenSource {
        TokenSource::new(
            reqwest::Client::new(),
            self.token_url().parse().unwrap(),
            self.credentials(),
            AuthMethod::Post,
            INTAKE.to_owned(),
            DEFAULT_RENEW_BEFORE,
        )
        .with_dpop(key)
    }

    /// A token request with `proofs` as `DPoP` headers: its status and body.
    async fn token_with(&self, proofs: &[String]) -> (u16, Value) {
        let mut request = reqwest::Client::new().post(self.token_url()).form(&[
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.as_str()),
            ("scope", INTAKE),
        ]);
        for proof in proofs {
            request = request.header("dpop", proof);
        }
        let resp = request.send().await.expect("the auth-server answers");
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("a JSON body"))
    }
}

/// The claims of a JWT, unverified.
fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON")
}

async fn a_dpop_client_gets_bound_tokens_and_calls_with_a_proof_each_time(backend: Backend) {
    let bound = Bound::start(backend).await;
    let key = DpopKey::generate().unwrap();
    let client = Client::builder(
        bound.credentials(),
        bound.token_url(),
        bound.intake.base_url(),
    )
    .dpop(key.clone())
    .build()
    .expect("the client builds");
    let email = fresh_email();
    let enquiry = purchase("brand_a", &email);
    let created = client.submit(&enquiry, None).await.expect("submitted");
    assert!(created.created());
    // A read is proved too, with its own method.
    let case = client
        .case(&created.body.reference)
        .await
        .expect("read back");
    assert_eq!(case.reference, created.body.reference);
    assert!(
        !client
            .submit(&enquiry, None)
            .await
            .expect("updated")
            .created()
    );
    let attach = AttachRequest {
        email,
        product_uuid: product(),
    };
    assert_eq!(
        client.attach(&attach, None).await.expect("attached").status,
        200
    );

    // The token is bound to the key, and is nothing without it.
    let token = bound.tokens(key.clone()).current().await.expect("a token");
    let raw = token.bound_token().expect("a DPoP-bound token").to_owned();
    assert!(token.header().to_str().unwrap().starts_with("DPoP "));
    assert_eq!(claims_of(&raw)["cnf"]["jkt"], key.thumbprint());
    let as_bearer = reqwest::Client::new()
        .post(format!(
            "{}/partners/external/intake",
            bound.intake.base_url()
        ))
        .bearer_auth(&raw)
        .json(&purchase("brand_a", &fresh_email()))
        .send()
        .await
        .expect("the intake-api answers");
    assert_eq!(as_bearer.status(), 401);
    let challenge = as_bearer.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with(r#"DPoP error="invalid_token""#),
        "{challenge}"
    );
}

async fn the_token_endpoint_takes_each_proof_once_and_only_for_itself(backend: Backend) {
    let bound = Bound::start(backend).await;
    let key = DpopKey::generate().unwrap();
    let url = bound.token_url();
    let proof = key.proof("POST", &url, None).unwrap();
    let (status, body) = bound.token_with(std::slice::from_ref(&proof)).await;
    assert_eq!(
        (status, body["token_type"].as_str()),
        (200, Some("DPoP")),
        "{body}"
    );
    let (status, plain) = bound.token_with(&[]).await;
    assert_eq!(
        (status, plain["token_type"].as_str()),
        (200, Some("Bearer")),
        "{plain}"
    );
    assert!(claims_of(plain["access_token"].as_str().unwrap())["cnf"].is_null());

    let metadata: Value = reqwest::get(format!(
        "{}/.well-known/oauth-authorization-server",
        bound.auth.base_url()
    ))
    .await
    .expect("metadata")
    .json()
    .await
    .expect("JSON");
    assert_eq!(
        metadata["dpop_signing_alg_values_supported"],
        serde_json::json!(["ES256", "PS256", "RS256", "EdDSA"])
    );

    let another = format!("{}/oauth/other", bound.auth.base_url());
    for (case, proofs) in [
        ("the same proof again", vec![proof]),
        (
            "a proof for another URL",
            vec![key.proof("POST", &another, None).unwrap()],
        ),
        (
            "a proof for GET",
            vec![key.proof("GET", &url, None).unwrap()],
        ),
        (
            "two proofs",
            vec![
                key.proof("POST", &url, None).unwrap(),
                key.proof("POST", &url, None).unwrap(),
            ],
        ),
        ("not a proof", vec!["a.b.c".to_owned()]),
    ] {
        let (status, body) = bound.token_with(&proofs).await;
        assert_eq!(status, 400, "{case}: {body}");
        assert_eq!(body["error"], "invalid_dpop_proof", "{case}: {body}");
    }
}

async fn a_client_that_requires_dpop_is_refused_a_bearer_token(backend: Backend) {
    let bound = Bound::start(backend).await;
    let set = |required| {
        bound.auth.client_cmd(ClientCommand::SetDpop {
            client_id: bound.client_id.clone(),
            require_dpop: required,
        })
    };
    let changed = set(true).await.expect("set-dpop");
    assert_eq!(changed["dpop_required"], true, "{changed}");
    let (status, body) = bound.token_with(&[]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_dpop_proof")),
        "{body}"
    );
    assert!(
        body["hint"].as_str().unwrap().contains("dpop_required"),
        "{body}"
    );
    let key = DpopKey::generate().unwrap();
    let proof = key.proof("POST", &bound.token_url(), None).unwrap();
    let (status, body) = bound.token_with(&[proof]).await;
    assert_eq!(
        (status, body["token_type"].as_str()),
        (200, Some("DPoP")),
        "{body}"
    );
    set(false).await.expect("set-dpop");
    let (status, body) = bound.token_with(&[]).await;
    assert_eq!(
        (status, body["token_type"].as_str()),
        (200, Some("Bearer")),
        "{body}"
    );
}

/// A proof spent at one auth-server is refused at another on the same database (no Redis):
/// the replicas share what was used, not each its own memory of it.
async fn a_proof_spent_at_one_auth_server_is_refused_at_another(backend: Backend) {
    let bound = Bound::start(backend).await;
    let issuer = bound.auth.config.issuer.clone();
    let replica = AuthServer::start(bound.auth.config.database.url(), |c| {
        c.issuer = issuer;
    })
    .await
    .expect("second auth-server starts");
    let key = DpopKey::generate().unwrap();
    let proof = key.proof("POST", &bound.token_url(), None).unwrap();
    assert_eq!(bound.token_with(std::slice::from_ref(&proof)).await.0, 200);
    let at_replica = |proof: String| {
        reqwest::Client::new()
            .post(format!("{}/oauth/token", replica.base_url()))
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", bound.client_id.as_str()),
                ("client_secret", bound.client_secret.as_str()),
                ("scope", INTAKE),
            ])
            .header("dpop", proof)
            .send()
    };
    let fresh = key.proof("POST", &bound.token_url(), None).unwrap();
    let control = at_replica(fresh).await.expect("the replica answers");
    assert_eq!(control.status(), 200, "a fresh proof at the replica");
    let replayed = at_replica(proof).await.expect("the replica answers");
    assert_eq!(replayed.status(), 400);
    let body: Value = replayed.json().await.expect("JSON");
    assert_eq!(body["error"], "invalid_dpop_proof", "{body}");
}

/// With the Redis that keeps used proofs unreachable, the token endpoint answers a DPoP
/// request 503 with Retry-After instead of trusting its own memory; plain requests go on.
async fn the_token_endpoint_fails_closed_while_its_replay_store_is_down(backend: Backend) {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let db = TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |c| {
        c.redis_url = Some(format!("redis://127.0.0.1:{closed}").parse().unwrap());
    })
    .await
    .expect("auth-server starts");
    let (id, secret) = auth.create_client(INTAKE).await;
    let url = format!("{}/oauth/token", auth.config.issuer.trim_end_matches('/'));
    let request = |proof: Option<String>| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/oauth/token", auth.base_url()))
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", id.as_str()),
                ("client_secret", secret.as_str()),
                ("scope", INTAKE),
            ]);
        if let Some(proof) = proof {
            request = request.header("dpop", proof);
        }
        request.send()
    };
    let key = DpopKey::generate().unwrap();
    let refused = request(Some(key.proof("POST", &url, None).unwrap()))
        .await
        .expect("the auth-server answers");
    assert_eq!(refused.status(), 503);
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("5")
    );
    let body: Value = refused.json().await.expect("JSON");
    assert_eq!(body["error"], "temporarily_unavailable", "{body}");
    let plain = request(None).await.expect("the auth-server answers");
    assert_eq!(plain.status(), 200);
}

on_both_backends!(
    a_proof_spent_at_one_auth_server_is_refused_at_another,
    the_token_endpoint_fails_closed_while_its_replay_store_is_down,
);

/// With server nonces on at both services, the client meets `use_dpop_nonce` once at each,
/// keeps the nonce every answer brings, and gets past a nonce gone stale by itself.
async fn with_server_nonces_the_client_asks_once_per_service_and_goes_on(backend: Backend) {
    let bound = Bound::start_with(backend, Some(true)).await;
    let key = DpopKey::generate().unwrap();
    let client = Client::builder(
        bound.credentials(),
        bound.token_url(),
        bound.intake.base_url(),
    )
    .dpop(key.clone())
    .build()
    .expect("the client builds");
    let created = client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect("submitted");
    assert!(created.created());
    let intake = bound.intake.base_url();
    assert!(key.nonce_for(&bound.token_url()).is_some());
    let given = key.nonce_for(&intake).expect("the intake-api's nonce");
    // One refusal at the token endpoint, then none: the nonce is carried from then on.
    let metrics = reqwest::get(format!("{}/metrics", bound.auth.base_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let refusals: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains(&bound.client_id) && l.contains(r#"reason="use_dpop_nonce""#))
        .collect();
    assert_eq!(refusals.len(), 1, "{metrics}");
    assert!(refusals[0].ends_with(" 1"), "{}", refusals[0]);

    // A nonce the server no longer takes (as after a minute idle): refused once, then
    // sent again with the answer's.
    let mut stale = reqwest::header::HeaderMap::new();
    stale.insert("dpop-nonce", "c3RhbGUtbm9uY2U".parse().unwrap());
    key.remember_nonce(&intake, &stale);
    let case = client
        .case(&created.body.reference)
        .await
        .expect("read back past a stale nonce");
    assert_eq!(case.reference, created.body.reference);
    let fresh = key.nonce_for(&intake).unwrap();
    assert_ne!(fresh, "c3RhbGUtbm9uY2U");
    assert!(!given.is_empty());
}

on_both_backends!(
    with_server_nonces_the_client_asks_once_per_service_and_goes_on,
    a_dpop_client_gets_bound_tokens_and_calls_with_a_proof_each_time,
    the_token_endpoint_takes_each_proof_once_and_only_for_itself,
    a_client_that_requires_dpop_is_refused_a_bearer_token,
);
