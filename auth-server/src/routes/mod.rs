//! HTTP routes of the auth-server.

pub mod discovery;
pub mod token;

use std::sync::Arc;

use poem_openapi::OpenApiService;
use serde_json::{Value, json};
use service_kit::openapi::{self, ApiDocuments, property_mut, schema_mut};
use shared::claims::scopes;

use crate::assertion::{JWT_BEARER, MAX_ASSERTION_CHARS};
use crate::state::AppState;
use crate::token_request::MAX_PARAM_CHARS;
use discovery::DiscoveryApi;
use token::TokenApi;

/// The OpenAPI service of the auth-server, also used to write `openapi/auth-server.yaml`.
pub fn api_service(state: Arc<AppState>) -> OpenApiService<(TokenApi, DiscoveryApi), ()> {
    let issuer = state.config.issuer().to_owned();
    OpenApiService::new(
        (
            TokenApi {
                state: state.clone(),
            },
            DiscoveryApi { state },
        ),
        "Partner Intake auth-server",
        env!("CARGO_PKG_VERSION"),
    )
    .description("OAuth 2.0 client-credentials authorization server: JWT access tokens (RS256 by default, PS256 or ES256 by choice) and the keys to verify them. Changes are compatible (new operations, optional fields, answer fields, enum values and event types, which clients must tolerate) unless announced: a breaking change comes as a new path version beside the old one, which answers with `Deprecation` and `Sunset` headers for an announced period (README, Versioning and change policy; CHANGELOG.md).")
    .server(issuer)
}

/// The OpenAPI document and docs page, with what the derive cannot say about a token request.
pub fn documents(state: Arc<AppState>) -> ApiDocuments {
    let (profile, nonces) = (state.config.profile(), state.dpop_nonces.is_some());
    let token_url = crate::token_binding::token_endpoint(&state.config.issuer);
    openapi::documents(&api_service(state), |doc| {
        refine(doc);
        openapi::set_token_url(doc, discovery::RESOURCE_SERVER_SCHEME, &token_url);
        refine_profile(doc, profile, nonces);
    })
}

/// Says in the document what a FAPI 2.0 deployment, or one handing out DPoP nonces, takes:
/// private_key_jwt and a DPoP proof at the token endpoint, a DPoP-bound token at
/// `/revocations`, the profile's algorithms, the nonce each proof must carry.
fn refine_profile(doc: &mut Value, profile: shared::profile::Profile, nonces: bool) {
    if !profile.is_fapi2() && !nonces {
        return;
    }
    let algorithms = profile.algorithms().join(", ");
    let mut text = String::new();
    if profile.is_fapi2() {
        text.push_str(&format!(
            " This deployment follows the FAPI 2.0 Security Profile: the token endpoint takes \
             private_key_jwt only (a client assertion signed {algorithms}) and a `DPoP` proof \
             with every request, signed {algorithms}; every token is DPoP-bound, and \
             `/revocations` takes it only as `Authorization: DPoP <token>` with a proof."
        ));
    }
    if nonces {
        text.push_str(
            " Every answer carries a `DPoP-Nonce` header: each proof carries the latest one in \
             its `nonce` claim; one without it is refused with `use_dpop_nonce` (400 at the \
             token endpoint, 401 at `/revocations`), and the answer's nonce is the one to send \
             again with.",
        );
    }
    if let Some(info) = doc.pointer_mut("/info/description")
        && let Some(described) = info.as_str()
    {
        *info = json!(format!("{described}{text}"));
    }
    if let Some(scheme) = doc
        .pointer_mut("/components/securitySchemes/resourceServerToken")
        .and_then(Value::as_object_mut)
    {
        scheme.insert(
            "x-dpop".into(),
            json!({
                "required": profile.is_fapi2(),
                "signingAlgorithms": profile.algorithms(),
                "nonce": nonces,
            }),
        );
    }
}

/// The token request as exactly as the endpoint reads it (only `client_credentials`, only
/// known scopes, bounded lengths), and an example for every body.
fn refine(doc: &mut Value) {
    let known = scopes::ALL.join("|");
    if let Some(request) = schema_mut(doc, "TokenRequest") {
        request.insert(
            "required".into(),
            json!(["grant_type", "client_id", "scope"]),
        );
        if let Some(grant) = property_mut(request, "grant_type") {
            grant.insert("enum".into(), json!(["client_credentials"]));
        }
        for field in ["client_id", "client_secret"] {
            if let Some(credential) = property_mut(request, field) {
                credential.insert("minLength".into(), json!(1));
            }
        }
        for field in [
            "grant_type",
            "client_id",
            "client_secret",
            "scope",
            "client_assertion_type",
        ] {
            if let Some(param) = property_mut(request, field) {
                param.insert("maxLength".into(), json!(MAX_PARAM_CHARS));
            }
        }
        if let Some(kind) = property_mut(request, "client_assertion_type") {
            kind.insert("enum".into(), json!([JWT_BEARER]));
        }
        if let Some(assertion) = property_mut(request, "client_assertion") {
            assertion.insert("minLength".into(), json!(1));
            assertion.insert("maxLength".into(), json!(MAX_ASSERTION_CHARS));
        }
        if let Some(id) = property_mut(request, "client_id") {
            id.insert(
                "description".into(),
                json!(
                    "The client identifier; with client_secret_basic, the same as in the header; with private_key_jwt, the assertion's `iss` and `sub`."
                ),
            );
        }
        if let Some(scope) = property_mut(request, "scope") {
            scope.insert("pattern".into(), json!(format!("^({known})( ({known}))*$")));
            scope.insert("example".into(), json!(scopes::CASE_INTAKE_CREATE));
        }
    }
    let issuer = doc
        .pointer("/servers/0/url")
        .and_then(Value::as_str)
        .unwrap_or("https://auth.example")
        .to_owned();
    let examples = [
        (
            "JwkSet",
            json!({"keys": [{
                "kty": "RSA",
                "use": "sig",
                "alg": "RS256",
                "kid": "q3Xw9Lr2-cF0tVh7mZa1kY8pN5sD4gJ6eB0uR2iT7oA",
                "n": "u1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0_IzW7yWR7QkrmBL7jTKEn5u-qKhbwKfBstIs-bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW_VDL5AaWTg0nLVkjRo9z-40RQzuVaE8AkAFmxZzow3x-VJYKdjykkJ0iT9wCS0DRTXu269V264Vf_3jvredZiKRkgwlL9xNAwxXFg0x_XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC-9aGVd-Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmw",
                "e": "AQAB",
            }]}),
        ),
        (
            "RevocationList",
            json!({"disabled_clients": ["0b6f2f4e-8d1a-4c3e-9a7b-5e2d1c0f9a88"]}),
        ),
        (
            "ServerMetadata",
            json!({
                "issuer": issuer,
                "token_endpoint": format!("{issuer}/oauth/token"),
                "jwks_uri": format!("{issuer}/.well-known/jwks.json"),
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "private_key_jwt"],
                "token_endpoint_auth_signing_alg_values_supported": crate::client_keys::SIGNING_ALGORITHMS,
                "scopes_supported": scopes::ALL,
                "response_types_supported": [],
            }),
        ),
    ];
    for (name, example) in examples {
        if let Some(schema) = schema_mut(doc, name) {
            schema.insert("example".into(), example);
        }
    }
    if let Some(token) = openapi::operation_mut(doc, "/oauth/token", "post") {
        openapi::request_examples(
            token,
            &[
                (
                    "client_secret_post",
                    "Credentials in the body",
                    json!({
                        "grant_type": "client_credentials",
                        "client_id": "9d6c1f0e-3b2a-4c5d-8e7f-0a1b2c3d4e5f",
                        "client_secret": "your-client-secret",
                        "scope": scopes::CASE_INTAKE_CREATE,
                    }),
                ),
                (
                    "private_key_jwt",
                    "A signed client assertion (RFC 7523)",
                    json!({
                        "grant_type": "client_credentials",
                        "client_id": "9d6c1f0e-3b2a-4c5d-8e7f-0a1b2c3d4e5f",
                        "client_assertion_type": JWT_BEARER,
                        "client_assertion": "eyJhbGciOiJFUzI1NiIsImtpZCI6InBhcnRuZXIta2V5LTEifQ.eyJpc3MiOiI5ZDZjMWYwZS0zYjJhLTRjNWQtOGU3Zi0wYTFiMmMzZDRlNWYiLCJzdWIiOiI5ZDZjMWYwZS0zYjJhLTRjNWQtOGU3Zi0wYTFiMmMzZDRlNWYiLCJhdWQiOiJodHRwczovL2F1dGguZXhhbXBsZSIsImV4cCI6MTc5NjAwMDA2MCwiaWF0IjoxNzk2MDAwMDAwLCJqdGkiOiI0ZjNjOWIyYSJ9.c2lnbmF0dXJl",
                        "scope": scopes::CASE_INTAKE_CREATE,
                    }),
                ),
            ],
        );
    }
}
