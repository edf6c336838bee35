//! The auth-server: an OAuth 2.0 client-credentials authorization server that issues RS256
//! JWT access tokens and publishes the keys to verify them, with staged key rotation and
//! operator commands for clients and keys.

pub mod audit;
pub mod cli;
pub mod config;
pub mod entity;
pub mod error;
pub mod keys;
pub mod migration;
pub mod registry;
pub mod routes;
pub mod secrets;
pub mod startup;
pub mod state;
pub mod store;
pub mod token;

use config::{Cli, Command};

/// Runs the binary's command line: `serve` (the default), `migrate`, `client ...`, `key ...`.
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
        Command::Client(c) => print(&cli::client(&cli.config, c).await?),
        Command::Key(k) => print(&cli::key(&cli.config, k).await?),
        Command::Audit(a) => print(&cli::audit(&cli.config, a).await?),
    }
}

fn print(value: &serde_json::Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
