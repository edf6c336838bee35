//! The operator commands: cases here, webhooks in [`crate::webhooks`]. Each makes the
//! report the binary prints, as a table or as JSON ([`report`]).

mod cases;

use std::io::IsTerminal;

use clap::Subcommand;
use service_kit::command_line::args_of;
use service_kit::command_line::output::{OutputArg, Report};

use crate::config::{Config, IntakeApiNames};
use crate::store::{HotStatement, StatementName};

pub use crate::config::Settings;
pub use crate::webhooks::{WebhookCommand, webhook};
pub use cases::{CaseCommand, case};

/// A parsed command line: the server, the migrations or an operator command.
pub type Cli = service_kit::command_line::Cli<IntakeApiNames, Config, OperatorCommand>;

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
    /// Print the statements the service sends on its hot paths, as PostgreSQL gets them,
    /// with the names of the values bound to them: to EXPLAIN one, or run it in pgbench as
    /// bench/run.sh does.
    #[command(
        args = args_of::<OutputArg>(),
        after_help = "Examples:
  intake-api statements
  intake-api statements submit -o json | jq -r .sql"
    )]
    Statements {
        /// Only this one.
        #[arg(value_enum)]
        name: Option<StatementName>,
    },
}

/// Runs an operator command with the settings it was given, for the report the binary
/// prints.
pub async fn report(command: OperatorCommand, settings: Settings) -> anyhow::Result<Report> {
    match command {
        OperatorCommand::Case(c) => cases::case_report(&settings, c).await,
        OperatorCommand::Webhook(w) => {
            let terminal = std::io::stdout().is_terminal();
            crate::webhooks::webhook_report(&settings, w, terminal).await
        }
        OperatorCommand::Statements { name: Some(name) } => {
            Ok(Report::record(serde_json::to_value(name.statement())?))
        }
        OperatorCommand::Statements { name: None } => {
            let all: Vec<HotStatement> = StatementName::ALL.map(StatementName::statement).into();
            Ok(Report::list(
                serde_json::to_value(all)?,
                &["name", "sql"],
                "No statements.",
            ))
        }
    }
}
