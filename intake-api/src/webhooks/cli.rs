//! `intake-api webhook ...`: partners' webhook endpoints, their signing secrets and their
//! deliveries.

use clap::Subcommand;
use serde_json::{Value, json};
use service_kit::command_line::reads;

use crate::config::{IntakeApiNames, Settings, webhook_secret, webhook_target};
use service_kit::command_line::output::Report;

/// Runs `intake-api webhook ...` and returns what it prints as JSON, as on a terminal.
pub async fn webhook(
    settings: impl Into<Settings>,
    command: WebhookCommand,
) -> anyhow::Result<Value> {
    Ok(webhook_report(&settings.into(), command, true).await?.json)
}

/// Why a command that would make a secret did nothing: its output is not a terminal.
fn secret_to_pipe(what: &str) -> anyhow::Error {
    anyhow::Error::new(service_kit::command_line::operator::UsageError(format!(
        "{what} would print a new signing secret, and stdout is not a terminal (a pipe or a \
         file, which can end up in a log): nothing was changed; add --show-secret to print it \
         there"
    )))
}

/// Runs a webhook command; `terminal` says whether stdout is one, where a new secret may be
/// printed without `--show-secret`.
pub(crate) async fn webhook_report(
    settings: &Settings,
    command: WebhookCommand,
    terminal: bool,
) -> anyhow::Result<Report> {
    let cases = settings.open().await?;
    let missing = |client_id: &str| anyhow::anyhow!("client {client_id} has no webhook endpoint");
    Ok(match command {
        WebhookCommand::Set {
            client_id,
            url,
            show_secret,
        } => {
            let url = service_kit::outbound::check_target(&url, settings.webhook_reach()).await?;
            let seal = settings.webhook_seal()?;
            let secret = super::signing::new_secret()?;
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
            let secret = super::signing::new_secret()?;
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

/// `intake-api webhook ...`
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Send a partner's events to URL (https, public addresses only). A new endpoint gets a
    /// signing secret, printed this once; setting it again changes the URL and re-enables
    /// it, keeps the secret and never prints it (`rotate-secret` makes a new one).
    #[command(
        args = webhook_target(),
        after_help = "Examples:
  intake-api webhook set CLIENT_ID https://partner.example/hooks
  intake-api webhook set CLIENT_ID https://partner.example/hooks --show-secret | jq -r .secret"
    )]
    Set {
        /// The partner's client id.
        client_id: String,
        /// Where its events are POSTed.
        url: String,
        /// Print a new endpoint's secret also when stdout is not a terminal (a pipe or a
        /// file, where it may end up in a log); without it, such a `set` makes no endpoint.
        #[arg(long)]
        show_secret: bool,
    },
    /// List every endpoint (never the secrets).
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api webhook list
  intake-api webhook list -o json | jq -r '.[] | select(.disabled_at) | .client_id'"
    )]
    List,
    /// Stop sending a partner's events; the ones not yet delivered are dropped.
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api webhook remove CLIENT_ID"
    )]
    Remove {
        /// The partner's client id.
        client_id: String,
    },
    /// Give an endpoint a new signing secret; the old one keeps signing beside it for the
    /// grace period, so the partner can switch without missing a delivery.
    #[command(
        args = webhook_secret(),
        after_help = "Examples:
  intake-api webhook rotate-secret CLIENT_ID                    # both secrets sign for a day
  intake-api webhook rotate-secret CLIENT_ID --grace-secs 3600
  intake-api webhook rotate-secret CLIENT_ID --show-secret | jq -r .secret"
    )]
    RotateSecret {
        /// The partner's client id.
        client_id: String,
        /// How long the old secret keeps signing, in seconds.
        #[arg(long, default_value_t = 86_400)]
        grace_secs: u64,
        /// Print the new secret also when stdout is not a terminal; without it, the secret
        /// is not changed there.
        #[arg(long)]
        show_secret: bool,
    },
    /// A partner's events, newest first.
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api webhook deliveries CLIENT_ID --failed
  intake-api webhook deliveries CLIENT_ID --limit 10 -o json"
    )]
    Deliveries {
        /// The partner's client id.
        client_id: String,
        /// Only the ones given up on.
        #[arg(long)]
        failed: bool,
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
    /// Send an event again, at once, to every partner it went to.
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api webhook redeliver msg_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d"
    )]
    Redeliver {
        /// The event's id (as `deliveries` lists it, or its `webhook-id`).
        delivery_id: String,
    },
}
