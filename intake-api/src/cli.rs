//! Operator commands.

use serde_json::json;

use crate::config::{CaseCommand, Config, WebhookCommand};
use crate::migration;
use crate::store::CaseStore;
use crate::webhooks;

/// Runs `intake-api case ...` and returns what it prints.
pub async fn case(config: &Config, command: CaseCommand) -> anyhow::Result<serde_json::Value> {
    const POOL: u32 = 2;
    let db = migration::open_existing(&config.database_url, POOL).await?;
    let cases = CaseStore::new(db, POOL, config.timing());
    match command {
        CaseCommand::Show { reference } => {
            let view = cases
                .show(&reference)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no case with reference {reference}"))?;
            Ok(serde_json::to_value(view)?)
        }
    }
}

/// Runs `intake-api webhook ...` and returns what it prints.
pub async fn webhook(
    config: &Config,
    command: WebhookCommand,
) -> anyhow::Result<serde_json::Value> {
    const POOL: u32 = 2;
    let db = migration::open_existing(&config.database_url, POOL).await?;
    let cases = CaseStore::new(db, POOL, config.timing());
    let missing = |client_id: &str| anyhow::anyhow!("client {client_id} has no webhook endpoint");
    match command {
        WebhookCommand::Set { client_id, url } => {
            let url = webhooks::check_target(&url, config.webhook_allow_insecure).await?;
            let (view, secret) = cases
                .set_webhook(&client_id, url.as_str(), &webhooks::new_secret()?)
                .await?;
            let mut out = serde_json::to_value(view)?;
            out["secret"] = json!(secret);
            Ok(out)
        }
        WebhookCommand::List => Ok(serde_json::to_value(cases.webhooks().await?)?),
        WebhookCommand::Remove { client_id } => {
            if !cases.remove_webhook(&client_id).await? {
                return Err(missing(&client_id));
            }
            Ok(json!({ "client_id": client_id, "removed": true }))
        }
        WebhookCommand::RotateSecret {
            client_id,
            grace_secs,
        } => {
            let secret = webhooks::new_secret()?;
            let grace = chrono::Duration::seconds(i64::try_from(grace_secs).unwrap_or(i64::MAX));
            let until = chrono::Utc::now()
                .checked_add_signed(grace)
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
            let view = cases
                .rotate_webhook_secret(&client_id, &secret, until)
                .await?
                .ok_or_else(|| missing(&client_id))?;
            let mut out = serde_json::to_value(view)?;
            out["secret"] = json!(secret);
            Ok(out)
        }
        WebhookCommand::Deliveries {
            client_id,
            failed,
            limit,
        } => Ok(serde_json::to_value(
            cases.webhook_deliveries(&client_id, failed, limit).await?,
        )?),
        WebhookCommand::Redeliver { delivery_id } => {
            let raw = delivery_id.strip_prefix("msg_").unwrap_or(&delivery_id);
            let id = uuid::Uuid::try_parse(raw)
                .map_err(|_| anyhow::anyhow!("{delivery_id} is not a delivery id"))?;
            let queued = cases.redeliver(id).await?;
            if queued == 0 {
                anyhow::bail!("no delivery with id {delivery_id}");
            }
            Ok(json!({ "id": id, "queued": queued }))
        }
    }
}
