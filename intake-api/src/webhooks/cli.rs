//! `intake-api webhook ...`: partners' webhook endpoints, their signing secrets and their
//! deliveries, on the same records partners manage through the API.

use clap::Subcommand;
use serde_json::{Value, json};
use service_kit::command_line::reads;

use shared::intake::webhook_endpoints::{endpoint_name, parse_endpoint_name};

use super::store::{ChangedBy, EndpointChange, SetOutcome};
use crate::config::{IntakeApiNames, Settings, webhook_secret, webhook_target};
use crate::store::CaseStore;
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

/// The endpoint of `client_id` a command acts on: the one `name`d, or the partner's only one.
async fn chosen(
    cases: &CaseStore,
    client_id: &str,
    name: Option<&str>,
) -> anyhow::Result<uuid::Uuid> {
    let held = cases.endpoints(Some(client_id)).await?;
    if let Some(name) = name {
        return parse_endpoint_name(name)
            .filter(|id| held.iter().any(|e| e.id == *id))
            .ok_or_else(|| anyhow::anyhow!("client {client_id} has no webhook endpoint {name}"));
    }
    match held.as_slice() {
        [] => anyhow::bail!("client {client_id} has no webhook endpoint"),
        [only] => Ok(only.id),
        several => anyhow::bail!(
            "client {client_id} has {} webhook endpoints; name one with --endpoint ({})",
            several.len(),
            several
                .iter()
                .map(|e| endpoint_name(e.id))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Runs a webhook command; `terminal` says whether stdout is one, where a new secret may be
/// printed without `--show-secret`.
pub(crate) async fn webhook_report(
    settings: &Settings,
    command: WebhookCommand,
    terminal: bool,
) -> anyhow::Result<Report> {
    let cases = settings.open().await?;
    Ok(match command {
        WebhookCommand::Set {
            client_id,
            url,
            show_secret,
        } => {
            let url = super::target::endpoint_url(&url, settings.webhook_reach()).await?;
            let seal = settings.webhook_seal()?;
            let secret = super::signing::new_secret()?;
            let offered = (terminal || show_secret).then_some(secret.as_str());
            match cases
                .set_webhook(
                    &client_id,
                    url.as_str(),
                    offered,
                    &seal,
                    &ChangedBy::operator(),
                )
                .await?
            {
                SetOutcome::Made(view) => {
                    let mut out = serde_json::to_value(view)?;
                    out["secret"] = json!(secret);
                    Report::record(out)
                }
                SetOutcome::Changed(view) => {
                    eprintln!(
                        "the endpoint keeps its signing secret, which is not shown again \
                         (`webhook rotate-secret {client_id}` makes a new one)"
                    );
                    Report::record(serde_json::to_value(view)?)
                }
                SetOutcome::NoSecret => {
                    return Err(secret_to_pipe(&format!("a new endpoint for {client_id}")));
                }
                SetOutcome::Several(n) => anyhow::bail!(
                    "client {client_id} has {n} webhook endpoints; `set` changes a partner's only \
                     one (the partner manages several through the API)"
                ),
            }
        }
        WebhookCommand::List { client_id } => Report::list(
            serde_json::to_value(cases.endpoints(client_id.as_deref()).await?)?,
            &[
                "id",
                "client_id",
                "url",
                "event_types",
                "disabled_at",
                "disabled_reason",
                "previous_secret_until",
                "rate_limit",
                "updated_at",
                "changed_by",
            ],
            "No webhook endpoints.",
        ),
        WebhookCommand::Remove {
            client_id,
            endpoint,
        } => {
            let id = chosen(&cases, &client_id, endpoint.as_deref()).await?;
            if !cases.delete_endpoint(&client_id, id).await? {
                anyhow::bail!(
                    "client {client_id} has no webhook endpoint {}",
                    endpoint_name(id)
                );
            }
            Report::record(
                json!({ "client_id": client_id, "id": endpoint_name(id), "removed": true }),
            )
        }
        WebhookCommand::Disable {
            client_id,
            endpoint,
            reason,
        } => {
            let id = chosen(&cases, &client_id, endpoint.as_deref()).await?;
            let change = EndpointChange {
                url: None,
                event_types: None,
                disabled: Some(Some(reason)),
                rate_limit: None,
                by: ChangedBy::operator(),
            };
            let view = cases
                .change_endpoint(&client_id, id, change)
                .await?
                .ok_or_else(|| anyhow::anyhow!("client {client_id} has no such endpoint"))?;
            Report::record(serde_json::to_value(view)?)
        }
        WebhookCommand::RotateSecret {
            client_id,
            endpoint,
            grace_secs,
            show_secret,
        } => {
            if !(terminal || show_secret) {
                return Err(secret_to_pipe("rotate-secret"));
            }
            let seal = settings.webhook_seal()?;
            let id = chosen(&cases, &client_id, endpoint.as_deref()).await?;
            let secret = super::signing::new_secret()?;
            let grace = chrono::Duration::seconds(i64::try_from(grace_secs).unwrap_or(i64::MAX));
            let until = chrono::Utc::now()
                .checked_add_signed(grace)
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
            let view = cases
                .rotate_endpoint_secret(
                    &client_id,
                    id,
                    &secret,
                    until,
                    &seal,
                    &ChangedBy::operator(),
                )
                .await?
                .ok_or_else(|| anyhow::anyhow!("client {client_id} has no such endpoint"))?;
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
                "endpoint_id",
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
            let queued = cases.redeliver(None, id).await?;
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
    /// Send a partner's events to URL (https, public addresses only), at its only endpoint.
    /// A new endpoint gets a signing secret, printed this once; setting it again changes the
    /// URL and re-enables it, keeps the secret and never prints it (`rotate-secret` makes a
    /// new one). A partner with several endpoints manages them through the API.
    #[command(
        args = webhook_target(),
        after_help = "Needs the servers' INTAKE_KEY_ENCRYPTION_KEY in the environment, which seals the
secret (never as a flag: `ps` shows flags).

Examples:
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
    /// List every endpoint, or a partner's (never the secrets).
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api webhook list
  intake-api webhook list CLIENT_ID
  intake-api webhook list -o json | jq -r '.[] | select(.disabled_at) | .id'"
    )]
    List {
        /// Only this partner's.
        client_id: Option<String>,
    },
    /// Remove an endpoint; its events not yet delivered are dropped.
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api webhook remove CLIENT_ID
  intake-api webhook remove CLIENT_ID --endpoint ep_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d"
    )]
    Remove {
        /// The partner's client id.
        client_id: String,
        /// Which of its endpoints (`ep_...`); without it, its only one.
        #[arg(long)]
        endpoint: Option<String>,
    },
    /// Stop sending to an endpoint, saying why; the partner sees the reason, and enables it
    /// again through the API (or `set`).
    #[command(
        args = reads::<IntakeApiNames>(),
        after_help = "Examples:
  intake-api webhook disable CLIENT_ID --reason 'answers with our own data'"
    )]
    Disable {
        /// The partner's client id.
        client_id: String,
        /// Which of its endpoints (`ep_...`); without it, its only one.
        #[arg(long)]
        endpoint: Option<String>,
        /// Why, as the partner will read it.
        #[arg(long, default_value = "disabled by an operator")]
        reason: String,
    },
    /// Give an endpoint a new signing secret; the old one keeps signing beside it for the
    /// grace period, so the partner can switch without missing a delivery.
    #[command(
        args = webhook_secret(),
        after_help = "Needs the servers' INTAKE_KEY_ENCRYPTION_KEY in the environment, which seals the
secret (never as a flag: `ps` shows flags).

Examples:
  intake-api webhook rotate-secret CLIENT_ID                    # both secrets sign for a day
  intake-api webhook rotate-secret CLIENT_ID --grace-secs 3600
  intake-api webhook rotate-secret CLIENT_ID --show-secret | jq -r .secret"
    )]
    RotateSecret {
        /// The partner's client id.
        client_id: String,
        /// Which of its endpoints (`ep_...`); without it, its only one.
        #[arg(long)]
        endpoint: Option<String>,
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
    /// Send an event again, at once, to every endpoint it went to.
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
