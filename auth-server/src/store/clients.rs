//! Clients and their secrets.

use anyhow::{anyhow, bail};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction,
    EntityTrait, QueryFilter, QueryOrder, Set, SqlErr,
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

/// A client's name as given, trimmed; there must be one.
fn parse_name(name: &str) -> anyhow::Result<String> {
    let name = name.trim();
    if name.is_empty() {
        bail!("a client needs a name");
    }
    Ok(name.to_owned())
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
    audit::append(txn, actor, "client.create", &c.client_id, detail).await?;
    Ok(Some(keys))
}

/// The longest client id an operator may choose: room for any naming scheme, and for the
/// UUIDs `client create` makes (36).
pub const MAX_CLIENT_ID_CHARS: usize = 64;

/// Checks a client id an operator chooses (`client ensure --id`): 1 to
/// [`MAX_CLIENT_ID_CHARS`] ASCII letters, digits, `-`, `_` or `.`, so that it travels as it
/// is in a Basic header (no `:`), a form, a log line and a metric label.
pub fn parse_client_id(id: &str) -> anyhow::Result<String> {
    if id.chars().any(char::is_control) {
        bail!("a client id must not hold control characters: {id:?}");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if id.is_empty() || id.len() > MAX_CLIENT_ID_CHARS || !id.chars().all(allowed) {
        let shown: String = id.chars().take(MAX_CLIENT_ID_CHARS).collect();
        bail!(
            "client id {shown:?}{} is refused: a client id is 1 to {MAX_CLIENT_ID_CHARS} ASCII \
             letters, digits, '-', '_' or '.'",
            if shown.len() < id.len() { "..." } else { "" }
        );
    }
    Ok(id.to_owned())
}

/// How a client declared to `client ensure` authenticates.
#[derive(Debug)]
pub enum DeclaredCredentials {
    /// With this secret, which the operator generated and keeps with the deployment's
    /// other secrets.
    Secret(Secret<String>),
    /// With assertions signed by one of these keys.
    Keys(ClientKeys),
}

/// A client as `client ensure` declares it, before it is checked.
#[derive(Debug)]
pub struct DeclaredClient {
    /// The id the operator chose.
    pub client_id: String,
    /// Partner name, unique whatever its case.
    pub name: String,
    /// Space-separated scopes.
    pub scopes: String,
    /// Comma-separated brands, for a portal client.
    pub brands: Option<String>,
    /// What it authenticates with.
    pub credentials: DeclaredCredentials,
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

/// A declaration, checked.
struct Wanted {
    client_id: String,
    name: String,
    scopes: Vec<String>,
    brands: Option<Vec<String>>,
    credentials: DeclaredCredentials,
}

impl Wanted {
    fn parse(declared: DeclaredClient) -> anyhow::Result<Self> {
        let scopes = parse_scopes(&declared.scopes)?;
        let brands = brands_for(&scopes, declared.brands.as_deref())?;
        Ok(Self {
            client_id: parse_client_id(&declared.client_id)?,
            name: parse_name(&declared.name)?,
            scopes,
            brands,
            credentials: declared.credentials,
        })
    }

    fn method(&self) -> AuthMethod {
        match self.credentials {
            DeclaredCredentials::Secret(_) => AuthMethod::ClientSecret,
            DeclaredCredentials::Keys(_) => AuthMethod::PrivateKeyJwt,
        }
    }

    /// What of `found` differs from this declaration. Refuses what `ensure` must not
    /// decide for an operator: bringing back a disabled client, changing how a client
    /// authenticates, or turning a sandbox client into a real one.
    fn differences(&self, found: &Found) -> anyhow::Result<Vec<Difference>> {
        let (c, id) = (&found.client, &self.client_id);
        if let Some(since) = c.disabled_at {
            bail!(
                "client {id} is disabled, since {}: `client ensure` does not enable a client \
                 an operator disabled; `auth-server client enable {id}` first, if it is to \
                 work again",
                since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
        if c.sandbox {
            bail!("client {id} is a sandbox client: `client ensure` declares real clients only");
        }
        if AuthMethod::parse(&c.auth_method) != Some(self.method()) {
            bail!(
                "client {id} authenticates with {}, not {}: `client ensure` does not change \
                 how a client authenticates; register a client with another id for that",
                c.auth_method,
                self.method().as_str()
            );
        }
        let mut differences = Vec::new();
        if c.name != self.name {
            differences.push(Difference::Name);
        }
        if !same_set(
            &c.scopes.split(' ').map(str::to_owned).collect::<Vec<_>>(),
            &self.scopes,
        ) {
            differences.push(Difference::Scopes);
        }
        let brands = self.brands.clone().unwrap_or_default();
        if !same_set(&split_brands(c.brands.as_deref()), &brands) {
            differences.push(Difference::Brands);
        }
        match &self.credentials {
            DeclaredCredentials::Secret(secret) => {
                let presented = secrets::hash_secret(secret.expose());
                // Only a current secret will do: one in its grace after a rotation stops
                // working soon, so declaring it makes it current again.
                let current = found
                    .secrets
                    .iter()
                    .filter(|s| s.expires_at.is_none())
                    .filter_map(|s| secrets::decode_hash(&s.secret_hash))
                    .fold(false, |m, h| m | secrets::hashes_match(&h, &presented));
                if !current {
                    differences.push(Difference::Secret);
                }
            }
            DeclaredCredentials::Keys(keys) => {
                if c.jwks_uri.is_some() || c.jwks.as_deref() != Some(keys.stored()) {
                    differences.push(Difference::Keys);
                }
            }
        }
        Ok(differences)
    }

    fn report(self, outcome: Ensured, changes: Vec<Difference>) -> EnsuredClient {
        let auth_method = self.method();
        EnsuredClient {
            client_id: self.client_id,
            outcome,
            changed: outcome != Ensured::Unchanged,
            changes,
            name: self.name,
            scopes: self.scopes,
            brands: self.brands.unwrap_or_default(),
            auth_method,
            keys: match &self.credentials {
                DeclaredCredentials::Secret(_) => Vec::new(),
                DeclaredCredentials::Keys(keys) => keys.summary(),
            },
        }
    }
}

/// Whether two lists hold the same items, whatever their order.
fn same_set(a: &[String], b: &[String]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    a == b
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
                let before = previous
                    .jwks
                    .as_deref()
                    .and_then(|j| ClientKeys::load(j).ok())
                    .map(|k| k.summary())
                    .unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chosen_client_id_is_refused_for_each_rule_it_breaks() {
        let longest = "a".repeat(MAX_CLIENT_ID_CHARS);
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("a name", "intake-api", None),
            (
                "letters, digits, dot, dash, underscore",
                "Intake_API-2.prod",
                None,
            ),
            (
                "a uuid as client create makes",
                "0b9f3c9e-6d1e-4c62-9a57-0d3c1f7e2b11",
                None,
            ),
            ("the longest taken", &longest, None),
            ("empty", "", Some("1 to 64")),
            ("one too long", &format!("{longest}a"), Some("1 to 64")),
            ("a NUL", "intake\0api", Some("control characters")),
            ("a newline", "intake-api\n", Some("control characters")),
            (
                "a colon, which splits Basic credentials",
                "intake:api",
                Some("1 to 64"),
            ),
            ("a space", "intake api", Some("1 to 64")),
            ("a slash", "intake/api", Some("1 to 64")),
            ("not ASCII", "intäke", Some("1 to 64")),
        ];
        for (rule, id, refused) in cases {
            match (refused, parse_client_id(id)) {
                (None, Ok(parsed)) => assert_eq!(parsed, *id, "{rule}"),
                (Some(why), Err(e)) => {
                    let message = e.to_string();
                    assert!(message.contains(why), "{rule}: {message}");
                    assert!(!message.contains('\0'), "{rule}: the NUL is escaped");
                }
                (_, outcome) => panic!("{rule}: {outcome:?}"),
            }
        }
    }

    #[test]
    fn scopes_and_brands_compare_whatever_their_order() {
        let list = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(same_set(&list("a b"), &list("b a")));
        assert!(!same_set(&list("a b"), &list("a")));
        assert!(!same_set(&list("a"), &list("b")));
    }
}
