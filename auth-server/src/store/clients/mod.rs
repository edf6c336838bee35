//! Clients and their secrets: the writes (create, ensure, rotate, set, disable). What an
//! operator gives is checked in [`input`]; what `client list` and `show` read is [`views`].

pub mod apply;
mod changes;
pub mod input;
pub mod views;

use anyhow::{anyhow, bail};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction,
    EntityTrait, QueryFilter, Set, SqlErr,
};
use serde::Serialize;
use serde_json::json;
use service_kit::Secret;

use self::input::{
    DeclaredClient, DeclaredCredentials, NewCredentials, RegisteredKeys, Wanted, brands_for,
    check_sandbox, parse_name, parse_scopes, split_brands, split_scopes,
};
use super::begin_change;
use crate::client_keys::{ClientKeys, KeySummary};
use crate::entity::{client, client_secret};
use crate::{audit, secrets};

/// How a client authenticates at the token endpoint: one method per client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum AuthMethod {
    /// A secret the server generates (client_secret_basic or client_secret_post).
    #[default]
    ClientSecret,
    /// An assertion signed with a private key whose public key is registered.
    PrivateKeyJwt,
}

impl AuthMethod {
    /// As stored in `clients.auth_method`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientSecret => "client_secret",
            Self::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method stored as `stored`; none for a method this release does not know.
    pub fn parse(stored: &str) -> Option<Self> {
        match stored {
            "client_secret" => Some(Self::ClientSecret),
            "private_key_jwt" => Some(Self::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// A client's credentials as printed once by `client create`.
#[derive(Debug)]
pub struct NewClient {
    /// The new client's id.
    pub client_id: String,
    /// The secret, shown this once; none for a `private_key_jwt` client.
    pub client_secret: Option<Secret<String>>,
    /// Its registered keys, for a `private_key_jwt` client (those its URL served, for one
    /// registered by JWKS URL).
    pub keys: Vec<KeySummary>,
    /// Where its keys are fetched from, for a client registered by JWKS URL.
    pub jwks_uri: Option<String>,
    /// Scopes it may be granted.
    pub scopes: Vec<String>,
    /// The brands a portal client redeems links of; empty for others.
    pub brands: Vec<String>,
    /// Whether it is a sandbox client.
    pub sandbox: bool,
}

/// Registers a client, a sandbox one when `sandbox`, and returns its one-time
/// credentials. Names are unique whatever their case, so that operators never mistake one
/// partner for another.
pub async fn create_client(
    db: &DatabaseConnection,
    name: &str,
    scopes: &str,
    brands: Option<&str>,
    credentials: NewCredentials,
    sandbox: bool,
    actor: &audit::Author,
) -> anyhow::Result<NewClient> {
    let name = parse_name(name)?;
    let scopes = parse_scopes(scopes)?;
    check_sandbox(&scopes, sandbox)?;
    let brands = brands_for(&scopes, brands)?;
    let (secret, keys) = match credentials {
        NewCredentials::Secret => (Some(secrets::generate_secret()?), None),
        NewCredentials::Keys(keys) => (None, Some(keys)),
    };
    let registration = Registration {
        client_id: uuid::Uuid::new_v4().to_string(),
        name,
        scopes,
        brands,
        secret,
        keys,
        sandbox,
        managed_by: None,
    };
    let txn = begin_change(db).await?;
    check_name_free(&txn, &registration.name, None).await?;
    let Some(keys) = insert_client(&txn, &registration, actor).await? else {
        bail!(
            "a client named {:?} exists: client names must differ in more than case",
            registration.name
        );
    };
    txn.commit().await?;
    Ok(NewClient {
        client_id: registration.client_id,
        client_secret: registration.secret,
        keys,
        jwks_uri: registration.keys.and_then(|k| k.columns().1),
        scopes: registration.scopes,
        brands: registration.brands.unwrap_or_default(),
        sandbox,
    })
}

/// Refuses `name` when a client other than `except` has it, whatever its case.
async fn check_name_free<C: ConnectionTrait>(
    txn: &C,
    name: &str,
    except: Option<&str>,
) -> anyhow::Result<()> {
    // Compared here as well as by the unique index on lower(name): SQLite's lower() folds
    // only ASCII letters.
    let folded = name.to_lowercase();
    let taken = client::Entity::find()
        .all(txn)
        .await?
        .into_iter()
        .find(|c| Some(c.client_id.as_str()) != except && c.name.to_lowercase() == folded);
    if let Some(taken) = taken {
        bail!(
            "client {} is already named {:?}: client names must differ in more than case",
            taken.client_id,
            taken.name
        );
    }
    Ok(())
}

/// A new client, checked, with what it authenticates with.
struct Registration {
    client_id: String,
    name: String,
    scopes: Vec<String>,
    brands: Option<Vec<String>>,
    /// Its first secret; none for a `private_key_jwt` client.
    secret: Option<Secret<String>>,
    /// Its keys; none for a secret client.
    keys: Option<RegisteredKeys>,
    sandbox: bool,
    /// What keeps it as code: [`apply::MANAGED_BY`] for a client a clients file makes.
    managed_by: Option<&'static str>,
}

/// Inserts `c` with its first secret and its `client.create` entry in `txn`, and returns its
/// keys as operators see them. None when its id or name is taken (a unique index): `txn`
/// is then of no further use, and is to be dropped.
async fn insert_client(
    txn: &DatabaseTransaction,
    c: &Registration,
    actor: &audit::Author,
) -> anyhow::Result<Option<Vec<KeySummary>>> {
    let method = if c.keys.is_some() {
        AuthMethod::PrivateKeyJwt
    } else {
        AuthMethod::ClientSecret
    };
    let (jwks, jwks_uri) = c.keys.as_ref().map(|k| k.columns()).unwrap_or_default();
    let now = Utc::now();
    let inserted = client::ActiveModel {
        client_id: Set(c.client_id.clone()),
        name: Set(c.name.clone()),
        scopes: Set(c.scopes.join(" ")),
        brands: Set(c.brands.as_ref().map(|b| b.join(" "))),
        auth_method: Set(method.as_str().to_owned()),
        jwks: Set(jwks),
        jwks_uri: Set(jwks_uri.clone()),
        dpop_required: Set(false),
        sandbox: Set(c.sandbox),
        disabled_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        managed_by: Set(c.managed_by.map(str::to_owned)),
    }
    .insert(txn)
    .await;
    if let Err(e) = inserted {
        if matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) {
            return Ok(None);
        }
        return Err(e.into());
    }
    if let Some(secret) = &c.secret {
        insert_secret(txn, &c.client_id, secret, now).await?;
    }
    let mut detail = json!({"name": c.name, "scopes": c.scopes});
    if let Some(brands) = &c.brands {
        detail["brands"] = json!(brands);
    }
    let keys = c.keys.as_ref().map(|k| k.summary()).unwrap_or_default();
    // Recorded only when not the default, so entries of secret clients read as before.
    if method != AuthMethod::ClientSecret {
        detail["auth_method"] = json!(method);
        detail["keys"] = json!(keys);
    }
    if let Some(uri) = &jwks_uri {
        detail["jwks_uri"] = json!(uri);
    }
    if c.sandbox {
        detail["sandbox"] = json!(true);
    }
    if let Some(managed_by) = c.managed_by {
        detail["managed_by"] = json!(managed_by);
    }
    audit::append(txn, actor, "client.create", &c.client_id, detail).await?;
    Ok(Some(keys))
}

/// What `client ensure` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ensured {
    /// There was no client with the id: it was made.
    Created,
    /// The client differed: it was brought to the declaration.
    Updated,
    /// The client was as declared: nothing was written.
    Unchanged,
}

/// What differed between a client and its declaration, and was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Difference {
    /// Its name.
    Name,
    /// Its scopes.
    Scopes,
    /// The brands it is bound to.
    Brands,
    /// Its secret: the declared one replaced every other.
    Secret,
    /// Its public keys.
    Keys,
}

/// What `client ensure` prints: never the secret.
#[derive(Debug, Serialize)]
pub struct EnsuredClient {
    /// The client.
    pub client_id: String,
    /// Created, updated or unchanged.
    pub outcome: Ensured,
    /// Whether anything was written.
    pub changed: bool,
    /// What an update changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Difference>,
    /// Its name now.
    pub name: String,
    /// Its scopes now.
    pub scopes: Vec<String>,
    /// The brands it is bound to now, for a portal client.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub brands: Vec<String>,
    /// How it authenticates.
    pub auth_method: AuthMethod,
    /// Its keys, for a `private_key_jwt` client.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<KeySummary>,
}

/// A stored client with its secrets.
struct Found {
    client: client::Model,
    secrets: Vec<client_secret::Model>,
}

async fn find_declared<C: ConnectionTrait>(
    db: &C,
    client_id: &str,
) -> anyhow::Result<Option<Found>> {
    let Some(client) = client::Entity::find_by_id(client_id.to_owned())
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let secrets = client_secret::Entity::find()
        .filter(client_secret::Column::ClientId.eq(client_id))
        .all(db)
        .await?;
    Ok(Some(Found { client, secrets }))
}

/// Brings client `declared.client_id` to the declaration: creates it when absent, changes
/// what differs when present, and writes nothing, not even the revision, when it is as
/// declared (so a deployment may run it at every start). A secret that differs replaces
/// every secret the client had at once, with no grace: the declaration says which secret
/// is the client's, and an operator declares a new one mostly because the old one got out.
///
/// Two runs at once, as replicas starting together make, leave one client: changes take
/// the revision row's lock one after another, and an insert that meets the unique index
/// anyway reads the client again and compares.
pub async fn ensure_client(
    db: &DatabaseConnection,
    declared: DeclaredClient,
    actor: &audit::Author,
) -> anyhow::Result<EnsuredClient> {
    let wanted = Wanted::parse(declared)?;
    if let Some(found) = find_declared(db, &wanted.client_id).await?
        && wanted.differences(&found)?.is_empty()
    {
        return Ok(wanted.report(Ensured::Unchanged, Vec::new()));
    }
    match ensure_in_change(db, &wanted, actor).await? {
        Some((outcome, changes)) => Ok(wanted.report(outcome, changes)),
        None => match ensure_in_change(db, &wanted, actor).await? {
            Some((outcome, changes)) => Ok(wanted.report(outcome, changes)),
            None => bail!(
                "client {} could not be created: a client with its id or its name was being \
                 created at the same time; run the command again",
                wanted.client_id
            ),
        },
    }
}

/// One try of [`ensure_client`] in a change transaction; none when the insert met a unique
/// index, the transaction rolled back.
async fn ensure_in_change(
    db: &DatabaseConnection,
    wanted: &Wanted,
    actor: &audit::Author,
) -> anyhow::Result<Option<(Ensured, Vec<Difference>)>> {
    let txn = begin_change(db).await?;
    let Some(found) = find_declared(&txn, &wanted.client_id).await? else {
        check_name_free(&txn, &wanted.name, None).await?;
        let (secret, keys) = match &wanted.credentials {
            DeclaredCredentials::Secret(secret) => (Some(secret.clone()), None),
            DeclaredCredentials::Keys(keys) => (None, Some(RegisteredKeys::Inline(keys.clone()))),
        };
        let registration = Registration {
            client_id: wanted.client_id.clone(),
            name: wanted.name.clone(),
            scopes: wanted.scopes.clone(),
            brands: wanted.brands.clone(),
            secret,
            keys,
            sandbox: false,
            managed_by: None,
        };
        if insert_client(&txn, &registration, actor).await?.is_none() {
            return Ok(None);
        }
        txn.commit().await?;
        return Ok(Some((Ensured::Created, Vec::new())));
    };
    let differences = wanted.differences(&found)?;
    if differences.is_empty() {
        // Another run got there first; dropping the transaction undoes the revision bump.
        return Ok(Some((Ensured::Unchanged, Vec::new())));
    }
    if differences.contains(&Difference::Name) {
        check_name_free(&txn, &wanted.name, Some(&wanted.client_id)).await?;
    }
    let id = wanted.client_id.as_str();
    let now = Utc::now();
    let previous = found.client.clone();
    let mut active: client::ActiveModel = found.client.into();
    let mut entries = Vec::new();
    for difference in &differences {
        match difference {
            Difference::Name => {
                active.name = Set(wanted.name.clone());
                let detail = json!({"name": wanted.name, "previous_name": previous.name});
                entries.push(("client.rename", detail));
            }
            Difference::Scopes => {
                active.scopes = Set(wanted.scopes.join(" "));
                let before: Vec<&str> = previous.scopes.split(' ').collect();
                let detail = json!({"scopes": wanted.scopes, "previous_scopes": before});
                entries.push(("client.set_scopes", detail));
            }
            Difference::Brands => {
                active.brands = Set(wanted.brands.as_ref().map(|b| b.join(" ")));
                let detail = json!({
                    "brands": wanted.brands.clone().unwrap_or_default(),
                    "previous_brands": split_brands(previous.brands.as_deref()),
                });
                entries.push(("client.set_brands", detail));
            }
            Difference::Secret => {
                let DeclaredCredentials::Secret(secret) = &wanted.credentials else {
                    continue;
                };
                expire_secrets(&txn, id, now).await?;
                insert_secret(&txn, id, secret, now).await?;
                let detail = json!({"previous_secrets_valid_until": now});
                entries.push(("client.rotate_secret", detail));
            }
            Difference::Keys => {
                let DeclaredCredentials::Keys(keys) = &wanted.credentials else {
                    continue;
                };
                active.jwks = Set(Some(keys.stored().to_owned()));
                active.jwks_uri = Set(None);
                let before = stored_keys(previous.jwks.as_deref());
                let mut detail = json!({"keys": keys.summary(), "previous_keys": before});
                // As `client set-keys` records it.
                if previous.jwks_uri.is_some() {
                    detail["jwks_uri"] = json!(null);
                    detail["previous_jwks_uri"] = json!(previous.jwks_uri);
                }
                entries.push(("client.set_keys", detail));
            }
        }
    }
    active.updated_at = Set(now);
    active.update(&txn).await?;
    for (action, detail) in entries {
        audit::append(&txn, actor, action, id, detail).await?;
    }
    txn.commit().await?;
    Ok(Some((Ensured::Updated, differences)))
}

/// Ends every secret of `client_id` that still works, at `now`.
async fn expire_secrets<C: ConnectionTrait>(
    txn: &C,
    client_id: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    client_secret::Entity::update_many()
        .col_expr(client_secret::Column::ExpiresAt, Expr::value(now))
        .filter(client_secret::Column::ClientId.eq(client_id))
        .filter(
            client_secret::Column::ExpiresAt
                .is_null()
                .or(client_secret::Column::ExpiresAt.gt(now)),
        )
        .exec(txn)
        .await?;
    Ok(())
}

async fn insert_secret<C: ConnectionTrait>(
    db: &C,
    client_id: &str,
    secret: &Secret<String>,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    client_secret::ActiveModel {
        id: Set(uuid::Uuid::new_v4()),
        client_id: Set(client_id.to_owned()),
        secret_hash: Set(secrets::encode_hash(&secrets::hash_secret(secret.expose()))),
        created_at: Set(now),
        expires_at: Set(None),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// The result of a secret rotation, printed once.
#[derive(Debug)]
pub struct RotatedSecret {
    /// The client.
    pub client_id: String,
    /// The new secret, shown this once.
    pub client_secret: Secret<String>,
    /// Until when the secrets issued before it keep working.
    pub previous_secret_valid_until: DateTime<Utc>,
}

async fn find_client<C: ConnectionTrait>(db: &C, client_id: &str) -> anyhow::Result<client::Model> {
    client::Entity::find_by_id(client_id.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| anyhow!("no client with id {client_id}"))
}

/// Issues a new secret; the older ones keep working for `grace`, then stop.
pub async fn rotate_secret(
    db: &DatabaseConnection,
    client_id: &str,
    grace: Duration,
    actor: &audit::Author,
) -> anyhow::Result<RotatedSecret> {
    let now = Utc::now();
    let valid_until = now + grace;
    let secret = secrets::generate_secret()?;
    let txn = begin_change(db).await?;
    let found = find_client(&txn, client_id).await?;
    if found.auth_method != AuthMethod::ClientSecret.as_str() {
        bail!(
            "client {client_id} authenticates with {} and has no secret to rotate: replace \
             its keys with `client set-keys`",
            found.auth_method
        );
    }
    // Secrets already on a shorter grace keep theirs; a rotation never extends one.
    client_secret::Entity::update_many()
        .col_expr(client_secret::Column::ExpiresAt, Expr::value(valid_until))
        .filter(client_secret::Column::ClientId.eq(client_id))
        .filter(
            client_secret::Column::ExpiresAt
                .is_null()
                .or(client_secret::Column::ExpiresAt.gt(valid_until)),
        )
        .exec(&txn)
        .await?;
    insert_secret(&txn, client_id, &secret, now).await?;
    let detail = json!({"previous_secrets_valid_until": valid_until});
    audit::append(&txn, actor, "client.rotate_secret", client_id, detail).await?;
    txn.commit().await?;
    Ok(RotatedSecret {
        client_id: client_id.to_owned(),
        client_secret: secret,
        previous_secret_valid_until: valid_until,
    })
}

/// Disables or enables a client. A disabled client gets no more tokens, and resource
/// servers refuse the tokens it holds. Returns the client and whether anything changed:
/// disabling a disabled client keeps the date it was first disabled.
pub async fn set_client_disabled(
    db: &DatabaseConnection,
    client_id: &str,
    disabled: bool,
    actor: &audit::Author,
) -> anyhow::Result<(client::Model, bool)> {
    let found = find_client(db, client_id).await?;
    if found.disabled_at.is_some() == disabled {
        return Ok((found, false));
    }
    let txn = begin_change(db).await?;
    let found = find_client(&txn, client_id).await?;
    if found.disabled_at.is_some() == disabled {
        return Ok((found, false));
    }
    let updated = changes::write_disabled(&txn, actor, found, disabled).await?;
    txn.commit().await?;
    Ok((updated, true))
}

/// What `client set-brands` changed.
#[derive(Debug, Serialize)]
pub struct BrandsSet {
    /// The client.
    pub client_id: String,
    /// The brands it is bound to now.
    pub brands: Vec<String>,
    /// Those it was bound to before (none for a client registered by 0.1.0).
    pub previous_brands: Vec<String>,
}

/// Binds portal client `client_id` to `brands` (comma-separated), replacing the brands it
/// had: its next token names them. Tokens it already holds keep the brands they name until
/// they expire ([`shared::claims::TOKEN_TTL_SECS`]).
pub async fn set_client_brands(
    db: &DatabaseConnection,
    client_id: &str,
    brands: &str,
    actor: &audit::Author,
) -> anyhow::Result<BrandsSet> {
    let txn = begin_change(db).await?;
    let found = find_client(&txn, client_id).await?;
    let scopes: Vec<String> = split_scopes(&found.scopes);
    let brands = brands_for(&scopes, Some(brands))?.unwrap_or_default();
    let set = changes::write_brands(&txn, actor, found, Some(brands)).await?;
    txn.commit().await?;
    Ok(set)
}

/// What `client set-dpop` changed.
#[derive(Debug, Serialize)]
pub struct DpopSet {
    /// The client.
    pub client_id: String,
    /// Whether it gets only DPoP-bound tokens now.
    pub dpop_required: bool,
    /// Whether it did before.
    pub previously_required: bool,
}

/// Makes client `client_id` get only DPoP-bound tokens (`required`), or bearer tokens
/// again. Tokens it already holds are as they were issued until they expire.
pub async fn set_client_dpop(
    db: &DatabaseConnection,
    client_id: &str,
    required: bool,
    actor: &audit::Author,
) -> anyhow::Result<DpopSet> {
    let txn = begin_change(db).await?;
    let found = find_client(&txn, client_id).await?;
    let set = changes::write_dpop(&txn, actor, found, required).await?;
    txn.commit().await?;
    Ok(set)
}

/// What `client set-keys` changed.
#[derive(Debug, Serialize)]
pub struct KeysSet {
    /// The client.
    pub client_id: String,
    /// The keys registered now (those its URL served, for a client registered by URL).
    pub keys: Vec<KeySummary>,
    /// Those registered before, which verify no assertion from now on (none listed when
    /// they came from a URL).
    pub previous_keys: Vec<KeySummary>,
    /// Where its keys are fetched from now, when from a URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// Where they were fetched from before, when from a URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_jwks_uri: Option<String>,
}

/// Replaces the keys of `private_key_jwt` client `client_id`, or the URL they come from
/// (either way round): assertions signed with the keys it had are refused once the change
/// has propagated.
pub async fn set_client_keys(
    db: &DatabaseConnection,
    client_id: &str,
    keys: RegisteredKeys,
    actor: &audit::Author,
) -> anyhow::Result<KeysSet> {
    let txn = begin_change(db).await?;
    let found = find_client(&txn, client_id).await?;
    if found.auth_method != AuthMethod::PrivateKeyJwt.as_str() {
        bail!(
            "client {client_id} authenticates with {}, not private_key_jwt: its keys would \
             never be used",
            found.auth_method
        );
    }
    let set = changes::write_keys(&txn, actor, found, &keys).await?;
    txn.commit().await?;
    Ok(set)
}

/// The keys stored in a client's `jwks` column, as operators see them; none when it holds
/// none (or none this release reads).
fn stored_keys(jwks: Option<&str>) -> Vec<KeySummary> {
    jwks.and_then(|j| ClientKeys::load(j).ok())
        .map(|k| k.summary())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
