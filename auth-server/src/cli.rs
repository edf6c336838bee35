//! The operator commands: clients, keys and the audit trail. Each makes the report the
//! binary prints, as a table or as JSON ([`report`]).

use chrono::{Duration, SecondsFormat, Utc};
use sea_orm::DatabaseConnection;
use serde_json::{Value, json};
use service_kit::Secret;
use service_kit::command_line::output::{self, Report};

use crate::audit;
use crate::commands::{AuditCommand, ClientCommand, KeyCommand, OperatorCommand};
use crate::config::Settings;
use crate::keys::KeyState;
use crate::registry::PROPAGATION;
use crate::store::clients::{self, AuthMethod};
use crate::store::{audit_trail, key_custody, signing_keys};
use crate::token_request::MAX_PARAM_CHARS;
use crate::{client_jwks, migration, secrets};

/// Runs an operator command with the settings it was given, for the report the binary
/// prints.
pub async fn report(command: OperatorCommand, settings: Settings) -> anyhow::Result<Report> {
    match command {
        OperatorCommand::Client(c) => client_report(&settings, c).await,
        OperatorCommand::Key(k) => key_report(&settings, k).await,
        OperatorCommand::Audit(a) => audit_report(&settings, a).await,
        OperatorCommand::Apply {
            file,
            dry_run,
            prune,
            adopt,
            show_secret,
        } => {
            let asked = Applying {
                dry_run,
                reach: clients::apply::Reach { prune, adopt },
                secrets_shown: output::may_print_secrets(show_secret),
            };
            apply_report(&settings, &file, asked).await
        }
    }
}

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

async fn apply_report(
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

/// Who makes a change, and the key its audit entry is sealed with: a change is refused
/// without it, before anything is written, since an entry left without a seal could not be
/// told from one whose seal was removed.
fn author(settings: &Settings, doing: &str) -> anyhow::Result<audit::Author> {
    Ok(audit::Author::new(
        audit::actor(settings.actor.as_deref()),
        audit_key(settings, doing)?,
    ))
}

/// The audit key, which checking or sealing the trail cannot do without.
fn audit_key(settings: &Settings, doing: &str) -> anyhow::Result<audit::AuditKey> {
    settings.audit_key()?.ok_or_else(|| {
        anyhow::anyhow!(
            "{doing} needs the servers' AUTH_KEY_ENCRYPTION_KEY (or a file holding it, \
             AUTH_KEY_ENCRYPTION_KEY_FILE): every audit entry is sealed with a key derived \
             from it"
        )
    })
}

async fn open(settings: &Settings) -> anyhow::Result<DatabaseConnection> {
    migration::SCHEMA
        .open_existing(settings.database.url.expose(), 2)
        .await
}

/// Waits until every running server has picked up a change just committed.
async fn propagated() {
    tokio::time::sleep(PROPAGATION).await;
}

/// The keys a `client create` or `set-keys` registers: read from the file, or fetched from
/// the URL (which must serve usable keys now); none when neither is given.
async fn registered_keys(
    settings: &Settings,
    jwks_file: Option<std::path::PathBuf>,
    jwks_uri: Option<String>,
) -> anyhow::Result<Option<clients::input::RegisteredKeys>> {
    Ok(match (jwks_file, jwks_uri) {
        (Some(_), Some(_)) => {
            anyhow::bail!("give --jwks-file or --jwks-uri, not both: a client's keys have one home")
        }
        (Some(file), None) => Some(clients::input::RegisteredKeys::Inline(
            clients::input::read_jwks_file(&file)?,
        )),
        (None, Some(uri)) => {
            let (url, fetched) =
                client_jwks::fetch_for_registration(&uri, settings.client_jwks_reach())
                    .await
                    .map_err(|e| anyhow::anyhow!("the JWKS URL {uri} is refused: {e}"))?;
            Some(clients::input::RegisteredKeys::Uri { url, fetched })
        }
        (None, None) => None,
    })
}

/// Refuses to make a secret client the servers would refuse: under FAPI 2.0 clients
/// authenticate with private_key_jwt only, with the keys the command's `keys` flags give.
fn refuse_secret_under_fapi2(
    settings: &Settings,
    method: AuthMethod,
    keys: &str,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !(settings.fapi2 && matches!(method, AuthMethod::ClientSecret)),
        "AUTH_FAPI2 is on: under FAPI 2.0 clients authenticate with private_key_jwt \
         only, and a secret client would be refused at the token endpoint; register \
         the client's public keys: --auth-method private_key_jwt {keys}"
    );
    Ok(())
}

/// The secret `client ensure` declares, read from the environment variable `var`: never
/// from the command line, where `ps` shows it. No error quotes it.
fn secret_from_env(var: &str) -> anyhow::Result<Secret<String>> {
    secrets::chosen_from_env(var, MAX_PARAM_CHARS)
        .map_err(|problem| anyhow::anyhow!("the secret in {var} is refused: {problem}"))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--secret-env names {var}, which is not set: set it to the client's secret \
                 (`openssl rand -base64 32` makes one)"
            )
        })
}

/// What `client ensure` declares the client authenticates with: one method, and what it
/// takes.
fn declared_credentials(
    method: AuthMethod,
    secret_env: Option<String>,
    jwks_file: Option<std::path::PathBuf>,
) -> anyhow::Result<clients::input::DeclaredCredentials> {
    Ok(match (method, secret_env, jwks_file) {
        (AuthMethod::ClientSecret, Some(var), None) => {
            clients::input::DeclaredCredentials::Secret(secret_from_env(&var)?)
        }
        (AuthMethod::ClientSecret, None, None) => anyhow::bail!(
            "a client_secret client needs --secret-env VAR, the environment variable holding \
             its secret (never the secret itself, which `ps` would show)"
        ),
        (AuthMethod::ClientSecret, _, Some(_)) => anyhow::bail!(
            "--jwks-file is for --auth-method private_key_jwt: a client uses one method"
        ),
        (AuthMethod::PrivateKeyJwt, Some(_), _) => anyhow::bail!(
            "--secret-env is for --auth-method client_secret: a private_key_jwt client has no \
             secret"
        ),
        (AuthMethod::PrivateKeyJwt, None, Some(file)) => {
            clients::input::DeclaredCredentials::Keys(clients::input::read_jwks_file(&file)?)
        }
        (AuthMethod::PrivateKeyJwt, None, None) => anyhow::bail!(
            "--auth-method private_key_jwt needs --jwks-file FILE, the client's public keys as \
             a JWKS"
        ),
    })
}

/// Runs `auth-server client ...` and returns what it prints as JSON.
pub async fn client(
    settings: impl Into<Settings>,
    command: ClientCommand,
) -> anyhow::Result<Value> {
    Ok(client_report(&settings.into(), command).await?.json)
}

async fn client_report(settings: &Settings, command: ClientCommand) -> anyhow::Result<Report> {
    let db = open(settings).await?;
    let actor = || author(settings, "a change to a client");
    let report = match command {
        ClientCommand::Create {
            name,
            scopes,
            brands,
            auth_method,
            jwks_file,
            jwks_uri,
            sandbox,
        } => {
            let given_keys = jwks_file.is_some() || jwks_uri.is_some();
            refuse_secret_under_fapi2(
                settings,
                auth_method,
                "--jwks-file FILE (or --jwks-uri URL)",
            )?;
            let credentials = match auth_method {
                AuthMethod::ClientSecret if !given_keys => clients::input::NewCredentials::Secret,
                AuthMethod::ClientSecret => anyhow::bail!(
                    "--jwks-file and --jwks-uri are for --auth-method private_key_jwt: a \
                     client uses one method"
                ),
                AuthMethod::PrivateKeyJwt => clients::input::NewCredentials::Keys(
                    registered_keys(settings, jwks_file, jwks_uri)
                        .await?
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "--auth-method private_key_jwt needs the client's public keys: \
                                 --jwks-file FILE (a JWKS) or --jwks-uri URL (where the \
                                 partner publishes it)"
                            )
                        })?,
                ),
            };
            let created = clients::create_client(
                &db,
                &name,
                &scopes,
                brands.as_deref(),
                credentials,
                sandbox,
                &actor()?,
            )
            .await?;
            propagated().await;
            let mut printed = json!({"client_id": created.client_id});
            if let Some(secret) = &created.client_secret {
                printed["client_secret"] = json!(secret.expose());
            }
            if let Some(uri) = &created.jwks_uri {
                printed["jwks_uri"] = json!(uri);
            }
            printed["scopes"] = json!(created.scopes);
            if !created.brands.is_empty() {
                printed["brands"] = json!(created.brands);
            }
            if created.sandbox {
                printed["sandbox"] = json!(true);
            }
            if created.client_secret.is_some() {
                Report {
                    hint: Some("Keep the secret now: it is never shown again."),
                    ..Report::record(printed)
                }
            } else {
                printed["auth_method"] = json!(AuthMethod::PrivateKeyJwt);
                printed["keys"] = json!(created.keys);
                Report::record(printed)
            }
        }
        ClientCommand::Ensure {
            id,
            name,
            scopes,
            brands,
            auth_method,
            secret_env,
            jwks_file,
        } => {
            refuse_secret_under_fapi2(settings, auth_method, "--jwks-file FILE")?;
            let declared = clients::input::DeclaredClient {
                client_id: id,
                name,
                scopes,
                brands,
                credentials: declared_credentials(auth_method, secret_env, jwks_file)?,
            };
            let ensured = clients::ensure_client(&db, declared, &actor()?).await?;
            if ensured.changed {
                propagated().await;
            }
            Report {
                note: (!ensured.changed).then(|| {
                    format!(
                        "client {} is as declared: nothing changed",
                        ensured.client_id
                    )
                }),
                ..Report::record(serde_json::to_value(ensured)?)
            }
        }
        ClientCommand::SetKeys {
            client_id,
            jwks_file,
            jwks_uri,
        } => {
            let keys = registered_keys(settings, jwks_file, jwks_uri)
                .await?
                .ok_or_else(|| {
                    anyhow::anyhow!("set-keys needs --jwks-file FILE or --jwks-uri URL")
                })?;
            let set = clients::set_client_keys(&db, &client_id, keys, &actor()?).await?;
            propagated().await;
            Report::record(serde_json::to_value(set)?)
        }
        ClientCommand::SetDpop {
            client_id,
            require_dpop,
        } => {
            let set = clients::set_client_dpop(&db, &client_id, require_dpop, &actor()?).await?;
            propagated().await;
            Report::record(serde_json::to_value(set)?)
        }
        ClientCommand::SetBrands { client_id, brands } => {
            let set = clients::set_client_brands(&db, &client_id, &brands, &actor()?).await?;
            propagated().await;
            Report::record(serde_json::to_value(set)?)
        }
        ClientCommand::List => Report::list(
            serde_json::to_value(clients::views::list_clients(&db).await?)?,
            &[
                "client_id",
                "name",
                "scopes",
                "brands",
                "sandbox",
                "disabled_at",
                "created_at",
                "auth_method",
                "secrets",
            ],
            "No clients.",
        ),
        ClientCommand::Show { client_id } => Report::record(serde_json::to_value(
            clients::views::show_client(&db, &client_id).await?,
        )?),
        ClientCommand::RotateSecret {
            client_id,
            grace_secs,
        } => {
            let grace = Duration::seconds(i64::try_from(grace_secs)?);
            let rotated = clients::rotate_secret(&db, &client_id, grace, &actor()?).await?;
            propagated().await;
            Report::record(json!({
                "client_id": rotated.client_id,
                "client_secret": rotated.client_secret.expose(),
                "previous_secret_valid_until": rotated.previous_secret_valid_until,
            }))
        }
        ClientCommand::Disable { client_id } => {
            let (c, changed) =
                clients::set_client_disabled(&db, &client_id, true, &actor()?).await?;
            if changed {
                propagated().await;
            }
            let since = c
                .disabled_at
                .map(|at| at.to_rfc3339_opts(SecondsFormat::Secs, true))
                .unwrap_or_default();
            Report {
                note: (!changed).then(|| {
                    format!(
                        "client {client_id} is already disabled, since {since}: nothing changed"
                    )
                }),
                ..Report::record(json!({
                    "client_id": c.client_id,
                    "disabled": true,
                    "disabled_at": c.disabled_at,
                    "changed": changed,
                }))
            }
        }
        ClientCommand::Enable { client_id } => {
            let (c, changed) =
                clients::set_client_disabled(&db, &client_id, false, &actor()?).await?;
            if changed {
                propagated().await;
            }
            Report {
                note: (!changed)
                    .then(|| format!("client {client_id} is already enabled: nothing changed")),
                ..Report::record(
                    json!({"client_id": c.client_id, "disabled": false, "changed": changed}),
                )
            }
        }
    };
    Ok(report)
}

/// Runs `auth-server key ...` and returns what it prints as JSON.
pub async fn key(settings: impl Into<Settings>, command: KeyCommand) -> anyhow::Result<Value> {
    Ok(key_report(&settings.into(), command).await?.json)
}

async fn key_report(settings: &Settings, command: KeyCommand) -> anyhow::Result<Report> {
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

/// Runs `auth-server audit ...` and returns what it prints as JSON.
pub async fn audit(settings: impl Into<Settings>, command: AuditCommand) -> anyhow::Result<Value> {
    Ok(audit_report(&settings.into(), command).await?.json)
}

async fn audit_report(settings: &Settings, command: AuditCommand) -> anyhow::Result<Report> {
    let db = open(settings).await?;
    Ok(match command {
        AuditCommand::List { since } => Report::list(
            serde_json::to_value(audit::list(&db, since).await?)?,
            &["seq", "at", "actor", "action", "subject", "detail"],
            "No audit entries.",
        ),
        AuditCommand::Verify { head } => {
            let key = audit_key(settings, "audit verify")?;
            Report::record(serde_json::to_value(
                audit::verify(&db, &key, head.as_ref()).await?,
            )?)
        }
        AuditCommand::Seal => {
            let sealer = author(settings, "audit seal")?;
            match audit_trail::seal_audit_trail(&db, &sealer).await? {
                audit_trail::Sealing::Accepted { to } => {
                    propagated().await;
                    Report::record(json!({"sealed": to, "from": 1, "to": to}))
                }
                audit_trail::Sealing::NothingUnsealed => {
                    propagated().await;
                    Report {
                        note: Some(
                            "every audit entry is sealed: the trail is marked, nothing accepted"
                                .into(),
                        ),
                        ..Report::record(json!({"sealed": 0}))
                    }
                }
                audit_trail::Sealing::AlreadyMarked { marker } => Report {
                    note: Some(format!(
                        "the audit trail was marked at entry {marker}: nothing changed"
                    )),
                    ..Report::record(json!({"sealed": 0}))
                },
            }
        }
    })
}
