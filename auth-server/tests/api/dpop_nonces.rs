//! DPoP server nonces at the auth-server (`AUTH_DPOP_NONCE`, RFC 9449 sections 8 and 9):
//! every answer carries one; a proof without a current one is refused with
//! `use_dpop_nonce`, at the token endpoint and at `/revocations`; replicas sharing the
//! key-encryption key take each other's, and nothing else does.

use serde_json::{Value, json};
use shared::claims::scopes::REVOCATIONS_READ;
use test_support::on_both_backends;

use crate::helpers::{AuthServer, Backend, INTAKE, ProofKey, TestDb, metrics_text, sample};

async fn server(
    db: &TestDb,
    configure: impl FnOnce(&mut auth_server::config::Config),
) -> AuthServer {
    AuthServer::start(&db.url, |c| {
        c.dpop_nonce = Some(true);
        configure(c);
    })
    .await
    .expect("auth-server starts")
}

/// A token request by secret with `proof`: status, the answer's nonce, and body.
async fn token(
    auth: &AuthServer,
    (id, secret): (&str, &str),
    scope: &str,
    proof: &str,
) -> (u16, Option<String>, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/oauth/token", auth.base_url()))
        .header("dpop", proof)
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", id),
            ("client_secret", secret),
            ("scope", scope),
        ])
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let nonce = nonce_of(&resp);
    (status, nonce, resp.json().await.unwrap())
}

fn nonce_of(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get("dpop-nonce")
        .map(|v| v.to_str().unwrap().to_owned())
}

/// NQCHAR (RFC 9449 section 8.1): printable ASCII but space, `"` and `\`.
fn is_nqchar(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
}

async fn the_token_endpoint_asks_for_its_nonce_and_takes_it_at_every_replica(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, |_| {}).await;
    let replica = server(&db, |c| c.issuer = auth.config.issuer.clone()).await;
    let stranger_db = TestDb::auth(backend).await;
    let stranger = server(&stranger_db, |c| {
        c.issuer = auth.config.issuer.clone();
        c.key_encryption_key = Some(
            "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
                .parse()
                .expect("infallible"),
        );
    })
    .await;
    let (id, secret) = auth.create_client(INTAKE).await;
    let client = (id.as_str(), secret.as_str());
    let endpoint = format!("{}/oauth/token", auth.config.issuer());
    let key = ProofKey::generate();

    // First contact: no nonce yet, so the proof is refused and the answer hands one out.
    let (status, nonce, body) = token(
        &auth,
        client,
        INTAKE,
        &key.proof("POST", &endpoint, None, 0),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("use_dpop_nonce")),
        "{body}"
    );
    assert!(
        body["hint"].as_str().unwrap().contains("DPoP-Nonce"),
        "{body}"
    );
    let nonce = nonce.expect("a nonce with the refusal");
    assert!(is_nqchar(&nonce), "{nonce}");

    // With it, a token; the answer carries a nonce too, the same within its step.
    let proof = key.proof_with_nonce("POST", &endpoint, None, 0, Some(&nonce));
    let (status, next, body) = token(&auth, client, INTAKE, &proof).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_type"], "DPoP", "{body}");
    assert!(next.as_deref().is_some_and(is_nqchar));
    // The same proof twice is refused as replayed, not for its nonce.
    let (status, _, body) = token(&auth, client, INTAKE, &proof).await;
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("invalid_dpop_proof")),
        "{body}"
    );

    // Another replica takes the nonce; a deployment with another key does not.
    let proof = key.proof_with_nonce("POST", &endpoint, None, 0, Some(&nonce));
    let (status, _, body) = token(&replica, client, INTAKE, &proof).await;
    assert_eq!(status, 200, "{body}");
    let (other_id, other_secret) = stranger.create_client(INTAKE).await;
    let proof = key.proof_with_nonce("POST", &endpoint, None, 0, Some(&nonce));
    let (status, theirs, body) = token(&stranger, (&other_id, &other_secret), INTAKE, &proof).await;
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("use_dpop_nonce")),
        "{body}"
    );
    assert_ne!(theirs.as_deref(), Some(nonce.as_str()));

    // Made-up nonces, hostile bytes among them, are refused the same way.
    for made_up in [
        "x",
        "",
        "\u{0}",
        &"A".repeat(22),
        &nonce.to_ascii_lowercase(),
    ] {
        if made_up == nonce {
            continue;
        }
        let proof = key.proof_with_nonce("POST", &endpoint, None, 0, Some(made_up));
        let (status, _, body) = token(&auth, client, INTAKE, &proof).await;
        assert_eq!(
            (status, &body["error"]),
            (400, &json!("use_dpop_nonce")),
            "{made_up:?}: {body}"
        );
    }

    // The served document says so.
    let doc: Value = reqwest::get(format!("{}/openapi.json", auth.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        doc["info"]["description"]
            .as_str()
            .unwrap()
            .contains("DPoP-Nonce"),
        "{}",
        doc["info"]
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["resourceServerToken"]["x-dpop"]["nonce"],
        true
    );

    // Every answer carries one, a refusal's and an operational endpoint's too.
    for path in ["/healthz", "/.well-known/jwks.json", "/no-such-path"] {
        let resp = reqwest::get(format!("{}{path}", auth.base_url()))
            .await
            .unwrap();
        assert!(nonce_of(&resp).as_deref().is_some_and(is_nqchar), "{path}");
    }
    let metrics = metrics_text(&auth.base_url()).await;
    let counted = sample(
        &metrics,
        "auth_token_requests_failed_total",
        &[("client_id", &id), ("reason", "use_dpop_nonce")],
    );
    assert!(counted >= 5.0, "{metrics}");
}

/// Without the setting (and outside FAPI 2.0), no answer carries a nonce and proofs need
/// none: nothing changes for today's deployments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_setting_no_nonce_is_given_or_asked_for() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    let endpoint = format!("{}/oauth/token", auth.config.issuer());
    let proof = ProofKey::generate().proof("POST", &endpoint, None, 0);
    let (status, nonce, body) = token(&auth, (&id, &secret), INTAKE, &proof).await;
    assert_eq!((status, nonce), (200, None), "{body}");
}

/// `/revocations` under the `DPoP` scheme asks for the nonce as a resource server does:
/// 401 with `DPoP error="use_dpop_nonce"` and the nonce in the answer.
async fn the_revocation_list_asks_for_a_nonce_too(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = server(&db, |_| {}).await;
    let (id, secret) = auth.create_client(REVOCATIONS_READ).await;
    let issuer = auth.config.issuer().to_owned();
    let key = ProofKey::generate();
    let endpoint = format!("{issuer}/oauth/token");
    let (_, nonce, _) = token(
        &auth,
        (&id, &secret),
        REVOCATIONS_READ,
        &key.proof("POST", &endpoint, None, 0),
    )
    .await;
    let proof = key.proof_with_nonce("POST", &endpoint, None, 0, nonce.as_deref());
    let (status, _, body) = token(&auth, (&id, &secret), REVOCATIONS_READ, &proof).await;
    assert_eq!(status, 200, "{body}");
    let bound = body["access_token"].as_str().unwrap().to_owned();

    let url = format!("{issuer}/revocations");
    let read = |nonce: Option<String>| {
        let proof = key.proof_with_nonce("GET", &url, Some(&bound), 0, nonce.as_deref());
        let request = reqwest::Client::new()
            .get(format!("{}/revocations", auth.base_url()))
            .header("authorization", format!("DPoP {bound}"))
            .header("dpop", proof);
        async move { request.send().await.unwrap() }
    };
    let refused = read(None).await;
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.starts_with(r#"DPoP error="use_dpop_nonce""#),
        "{challenge}"
    );
    let nonce = nonce_of(&refused).expect("a nonce with the refusal");
    let read_back = read(Some(nonce)).await;
    assert_eq!(read_back.status(), 200);
    assert!(nonce_of(&read_back).is_some());
}

on_both_backends!(
    the_token_endpoint_asks_for_its_nonce_and_takes_it_at_every_replica,
    the_revocation_list_asks_for_a_nonce_too,
);
