//! `/revocations` lists disabled clients only to resource servers: a token of a client
//! granted `revocations:read`, verified against the keys this server publishes.

use auth_server::config::ClientCommand;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use shared::claims::scopes::REVOCATIONS_READ;
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
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{reader_id}:{reader_secret}"))
    );
    for (what, value, expected) in [
        ("client credentials", basic, 401),
        ("garbage", "Bearer not-a-token".to_owned(), 401),
        ("edited claims", format!("Bearer {edited}"), 401),
        ("alg none", format!("Bearer {unsigned}"), 401),
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
    for reason in ["missing", "scope", "client_disabled", "verification"] {
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
    let (reader_id, reader_secret) = app.auth.create_client(REVOCATIONS_READ).await;
    let key = crate::helpers::ProofKey::generate();
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
    let bound = body["access_token"].as_str().expect("a token").to_owned();
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
