//! `auth-server key ...`: the signing keys, listed, rotated and revoked, and where each is
//! kept.

use chrono::{Duration, SecondsFormat, Utc};
use serde_json::{Value, json};
use service_kit::command_line::output::Report;

use super::{author, open, propagated};
use crate::commands::KeyCommand;
use crate::config::Settings;
use crate::keys::KeyState;
use crate::registry::PROPAGATION;
use crate::store::{key_custody, signing_keys};

/// Runs `auth-server key ...` and returns what it prints as JSON.
pub async fn key(settings: impl Into<Settings>, command: KeyCommand) -> anyhow::Result<Value> {
    Ok(key_report(&settings.into(), command).await?.json)
}

pub(super) async fn key_report(settings: &Settings, command: KeyCommand) -> anyhow::Result<Report> {
    let db = open(settings).await?;
    let actor = || author(settings, "a change to the signing keys");
    let report = match command {
        KeyCommand::Rotate {
            alg,
            publish_ahead_secs,
            move_key_store,
        } => {
            let ahead = publish_ahead_secs.unwrap_or(settings.jwks_max_age_secs);
            let ahead = Duration::seconds(i64::try_from(ahead)?);
            // Never sooner than every auth-server can have loaded the change: then all
            // switch together.
            let not_before = Utc::now() + Duration::from_std(PROPAGATION)?;
            let rotated = signing_keys::rotate_keys(
                &db,
                &settings.keys()?,
                alg,
                ahead,
                not_before,
                move_key_store,
                &actor()?,
            )
            .await?;
            propagated().await;
            let state = if rotated.activates_at <= Utc::now() {
                KeyState::Active
            } else {
                KeyState::Pending
            };
            let mut printed = json!({
                "kid": rotated.kid,
                "alg": rotated.alg.name(),
                "state": state,
                "activates_at": rotated.activates_at,
                "standby_kid": rotated.standby_kid,
                "withdrawn_standby_kid": rotated.withdrawn_standby_kid,
                "key_store": rotated.key_store,
            });
            let note = rotated.moved_from.as_ref().map(|from| {
                printed["moved_key_store_from"] = json!(from);
                format!(
                    "the signing keys moved from {from} to {}: the key that takes over and \
                     the standby are made there",
                    rotated.key_store
                )
            });
            Report {
                note,
                ..Report::record(printed)
            }
        }
        KeyCommand::List {
            rotation_interval_secs,
        } => {
            let custody = key_custody::custody(&db).await?;
            let listed = signing_keys::list_keys(
                &db,
                rotation_interval_secs
                    .and_then(|s| i64::try_from(s).ok())
                    .and_then(Duration::try_seconds),
            )
            .await?;
            Report {
                note: custody.map(|c| match c.recorded_at {
                    Some(at) => format!(
                        "new signing keys are made in {}, as the database records since {}",
                        c.home,
                        at.to_rfc3339_opts(SecondsFormat::Secs, true)
                    ),
                    None => format!(
                        "new signing keys are made in {}, as the newest key says (the \
                         database records it at the next key made)",
                        c.home
                    ),
                }),
                ..Report::list(
                    serde_json::to_value(listed)?,
                    &[
                        "kid",
                        "alg",
                        "store",
                        "state",
                        "created_at",
                        "activates_at",
                        "retired_at",
                        "unpublish_at",
                        "revoked_at",
                        "rotates_at",
                    ],
                    "No keys: `auth-server serve` makes the first ones.",
                )
            }
        }
        KeyCommand::Revoke { kid } => {
            let keys = settings.keys()?;
            let revoked = signing_keys::revoke_key(&db, &keys, &kid, &actor()?).await?;
            if revoked.already_revoked_at.is_none() {
                propagated().await;
            }
            // Once no server signs with it: destroyed where it lives, so it can never sign;
            // for a key already revoked, whatever an earlier revoke left is destroyed now.
            keys.destroy(&revoked.revoked)?;
            match revoked.already_revoked_at {
                Some(at) => Report {
                    note: Some(format!(
                        "key {kid} is already revoked, since {}: nothing changed in the \
                         database; its private half is destroyed where it lived, if anything \
                         of it was left",
                        at.to_rfc3339_opts(SecondsFormat::Secs, true)
                    )),
                    ..Report::record(json!({
                        "kid": kid,
                        "state": "revoked",
                        "revoked_at": at,
                        "changed": false,
                    }))
                },
                None => Report::record(json!({
                    "kid": kid,
                    "state": "revoked",
                    "replacement_kid": revoked.replacement_kid,
                    "standby_kid": revoked.standby_kid,
                    "changed": true,
                })),
            }
        }
    };
    Ok(report)
}
