//! Clients and their secrets.

use anyhow::{anyhow, bail};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set, SqlErr,
};
use serde::Serialize;
use serde_json::json;
use service_kit::Secret;

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

/// How a new client is to authenticate, with what it needs for that.
#[derive(Debug, Clone)]
pub enum NewCredentials {
    /// A secret, generated and shown once.
    Secret,
    /// Assertions signed by one of these keys; the client has no secret.
    Keys(RegisteredKeys),
}

/// Where a `private_key_jwt` client's keys come from, as an operator registers them.
#[derive(Debug, Clone)]
pub enum RegisteredKeys {
    /// A JWKS the operator gave, stored.
    Inline(ClientKeys),
    /// The URL the servers fetch the client's JWKS from, with the keys it served when the
    /// operator registered it (checked, shown, audited; never stored: the URL decides).
    Uri {
        /// The URL.
        url: url::Url,
        /// What it served at registration.
        fetched: ClientKeys,
    },
}

impl RegisteredKeys {
    /// The `jwks` and `jwks_uri` columns: exactly one is set.
    fn columns(&self) -> (Option<String>, Option<String>) {
        match self {
            Self::Inline(keys) => (Some(keys.stored().to_owned()), None),
            Self::Uri { url, .. } => (None, Some(url.to_string())),
        }
    }

    /// The keys as operators see them.
    fn summary(&self) -> Vec<KeySummary> {
        match self {
            Self::Inline(keys) | Self::Uri { fetched: keys, .. } => keys.summary(),
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

/// Splits and checks a comma-separated brand list (`--brands`): each a well-formed brand
/// identifier, in the order given, without repeats. The auth-server does not know which
/// brands the intake-api is configured with: the intake-api reports a token naming one it
/// does not know.
pub fn parse_brands(brands: &str) -> anyhow::Result<Vec<String>> {
    use shared::claims::brands::{MAX_CHARS, MAX_PER_CLIENT, is_well_formed};
    let mut out: Vec<String> = Vec::new();
    for b in brands.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        if !is_well_formed(b) {
            bail!(
                "brand {b:?} must be as INTAKE_BRANDS names it: lower-case letters, digits, '_' \
                 or '-', at most {MAX_CHARS} characters"
            );
        }
        if !out.iter().any(|o| o == b) {
            out.push(b.to_owned());
        }
    }
    if out.is_empty() {
        bail!("--brands needs at least one brand, comma-separated (brand_a,brand_b)");
    }
    if out.len() > MAX_PER_CLIENT {
        bail!("a client may be bound to at most {MAX_PER_CLIENT} brands");
    }
    Ok(out)
}

/// The brands of a client with `scopes`, from `--brands`: a customer-portal client must be
/// bound to at least one (a portal of no brand would redeem nothing), and no other client
/// may be.
fn brands_for(scopes: &[String], brands: Option<&str>) -> anyhow::Result<Option<Vec<String>>> {
    let portal = shared::claims::scopes::PORTAL_REDIRECT_REDEEM;
    let is_portal = scopes.iter().any(|s| s == portal);
    match (is_portal, brands) {
        (true, Some(brands)) => Ok(Some(parse_brands(brands)?)),
        (true, None) => bail!(
            "a client with the {portal} scope redeems the links of the brands it is bound to: \
             name them with --brands (brand_a or brand_a,brand_b)"
        ),
        (false, Some(_)) => bail!("only a client with the {portal} scope is bound to brands"),
        (false, None) => Ok(None),
    }
}

/// Refuses a sandbox client any scope but a partner's: a customer portal redeems real
/// customers' links, and a resource server reads the list of disabled clients; neither
/// has anything to practise.
fn check_sandbox(scopes: &[String], sandbox: bool) -> anyhow::Result<()> {
    use shared::claims::scopes::{PORTAL_REDIRECT_REDEEM, REVOCATIONS_READ};
    if !sandbox {
        return Ok(());
    }
    if let Some(s) = scopes
        .iter()
        .find(|s| [PORTAL_REDIRECT_REDEEM, REVOCATIONS_READ].contains(&s.as_str()))
    {
        bail!("a sandbox client is a partner practising: it may not have the {s} scope");
    }
    Ok(())
}

/// Splits and checks a space-separated scope list: every scope must be a known one.
pub fn parse_scopes(scopes: &str) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for s in scopes.split_whitespace() {
        if !shared::claims::scopes::is_known(s) {
            bail!(
                "unknown scope {s:?}; known scopes: {}",
                shared::claims::scopes::ALL.join(" ")
            );
        }
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    if out.is_empty() {
        bail!("a client needs at least one scope");
    }
    Ok(out)
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
    let name = name.trim();
    if name.is_empty() {
        bail!("a client needs a name");
    }
    let scopes = parse_scopes(scopes)?;
    check_sandbox(&scopes, sandbox)?;
    let brands = brands_for(&scopes, brands)?;
    let client_id = uuid::Uuid::new_v4().to_string();
    let (method, secret, keys): (_, _, Option<RegisteredKeys>) = match credentials {
        NewCredentials::Secret => (
            AuthMethod::ClientSecret,
            Some(secrets::generate_secret()?),
            None,
        ),
        NewCredentials::Keys(keys) => (AuthMethod::PrivateKeyJwt, None, Some(keys)),
    };
    let (jwks, jwks_uri) = keys.as_ref().map(|k| k.columns()).unwrap_or_default();
    let now = Utc::now();
    let txn = begin_change(db).await?;
    // Compared here as well as by the unique index on lower(name): SQLite's lower() folds
    // only ASCII letters.
    let folded = name.to_lowercase();
    let taken = client::Entity::find()
        .all(&txn)
        .await?
        .into_iter()
        .find(|c| c.name.to_lowercase() == folded);
    if let Some(taken) = taken {
        bail!(
            "client {} is already named {:?}: client names must differ in more than case",
            taken.client_id,
            taken.name
        );
    }
    let inserted = client::ActiveModel {
        client_id: Set(client_id.clone()),
        name: Set(name.to_owned()),
        scopes: Set(scopes.join(" ")),
        brands: Set(brands.as_ref().map(|b| b.join(" "))),
        auth_method: Set(method.as_str().to_owned()),
        jwks: Set(jwks),
        jwks_uri: Set(jwks_uri.clone()),
        dpop_required: Set(false),
        sandbox: Set(sandbox),
        disabled_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(&txn)
    .await;
    if let Err(e) = inserted {
        if matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) {
            bail!("a client named {name:?} exists: client names must differ in more than case");
        }
        return Err(e.into());
    }
    if let Some(secret) = &secret {
        insert_secret(&txn, &client_id, secret, now).await?;
    }
    let mut detail = json!({"name": name, "scopes": scopes});
    if let Some(brands) = &brands {
        detail["brands"] = json!(brands);
    }
    let keys = keys.map(|k| k.summary()).unwrap_or_default();
    // Recorded only when not the default, so entries of secret clients read as before.
    if method != AuthMethod::ClientSecret {
        detail["auth_method"] = json!(method);
        detail["keys"] = json!(keys);
    }
    if let Some(uri) = &jwks_uri {
        detail["jwks_uri"] = json!(uri);
    }
    if sandbox {
        detail["sandbox"] = json!(true);
    }
    audit::append(&txn, actor, "client.create", &client_id, detail).await?;
    txn.commit().await?;
    Ok(NewClient {
        client_id,
        client_secret: secret,
        keys,
        jwks_uri,
        scopes,
        brands: brands.unwrap_or_default(),
        sandbox,
    })
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

/// A client as `client list` and `client show` show it: never a secret or a hash.
#[derive(Debug, Serialize)]
pub struct ClientInfo {
    /// The client's id.
    pub client_id: String,
    /// Operator-facing name.
    pub name: String,
    /// Scopes it may be granted.
    pub scopes: Vec<String>,
    /// The brands a portal client redeems links of; empty for others, and for a portal
    /// client not bound yet (it redeems nothing).
    pub brands: Vec<String>,
    /// Whether it is a sandbox client: its tokens say so.
    pub sandbox: bool,
    /// How it authenticates.
    pub auth_method: AuthMethod,
    /// Its registered keys, for a `private_key_jwt` client; none for others, and for one
    /// registered by JWKS URL (the URL decides, and each server fetches it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<KeySummary>,
    /// Where its keys are fetched from, for a client registered by JWKS URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// Whether it gets only DPoP-bound tokens.
    pub dpop_required: bool,
    /// Whether it has been disabled.
    pub disabled: bool,
    /// When it was disabled.
    pub disabled_at: Option<DateTime<Utc>>,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// Its secrets, by date: those that still work in `client list`, every one in
    /// `client show`.
    pub secrets: Vec<SecretInfo>,
}

/// Which of a client's secrets this is, when it was issued and until when it works.
#[derive(Debug, Serialize)]
pub struct SecretInfo {
    /// Tells the secret apart without revealing it: see [`fingerprint`].
    pub fingerprint: String,
    /// `current`, `grace` (replaced, still working until `valid_until`) or `expired`.
    pub state: &'static str,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
    /// When it stops working; none for the current secret.
    pub valid_until: Option<DateTime<Utc>>,
}

impl SecretInfo {
    fn of(secret: &client_secret::Model, now: DateTime<Utc>) -> Self {
        Self {
            fingerprint: fingerprint(&secret.secret_hash),
            state: match secret.expires_at {
                None => "current",
                Some(until) if until > now => "grace",
                Some(_) => "expired",
            },
            created_at: secret.created_at,
            valid_until: secret.expires_at,
        }
    }
}

/// A secret's fingerprint: the first 8 bytes, in hex, of SHA-256 over its stored SHA-256.
/// Whoever holds the secret can compute it
/// (`printf %s "$SECRET" | openssl dgst -sha256 -binary | sha256sum | cut -c1-16`); from
/// the fingerprint nothing leads back to the secret or to the stored hash.
pub fn fingerprint(stored_hash: &str) -> String {
    let Some(hash) = secrets::decode_hash(stored_hash) else {
        return "unreadable".to_owned();
    };
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &hash);
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn client_info(c: client::Model, secrets: Vec<SecretInfo>) -> ClientInfo {
    ClientInfo {
        secrets,
        auth_method: AuthMethod::parse(&c.auth_method).unwrap_or_default(),
        dpop_required: c.dpop_required,
        keys: c
            .jwks
            .as_deref()
            .and_then(|j| ClientKeys::load(j).ok())
            .map(|k| k.summary())
            .unwrap_or_default(),
        jwks_uri: c.jwks_uri,
        client_id: c.client_id,
        name: c.name,
        scopes: c.scopes.split(' ').map(str::to_owned).collect(),
        brands: split_brands(c.brands.as_deref()),
        sandbox: c.sandbox,
        disabled: c.disabled_at.is_some(),
        disabled_at: c.disabled_at,
        created_at: c.created_at,
    }
}

/// The brands stored for a client, as a list.
pub fn split_brands(stored: Option<&str>) -> Vec<String> {
    stored
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Every client, oldest first, with the secrets that still work.
pub async fn list_clients(db: &DatabaseConnection) -> anyhow::Result<Vec<ClientInfo>> {
    let now = Utc::now();
    let clients = client::Entity::find()
        .order_by_asc(client::Column::CreatedAt)
        .all(db)
        .await?;
    let secrets = client_secret::Entity::find()
        .order_by_asc(client_secret::Column::CreatedAt)
        .all(db)
        .await?;
    Ok(clients
        .into_iter()
        .map(|c| {
            let live = secrets
                .iter()
                .filter(|s| s.client_id == c.client_id && s.expires_at.is_none_or(|e| e > now))
                .map(|s| SecretInfo::of(s, now))
                .collect();
            client_info(c, live)
        })
        .collect())
}

/// One client, with every secret it was ever given, oldest first.
pub async fn show_client(db: &DatabaseConnection, client_id: &str) -> anyhow::Result<ClientInfo> {
    let now = Utc::now();
    let found = find_client(db, client_id).await?;
    let secrets = client_secret::Entity::find()
        .filter(client_secret::Column::ClientId.eq(client_id))
        .order_by_asc(client_secret::Column::CreatedAt)
        .all(db)
        .await?
        .iter()
        .map(|s| SecretInfo::of(s, now))
        .collect();
    Ok(client_info(found, secrets))
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
    let now = Utc::now();
    let mut active: client::ActiveModel = found.into();
    active.disabled_at = Set(disabled.then_some(now));
    active.updated_at = Set(now);
    let updated = active.update(&txn).await?;
    let action = if disabled {
        "client.disable"
    } else {
        "client.enable"
    };
    audit::append(&txn, actor, action, client_id, json!({})).await?;
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
    let scopes: Vec<String> = found.scopes.split(' ').map(str::to_owned).collect();
    let brands = brands_for(&scopes, Some(brands))?.unwrap_or_default();
    let previous = split_brands(found.brands.as_deref());
    let mut active: client::ActiveModel = found.into();
    active.brands = Set(Some(brands.join(" ")));
    active.updated_at = Set(Utc::now());
    active.update(&txn).await?;
    let detail = json!({"brands": brands, "previous_brands": previous});
    audit::append(&txn, actor, "client.set_brands", client_id, detail).await?;
    txn.commit().await?;
    Ok(BrandsSet {
        client_id: client_id.to_owned(),
        brands,
        previous_brands: previous,
    })
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
    let previously = found.dpop_required;
    let mut active: client::ActiveModel = found.into();
    active.dpop_required = Set(required);
    active.updated_at = Set(Utc::now());
    active.update(&txn).await?;
    let detail = json!({"dpop_required": required, "previously_required": previously});
    audit::append(&txn, actor, "client.set_dpop", client_id, detail).await?;
    txn.commit().await?;
    Ok(DpopSet {
        client_id: client_id.to_owned(),
        dpop_required: required,
        previously_required: previously,
    })
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
    let previous = found
        .jwks
        .as_deref()
        .and_then(|j| ClientKeys::load(j).ok())
        .map(|k| k.summary())
        .unwrap_or_default();
    let previous_uri = found.jwks_uri.clone();
    let (jwks, jwks_uri) = keys.columns();
    let mut active: client::ActiveModel = found.into();
    active.jwks = Set(jwks);
    active.jwks_uri = Set(jwks_uri.clone());
    active.updated_at = Set(Utc::now());
    active.update(&txn).await?;
    let summary = keys.summary();
    let mut detail = json!({"keys": summary, "previous_keys": previous});
    // Named only when a URL is involved, so entries of inline keys read as before.
    if jwks_uri.is_some() || previous_uri.is_some() {
        detail["jwks_uri"] = json!(jwks_uri);
        detail["previous_jwks_uri"] = json!(previous_uri);
    }
    audit::append(&txn, actor, "client.set_keys", client_id, detail).await?;
    txn.commit().await?;
    Ok(KeysSet {
        client_id: client_id.to_owned(),
        keys: summary,
        previous_keys: previous,
        jwks_uri,
        previous_jwks_uri: previous_uri,
    })
}

/// Reads a JWKS file an operator registers, no larger than [`crate::client_keys::MAX_JWKS_BYTES`].
pub fn read_jwks_file(path: &std::path::Path) -> anyhow::Result<ClientKeys> {
    use std::io::Read;
    let limit = crate::client_keys::MAX_JWKS_BYTES;
    let file = std::fs::File::open(path)
        .map_err(|e| anyhow!("cannot read the JWKS file {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(limit as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| anyhow!("cannot read the JWKS file {}: {e}", path.display()))?;
    if text.len() > limit {
        bail!(
            "the JWKS file {} is larger than {limit} bytes",
            path.display()
        );
    }
    ClientKeys::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}
