//! The operator commands: cases and webhooks. Each returns the JSON document it prints;
//! [`run`] prints it as a table or as JSON.

use std::io::IsTerminal;
use std::time::Duration;

use serde_json::{Value, json};
use service_kit::cli::View;

use crate::config::{CaseCommand, Operation, OperatorCommand, Settings, WebhookCommand};
use crate::domain::Email;
use crate::migration;
use crate::store::{CaseStore, Timing};
use crate::webhooks;

/// What a command did: the JSON it prints, and how that reads as a table.
struct Report {
    json: Value,
    view: View,
}

impl Report {
    fn record(json: Value) -> Self {
        Self {
            json,
            view: View::Record,
        }
    }

    fn list(json: Value, columns: &'static [&'static str], empty: &'static str) -> Self {
        Self {
            json,
            view: View::List { columns, empty },
        }
    }
}

/// The columns of a list of cases.
const CASE_COLUMNS: &[&str] = &[
    "reference",
    "brand",
    "status",
    "created_at",
    "updated_at",
    "activated_at",
    "product_uuid",
];

/// The columns of what `case erase` did.
const ERASED_COLUMNS: &[&str] = &["reference", "brand", "requested_by"];

/// Runs an operator command as the binary does: logs only warnings, and prints what it
/// did in the format asked for.
pub async fn run(operation: Operation) -> anyhow::Result<()> {
    service_kit::cli::init_logs();
    let Operation {
        command,
        output,
        given,
    } = operation;
    let settings = Settings::from(&given);
    let report = match command {
        OperatorCommand::Case(c) => case_report(&settings, c).await?,
        OperatorCommand::Webhook(w) => {
            let terminal = std::io::stdout().is_terminal();
            webhook_report(&settings, w, terminal).await?
        }
    };
    service_kit::cli::print(&report.json, output, report.view)
}

/// The store on the existing database. Commands make neither cases nor links, so the
/// timing of those never applies.
async fn open(settings: &Settings) -> anyhow::Result<CaseStore> {
    const POOL: u32 = 2;
    let db = migration::SCHEMA
        .open_existing(settings.database.url.expose(), POOL)
        .await?;
    let unused = Timing {
        activation_delay: Duration::ZERO,
        redirect_ttl: Duration::ZERO,
        sandbox_activation_delay: Duration::ZERO,
    };
    Ok(CaseStore::new(db, POOL, unused))
}

/// Runs `intake-api case ...` and returns what it prints as JSON.
pub async fn case(settings: impl Into<Settings>, command: CaseCommand) -> anyhow::Result<Value> {
    Ok(case_report(&settings.into(), command).await?.json)
}

async fn case_report(settings: &Settings, command: CaseCommand) -> anyhow::Result<Report> {
    let cases = open(settings).await?;
    Ok(match command {
        CaseCommand::Show { reference } => {
            let view = cases
                .show(&reference)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no case with reference {reference}"))?;
            Report::record(serde_json::to_value(view)?)
        }
        CaseCommand::Find { email, sandbox } => Report::list(
            serde_json::to_value(cases.find_by_email(&email, sandbox).await?)?,
            CASE_COLUMNS,
            "No cases for that e-mail address.",
        ),
        CaseCommand::Erase { email, brand } => {
            let email = Email::parse(&email)
                .map_err(|_| anyhow::anyhow!("{email:?} is not an e-mail address"))?;
            let actor = service_kit::cli::actor(settings.actor.as_deref());
            // Holding nothing for the address is an answer too: an empty list, not an error.
            let erased: Vec<Value> = cases
                .erase(&email, brand.as_deref(), &actor)
                .await?
                .into_iter()
                .map(|c| json!({"reference": c.reference, "brand": c.brand, "requested_by": actor}))
                .collect();
            Report::list(
                Value::from(erased),
                ERASED_COLUMNS,
                "No case for that e-mail address: nothing to erase.",
            )
        }
        CaseCommand::List {
            status,
            since,
            limit,
            sandbox,
        } => Report::list(
            serde_json::to_value(cases.list(&status, since, limit, sandbox).await?)?,
            CASE_COLUMNS,
            "No cases.",
        ),
    })
}

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
async fn webhook_report(
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
            let secret = webhooks::new_secret()?;
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
            let secret = webhooks::new_secret()?;
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
