//! HTTP routes of the auth-server.

pub mod discovery;
pub mod token;

use std::sync::Arc;

use poem_openapi::OpenApiService;

use crate::state::AppState;
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
    .description("OAuth 2.0 client-credentials authorization server: RS256 JWT access tokens and the keys to verify them.")
    .server(issuer)
}
