//! What resource servers and client libraries fetch: the JWKS and the RFC 8414 metadata.

use std::sync::Arc;

use chrono::Utc;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi, Tags};

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
    Ok(Json<JwkSet>, #[oai(header = "Cache-Control")] String),
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
    async fn jwks(&self) -> JwksResponse {
        let snapshot = self.state.registry.snapshot();
        let keys = snapshot
            .published_keys(Utc::now())
            .into_iter()
            .map(|k| k.jwk.clone())
            .collect();
        JwksResponse::Ok(
            Json(JwkSet { keys }),
            format!("public, max-age={}", self.state.config.jwks_max_age_secs),
        )
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
