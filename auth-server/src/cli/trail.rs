//! `auth-server audit ...`: the audit trail, listed, verified and sealed.

use serde_json::{Value, json};
use service_kit::command_line::output::Report;

use super::{audit_key, author, open, propagated};
use crate::audit;
use crate::commands::AuditCommand;
use crate::config::Settings;
use crate::store::audit_trail;

/// Runs `auth-server audit ...` and returns what it prints as JSON.
pub async fn audit(settings: impl Into<Settings>, command: AuditCommand) -> anyhow::Result<Value> {
    Ok(audit_report(&settings.into(), command).await?.json)
}

pub(super) async fn audit_report(
    settings: &Settings,
    command: AuditCommand,
) -> anyhow::Result<Report> {
    let db = open(settings).await?;
    Ok(match command {
        AuditCommand::List { since } => Report::list(
            serde_json::to_value(audit::list(&db, since).await?)?,
            &["seq", "at", "actor", "action", "subject", "detail"],
            "No audit entries.",
        ),
        AuditCommand::Verify { head } => {
            let key = audit_key(settings, "audit verify")?;
            Report::record(serde_json::to_value(
                audit::verify(&db, &key, head.as_ref()).await?,
            )?)
        }
        AuditCommand::Seal => {
            let sealer = author(settings, "audit seal")?;
            match audit_trail::seal_audit_trail(&db, &sealer).await? {
                audit_trail::Sealing::Accepted { to } => {
                    propagated().await;
                    Report::record(json!({"sealed": to, "from": 1, "to": to}))
                }
                audit_trail::Sealing::NothingUnsealed => {
                    propagated().await;
                    Report {
                        note: Some(
                            "every audit entry is sealed: the trail is marked, nothing accepted"
                                .into(),
                        ),
                        ..Report::record(json!({"sealed": 0}))
                    }
                }
                audit_trail::Sealing::AlreadyMarked { marker } => Report {
                    note: Some(format!(
                        "the audit trail was marked at entry {marker}: nothing changed"
                    )),
                    ..Report::record(json!({"sealed": 0}))
                },
            }
        }
    })
}
