//! The intake-api: verifies partners' bearer tokens, validates enquiries, creates or updates
//! cases that activate after a delay, and attaches eligibility-engine products.
//!
//! `state` holds what requests share; `routes` (the HTTP interface) sits on it, `domain`
//! parses what partners send, `store` keeps cases, `auth` and `jwks` verify tokens, and
//! `startup` puts them together.

pub mod activation;
pub mod auth;
pub mod cli;
pub mod config;
pub mod domain;
pub mod entity;
pub mod error;
pub mod examples;
pub mod history_cursor;
pub mod housekeeping;
pub mod jwks;
pub mod migration;
pub mod revocations;
pub mod routes;
pub mod sandbox;
pub mod startup;
pub mod state;
pub mod store;
pub mod webhooks;

use cli::Cli;
use service_kit::http::Server;
use startup::Application;

/// Runs the binary's command line: `serve` (the default), `migrate`, `case ...`,
/// `webhook ...`.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    cli.run(Application::serve, &migration::SCHEMA, cli::report)
        .await
}
