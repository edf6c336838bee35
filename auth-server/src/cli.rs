//! The operator commands: clients and keys. Each prints one JSON document on stdout.

use chrono::{Duration, Utc};
use sea_orm::DatabaseConnection;
use serde_json::json;

use crate::config::{ClientCommand, Config, KeyCommand};
use crate::registry::PROPAGATION;
use crate::{migration, store};

async fn open(config: &Config) -> anyhow::Result<DatabaseConnection> {
    migration::connect(&config.database_url, 2).await
}

/// Waits until every running server has picked up a change just committed.
async fn propagated() {
    tokio::time::sleep(PROPAGATION).await;
}

/// Runs `auth-server client ...` and returns what it prints.
pub async fn client(config: &Config, command: ClientCommand) -> anyhow::Result<serde_json::Value> {
    let db = open(config).await?;
    let mutates = !matches!(command, ClientCommand::List);
    let out: anyhow::Result<serde_json::Value> = match command {
        ClientCommand::Create { name, scopes } => {
            let kek = config.kek()?;
            store::ensure_signing_key(&db, kek.as_ref()).await?;
            let created = store::create_client(&db, &name, &scopes).await?;
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
            let rotated = store::rotate_secret(&db, &client_id, grace).await?;
            Ok(json!({
                "client_id": rotated.client_id,
                "client_secret": rotated.client_secret.expose(),
                "previous_secret_valid_until": rotated.previous_secret_valid_until,
            }))
        }
        ClientCommand::Disable { client_id } => {
            let c = store::disable_client(&db, &client_id).await?;
            Ok(json!({"client_id": c.client_id, "disabled": true, "disabled_at": c.disabled_at}))
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
    let kek = config.kek()?;
    match command {
        KeyCommand::Rotate { publish_ahead_secs } => {
            let ahead = publish_ahead_secs.unwrap_or(config.jwks_max_age_secs);
            // Never sooner than every server can have loaded it: then all switch together.
            let ahead =
                Duration::seconds(i64::try_from(ahead)?).max(Duration::from_std(PROPAGATION)?);
            let kid = store::create_key(&db, kek.as_ref(), Utc::now() + ahead).await?;
            propagated().await;
            let keys = store::list_keys(&db).await?;
            let info = keys.iter().find(|k| k.kid == kid);
            Ok(serde_json::to_value(info)?)
        }
        KeyCommand::List => Ok(serde_json::to_value(store::list_keys(&db).await?)?),
        KeyCommand::Revoke { kid } => {
            let replacement = store::revoke_key(&db, kek.as_ref(), &kid).await?;
            propagated().await;
            Ok(json!({"kid": kid, "state": "revoked", "replacement_kid": replacement}))
        }
    }
}
