//! The token endpoint: success with each body and authentication method, and every error
//! with its exact body.

use base64::Engine;
use serde_json::{Value, json};

use crate::helpers::{Backend, INTAKE, TestApp};
use test_support::{on_both_backends, on_sqlite};

const INVALID_REQUEST: &str = "The request is missing a required parameter, includes an invalid parameter value, includes a parameter more than once, or is otherwise malformed.";

fn invalid_request(hint: &str) -> Value {
    json!({"error": "invalid_request", "error_description": INVALID_REQUEST, "hint": hint, "message": INVALID_REQUEST})
}

/// (name, content type, body, authorization, status, expected body, challenge expected)
type Refusal = (
    &'static str,
    &'static str,
    String,
    Option<String>,
    u16,
    Value,
    bool,
);

fn basic(id: &str, secret: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    )
}

async fn a_json_post_request_gets_a_token_that_verifies_against_the_jwks(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let resp = app.token_json(app.post_body(INTAKE)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert_eq!(resp.headers()["pragma"], "no-cache");
    let body: Value = resp.json().await.unwrap();
    let obj = body.as_object().unwrap();
    let mut keys: Vec<_> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["access_token", "expires_in", "token_type"]);
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 900);
    let jwt = body["access_token"].as_str().unwrap();
    let header = jsonwebtoken::decode_header(jwt).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::RS256);
    assert_eq!(header.typ.as_deref(), Some("at+jwt"));
    let claims = app.verify(jwt).await.expect("token verifies");
    assert_eq!(claims["sub"], app.client_id.as_str());
    assert_eq!(claims["client_id"], app.client_id.as_str());
    assert_eq!(claims["scope"], INTAKE);
    assert_eq!(claims["aud"], "partner-intake");
    let iat = claims["iat"].as_i64().expect("integer iat");
    assert_eq!(claims["nbf"].as_i64(), Some(iat));
    assert_eq!(claims["exp"].as_i64(), Some(iat + 900));
    assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 16));
}

async fn a_form_request_with_basic_authentication_gets_a_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let resp = app
        .http
        .post(app.url("/oauth/token"))
        .header("authorization", basic(&app.client_id, &app.client_secret))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", INTAKE),
            ("audience", "ignored"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    app.verify(body["access_token"].as_str().unwrap())
        .await
        .expect("verifies");
}

async fn every_refusal_has_its_exact_status_and_body(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let id = app.client_id.clone();
    let secret = app.client_secret.clone();
    let invalid_client = json!({"error": "invalid_client", "error_description": "Client authentication failed", "message": "Client authentication failed"});
    let unsupported = json!({
        "error": "unsupported_grant_type",
        "error_description": "The authorization grant type is not supported by the authorization server.",
        "hint": "Check that all required parameters have been provided",
        "message": "The authorization grant type is not supported by the authorization server.",
    });
    let invalid_scope = |s: &str| {
        json!({
            "error": "invalid_scope",
            "error_description": "The requested scope is invalid, unknown, or malformed",
            "hint": format!("Check the `{s}` scope"),
            "message": "The requested scope is invalid, unknown, or malformed",
        })
    };
    let cases: Vec<Refusal> = vec![
        ("missing grant_type", "application/json", json!({"client_id": id, "client_secret": secret, "scope": INTAKE}).to_string(), None, 400, unsupported.clone(), false),
        ("password grant", "application/json", json!({"grant_type": "password", "client_id": id, "client_secret": secret, "scope": INTAKE}).to_string(), None, 400, unsupported.clone(), false),
        ("missing client_id", "application/json", json!({"grant_type": "client_credentials", "client_secret": secret, "scope": INTAKE}).to_string(), None, 400, invalid_request("Check the `client_id` parameter"), false),
        ("missing scope", "application/json", json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret}).to_string(), None, 400, invalid_request("Check the `scope` parameter"), false),
        ("scope twice", "application/x-www-form-urlencoded", format!("grant_type=client_credentials&client_id={id}&client_secret={secret}&scope=a&scope=b"), None, 400, invalid_request("Check the `scope` parameter"), false),
        ("client_id not a string", "application/json", json!({"grant_type": "client_credentials", "client_id": 7, "client_secret": secret, "scope": INTAKE}).to_string(), None, 400, invalid_request("Check the `client_id` parameter"), false),
        ("malformed JSON", "application/json", "{\"grant_type\": ".into(), None, 400, invalid_request("The request body must be a JSON object"), false),
        ("wrong content type", "text/plain", "grant_type=client_credentials".into(), None, 400, invalid_request("Send the parameters as application/json or application/x-www-form-urlencoded"), false),
        ("oversized body", "application/json", format!("{{\"pad\":\"{}\"}}", "x".repeat(9000)), None, 413, invalid_request("The request body must not exceed 8 KiB"), false),
        ("wrong secret in body", "application/json", json!({"grant_type": "client_credentials", "client_id": id, "client_secret": "wrong", "scope": INTAKE}).to_string(), None, 401, invalid_client.clone(), false),
        ("missing secret", "application/json", json!({"grant_type": "client_credentials", "client_id": id, "scope": INTAKE}).to_string(), None, 401, invalid_client.clone(), false),
        ("unknown client", "application/json", json!({"grant_type": "client_credentials", "client_id": "nobody", "client_secret": secret, "scope": INTAKE}).to_string(), None, 401, invalid_client.clone(), false),
        ("wrong secret in basic", "application/x-www-form-urlencoded", format!("grant_type=client_credentials&scope={INTAKE}"), Some(basic(&id, "wrong")), 401, invalid_client.clone(), true),
        ("garbage basic header", "application/x-www-form-urlencoded", format!("grant_type=client_credentials&scope={INTAKE}"), Some("Basic %%%".into()), 401, invalid_client.clone(), true),
        ("unknown scope", "application/json", json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret, "scope": "admin"}).to_string(), None, 400, invalid_scope("admin"), false),
        ("scope not granted", "application/json", json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret, "scope": format!("{INTAKE} enquiry:referral:create")}).to_string(), None, 400, invalid_scope("enquiry:referral:create"), false),
    ];
    for (name, ct, body, auth, status, expected, challenge) in cases {
        let mut req = app
            .http
            .post(app.url("/oauth/token"))
            .header("content-type", ct)
            .body(body);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{name}");
        assert_eq!(
            resp.headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_owned()),
            challenge.then(|| "Basic realm=\"OAuth\"".to_owned()),
            "{name}"
        );
        let got: Value = resp.json().await.unwrap();
        assert_eq!(got, expected, "{name}");
    }
}

async fn unknown_parameters_are_ignored_and_scopes_may_repeat(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut body = app.post_body(&format!("{INTAKE}  {INTAKE}"));
    body["resource"] = json!("https://example.org");
    body["nested"] = json!({"a": [1, 2]});
    let resp = app.token_json(body).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let claims = app
        .verify(body["access_token"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(claims["scope"], INTAKE);
}

async fn discovery_documents_describe_the_server(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let resp = app
        .http
        .get(app.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["cache-control"], "public, max-age=300");
    let jwks: Value = resp.json().await.unwrap();
    let key = &jwks["keys"][0];
    assert_eq!(key["kty"], "RSA");
    assert_eq!(key["alg"], "RS256");
    assert_eq!(key["use"], "sig");
    for private in ["d", "p", "q", "dp", "dq", "qi"] {
        assert!(key.get(private).is_none(), "JWKS leaks {private}");
    }
    let meta: Value = app
        .http
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["issuer"], "http://127.0.0.1:8081");
    assert_eq!(meta["token_endpoint"], "http://127.0.0.1:8081/oauth/token");
    assert_eq!(
        meta["jwks_uri"],
        "http://127.0.0.1:8081/.well-known/jwks.json"
    );
    assert_eq!(meta["grant_types_supported"], json!(["client_credentials"]));
    assert_eq!(
        meta["token_endpoint_auth_methods_supported"],
        json!([
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt"
        ])
    );
    assert_eq!(
        meta["token_endpoint_auth_signing_alg_values_supported"],
        json!(["RS256", "PS256", "ES256", "EdDSA"])
    );
    assert_eq!(
        meta["scopes_supported"],
        json!([
            "enquiry:referral:create",
            "enquiry:case:intake:create",
            "portal:redirect:redeem",
            "revocations:read",
            "webhooks:manage"
        ])
    );
    for path in ["/healthz", "/readyz", "/openapi.json", "/docs"] {
        let resp = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let echoed = app
        .http
        .get(app.url("/healthz"))
        .header("x-request-id", "partner-req-42")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "partner-req-42");
    let generated = app.http.get(app.url("/healthz")).send().await.unwrap();
    let id = generated.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(id.len(), 32, "{id}");
    let hostile = app
        .http
        .get(app.url("/healthz"))
        .header("x-request-id", "bad id with spaces")
        .send()
        .await
        .unwrap();
    assert_ne!(hostile.headers()["x-request-id"], "bad id with spaces");
    let metrics = app
        .http
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("http_requests_total"), "{metrics}");
}

/// The value of the `http_requests_total` line with exactly these labels, 0 when absent.
fn http_requests(metrics: &str, labels: &str) -> u64 {
    let prefix = format!("http_requests_total{{{labels}}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

async fn http_metrics_count_every_request_under_a_bounded_method_label(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let scrape = || async {
        let resp = app.http.get(app.url("/metrics")).send().await.unwrap();
        resp.text().await.unwrap()
    };
    // Only this test sends a made-up method, so its count is this test's alone.
    let labels = r#"service="auth-server",route="/healthz",method="other",status="405""#;
    let before = http_requests(&scrape().await, labels);
    for method in ["FROB", "FROB2", "BREW"] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let resp = app
            .http
            .request(method, app.url("/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405);
    }
    let after = scrape().await;
    assert_eq!(http_requests(&after, labels), before + 3, "{after}");
    for made_up in ["FROB", "BREW"] {
        assert!(!after.contains(&format!("method=\"{made_up}\"")), "{after}");
    }
    assert!(
        after.contains(r#"http_request_duration_seconds_count{service="auth-server",route="/healthz",method="other",status="405"}"#),
        "{after}"
    );
}

on_sqlite!(http_metrics_count_every_request_under_a_bounded_method_label);

on_both_backends!(
    a_json_post_request_gets_a_token_that_verifies_against_the_jwks,
    a_form_request_with_basic_authentication_gets_a_token,
    every_refusal_has_its_exact_status_and_body,
    unknown_parameters_are_ignored_and_scopes_may_repeat,
    discovery_documents_describe_the_server,
);
