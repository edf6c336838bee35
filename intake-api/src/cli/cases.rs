//! `intake-api case ...`: finding, showing and erasing cases.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use serde_json::{Value, json};
use service_kit::command_line::reads;

use crate::config::{IntakeApiNames, Settings, changes};
use crate::domain::Email;
use crate::entity::case;
use crate::sandbox::World;
use service_kit::command_line::output::Report;

/// The columns of a list of cases.
const CASE_COLUMNS: &[&str] = &[
    "reference",
    "brand",
    "status",
    "created_at",
    "updated_at",
    "activated_at",
    "product_uuid",
];

/// The columns of what `case erase` did.
const ERASED_COLUMNS: &[&str] = &["reference", "brand", "requested_by"];

/// Runs `intake-api case ...` and returns what it prints as JSON.
pub async fn case(settings: impl Into<Settings>, command: CaseCommand) -> anyhow::Result<Value> {
    Ok(case_report(&settings.into(), command).await?.json)
}

/// Runs a case command, keeping how its output reads as a table for [`super::run`].
pub(super) async fn case_report(
    settings: &Settings,
    command: CaseCommand,
) -> anyhow::Result<Report> {
    let cases = settings.open().await?;
    Ok(match command {
        CaseCommand::Show { reference } => {
            let view = cases
                .show(&reference)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no case with reference {reference}"))?;
            Report::record(serde_json::to_value(view)?)
        }
        CaseCommand::Find { email, sandbox } => Report::list(
            serde_json::to_value(cases.find_by_email(&email, World::of(sandbox)).await?)?,
            CASE_COLUMNS,
            "No cases for that e-mail address.",
        ),
        CaseCommand::Erase { email, brand } => {
            let email = Email::parse(&email)
                .map_err(|_| anyhow::anyhow!("{email:?} is not an e-mail address"))?;
            let actor = service_kit::command_line::operator::actor(settings.actor.as_deref());
            // Holding nothing for the address is an answer too: an empty list, not an error.
            let erased: Vec<Value> = cases
                .erase(&email, brand.as_deref(), &actor)
                .await?
                .into_iter()
                .map(|c| json!({"reference": c.reference, "brand": c.brand, "requested_by": actor}))
                .collect();
            Report::list(
                Value::from(erased),
                ERASED_COLUMNS,
                "No case for that e-mail address: nothing to erase.",
            )
        }
        CaseCommand::List {
            status,
            since,
            limit,
            sandbox,
        } => Report::list(
            serde_json::to_value(
                cases
                    .list(&status, since, limit, World::of(sandbox))
                    .await?,
            )?,
            CASE_COLUMNS,
            "No cases.",
        ),
    })
}

/// `intake-api case ...`
#[derive(Debug, Subcommand)]
pub enum CaseCommand {
    /// Show one case: its state, how many enquiries it took, and its history.
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api case show 48213376
  intake-api case show 48213376 -o json | jq -r .status"
    )]
    Show {
        /// The case reference.
        reference: String,
    },
    /// The cases of one customer, by e-mail address (in every brand), most recently
    /// updated first.
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api case find --email jane.doe@example.com
  intake-api case find --email ' Jane.Doe@Example.com' -o json | jq -r '.[].reference'
  intake-api case find --email jane.doe@example.com --sandbox   # a sandbox client's cases"
    )]
    Find {
        /// The customer's e-mail address, in any case.
        #[arg(long)]
        email: String,
        /// Sandbox clients' cases instead of real ones.
        #[arg(long)]
        sandbox: bool,
    },
    /// The most recently created cases, newest first.
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api case list                                   # the newest 50
  intake-api case list --status pending_activation --since 2h
  intake-api case list --since 2026-11-26T00:00:00Z --limit 500 -o json
  intake-api case list --sandbox                         # what sandbox clients made"
    )]
    List {
        /// Only cases in these states (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', value_enum)]
        status: Vec<case::Status>,
        /// Only cases created at or after this time: RFC 3339 (2026-11-26T00:00:00Z), or a
        /// span back from now (30m, 24h, 7d).
        #[arg(long, value_parser = service_kit::command_line::operator::parse_since)]
        since: Option<DateTime<Utc>>,
        /// How many at most.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        limit: u64,
        /// Sandbox clients' cases instead of real ones.
        #[arg(long)]
        sandbox: bool,
    },
    /// Erase a customer's personal data on request: the enquiry, the e-mail address and
    /// every submission as sent, in each of the customer's cases (of one brand with
    /// --brand). The reference, brand, status, dates and history stay, with an `erased`
    /// event naming who asked; partners then get 404 for the case, and a later enquiry for
    /// the address makes a new case.
    #[command(
        args = changes(),
        after_help = "Examples:
  intake-api case erase --email jane.doe@example.com --actor 'DPO ticket 4711'
  intake-api case erase --email jane.doe@example.com --brand brand_a -o json"
    )]
    Erase {
        /// The customer's e-mail address, in any case.
        #[arg(long)]
        email: String,
        /// Only the case with this brand.
        #[arg(long)]
        brand: Option<String>,
    },
}

/// The statuses `case list --status` takes, by their stored names.
impl clap::ValueEnum for case::Status {
    fn value_variants<'a>() -> &'a [Self] {
        &[Self::Referred, Self::PendingActivation, Self::Active]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}
