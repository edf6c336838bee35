//! The operator commands: cases and webhooks. Each returns the JSON document it prints;
//! [`run`] prints it as a table or as JSON.

mod cases;
mod settings;
mod webhooks;

use std::io::IsTerminal;
use std::time::Duration;

use clap::Subcommand;
use service_kit::cli::Report;

use crate::config::{Config, IntakeApi};
use crate::migration;
use crate::store::{CaseStore, Timing};

pub use cases::{CaseCommand, case};
pub use settings::Settings;
pub use webhooks::{WebhookCommand, webhook};

/// A parsed command line: the server, the migrations or an operator command.
pub type Cli = service_kit::command_line::Cli<IntakeApi, Config, OperatorCommand>;

/// The operator commands.
#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Find and look at cases.
    #[command(
        subcommand,
        after_help = "Examples:
  intake-api case find --email jane.doe@example.com
  intake-api case list --since 24h"
    )]
    Case(CaseCommand),
    /// Manage partners' webhook endpoints and their deliveries.
    #[command(
        subcommand,
        after_help = "Examples:
  intake-api webhook list
  intake-api webhook deliveries CLIENT_ID --failed"
    )]
    Webhook(WebhookCommand),
}

/// Runs an operator command with the settings it was given, for the report the binary
/// prints.
pub async fn report(command: OperatorCommand, settings: Settings) -> anyhow::Result<Report> {
    match command {
        OperatorCommand::Case(c) => cases::case_report(&settings, c).await,
        OperatorCommand::Webhook(w) => {
            let terminal = std::io::stdout().is_terminal();
            webhooks::webhook_report(&settings, w, terminal).await
        }
    }
}

/// The store on the existing database. Commands make neither cases nor links, so the
/// timing of those never applies.
async fn open(settings: &Settings) -> anyhow::Result<CaseStore> {
    const POOL: u32 = 2;
    let db = migration::SCHEMA
        .open_existing(settings.database.url.expose(), POOL)
        .await?;
    let unused = Timing {
        activation_delay: Duration::ZERO,
        redirect_ttl: Duration::ZERO,
        sandbox_activation_delay: Duration::ZERO,
    };
    Ok(CaseStore::new(db, POOL, unused))
}
