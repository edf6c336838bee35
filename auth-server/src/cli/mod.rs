//! The operator commands: clients, keys and the audit trail. Each makes the report the
//! binary prints, as a table or as JSON ([`report`]): `apply` (clients as code), `client`,
//! `key` and `audit` (`trail`), each in a module of its own, over the few steps they share
//! here.

mod apply;
mod client;
mod key;
mod trail;

use apply::apply_report;
pub use apply::{Applying, apply};
pub use client::client;
use client::client_report;
pub use key::key;
use key::key_report;
pub use trail::audit;
use trail::audit_report;

use sea_orm::DatabaseConnection;
use service_kit::command_line::output::{self, Report};

use crate::audit;
use crate::commands::OperatorCommand;
use crate::config::Settings;
use crate::migration;
use crate::registry::PROPAGATION;
use crate::store::clients;

/// Runs an operator command with the settings it was given, for the report the binary
/// prints.
pub async fn report(command: OperatorCommand, settings: Settings) -> anyhow::Result<Report> {
    match command {
        OperatorCommand::Client(c) => client_report(&settings, c).await,
        OperatorCommand::Key(k) => key_report(&settings, k).await,
        OperatorCommand::Audit(a) => audit_report(&settings, a).await,
        OperatorCommand::Apply {
            file,
            dry_run,
            prune,
            adopt,
            show_secret,
        } => {
            let asked = Applying {
                dry_run,
                reach: clients::apply::Reach { prune, adopt },
                secrets_shown: output::may_print_secrets(show_secret),
            };
            apply_report(&settings, &file, asked).await
        }
    }
}

/// Who makes a change, and the key its audit entry is sealed with: a change is refused
/// without it, before anything is written, since an entry left without a seal could not be
/// told from one whose seal was removed.
fn author(settings: &Settings, doing: &str) -> anyhow::Result<audit::Author> {
    Ok(audit::Author::new(
        audit::actor(settings.actor.as_deref()),
        audit_key(settings, doing)?,
    ))
}

/// The audit key, which checking or sealing the trail cannot do without.
fn audit_key(settings: &Settings, doing: &str) -> anyhow::Result<audit::AuditKey> {
    settings.audit_key()?.ok_or_else(|| {
        anyhow::anyhow!(
            "{doing} needs the servers' AUTH_KEY_ENCRYPTION_KEY (or a file holding it, \
             AUTH_KEY_ENCRYPTION_KEY_FILE): every audit entry is sealed with a key derived \
             from it"
        )
    })
}

async fn open(settings: &Settings) -> anyhow::Result<DatabaseConnection> {
    migration::SCHEMA
        .open_existing(settings.database.url.expose(), 2)
        .await
}

/// Waits until every running server has picked up a change just committed.
async fn propagated() {
    tokio::time::sleep(PROPAGATION).await;
}
