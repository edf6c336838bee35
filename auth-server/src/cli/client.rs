//! `auth-server client ...`: registering, changing, disabling and listing clients, with
//! their secrets or keys.

use chrono::{Duration, SecondsFormat};
use serde_json::{Value, json};
use service_kit::Secret;
use service_kit::command_line::output::Report;

use super::{author, open, propagated};
use crate::commands::ClientCommand;
use crate::config::Settings;
use crate::store::clients::{self, AuthMethod};
use crate::token_request::MAX_PARAM_CHARS;
use crate::{client_jwks, secrets};

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

pub(super) async fn client_report(
    settings: &Settings,
    command: ClientCommand,
) -> anyhow::Result<Report> {
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
