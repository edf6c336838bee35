//! What resource servers and client libraries fetch: the JWKS and the RFC 8414 metadata.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use poem_openapi::param::Header;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi, Tags};
use serde::Serialize;

use crate::keys::Jwk;
use crate::state::AppState;

#[derive(Tags)]
enum ApiTags {
    /// Keys and metadata for verifying tokens.
    Discovery,
}

/// A JSON Web Key Set (RFC 7517 section 5).
#[derive(Debug, Object)]
pub struct JwkSet {
    /// The public keys that sign (or recently signed, or will soon sign) access tokens.
    pub keys: Vec<Jwk>,
}

/// Response of the JWKS endpoint.
#[derive(ApiResponse)]
pub enum JwksResponse {
    /// The published keys.
    #[oai(status = 200)]
    Ok(
        Json<JwkSet>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
    /// Unchanged since the `ETag` sent in `If-None-Match`.
    #[oai(status = 304)]
    NotModified(
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
}

/// The clients whose tokens resource servers must refuse, though the tokens verify.
#[derive(Debug, Object, Serialize)]
pub struct RevocationList {
    /// Ids of disabled clients, sorted.
    pub disabled_clients: Vec<String>,
}

/// Response of the revocation list endpoint.
#[derive(ApiResponse)]
pub enum RevocationsResponse {
    /// The current list; fetch it again before relying on it (`no-cache`).
    #[oai(status = 200)]
    Ok(
        Json<RevocationList>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
    /// Unchanged since the `ETag` sent in `If-None-Match`.
    #[oai(status = 304)]
    NotModified(
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
}

/// A strong entity tag for a body: resource servers poll with `If-None-Match`, so an
/// unchanged document costs a 304 and no body.
fn etag<T: Serialize>(body: &T) -> String {
    let json = serde_json::to_vec(body).unwrap_or_default();
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &json);
    format!("\"{}\"", URL_SAFE_NO_PAD.encode(&digest.as_ref()[..16]))
}

/// Whether an `If-None-Match` value names `etag` (RFC 9110 13.1.2: weak comparison).
fn matches(if_none_match: Option<&str>, etag: &str) -> bool {
    if_none_match.is_some_and(|v| {
        v.split(',')
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == etag || t == "*")
    })
}

/// Authorization server metadata (RFC 8414).
#[derive(Debug, Object)]
pub struct ServerMetadata {
    /// The issuer: the `iss` of every token.
    pub issuer: String,
    /// Where to ask for tokens.
    pub token_endpoint: String,
    /// Where the signing keys are published.
    pub jwks_uri: String,
    /// Only `client_credentials`.
    pub grant_types_supported: Vec<String>,
    /// `client_secret_basic` and `client_secret_post`.
    pub token_endpoint_auth_methods_supported: Vec<String>,
    /// Every scope a client can be granted.
    pub scopes_supported: Vec<String>,
    /// Empty: there is no authorization endpoint.
    pub response_types_supported: Vec<String>,
}

/// The discovery endpoints.
pub struct DiscoveryApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

#[OpenApi]
impl DiscoveryApi {
    /// The public signing keys (JWKS).
    ///
    /// Cache it for the `max-age` it is served with; refetch early when a token carries a
    /// `kid` you do not know.
    #[oai(
        path = "/.well-known/jwks.json",
        method = "get",
        operation_id = "getJwks",
        tag = "ApiTags::Discovery"
    )]
    async fn jwks(
        &self,
        #[oai(name = "If-None-Match")] if_none_match: Header<Option<String>>,
    ) -> JwksResponse {
        let snapshot = self.state.registry.snapshot();
        let keys: Vec<Jwk> = snapshot
            .published_keys(Utc::now())
            .into_iter()
            .map(|k| k.jwk.clone())
            .collect();
        let tag = etag(&keys);
        let cache = format!("public, max-age={}", self.state.config.jwks_max_age_secs);
        if matches(if_none_match.0.as_deref(), &tag) {
            return JwksResponse::NotModified(cache, tag);
        }
        JwksResponse::Ok(Json(JwkSet { keys }), cache, tag)
    }

    /// Clients whose tokens must be refused.
    ///
    /// For resource servers: a token whose `client_id` is listed must be refused even
    /// though it verifies, until the client is enabled again. Poll it every few seconds
    /// with `If-None-Match`; keep the last list while this endpoint cannot be reached.
    #[oai(
        path = "/revocations",
        method = "get",
        operation_id = "getRevocations",
        tag = "ApiTags::Discovery"
    )]
    async fn revocations(
        &self,
        #[oai(name = "If-None-Match")] if_none_match: Header<Option<String>>,
    ) -> RevocationsResponse {
        let snapshot = self.state.registry.snapshot();
        let mut disabled_clients: Vec<String> = snapshot
            .clients
            .iter()
            .filter(|(_, c)| c.disabled)
            .map(|(id, _)| id.clone())
            .collect();
        disabled_clients.sort_unstable();
        let list = RevocationList { disabled_clients };
        let tag = etag(&list);
        let cache = "no-cache".to_owned();
        if matches(if_none_match.0.as_deref(), &tag) {
            return RevocationsResponse::NotModified(cache, tag);
        }
        RevocationsResponse::Ok(Json(list), cache, tag)
    }

    /// Authorization server metadata (RFC 8414).
    #[oai(
        path = "/.well-known/oauth-authorization-server",
        method = "get",
        operation_id = "getServerMetadata",
        tag = "ApiTags::Discovery"
    )]
    async fn metadata(&self) -> Json<ServerMetadata> {
        let issuer = self.state.config.issuer.trim_end_matches('/').to_owned();
        Json(ServerMetadata {
            token_endpoint: format!("{issuer}/oauth/token"),
            jwks_uri: format!("{issuer}/.well-known/jwks.json"),
            issuer,
            grant_types_supported: vec!["client_credentials".into()],
            token_endpoint_auth_methods_supported: vec![
                "client_secret_basic".into(),
                "client_secret_post".into(),
            ],
            scopes_supported: shared::claims::scopes::ALL
                .iter()
                .map(|s| s.to_string())
                .collect(),
            response_types_supported: vec![],
        })
    }
}
