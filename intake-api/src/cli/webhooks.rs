//! `intake-api webhook ...`: partners' webhook endpoints, their signing secrets and their
//! deliveries.

use serde_json::{Value, json};

use super::{Report, open};
use crate::config::{Settings, WebhookCommand};

/// Runs `intake-api webhook ...` and returns what it prints as JSON, as on a terminal.
pub async fn webhook(
    settings: impl Into<Settings>,
    command: WebhookCommand,
) -> anyhow::Result<Value> {
    Ok(webhook_report(&settings.into(), command, true).await?.json)
}

/// Why a command that would make a secret did nothing: its output is not a terminal.
fn secret_to_pipe(what: &str) -> anyhow::Error {
    anyhow::Error::new(service_kit::cli::UsageError(format!(
        "{what} would print a new signing secret, and stdout is not a terminal (a pipe or a \
         file, which can end up in a log): nothing was changed; add --show-secret to print it \
         there"
    )))
}

/// Runs a webhook command; `terminal` says whether stdout is one, where a new secret may be
/// printed without `--show-secret`.
pub(super) async fn webhook_report(
    settings: &Settings,
    command: WebhookCommand,
    terminal: bool,
) -> anyhow::Result<Report> {
    let cases = open(settings).await?;
    let missing = |client_id: &str| anyhow::anyhow!("client {client_id} has no webhook endpoint");
    Ok(match command {
        WebhookCommand::Set {
            client_id,
            url,
            show_secret,
        } => {
            let url = service_kit::outbound::check_target(&url, settings.webhook_reach()).await?;
            let seal = settings.webhook_seal()?;
            let secret = crate::webhooks::new_secret()?;
            let offered = (terminal || show_secret).then_some(secret.as_str());
            let (view, made) = cases
                .set_webhook(&client_id, url.as_str(), offered, &seal)
                .await?
                .ok_or_else(|| secret_to_pipe(&format!("a new endpoint for {client_id}")))?;
            let mut out = serde_json::to_value(view)?;
            match made {
                Some(secret) => out["secret"] = json!(secret),
                None => eprintln!(
                    "the endpoint keeps its signing secret, which is not shown again \
                     (`webhook rotate-secret {client_id}` makes a new one)"
                ),
            }
            Report::record(out)
        }
        WebhookCommand::List => Report::list(
            serde_json::to_value(cases.webhooks().await?)?,
            &[
                "client_id",
                "url",
                "disabled_at",
                "disabled_reason",
                "previous_secret_until",
                "updated_at",
            ],
            "No webhook endpoints.",
        ),
        WebhookCommand::Remove { client_id } => {
            if !cases.remove_webhook(&client_id).await? {
                return Err(missing(&client_id));
            }
            Report::record(json!({ "client_id": client_id, "removed": true }))
        }
        WebhookCommand::RotateSecret {
            client_id,
            grace_secs,
            show_secret,
        } => {
            if !(terminal || show_secret) {
                return Err(secret_to_pipe("rotate-secret"));
            }
            let seal = settings.webhook_seal()?;
            let secret = crate::webhooks::new_secret()?;
            let grace = chrono::Duration::seconds(i64::try_from(grace_secs).unwrap_or(i64::MAX));
            let until = chrono::Utc::now()
                .checked_add_signed(grace)
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
            let view = cases
                .rotate_webhook_secret(&client_id, &secret, until, &seal)
                .await?
                .ok_or_else(|| missing(&client_id))?;
            let mut out = serde_json::to_value(view)?;
            out["secret"] = json!(secret);
            Report::record(out)
        }
        WebhookCommand::Deliveries {
            client_id,
            failed,
            limit,
        } => Report::list(
            serde_json::to_value(cases.webhook_deliveries(&client_id, failed, limit).await?)?,
            &[
                "id",
                "reference",
                "event_type",
                "created_at",
                "state",
                "attempts",
                "next_attempt_at",
                "last_status",
                "last_error",
            ],
            "No deliveries.",
        ),
        WebhookCommand::Redeliver { delivery_id } => {
            let raw = delivery_id.strip_prefix("msg_").unwrap_or(&delivery_id);
            let id = uuid::Uuid::try_parse(raw)
                .map_err(|_| anyhow::anyhow!("{delivery_id} is not a delivery id"))?;
            let queued = cases.redeliver(id).await?;
            if queued == 0 {
                anyhow::bail!("no delivery with id {delivery_id}");
            }
            Report::record(json!({ "id": id, "queued": queued }))
        }
    })
}
