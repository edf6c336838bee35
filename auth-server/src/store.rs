//! Everything the auth-server reads from and writes to its database.
//!
//! Every change bumps the revision row in the same transaction, which is how running
//! servers learn of it within a fraction of a second.

use anyhow::{Context, anyhow, bail};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction,
    EntityTrait, QueryFilter, QueryOrder, Set, SqlErr, TransactionTrait,
};
use serde::Serialize;
use serde_json::json;
use service_kit::Secret;

use crate::entity::{client, client_secret, revision, signing_key};
use crate::keys::{self, KeyEncryptionKey, KeyState};
use crate::{audit, secrets};

/// Marks a change to clients or keys, for the running servers to pick up.
pub(crate) async fn bump_revision<C: ConnectionTrait>(db: &C) -> anyhow::Result<()> {
    revision::Entity::update_many()
        .col_expr(
            revision::Column::Value,
            Expr::col(revision::Column::Value).add(1),
        )
        .filter(revision::Column::Id.eq(1))
        .exec(db)
        .await?;
    Ok(())
}

/// The current revision: changes whenever a client or key changes.
pub async fn current_revision(db: &DatabaseConnection) -> anyhow::Result<i64> {
    let row = revision::Entity::find_by_id(1)
        .one(db)
        .await?
        .ok_or_else(|| anyhow!("the revision row is missing; run `auth-server migrate`"))?;
    Ok(row.value)
}

/// A client's credentials as printed once by `client create`.
#[derive(Debug)]
pub struct NewClient {
    /// The new client's id.
    pub client_id: String,
    /// The secret, shown this once.
    pub client_secret: Secret<String>,
    /// Scopes it may be granted.
    pub scopes: Vec<String>,
    /// The brands a portal client redeems links of; empty for others.
    pub brands: Vec<String>,
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

/// Registers a client and returns its one-time credentials. Names are unique whatever
/// their case, so that operators never mistake one partner for another.
pub async fn create_client(
    db: &DatabaseConnection,
    name: &str,
    scopes: &str,
    brands: Option<&str>,
    actor: &audit::Author,
) -> anyhow::Result<NewClient> {
    let name = name.trim();
    if name.is_empty() {
        bail!("a client needs a name");
    }
    let scopes = parse_scopes(scopes)?;
    let brands = brands_for(&scopes, brands)?;
    let client_id = uuid::Uuid::new_v4().to_string();
    let secret = secrets::generate_secret()?;
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
    insert_secret(&txn, &client_id, &secret, now).await?;
    let mut detail = json!({"name": name, "scopes": scopes});
    if let Some(brands) = &brands {
        detail["brands"] = json!(brands);
    }
    audit::append(&txn, actor, "client.create", &client_id, detail).await?;
    txn.commit().await?;
    Ok(NewClient {
        client_id,
        client_secret: secret,
        scopes,
        brands: brands.unwrap_or_default(),
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
        client_id: c.client_id,
        name: c.name,
        scopes: c.scopes.split(' ').map(str::to_owned).collect(),
        brands: split_brands(c.brands.as_deref()),
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
    find_client(&txn, client_id).await?;
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

/// A freshly generated key, sealed for storage; generated before any transaction opens,
/// since RSA key generation takes a while.
struct FreshKey {
    kid: String,
    sealed: String,
}

async fn fresh_key(kek: &KeyEncryptionKey) -> anyhow::Result<FreshKey> {
    // Key generation is CPU-heavy: keep it off the async workers.
    let generated = tokio::task::spawn_blocking(keys::generate_key)
        .await
        .context("key generation task failed")??;
    let sealed = keys::seal_private_key(kek, &generated.kid, generated.pkcs8.expose())?;
    Ok(FreshKey {
        kid: generated.kid,
        sealed,
    })
}

async fn insert_key<C: ConnectionTrait>(
    db: &C,
    key: FreshKey,
    activates_at: DateTime<Utc>,
    standby: bool,
) -> anyhow::Result<String> {
    let now = Utc::now();
    signing_key::ActiveModel {
        kid: Set(key.kid.clone()),
        private_key: Set(key.sealed),
        created_at: Set(now),
        activates_at: Set(std::cmp::max(activates_at, now)),
        revoked_at: Set(None),
        standby: Set(standby),
    }
    .insert(db)
    .await?;
    Ok(key.kid)
}

/// Every key not revoked, standby included, oldest activation first.
async fn live_keys<C: ConnectionTrait>(db: &C) -> anyhow::Result<Vec<signing_key::Model>> {
    Ok(signing_key::Entity::find()
        .filter(signing_key::Column::RevokedAt.is_null())
        .order_by_asc(signing_key::Column::ActivatesAt)
        .order_by_asc(signing_key::Column::CreatedAt)
        .order_by_asc(signing_key::Column::Kid)
        .all(db)
        .await?)
}

/// The live (not revoked) keys: those scheduled to sign, and the standby.
pub struct KeyRing {
    /// Keys with an activation, oldest activation first: the order key states follow from.
    pub scheduled: Vec<signing_key::Model>,
    /// The published key with no activation yet.
    pub standby: Option<signing_key::Model>,
}

impl KeyRing {
    /// The keys as `db` sees them.
    pub async fn load<C: ConnectionTrait>(db: &C) -> anyhow::Result<Self> {
        let (standby, scheduled): (Vec<_>, Vec<_>) =
            live_keys(db).await?.into_iter().partition(|k| k.standby);
        Ok(Self {
            scheduled,
            standby: standby.into_iter().next(),
        })
    }

    /// Every live key, the standby last.
    pub fn all(&self) -> impl Iterator<Item = &signing_key::Model> {
        self.scheduled.iter().chain(&self.standby)
    }

    /// The key signing at `now`: the most recently activated one.
    pub fn signer(&self, now: DateTime<Utc>) -> Option<&signing_key::Model> {
        self.scheduled.iter().rev().find(|k| k.activates_at <= now)
    }
}

/// Opens a transaction for a change to clients or keys. Bumping the revision first takes
/// its row lock, so changes from several processes (replicas starting, the CLI) run one
/// after another: each sees what the one before it left, and audit entries follow each
/// other without gaps.
async fn begin_change(db: &DatabaseConnection) -> anyhow::Result<DatabaseTransaction> {
    let txn = db.begin().await?;
    bump_revision(&txn).await?;
    Ok(txn)
}

/// Encrypts the private keys an older version stored in clear, in one transaction; returns
/// how many there were.
pub async fn seal_keys_stored_in_clear(
    db: &DatabaseConnection,
    kek: &KeyEncryptionKey,
) -> anyhow::Result<usize> {
    let in_clear = signing_key::Entity::find().all(db).await?;
    if !in_clear
        .iter()
        .any(|k| keys::stored_in_clear(&k.private_key))
    {
        return Ok(0);
    }
    let server = audit::Author::server(audit::AuditKey::derive(kek)?);
    let txn = begin_change(db).await?;
    let mut sealed = 0;
    for key in signing_key::Entity::find().all(&txn).await? {
        if !keys::stored_in_clear(&key.private_key) {
            continue;
        }
        let pkcs8 = Secret::new(keys::open_private_key(kek, &key.kid, &key.private_key)?);
        let kid = key.kid.clone();
        let mut row: signing_key::ActiveModel = key.into();
        row.private_key = Set(keys::seal_private_key(kek, &kid, pkcs8.expose())?);
        row.update(&txn).await?;
        audit::append(&txn, &server, "key.seal", &kid, json!({})).await?;
        sealed += 1;
    }
    txn.commit().await?;
    Ok(sealed)
}

/// Seals the audit entries written without the key since the last sealed one (by the
/// previous release, a migration, or a command run without the key), with an `audit.seal`
/// entry saying which; returns their first and last, none when there were none.
pub async fn seal_audit_trail(
    db: &DatabaseConnection,
    actor: &audit::Author,
) -> anyhow::Result<Option<(i64, i64)>> {
    if !actor.seals() {
        bail!("sealing the audit trail needs AUTH_KEY_ENCRYPTION_KEY");
    }
    if audit::unsealed(db).await?.is_none() {
        return Ok(None);
    }
    let txn = begin_change(db).await?;
    // Another process may have sealed them meanwhile: then nothing changes.
    let Some((from, to)) = audit::unsealed(&txn).await? else {
        return Ok(None);
    };
    let detail = json!({"from": from, "to": to});
    audit::append(&txn, actor, "audit.seal", "audit_log", detail).await?;
    txn.commit().await?;
    Ok(Some((from, to)))
}

/// Makes sure a key signs now and a standby key is published; serve runs it at start.
/// Returns the kids it created.
pub async fn ensure_keys(
    db: &DatabaseConnection,
    kek: &KeyEncryptionKey,
) -> anyhow::Result<Vec<String>> {
    let now = Utc::now();
    let ring = KeyRing::load(db).await?;
    let need_signer = ring.signer(now).is_none();
    let need_standby = ring.standby.is_none();
    if !need_signer && !need_standby {
        return Ok(Vec::new());
    }
    let signer = if need_signer {
        Some(fresh_key(kek).await?)
    } else {
        None
    };
    let standby = if need_standby {
        Some(fresh_key(kek).await?)
    } else {
        None
    };
    let server = audit::Author::server(audit::AuditKey::derive(kek)?);
    let txn = begin_change(db).await?;
    // Another process may have made them meanwhile.
    let ring = KeyRing::load(&txn).await?;
    let mut created = Vec::new();
    if let (Some(key), None) = (signer, ring.signer(now)) {
        let kid = insert_key(&txn, key, now, false).await?;
        let detail = json!({"role": "signing", "activates_at": now});
        audit::append(&txn, &server, "key.create", &kid, detail).await?;
        created.push(kid);
    }
    if let (Some(key), None) = (standby, &ring.standby) {
        let kid = insert_key(&txn, key, now, true).await?;
        let detail = json!({"role": "standby"});
        audit::append(&txn, &server, "key.create", &kid, detail).await?;
        created.push(kid);
    }
    if created.is_empty() {
        // Another process made them meanwhile: nothing changed after all.
        return Ok(created);
    }
    txn.commit().await?;
    Ok(created)
}

/// What a rotation did.
#[derive(Debug)]
pub struct Rotation {
    /// The key that takes over.
    pub kid: String,
    /// When it starts signing.
    pub activates_at: DateTime<Utc>,
    /// The new standby key.
    pub standby_kid: String,
}

/// Schedules the standby key to take over signing, at the earliest `publish_ahead` after it
/// was published (so every resource server caching the JWKS holds it by then) and never
/// sooner than `not_before`, and publishes a new standby key, in one transaction.
pub async fn rotate_keys(
    db: &DatabaseConnection,
    kek: &KeyEncryptionKey,
    publish_ahead: Duration,
    not_before: DateTime<Utc>,
    actor: &audit::Author,
) -> anyhow::Result<Rotation> {
    let next_standby = fresh_key(kek).await?;
    // Without a standby (a database from before standby keys) the new key takes its place.
    let spare = if KeyRing::load(db).await?.standby.is_none() {
        Some(fresh_key(kek).await?)
    } else {
        None
    };
    let txn = begin_change(db).await?;
    let ring = KeyRing::load(&txn).await?;
    let (kid, activates_at) = match (ring.standby, spare) {
        (Some(standby), _) => {
            let activates_at = std::cmp::max(not_before, standby.created_at + publish_ahead);
            let kid = standby.kid.clone();
            let mut promoted: signing_key::ActiveModel = standby.into();
            promoted.standby = Set(false);
            promoted.activates_at = Set(activates_at);
            promoted.update(&txn).await?;
            (kid, activates_at)
        }
        (None, Some(spare)) => {
            let activates_at = std::cmp::max(not_before, Utc::now() + publish_ahead);
            (
                insert_key(&txn, spare, activates_at, false).await?,
                activates_at,
            )
        }
        (None, None) => bail!("the standby key disappeared during the rotation; run it again"),
    };
    let standby_kid = insert_key(&txn, next_standby, Utc::now(), true).await?;
    let detail = json!({"activates_at": activates_at, "standby_kid": standby_kid});
    audit::append(&txn, actor, "key.rotate", &kid, detail).await?;
    txn.commit().await?;
    Ok(Rotation {
        kid,
        activates_at,
        standby_kid,
    })
}

/// A key as `key list` shows it.
#[derive(Debug, Serialize)]
pub struct KeyInfo {
    /// Key id.
    pub kid: String,
    /// State now.
    pub state: KeyState,
    /// When it was generated and published.
    pub created_at: DateTime<Utc>,
    /// When it starts (or started) signing; none while on standby.
    pub activates_at: Option<DateTime<Utc>>,
    /// When a later key took over.
    pub retired_at: Option<DateTime<Utc>>,
    /// When it leaves (or left) the JWKS.
    pub unpublish_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Every key with its state now, oldest activation first.
pub async fn list_keys(db: &DatabaseConnection) -> anyhow::Result<Vec<KeyInfo>> {
    let now = Utc::now();
    let ring = KeyRing::load(db).await?;
    let usable = ring.scheduled;
    let activations: Vec<_> = usable.iter().map(|k| k.activates_at).collect();
    let times = keys::key_times(&activations, now);
    let mut out: Vec<KeyInfo> = usable
        .into_iter()
        .zip(times)
        .map(|(k, t)| KeyInfo {
            kid: k.kid,
            state: t.state(now),
            created_at: k.created_at,
            activates_at: Some(k.activates_at),
            retired_at: t.retired_at,
            unpublish_at: t.unpublish_at(),
            revoked_at: None,
        })
        .collect();
    if let Some(k) = ring.standby {
        out.push(KeyInfo {
            kid: k.kid,
            state: KeyState::Standby,
            created_at: k.created_at,
            activates_at: None,
            retired_at: None,
            unpublish_at: None,
            revoked_at: None,
        });
    }
    let revoked = signing_key::Entity::find()
        .filter(signing_key::Column::RevokedAt.is_not_null())
        .all(db)
        .await?;
    out.extend(revoked.into_iter().map(|k| KeyInfo {
        kid: k.kid,
        state: KeyState::Revoked,
        created_at: k.created_at,
        activates_at: (!k.standby).then_some(k.activates_at),
        retired_at: None,
        unpublish_at: k.revoked_at,
        revoked_at: k.revoked_at,
    }));
    // Standby keys (no activation) after every scheduled one.
    out.sort_by_key(|k| (k.activates_at.is_none(), k.activates_at, k.created_at));
    Ok(out)
}

/// What a revoke did.
#[derive(Debug)]
pub struct Revocation {
    /// The key now signing in its place, when it was the signing key.
    pub replacement_kid: Option<String>,
    /// The new standby key, when the revoke used up or removed the old one.
    pub standby_kid: Option<String>,
}

/// How long a standby key must have been published before a revoke makes it sign at once:
/// longer than resource servers take to refetch the JWKS (the intake-api polls it every
/// second), so none of them meets its `kid` unknown.
pub const STANDBY_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(2);

/// Emergency revoke: the key leaves the JWKS at once and never signs again, so every
/// token it signed stops verifying. When it was the signing key the standby key signs from
/// now on, and a new standby is published, all in one transaction, so the token endpoint
/// is never without a signing key. When the standby was published too recently for every
/// resource server to hold it, the revoke first waits until it has been.
pub async fn revoke_key(
    db: &DatabaseConnection,
    kek: &KeyEncryptionKey,
    kid: &str,
    actor: &audit::Author,
) -> anyhow::Result<Revocation> {
    let found = signing_key::Entity::find_by_id(kid.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| anyhow!("no key with kid {kid}"))?;
    if found.revoked_at.is_some() {
        bail!("key {kid} is already revoked");
    }
    let next_standby = fresh_key(kek).await?;
    if let Some(standby) = KeyRing::load(db).await?.standby.filter(|s| s.kid != kid) {
        let age = (Utc::now() - standby.created_at)
            .to_std()
            .unwrap_or_default();
        if let Some(wait) = STANDBY_MIN_AGE.checked_sub(age) {
            tokio::time::sleep(wait).await;
        }
    }
    let txn = begin_change(db).await?;
    let now = Utc::now();
    let ring = KeyRing::load(&txn).await?;
    let key = signing_key::Entity::find_by_id(kid.to_owned())
        .one(&txn)
        .await?
        .ok_or_else(|| anyhow!("no key with kid {kid}"))?;
    if key.revoked_at.is_some() {
        bail!("key {kid} is already revoked");
    }
    let was_signing = ring.signer(now).is_some_and(|s| s.kid == kid);
    let was_standby = key.standby;
    let mut revoked: signing_key::ActiveModel = key.into();
    revoked.revoked_at = Set(Some(now));
    revoked.update(&txn).await?;
    let mut outcome = Revocation {
        replacement_kid: None,
        standby_kid: None,
    };
    if was_signing {
        let standby = ring.standby.ok_or_else(|| {
            anyhow!(
                "there is no standby key to take over; run `auth-server serve` once to publish one"
            )
        })?;
        outcome.replacement_kid = Some(standby.kid.clone());
        let mut promoted: signing_key::ActiveModel = standby.into();
        promoted.standby = Set(false);
        promoted.activates_at = Set(now);
        promoted.update(&txn).await?;
    }
    if was_signing || was_standby {
        outcome.standby_kid = Some(insert_key(&txn, next_standby, now, true).await?);
    }
    let detail = json!({
        "replacement_kid": outcome.replacement_kid,
        "standby_kid": outcome.standby_kid,
    });
    audit::append(&txn, actor, "key.revoke", kid, detail).await?;
    txn.commit().await?;
    Ok(outcome)
}
