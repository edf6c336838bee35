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
pub mod housekeeping;
pub mod jwks;
pub mod migration;
pub mod revocations;
pub mod routes;
pub mod startup;
pub mod state;
pub mod store;
pub mod webhooks;

use config::{Cli, Command};

/// Runs the binary's command line: `serve` (the default), `migrate`, `case show`,
/// `webhook ...`.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let _logs = service_kit::telemetry::init_tracing(cli.config.log_format);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            startup::Application::build(cli.config)
                .await?
                .run_until_stopped()
                .await
        }
        Command::Migrate => {
            let db = service_kit::db::connect(&cli.config.database_url, 1).await?;
            migration::run(&db).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Case(c) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&cli::case(&cli.config, c).await?)?
            );
            Ok(())
        }
        Command::Webhook(c) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&cli::webhook(&cli.config, c).await?)?
            );
            Ok(())
        }
    }
}
