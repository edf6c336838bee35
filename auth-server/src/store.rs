//! Everything the auth-server reads from and writes to its database.
//!
//! Every change bumps the revision row in the same transaction, which is how running
//! servers learn of it within a fraction of a second.

use anyhow::{Context, anyhow, bail};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set, TransactionTrait,
};
use serde::Serialize;
use service_kit::Secret;

use crate::entity::{client, client_secret, revision, signing_key};
use crate::keys::{self, KeyEncryptionKey, KeyState};
use crate::secrets;

async fn bump_revision<C: ConnectionTrait>(db: &C) -> anyhow::Result<()> {
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

/// Registers a client and returns its one-time credentials.
pub async fn create_client(
    db: &DatabaseConnection,
    name: &str,
    scopes: &str,
) -> anyhow::Result<NewClient> {
    let name = name.trim();
    if name.is_empty() {
        bail!("a client needs a name");
    }
    let scopes = parse_scopes(scopes)?;
    let client_id = uuid::Uuid::new_v4().to_string();
    let secret = secrets::generate_secret()?;
    let now = Utc::now();
    let txn = db.begin().await?;
    client::ActiveModel {
        client_id: Set(client_id.clone()),
        name: Set(name.to_owned()),
        scopes: Set(scopes.join(" ")),
        disabled_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(&txn)
    .await?;
    insert_secret(&txn, &client_id, &secret, now).await?;
    bump_revision(&txn).await?;
    txn.commit().await?;
    Ok(NewClient {
        client_id,
        client_secret: secret,
        scopes,
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

/// A client as `client list` shows it: never a secret or a hash.
#[derive(Debug, Serialize)]
pub struct ClientInfo {
    /// The client's id.
    pub client_id: String,
    /// Operator-facing name.
    pub name: String,
    /// Scopes it may be granted.
    pub scopes: Vec<String>,
    /// Whether it has been disabled.
    pub disabled: bool,
    /// When it was disabled.
    pub disabled_at: Option<DateTime<Utc>>,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// Its secrets that still work, by date.
    pub secrets: Vec<SecretInfo>,
}

/// When a secret was issued and until when it works.
#[derive(Debug, Serialize)]
pub struct SecretInfo {
    /// When it was issued.
    pub created_at: DateTime<Utc>,
    /// When it stops working; none for the current secret.
    pub valid_until: Option<DateTime<Utc>>,
}

/// Every client, oldest first.
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
        .map(|c| ClientInfo {
            secrets: secrets
                .iter()
                .filter(|s| s.client_id == c.client_id && s.expires_at.is_none_or(|e| e > now))
                .map(|s| SecretInfo {
                    created_at: s.created_at,
                    valid_until: s.expires_at,
                })
                .collect(),
            client_id: c.client_id,
            name: c.name,
            scopes: c.scopes.split(' ').map(str::to_owned).collect(),
            disabled: c.disabled_at.is_some(),
            disabled_at: c.disabled_at,
            created_at: c.created_at,
        })
        .collect())
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
) -> anyhow::Result<RotatedSecret> {
    let now = Utc::now();
    let valid_until = now + grace;
    let secret = secrets::generate_secret()?;
    let txn = db.begin().await?;
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
    bump_revision(&txn).await?;
    txn.commit().await?;
    Ok(RotatedSecret {
        client_id: client_id.to_owned(),
        client_secret: secret,
        previous_secret_valid_until: valid_until,
    })
}

/// Disables a client: it gets no more tokens (tokens already issued run out on their own).
pub async fn disable_client(
    db: &DatabaseConnection,
    client_id: &str,
) -> anyhow::Result<client::Model> {
    let txn = db.begin().await?;
    let found = find_client(&txn, client_id).await?;
    let now = Utc::now();
    let mut active: client::ActiveModel = found.into();
    active.disabled_at = Set(Some(now));
    active.updated_at = Set(now);
    let updated = active.update(&txn).await?;
    bump_revision(&txn).await?;
    txn.commit().await?;
    Ok(updated)
}

/// Generates a key that starts signing at `activates_at`, and stores it.
pub async fn create_key(
    db: &DatabaseConnection,
    kek: Option<&KeyEncryptionKey>,
    activates_at: DateTime<Utc>,
) -> anyhow::Result<String> {
    // Key generation is CPU-heavy: keep it off the async workers.
    let generated = tokio::task::spawn_blocking(keys::generate_key)
        .await
        .context("key generation task failed")??;
    let sealed = keys::seal_private_key(kek, &generated.kid, generated.pkcs8.expose())?;
    let now = Utc::now();
    let txn = db.begin().await?;
    signing_key::ActiveModel {
        kid: Set(generated.kid.clone()),
        private_key: Set(sealed),
        created_at: Set(now),
        activates_at: Set(std::cmp::max(activates_at, now)),
        revoked_at: Set(None),
    }
    .insert(&txn)
    .await?;
    bump_revision(&txn).await?;
    txn.commit().await?;
    Ok(generated.kid)
}

/// Every key not revoked, oldest activation first: the order key states are derived in.
pub async fn usable_keys(db: &DatabaseConnection) -> anyhow::Result<Vec<signing_key::Model>> {
    Ok(signing_key::Entity::find()
        .filter(signing_key::Column::RevokedAt.is_null())
        .order_by_asc(signing_key::Column::ActivatesAt)
        .order_by_asc(signing_key::Column::CreatedAt)
        .order_by_asc(signing_key::Column::Kid)
        .all(db)
        .await?)
}

/// Creates a key that signs from now on when no key is signing now (an empty database,
/// or every signing key revoked). Returns the new kid if it made one.
pub async fn ensure_signing_key(
    db: &DatabaseConnection,
    kek: Option<&KeyEncryptionKey>,
) -> anyhow::Result<Option<String>> {
    let now = Utc::now();
    let keys = usable_keys(db).await?;
    if keys.iter().any(|k| k.activates_at <= now) {
        return Ok(None);
    }
    create_key(db, kek, now).await.map(Some)
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
    /// When it starts (or started) signing.
    pub activates_at: DateTime<Utc>,
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
    let usable = usable_keys(db).await?;
    let activations: Vec<_> = usable.iter().map(|k| k.activates_at).collect();
    let times = keys::key_times(&activations, now);
    let mut out: Vec<KeyInfo> = usable
        .into_iter()
        .zip(times)
        .map(|(k, t)| KeyInfo {
            kid: k.kid,
            state: t.state(now),
            created_at: k.created_at,
            activates_at: k.activates_at,
            retired_at: t.retired_at,
            unpublish_at: t.unpublish_at(),
            revoked_at: None,
        })
        .collect();
    let revoked = signing_key::Entity::find()
        .filter(signing_key::Column::RevokedAt.is_not_null())
        .all(db)
        .await?;
    out.extend(revoked.into_iter().map(|k| KeyInfo {
        kid: k.kid,
        state: KeyState::Revoked,
        created_at: k.created_at,
        activates_at: k.activates_at,
        retired_at: None,
        unpublish_at: k.revoked_at,
        revoked_at: k.revoked_at,
    }));
    out.sort_by_key(|k| (k.activates_at, k.created_at));
    Ok(out)
}

/// Emergency revoke: the key leaves the JWKS at once and never signs again, so every
/// token it signed stops verifying. When it was the signing key, a new one takes over now.
pub async fn revoke_key(
    db: &DatabaseConnection,
    kek: Option<&KeyEncryptionKey>,
    kid: &str,
) -> anyhow::Result<Option<String>> {
    let txn = db.begin().await?;
    let key = signing_key::Entity::find_by_id(kid.to_owned())
        .one(&txn)
        .await?
        .ok_or_else(|| anyhow!("no key with kid {kid}"))?;
    if key.revoked_at.is_some() {
        bail!("key {kid} is already revoked");
    }
    let mut active: signing_key::ActiveModel = key.into();
    active.revoked_at = Set(Some(Utc::now()));
    active.update(&txn).await?;
    bump_revision(&txn).await?;
    txn.commit().await?;
    ensure_signing_key(db, kek).await
}
