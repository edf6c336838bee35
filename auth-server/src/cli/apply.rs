//! `auth-server apply -f FILE`: clients as code, the file read (bounded) and the difference
//! applied, or shown with `--dry-run`.

use chrono::SecondsFormat;
use serde_json::{Value, json};
use service_kit::command_line::output::Report;

use super::{author, open, propagated};
use crate::client_jwks;
use crate::config::Settings;
use crate::store::clients;

/// How `auth-server apply` is asked to run.
#[derive(Debug, Clone, Copy)]
pub struct Applying {
    /// Print the difference and change nothing.
    pub dry_run: bool,
    /// Which clients besides the file's own it may reach.
    pub reach: clients::apply::Reach,
    /// Whether secrets made for new clients may be printed: on a terminal, or asked for
    /// with `--show-secret`.
    pub secrets_shown: bool,
}

/// Runs `auth-server apply` and returns what it prints as JSON.
pub async fn apply(
    settings: impl Into<Settings>,
    file: &std::path::Path,
    asked: Applying,
) -> anyhow::Result<Value> {
    Ok(apply_report(&settings.into(), file, asked).await?.json)
}

/// The most a clients file may hold: far more than any deployment's clients take, and a
/// bound on what `-f /dev/zero` reads.
const MAX_CLIENTS_FILE_BYTES: u64 = 1 << 20;

/// The clients file's text: from standard input for `-`, else the file (a pipe, as `<(...)`
/// gives, too); at most [`MAX_CLIENTS_FILE_BYTES`].
fn read_clients_file(file: &std::path::Path) -> anyhow::Result<String> {
    use service_kit::command_line::operator::UsageError;
    use std::io::Read;
    let shown = file.display();
    let mut bytes = Vec::new();
    let read = if file.as_os_str() == "-" {
        std::io::stdin()
            .take(MAX_CLIENTS_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file)
            .and_then(|f| f.take(MAX_CLIENTS_FILE_BYTES + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| UsageError(format!("cannot read {shown}: {e}")))?;
    if bytes.len() as u64 > MAX_CLIENTS_FILE_BYTES {
        return Err(UsageError(format!(
            "{shown} is larger than {MAX_CLIENTS_FILE_BYTES} bytes: not a clients file"
        ))
        .into());
    }
    String::from_utf8(bytes).map_err(|_| UsageError(format!("{shown} is not UTF-8 text")).into())
}

pub(super) async fn apply_report(
    settings: &Settings,
    file: &std::path::Path,
    asked: Applying,
) -> anyhow::Result<Report> {
    use clients::apply;
    use service_kit::command_line::operator::{Refused, UsageError};
    let stdin = file.as_os_str() == "-";
    let text = read_clients_file(file)?;
    let dir = match file.parent() {
        Some(dir) if !stdin && !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => std::path::PathBuf::from("."),
    };
    let reading = crate::clients_file::Reading {
        source: &file.display().to_string(),
        dir: &dir,
        fapi2: settings.fapi2,
    };
    let declared =
        crate::clients_file::read(&text, &reading).map_err(|bad| UsageError(bad.to_string()))?;
    let db = open(settings).await?;
    let refused = |e: anyhow::Error| match e.downcast::<apply::Refusals>() {
        Ok(r) => anyhow::Error::new(Refused(r.to_string())),
        Err(e) => e,
    };
    let plan = apply::plan(&db, &declared, asked.reach)
        .await
        .map_err(refused)?;
    let shown = |changes: &[apply::Change]| serde_json::to_value(changes);
    let kept_note = |kept: &[apply::KeptDisabled]| {
        kept.iter()
            .map(|k| {
                format!(
                    "client {:?} ({}) is disabled, since {}, and its entry does not say \
                     `disabled`: it stays disabled (`disabled: false` enables it)",
                    k.client,
                    k.client_id,
                    k.disabled_at.to_rfc3339_opts(SecondsFormat::Secs, true)
                )
            })
            .collect::<Vec<_>>()
    };
    if asked.dry_run || plan.changes.is_empty() {
        let mut notes = kept_note(&plan.kept_disabled);
        notes.push(if plan.changes.is_empty() {
            "the clients are as the file declares: nothing to change".to_owned()
        } else {
            format!(
                "{} change(s) to make; --dry-run made none",
                plan.changes.len()
            )
        });
        return Ok(Report {
            note: Some(notes.join("\n")),
            ..Report::record(json!({
                "dry_run": asked.dry_run,
                "changed": false,
                "changes": shown(&plan.changes)?,
                "kept_disabled": plan.kept_disabled,
            }))
        });
    }
    let made_secrets = apply::secrets_made(&plan.changes, &declared);
    if !asked.secrets_shown && !made_secrets.is_empty() {
        return Err(UsageError(format!(
            "apply would make and print a secret for {}, and stdout is not a terminal (a pipe \
             or a file, which can end up in a log): nothing was changed; add --show-secret to \
             print it there, or name the secret in the entry (`secret_env`, `secret_file`)",
            made_secrets
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    let mut fetched = std::collections::HashMap::new();
    for url in apply::urls_to_fetch(&plan.changes, &declared) {
        let (_, keys) =
            client_jwks::fetch_for_registration(url.as_str(), settings.client_jwks_reach())
                .await
                .map_err(|e| Refused(format!("the JWKS URL {url} is refused: {e}")))?;
        fetched.insert(url, keys);
    }
    let applied = apply::apply(
        &db,
        &declared,
        asked.reach,
        &fetched,
        &author(settings, "apply")?,
    )
    .await
    .map_err(refused)?;
    if !applied.changes.is_empty() {
        propagated().await;
    }
    let made: Vec<Value> = applied
        .made
        .iter()
        .map(|m| {
            let mut made = json!({"client": m.name, "client_id": m.client_id});
            if let Some(secret) = &m.made_secret {
                made["client_secret"] = json!(secret.expose());
            }
            made
        })
        .collect();
    let hint = applied.made.iter().any(|m| m.made_secret.is_some());
    let notes = kept_note(&applied.kept_disabled);
    Ok(Report {
        hint: hint.then_some("Keep the secrets now: they are never shown again."),
        note: (!notes.is_empty()).then(|| notes.join("\n")),
        ..Report::record(json!({
            "dry_run": false,
            "changed": !applied.changes.is_empty(),
            "changes": shown(&applied.changes)?,
            "made": made,
            "kept_disabled": applied.kept_disabled,
        }))
    })
}
