//! The operator commands: clients and keys. Each prints one JSON document on stdout.

use chrono::{Duration, Utc};
use sea_orm::DatabaseConnection;
use serde_json::json;

use crate::audit;
use crate::config::{AuditCommand, ClientCommand, Config, KeyCommand};
use crate::keys::KeyState;
use crate::registry::PROPAGATION;
use crate::{migration, store};

async fn open(config: &Config) -> anyhow::Result<DatabaseConnection> {
    migration::open_existing(&config.database_url, 2).await
}

/// Waits until every running server has picked up a change just committed.
async fn propagated() {
    tokio::time::sleep(PROPAGATION).await;
}

/// Runs `auth-server client ...` and returns what it prints.
pub async fn client(config: &Config, command: ClientCommand) -> anyhow::Result<serde_json::Value> {
    let db = open(config).await?;
    let actor = audit::actor(config.actor.as_deref());
    let mutates = !matches!(command, ClientCommand::List);
    let out: anyhow::Result<serde_json::Value> = match command {
        ClientCommand::Create { name, scopes } => {
            let created = store::create_client(&db, &name, &scopes, &actor).await?;
            Ok(json!({
                "client_id": created.client_id,
                "client_secret": created.client_secret.expose(),
                "scopes": created.scopes,
            }))
        }
        ClientCommand::List => Ok(serde_json::to_value(store::list_clients(&db).await?)?),
        ClientCommand::RotateSecret {
            client_id,
            grace_secs,
        } => {
            let grace = Duration::seconds(i64::try_from(grace_secs)?);
            let rotated = store::rotate_secret(&db, &client_id, grace, &actor).await?;
            Ok(json!({
                "client_id": rotated.client_id,
                "client_secret": rotated.client_secret.expose(),
                "previous_secret_valid_until": rotated.previous_secret_valid_until,
            }))
        }
        ClientCommand::Disable { client_id } => {
            let (c, changed) = store::set_client_disabled(&db, &client_id, true, &actor).await?;
            Ok(json!({
                "client_id": c.client_id,
                "disabled": true,
                "disabled_at": c.disabled_at,
                "changed": changed,
            }))
        }
        ClientCommand::Enable { client_id } => {
            let (c, changed) = store::set_client_disabled(&db, &client_id, false, &actor).await?;
            Ok(json!({"client_id": c.client_id, "disabled": false, "changed": changed}))
        }
    };
    let out = out?;
    if mutates {
        propagated().await;
    }
    Ok(out)
}

/// Runs `auth-server key ...` and returns what it prints.
pub async fn key(config: &Config, command: KeyCommand) -> anyhow::Result<serde_json::Value> {
    let db = open(config).await?;
    let actor = audit::actor(config.actor.as_deref());
    match command {
        KeyCommand::Rotate { publish_ahead_secs } => {
            let ahead = publish_ahead_secs.unwrap_or(config.jwks_max_age_secs);
            let ahead = Duration::seconds(i64::try_from(ahead)?);
            // Never sooner than every auth-server can have loaded the change: then all
            // switch together.
            let not_before = Utc::now() + Duration::from_std(PROPAGATION)?;
            let rotated =
                store::rotate_keys(&db, &config.kek()?, ahead, not_before, &actor).await?;
            propagated().await;
            let state = if rotated.activates_at <= Utc::now() {
                KeyState::Active
            } else {
                KeyState::Pending
            };
            Ok(json!({
                "kid": rotated.kid,
                "state": state,
                "activates_at": rotated.activates_at,
                "standby_kid": rotated.standby_kid,
            }))
        }
        KeyCommand::List => Ok(serde_json::to_value(store::list_keys(&db).await?)?),
        KeyCommand::Revoke { kid } => {
            let revoked = store::revoke_key(&db, &config.kek()?, &kid, &actor).await?;
            propagated().await;
            Ok(json!({
                "kid": kid,
                "state": "revoked",
                "replacement_kid": revoked.replacement_kid,
                "standby_kid": revoked.standby_kid,
            }))
        }
    }
}

/// Runs `auth-server audit ...` and returns what it prints.
pub async fn audit(config: &Config, command: AuditCommand) -> anyhow::Result<serde_json::Value> {
    let db = open(config).await?;
    match command {
        AuditCommand::List { since } => Ok(serde_json::to_value(audit::list(&db, since).await?)?),
        AuditCommand::Verify => Ok(serde_json::to_value(audit::verify(&db).await?)?),
    }
}
