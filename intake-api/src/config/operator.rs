//! What an operator command runs with besides its own arguments: the database, who asks,
//! and what webhook commands need; each subcommand takes only the ones it uses.

use service_kit::Secret;
use service_kit::command_line::output::OutputArg;
use service_kit::command_line::{Actor, Database, Given, KeyEncryptionKeyArg, args_of};
use service_kit::kek::KeyEncryptionKey;

use std::time::Duration;

use super::{AllowInsecure, Config, IntakeApiNames, KEK_VARIABLE};
use crate::migration;
use crate::store::{CaseStore, Timing};

/// What an operator command (`case`, `webhook`) runs with besides its own arguments. On
/// the command line each subcommand takes only the ones it uses.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The database the servers run on.
    pub database: Database<IntakeApiNames>,
    /// Who asks for a change, for the case's history; the operating-system user when unset.
    pub actor: Option<String>,
    /// Whether webhooks may go to http URLs and addresses that are not public (local use and
    /// tests).
    pub webhook_insecure: AllowInsecure,
    /// The key webhook signing secrets are sealed with (the servers' own).
    pub key_encryption_key: Option<Secret<String>>,
}

impl Settings {
    /// The store on the existing database. Commands make neither cases nor links, so the
    /// timing of those never applies.
    pub(crate) async fn open(&self) -> anyhow::Result<CaseStore> {
        const POOL: u32 = 2;
        let db = migration::SCHEMA
            .open_existing(self.database.url.expose(), POOL)
            .await?;
        let unused = Timing {
            activation_delay: Duration::ZERO,
            redirect_ttl: Duration::ZERO,
            sandbox_activation_delay: Duration::ZERO,
        };
        Ok(CaseStore::new(db, POOL, unused))
    }

    /// Where `webhook set` may point a partner's endpoint.
    pub fn webhook_reach(&self) -> service_kit::outbound::Reach {
        self.webhook_insecure.reach()
    }

    /// What a command that makes a webhook secret seals it with.
    pub fn webhook_seal(&self) -> anyhow::Result<crate::store::SecretSeal> {
        let kek = KeyEncryptionKey::required(
            KEK_VARIABLE,
            self.key_encryption_key.as_ref(),
            "webhook signing secrets are stored sealed with the servers' key",
        )?;
        crate::store::SecretSeal::new(&kek)
    }
}

/// An operator command's settings, as given with it on the command line.
impl From<&Given> for Settings {
    fn from(given: &Given) -> Self {
        Self {
            database: given.settings().unwrap_or_default(),
            actor: given
                .settings::<Actor<IntakeApiNames>>()
                .and_then(|a| a.actor),
            webhook_insecure: given
                .settings::<AllowInsecure>()
                .unwrap_or(AllowInsecure { allow: false }),
            key_encryption_key: given
                .settings::<KeyEncryptionKeyArg<IntakeApiNames>>()
                .and_then(|k| k.key_encryption_key),
        }
    }
}

/// The server's settings serve the operator commands run beside it (tests, the launcher).
impl From<&Config> for Settings {
    fn from(config: &Config) -> Self {
        Self {
            database: config.database.database.clone(),
            actor: None,
            webhook_insecure: config.webhooks.insecure,
            key_encryption_key: config.key_encryption_key.clone(),
        }
    }
}

/// What a command that changes cases takes besides its own arguments.
pub(crate) fn changes() -> Vec<clap::Arg> {
    [
        args_of::<Database<IntakeApiNames>>(),
        args_of::<Actor<IntakeApiNames>>(),
        args_of::<OutputArg>(),
    ]
    .concat()
}

/// What `webhook set` takes besides its own arguments.
pub(crate) fn webhook_target() -> Vec<clap::Arg> {
    [
        args_of::<Database<IntakeApiNames>>(),
        args_of::<AllowInsecure>(),
        args_of::<KeyEncryptionKeyArg<IntakeApiNames>>(),
        args_of::<OutputArg>(),
    ]
    .concat()
}

/// What `webhook rotate-secret` takes besides its own arguments.
pub(crate) fn webhook_secret() -> Vec<clap::Arg> {
    [
        args_of::<Database<IntakeApiNames>>(),
        args_of::<KeyEncryptionKeyArg<IntakeApiNames>>(),
        args_of::<OutputArg>(),
    ]
    .concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_password_never_shows_in_debug() {
        let config = Config::with_database("postgres://intake:hunter2@db.example/intake");
        let shown = format!("{config:?} {:?}", Settings::from(&config));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            config.database.url(),
            "postgres://intake:hunter2@db.example/intake"
        );
    }
}
