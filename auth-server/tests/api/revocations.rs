//! `/revocations` lists disabled clients only to resource servers: a token of a client
//! granted `revocations:read`, verified against the keys this server publishes.

use auth_server::commands::ClientCommand;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use shared::claims::scopes::REVOCATIONS_READ;
use test_support::document::Served;
use test_support::on_both_backends;

use crate::helpers::{Backend, INTAKE, TestApp, metrics_text, sample};

/// What `/revocations` answers with `authorization` as the header: status, the
/// `WWW-Authenticate` challenge, and the body.
async fn revocations(app: &TestApp, authorization: Option<&str>) -> (u16, String, Value) {
    let mut request = app.http.get(app.url("/revocations"));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let resp = request.send().await.expect("revocations");
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().expect("ascii").to_owned())
        .unwrap_or_default();
    let body = resp.json().await.expect("a JSON body");
    (status, challenge, body)
}

/// `jwt` with its payload replaced by `claims`, the header and signature kept.
fn with_claims(jwt: &str, claims: &Value) -> String {
    let parts: Vec<&str> = jwt.split('.').collect();
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{}.{payload}.{}", parts[0], parts[2])
}

/// `jwt`'s claims.
fn claims_of(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).expect("a payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON")
}

async fn the_revocation_list_is_read_only_with_a_resource_servers_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (reader_id, reader_secret) = app.auth.create_client(REVOCATIONS_READ).await;
    let reader = app
        .auth
        .token(&reader_id, &reader_secret, REVOCATIONS_READ)
        .await;
    let partner = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    // A disabled client, so a leak would show in any body below.
    let (disabled_id, _) = app.auth.create_client(INTAKE).await;
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: disabled_id.clone(),
        })
        .await
        .expect("client disable");

    let (status, challenge, body) = revocations(&app, None).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(challenge, r#"Bearer scope="revocations:read""#);
    assert_eq!(body["error"], "invalid_token");

    // What a thief might try: client credentials instead of a token, garbage, a partner's
    // token, a token re-signed by nobody (alg none), one whose claims were edited.
    let mut claims = claims_of(&partner);
    claims["scope"] = json!(REVOCATIONS_READ);
    let edited = with_claims(&partner, &claims);
    let header = URL_SAFE_NO_PAD.encode(
        json!({"alg": "none", "typ": "at+jwt", "kid": test_support::kid_of(&reader)}).to_string(),
    );
    let unsigned = format!("{header}.{}.", reader.split('.').nth(1).expect("payload"));
    // A critical extension nobody here understands: refused before any signature is checked,
    // as the intake-api refuses it (one check serves both).
    let critical = URL_SAFE_NO_PAD.encode(
        json!({"alg": "RS256", "typ": "at+jwt", "kid": test_support::kid_of(&reader), "crit": ["exp"]})
            .to_string(),
    );
    let critical = format!("{critical}.{}", reader.split_once('.').expect("parts").1);
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{reader_id}:{reader_secret}"))
    );
    for (what, value, expected) in [
        ("client credentials", basic, 401),
        ("garbage", "Bearer not-a-token".to_owned(), 401),
        ("edited claims", format!("Bearer {edited}"), 401),
        ("alg none", format!("Bearer {unsigned}"), 401),
        ("a critical extension", format!("Bearer {critical}"), 401),
        ("a partner's token", format!("Bearer {partner}"), 403),
    ] {
        let (status, challenge, body) = revocations(&app, Some(&value)).await;
        assert_eq!(status, expected, "{what}: {body}");
        let code = if expected == 403 {
            "insufficient_scope"
        } else {
            "invalid_token"
        };
        assert_eq!(body["error"], code, "{what}: {body}");
        // Credentials of another scheme are no bearer token at all: a bare challenge.
        if what == "client credentials" {
            assert_eq!(challenge, r#"Bearer scope="revocations:read""#);
        } else {
            assert!(
                challenge.contains(&format!("error=\"{code}\"")),
                "{what}: {challenge}"
            );
        }
        assert!(
            !body.to_string().contains(&disabled_id),
            "{what} saw the list"
        );
    }

    let (status, _, body) = revocations(&app, Some(&format!("Bearer {reader}"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"disabled_clients": [disabled_id]}));

    // A resource server's client that is disabled loses the list with its token.
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: reader_id.clone(),
        })
        .await
        .expect("client disable");
    let (status, _, body) = revocations(&app, Some(&format!("Bearer {reader}"))).await;
    assert_eq!(status, 401, "{body}");

    let metrics = metrics_text(&app.auth.base_url()).await;
    // Each refusal under its own reason, named as the intake-api names it.
    for reason in [
        "missing",
        "scope",
        "client_disabled",
        "malformed",
        "signature",
        "algorithm",
        "crit",
    ] {
        let counted = sample(
            &metrics,
            "auth_revocations_refused_total",
            &[("reason", reason)],
        );
        assert!(counted >= 1.0, "{reason} not counted: {metrics}");
    }
}

on_both_backends!(the_revocation_list_is_read_only_with_a_resource_servers_token,);

/// A token bound to a DPoP key is no bearer token: a resource server's client holding a
/// bound token gets 401 `invalid_token` sending it as `Bearer`, as at the intake-api, so a
/// thief holding only the token cannot read the list.
async fn a_dpop_bound_token_sent_as_bearer_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = crate::helpers::ProofKey::generate();
    let (bound, (reader_id, reader_secret)) = bound_reader_token(&app, &key).await;
    assert!(claims_of(&bound)["cnf"]["jkt"].is_string());

    let (status, challenge, body) = revocations(&app, Some(&format!("Bearer {bound}"))).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "invalid_token", "{body}");
    assert!(
        challenge.contains(r#"error="invalid_token""#),
        "{challenge}"
    );
    assert!(body.get("disabled_clients").is_none(), "{body}");
    let metrics = metrics_text(&app.auth.base_url()).await;
    let counted = sample(
        &metrics,
        "auth_revocations_refused_total",
        &[("reason", "bound_token_as_bearer")],
    );
    assert!(counted >= 1.0, "{metrics}");

    // The same client's bearer token still reads it.
    let reader = app
        .auth
        .token(&reader_id, &reader_secret, REVOCATIONS_READ)
        .await;
    let (status, _, body) = revocations(&app, Some(&format!("Bearer {reader}"))).await;
    assert_eq!(status, 200, "{body}");
}

on_both_backends!(a_dpop_bound_token_sent_as_bearer_is_refused,);

/// What `/revocations` answers to `Authorization: DPoP <token>` with `proofs` as the
/// `DPoP` headers, at `base`: status, challenge, `Retry-After`, and the body.
async fn revocations_dpop(
    base: &str,
    token: &str,
    proofs: &[&str],
) -> (u16, String, Option<String>, Value) {
    let mut request = reqwest::Client::new()
        .get(format!("{base}/revocations"))
        .header("authorization", format!("DPoP {token}"));
    for proof in proofs {
        request = request.header("dpop", *proof);
    }
    let resp = request.send().await.expect("revocations");
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().expect("ascii").to_owned())
    };
    let (challenge, retry_after) = (header("www-authenticate"), header("retry-after"));
    let status = resp.status().as_u16();
    let body = resp.json().await.expect("a JSON body");
    (status, challenge.unwrap_or_default(), retry_after, body)
}

/// A new resource server client's token bound to `key`, from `app`'s auth-server, and the
/// client's id and secret.
async fn bound_reader_token(
    app: &TestApp,
    key: &crate::helpers::ProofKey,
) -> (String, (String, String)) {
    let (reader_id, reader_secret) = app.auth.create_client(REVOCATIONS_READ).await;
    let endpoint = format!(
        "{}/oauth/token",
        app.auth.config.issuer.trim_end_matches('/')
    );
    let proof = key.proof("POST", &endpoint, None, 0);
    let (status, body) = app
        .token_with_proof(&reader_id, &reader_secret, REVOCATIONS_READ, &proof)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_type"], "DPoP", "{body}");
    let token = body["access_token"].as_str().expect("a token").to_owned();
    (token, (reader_id, reader_secret))
}

/// A DPoP-bound token reads the list as at the intake-api: under the `DPoP` scheme beside a
/// proof by its key for `GET` on the issuer's `/revocations`, each proof once, at every
/// replica. Every other way of sending it is refused, naming the proof or the token.
async fn a_dpop_bound_token_reads_the_list_once_per_fresh_proof_by_its_key(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = crate::helpers::ProofKey::generate();
    let (bound, _) = bound_reader_token(&app, &key).await;
    let url = format!(
        "{}/revocations",
        app.auth.config.issuer.trim_end_matches('/')
    );
    let base = app.auth.base_url();

    let proof = key.proof("GET", &url, Some(&bound), 0);
    let (status, _, _, body) = revocations_dpop(&base, &bound, &[&proof]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["disabled_clients"].is_array(), "{body}");

    // The same proof again, at this replica and at another on the same database.
    let other = test_support::AuthServer::start(&app.db.url, |_| {})
        .await
        .expect("a second replica");
    for at in [base.clone(), other.base_url()] {
        let (status, challenge, _, body) = revocations_dpop(&at, &bound, &[&proof]).await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["error"], "invalid_dpop_proof", "{body}");
        assert!(
            challenge.starts_with(r#"DPoP error="invalid_dpop_proof""#),
            "{challenge}"
        );
        assert!(body.get("disabled_clients").is_none(), "{body}");
    }
    // A fresh one works at the other replica.
    let fresh = key.proof("GET", &url, Some(&bound), 0);
    let (status, _, _, body) = revocations_dpop(&other.base_url(), &bound, &[&fresh]).await;
    assert_eq!(status, 200, "{body}");

    let stranger = crate::helpers::ProofKey::generate();
    let refused = [
        ("proof_missing", vec![]),
        (
            "proof_multiple",
            vec![
                key.proof("GET", &url, Some(&bound), 0),
                key.proof("GET", &url, Some(&bound), 0),
            ],
        ),
        ("proof_htm", vec![key.proof("POST", &url, Some(&bound), 0)]),
        (
            "proof_htu",
            vec![key.proof("GET", &format!("{url}/other"), Some(&bound), 0)],
        ),
        ("proof_ath", vec![key.proof("GET", &url, None, 0)]),
        (
            "proof_iat",
            vec![key.proof("GET", &url, Some(&bound), -400)],
        ),
    ];
    for (reason, proofs) in &refused {
        let proofs: Vec<&str> = proofs.iter().map(String::as_str).collect();
        let (status, challenge, _, body) = revocations_dpop(&base, &bound, &proofs).await;
        assert_eq!(status, 401, "{reason}: {body}");
        assert_eq!(body["error"], "invalid_dpop_proof", "{reason}: {body}");
        assert!(challenge.contains("algs="), "{challenge}");
    }
    // Another key's proof: the token is not this key's.
    let theirs = stranger.proof("GET", &url, Some(&bound), 0);
    let (status, challenge, _, body) = revocations_dpop(&base, &bound, &[&theirs]).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "invalid_token", "{body}");
    assert!(
        challenge.starts_with(r#"DPoP error="invalid_token""#),
        "{challenge}"
    );
    // A bearer token is no bound token: sent as DPoP, even with a proof, it is refused.
    let (reader_id, reader_secret) = app.auth.create_client(REVOCATIONS_READ).await;
    let bearer = app
        .auth
        .token(&reader_id, &reader_secret, REVOCATIONS_READ)
        .await;
    let proof = key.proof("GET", &url, Some(&bearer), 0);
    let (status, _, _, body) = revocations_dpop(&base, &bearer, &[&proof]).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "invalid_token", "{body}");

    let metrics = metrics_text(&base).await;
    for (reason, _) in &refused {
        let counted = sample(
            &metrics,
            "auth_revocations_refused_total",
            &[("reason", reason)],
        );
        assert!(counted >= 1.0, "{reason} not counted: {metrics}");
    }
    for reason in ["proof_replayed", "proof_key_mismatch", "token_not_bound"] {
        let counted = sample(
            &metrics,
            "auth_revocations_refused_total",
            &[("reason", reason)],
        );
        assert!(counted >= 1.0, "{reason} not counted: {metrics}");
    }
}

/// While the Redis keeping used proofs cannot be reached, a bound token's request is
/// refused for now (503 with `Retry-After`), never served on one replica's word; a bearer
/// token still reads the list.
async fn a_dpop_request_fails_closed_while_the_replay_store_is_down(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = crate::helpers::ProofKey::generate();
    let (bound, _) = bound_reader_token(&app, &key).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let cut_off = test_support::AuthServer::start(&app.db.url, |c| {
        c.redis_url = Some(format!("redis://127.0.0.1:{closed}").parse().unwrap());
    })
    .await
    .expect("a replica");
    let url = format!(
        "{}/revocations",
        app.auth.config.issuer.trim_end_matches('/')
    );
    let proof = key.proof("GET", &url, Some(&bound), 0);
    let (status, _, retry_after, body) =
        revocations_dpop(&cut_off.base_url(), &bound, &[&proof]).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "temporarily_unavailable", "{body}");
    assert_eq!(retry_after.as_deref(), Some("5"), "{body}");

    let (reader_id, reader_secret) = app.auth.create_client(REVOCATIONS_READ).await;
    let bearer = app
        .auth
        .token(&reader_id, &reader_secret, REVOCATIONS_READ)
        .await;
    let resp = reqwest::Client::new()
        .get(format!("{}/revocations", cut_off.base_url()))
        .bearer_auth(&bearer)
        .send()
        .await
        .expect("revocations");
    assert_eq!(resp.status().as_u16(), 200);
}

on_both_backends!(
    a_dpop_bound_token_reads_the_list_once_per_fresh_proof_by_its_key,
    a_dpop_request_fails_closed_while_the_replay_store_is_down,
);

/// Each operation of the served document that needs a token names, in its security
/// requirement, the scope its check asks for (a partner's token is refused with 403, whose
/// challenge names the scope wanted), under an OAuth 2.0 scheme whose token URL is this
/// issuer's token endpoint; the others need none.
#[tokio::test]
async fn every_operation_names_the_scope_it_enforces_in_the_document() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let partner = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    let served = Served::fetch(&app.http, &app.auth.base_url()).await;
    let mut secured = 0;
    for operation in &served.operations {
        if operation.spec.get("security").is_none() {
            continue;
        }
        let refused = app
            .http
            .request(operation.method.clone(), app.url(&operation.path))
            .header("authorization", format!("Bearer {partner}"))
            .send()
            .await
            .expect("answered");
        let flow = served.assert_names_enforced_scope(operation, &refused, "resourceServerToken");
        assert_eq!(
            flow["tokenUrl"],
            format!("{}/oauth/token", app.auth.config.issuer()),
        );
        secured += 1;
    }
    assert_eq!(secured, 1, "only /revocations needs a token");
}
