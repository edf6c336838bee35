//! The auth-server: an OAuth 2.0 client-credentials authorization server that issues JWT
//! access tokens (RS256 by default; PS256 or ES256 after a `key rotate --alg`) and publishes the keys to verify them, with staged key rotation and
//! operator commands for clients and keys.

pub mod assertion;
pub mod audit;
pub mod bearer;
pub mod cli;
pub mod client_jwks;
pub mod client_keys;
pub mod clients_file;
pub mod commands;
pub mod config;
pub mod entity;
pub mod error;
pub mod key_store;
pub mod keys;
pub mod migration;
pub mod registry;
pub mod routes;
pub mod scheduled_rotation;
pub mod secrets;
pub mod signing;
pub mod startup;
pub mod state;
pub mod store;
pub mod token_binding;
pub mod token_request;

use commands::Cli;
use service_kit::http::Server;
use startup::Application;

/// Runs the binary's command line: `serve` (the default), `migrate`, `client ...`,
/// `key ...`, `audit ...`.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    cli.run(Application::serve, &migration::SCHEMA, cli::report)
        .await
}
