//! The FAPI 2.0 profile (`AUTH_FAPI2`): the token endpoint takes private_key_jwt only,
//! signed PS256, ES256 or EdDSA, issues DPoP-bound tokens only, and says so in its
//! metadata and health answers; `/revocations` takes no bearer token.

use auth_server::commands::ClientCommand;
use auth_server::store::clients::AuthMethod;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::Algorithm;
use serde_json::{Value, json};
use shared::claims::scopes::REVOCATIONS_READ;
use test_support::on_both_backends;

use crate::helpers::{AuthServer, Backend, INTAKE, ProofKey, TestDb, metrics_text, sample};
use crate::private_key_jwt::{JWT_BEARER, PartnerKey, claims, register_for as register, send};

/// An auth-server with the profile on, whose issuer is the address it is called at; its
/// DPoP nonces, on by default under the profile, are off here and tested in `dpop_nonces`.
async fn fapi2_server(db: &TestDb) -> AuthServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    AuthServer::start(&db.url, |c| {
        c.listen.bind = format!("127.0.0.1:{port}");
        c.issuer = format!("http://127.0.0.1:{port}");
        c.fapi2 = true;
        c.dpop_nonce = Some(false);
    })
    .await
    .expect("auth-server starts")
}

/// A token request with `assertion`, for `scope`, with `proof` as its `DPoP` header.
async fn token(
    auth: &AuthServer,
    assertion: &str,
    scope: &str,
    proof: Option<&str>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/oauth/token", auth.base_url()))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", scope),
            ("client_assertion_type", JWT_BEARER),
            ("client_assertion", assertion),
        ]);
    if let Some(proof) = proof {
        req = req.header("dpop", proof);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn token_endpoint(auth: &AuthServer) -> String {
    format!("{}/oauth/token", auth.config.issuer())
}

/// A proof for `POST` on the token endpoint whose header names `alg`, with an EC key: the
/// algorithm is refused before the key or the signature is looked at.
fn proof_naming(auth: &AuthServer, alg: &str) -> String {
    let key = PartnerKey::p256("dpop");
    let header = json!({"typ": "dpop+jwt", "alg": alg, "jwk": key.jwk});
    let claims = json!({
        "jti": uuid::Uuid::new_v4().to_string(),
        "htm": "POST",
        "htu": token_endpoint(auth),
        "iat": chrono::Utc::now().timestamp(),
    });
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    format!("{input}.c2lnbmF0dXJl")
}

async fn get_json(url: &str) -> (u16, Value) {
    let resp = reqwest::get(url).await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

async fn the_token_endpoint_takes_private_key_jwt_and_dpop_only(backend: Backend) {
    let db = TestDb::auth(backend).await;
    // A secret client made before the switch, by a server without it.
    let before = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (secret_id, secret) = before.create_client(INTAKE).await;
    let auth = fapi2_server(&db).await;
    let base = auth.base_url();

    let (_, metadata) = get_json(&format!("{base}/.well-known/oauth-authorization-server")).await;
    assert_eq!(
        metadata["token_endpoint_auth_methods_supported"],
        json!(["private_key_jwt"])
    );
    let algs = json!(["PS256", "ES256", "EdDSA"]);
    assert_eq!(
        metadata["token_endpoint_auth_signing_alg_values_supported"],
        algs
    );
    assert_eq!(metadata["dpop_signing_alg_values_supported"], algs);
    for path in ["/healthz", "/readyz"] {
        let (status, body) = get_json(&format!("{base}{path}")).await;
        assert_eq!((status, &body["profile"]), (200, &json!("fapi2")), "{body}");
    }
    let (_, doc) = get_json(&format!("{base}/openapi.json")).await;
    assert!(
        doc["info"]["description"]
            .as_str()
            .unwrap()
            .contains("FAPI 2.0 Security Profile"),
        "{}",
        doc["info"]
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["resourceServerToken"]["x-dpop"],
        json!({"required": true, "signingAlgorithms": algs, "nonce": false})
    );

    // No secret client is made, and none is taken: the answer is the same for a real
    // client's right secret as for an id no client has.
    let refused = auth
        .client_cmd(ClientCommand::Create {
            name: "Secret partner".into(),
            scopes: INTAKE.into(),
            brands: None,
            auth_method: AuthMethod::ClientSecret,
            jwks_file: None,
            jwks_uri: None,
            sandbox: false,
        })
        .await
        .expect_err("a secret client under FAPI 2.0");
    assert!(refused.to_string().contains("AUTH_FAPI2"), "{refused}");
    let basic = format!("Basic {}", STANDARD.encode(format!("{secret_id}:{secret}")));
    let form = [("grant_type", "client_credentials"), ("scope", INTAKE)];
    let cases = [
        send(&auth, &form, Some(basic)).await,
        send(
            &auth,
            &[
                ("grant_type", "client_credentials"),
                ("scope", INTAKE),
                ("client_id", &secret_id),
                ("client_secret", &secret),
            ],
            None,
        )
        .await,
        send(
            &auth,
            &[
                ("grant_type", "client_credentials"),
                ("scope", INTAKE),
                ("client_id", "nobody"),
                ("client_secret", "guess"),
            ],
            None,
        )
        .await,
    ];
    for (status, body) in &cases {
        assert_eq!(*status, 401, "{body}");
        assert_eq!(body["error"], "invalid_client", "{body}");
        assert!(
            body["error_description"]
                .as_str()
                .unwrap()
                .contains("private_key_jwt"),
            "{body}"
        );
        assert_eq!(body, &cases[2].1);
    }
    let metrics = metrics_text(&base).await;
    let counted = sample(
        &metrics,
        "auth_token_requests_failed_total",
        &[("client_id", &secret_id), ("reason", "secret_not_accepted")],
    );
    assert_eq!(counted, 2.0, "{metrics}");

    let keys = [
        PartnerKey::p256("ec"),
        PartnerKey::rsa("rsa", Algorithm::PS256),
        PartnerKey::ed25519("ed"),
    ];
    let id = register(&auth, &[&keys[0], &keys[1], &keys[2]], INTAKE).await;
    let proof_key = ProofKey::generate();
    // Without a proof, no token: every token is DPoP-bound.
    let (status, body) = token(&auth, &keys[0].sign(&claims(&auth, &id)), INTAKE, None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "invalid_dpop_proof", "{body}");
    let hint = body["hint"].as_str().unwrap();
    assert!(
        hint.contains("PS256, ES256, EdDSA") && hint.contains("dpop_required"),
        "{hint}"
    );
    for key in &keys {
        let proof = proof_key.proof("POST", &token_endpoint(&auth), None, 0);
        let assertion = key.sign(&claims(&auth, &id));
        let (status, body) = token(&auth, &assertion, INTAKE, Some(&proof)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["token_type"], "DPoP", "{body}");
    }
    // Proofs the conformance suite sends that must pass here too: `iat` 10 s behind
    // (FAPI2SPFinalEnsureDpopProofWithIat10SecondsBeforeSucceeds), and `nbf` and `exp`
    // (FAPI2SPFinalCheckDpopProofNbfExp).
    let now = chrono::Utc::now().timestamp();
    let lenient = [
        (
            "iat 10 s behind",
            proof_key.proof("POST", &token_endpoint(&auth), None, -10),
        ),
        (
            "nbf and exp",
            proof_key.proof_with_claims(
                "POST",
                &token_endpoint(&auth),
                &json!({"nbf": now, "exp": now + 300}),
            ),
        ),
    ];
    for (case, proof) in lenient {
        let assertion = keys[0].sign(&claims(&auth, &id));
        let (status, body) = token(&auth, &assertion, INTAKE, Some(&proof)).await;
        assert_eq!(status, 200, "{case}: {body}");
        assert_eq!(body["token_type"], "DPoP", "{case}: {body}");
    }
    // RS256 is not FAPI 2.0's, with the very RSA key that signs PS256.
    let rs256 = PartnerKey::rsa("rsa", Algorithm::RS256);
    let proof = proof_key.proof("POST", &token_endpoint(&auth), None, 0);
    let (status, body) = token(
        &auth,
        &rs256.sign(&claims(&auth, &id)),
        INTAKE,
        Some(&proof),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (401, &json!("invalid_client")),
        "{body}"
    );
    // Nor is a proof signed RS256.
    let proof = proof_naming(&auth, "RS256");
    let (status, body) = token(
        &auth,
        &keys[0].sign(&claims(&auth, &id)),
        INTAKE,
        Some(&proof),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("invalid_dpop_proof")),
        "{body}"
    );
    let metrics = metrics_text(&base).await;
    for reason in ["assertion_algorithm", "proof_alg", "dpop_required"] {
        let counted = sample(
            &metrics,
            "auth_token_requests_failed_total",
            &[("client_id", &id), ("reason", reason)],
        );
        assert_eq!(counted, 1.0, "{reason}: {metrics}");
    }
}

/// Under the profile `/revocations` takes no bearer token, even one issued before the
/// switch and still valid; a resource server's DPoP-bound token with its proof reads it.
async fn the_revocation_list_takes_no_bearer_token(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let before = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (reader_id, reader_secret) = before.create_client(REVOCATIONS_READ).await;
    let bearer = before
        .token(&reader_id, &reader_secret, REVOCATIONS_READ)
        .await;
    let auth = fapi2_server(&db).await;
    let url = format!("{}/revocations", auth.base_url());

    let resp = reqwest::Client::new()
        .get(&url)
        .bearer_auth(&bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let challenge = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.starts_with(r#"DPoP error="invalid_token""#)
            && challenge.contains(r#"algs="PS256 ES256 EdDSA""#),
        "{challenge}"
    );
    let resp = reqwest::get(&url).await.unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let challenge = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("DPoP scope="), "{challenge}");
    let metrics = metrics_text(&auth.base_url()).await;
    let counted = sample(
        &metrics,
        "auth_revocations_refused_total",
        &[("reason", "bearer_not_accepted")],
    );
    // The metrics are the test process's, shared with the other backend's run.
    assert!(counted >= 1.0, "{metrics}");

    let key = PartnerKey::p256("reader");
    let reader = register(&auth, &[&key], REVOCATIONS_READ).await;
    let proof_key = ProofKey::generate();
    let proof = proof_key.proof("POST", &token_endpoint(&auth), None, 0);
    let (status, body) = token(
        &auth,
        &key.sign(&claims(&auth, &reader)),
        REVOCATIONS_READ,
        Some(&proof),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let bound = body["access_token"].as_str().unwrap();
    let proof = proof_key.proof(
        "GET",
        &format!("{}/revocations", auth.config.issuer()),
        Some(bound),
        0,
    );
    let resp = reqwest::Client::new()
        .get(&url)
        .header("authorization", format!("DPoP {bound}"))
        .header("dpop", proof)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}

/// Off, the switch changes nothing: the metadata offers secrets and RS256, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_switch_the_metadata_offers_every_method() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (_, metadata) = get_json(&format!(
        "{}/.well-known/oauth-authorization-server",
        auth.base_url()
    ))
    .await;
    assert_eq!(
        metadata["token_endpoint_auth_methods_supported"],
        json!([
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt"
        ])
    );
    assert_eq!(
        metadata["dpop_signing_alg_values_supported"],
        json!(["ES256", "PS256", "RS256", "EdDSA"])
    );
    let (_, health) = get_json(&format!("{}/healthz", auth.base_url())).await;
    assert_eq!(health, json!({"status": "ok", "profile": "standard"}));
}

on_both_backends!(
    the_token_endpoint_takes_private_key_jwt_and_dpop_only,
    the_revocation_list_takes_no_bearer_token,
);

/// The value of the unlabelled gauge `name` in a scrape, when it has one.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// Under `AUTH_FAPI2` the default key signs RS256, which FAPI 2.0 does not allow, and the
/// server cannot move by itself (the intake-api and the tokens in flight follow a staged
/// rotation): it says so at start (a WARN naming the algorithm), in `/readyz`'s `warnings`
/// (staying ready), and by `auth_fapi2_token_alg_nonconformant` at 1. Once `key rotate --alg
/// ES256` has the new key signing, the warning is gone and the gauge is 0. Each server in a
/// process of its own, so the gauge and the log are its alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_fapi2_an_rs256_signing_key_is_told_at_start_in_readyz_and_by_a_gauge() {
    use crate::helpers::{Served, eventually, run};
    use std::time::Duration;
    const NONCONFORMANT: &str = "auth_fapi2_token_alg_nonconformant";
    let db = TestDb::auth(Backend::Sqlite).await;
    let served = Served::start(&db.url, &[("AUTH_FAPI2", "true")]).await;
    let lines = served.log_lines();
    let warned = lines
        .iter()
        .find(|l| l["level"] == "WARN" && l["alg"] == "RS256")
        .unwrap_or_else(|| panic!("no warning at start: {}", served.logs()));
    let said = warned["message"].as_str().unwrap_or_default();
    assert!(said.contains("not FAPI 2.0 conformant"), "{said}");
    assert!(said.contains("key rotate --alg ES256"), "{said}");
    let (status, ready) = served.get_json("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "ready");
    let warning = ready["warnings"]["fapi2_token_signing"]
        .as_str()
        .unwrap_or_else(|| panic!("no warning in /readyz: {ready}"));
    assert!(warning.contains("signed RS256"), "{warning}");
    let flagged = eventually(Duration::from_secs(10), || async {
        (gauge(&served.metrics().await, NONCONFORMANT) == Some(1.0)).then_some(())
    })
    .await;
    assert!(flagged.is_some(), "{}", served.metrics().await);
    drop(served);

    let rotated = run(
        &db.url,
        &[
            "key",
            "rotate",
            "--alg",
            "ES256",
            "--publish-ahead-secs",
            "0",
            "-o",
            "json",
        ],
        &[],
    );
    assert_eq!(rotated.code, Some(0), "{}", rotated.stderr);
    let served = Served::start(&db.url, &[("AUTH_FAPI2", "true")]).await;
    let quiet = eventually(Duration::from_secs(10), || async {
        let (_, ready) = served.get_json("/readyz").await;
        ready.get("warnings").is_none().then_some(())
    })
    .await;
    assert!(quiet.is_some(), "{:?}", served.get_json("/readyz").await);
    let cleared = eventually(Duration::from_secs(20), || async {
        (gauge(&served.metrics().await, NONCONFORMANT) == Some(0.0)).then_some(())
    })
    .await;
    assert!(cleared.is_some(), "{}", served.metrics().await);
}

/// Outside the profile, RS256 is the spec's algorithm: nothing to warn of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_fapi2_an_rs256_signing_key_is_no_warning() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (status, ready) = get_json(&format!("{}/readyz", auth.base_url())).await;
    assert_eq!(status, 200);
    assert!(ready.get("warnings").is_none(), "{ready}");
}
