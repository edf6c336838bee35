//! `intake-api case ...`: finding, showing and erasing cases.

use serde_json::{Value, json};

use super::{Report, open};
use crate::config::{CaseCommand, Settings};
use crate::domain::Email;

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
    let cases = open(settings).await?;
    Ok(match command {
        CaseCommand::Show { reference } => {
            let view = cases
                .show(&reference)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no case with reference {reference}"))?;
            Report::record(serde_json::to_value(view)?)
        }
        CaseCommand::Find { email, sandbox } => Report::list(
            serde_json::to_value(cases.find_by_email(&email, sandbox).await?)?,
            CASE_COLUMNS,
            "No cases for that e-mail address.",
        ),
        CaseCommand::Erase { email, brand } => {
            let email = Email::parse(&email)
                .map_err(|_| anyhow::anyhow!("{email:?} is not an e-mail address"))?;
            let actor = service_kit::cli::actor(settings.actor.as_deref());
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
            serde_json::to_value(cases.list(&status, since, limit, sandbox).await?)?,
            CASE_COLUMNS,
            "No cases.",
        ),
    })
}
