//! Signing keys: made, rotated, revoked, sealed at rest.

use anyhow::{Context, anyhow, bail};
use chrono::{DateTime, Duration, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::Serialize;
use serde_json::json;
use service_kit::Secret;

use std::sync::Arc;

use super::begin_change;
use super::key_custody::{self, Verdict};
use crate::audit;
use crate::entity::signing_key;
use crate::key_store::{self, KeyHome, KeyStore, NewKey};
use crate::keys::{self, KeyState, SigningKeySealer};
use shared::claims::TokenAlgorithm;

/// A freshly made key, ready to store; made before any transaction opens, since key
/// generation takes a while (and, in a token, a round trip).
async fn fresh_key(keys: &Arc<KeyStore>, alg: TokenAlgorithm) -> anyhow::Result<NewKey> {
    let keys = keys.clone();
    // Key generation is CPU-heavy or blocking: keep it off the async workers.
    tokio::task::spawn_blocking(move || keys.generate(alg))
        .await
        .context("key generation task failed")?
}

/// Destroys keys made and not stored, where they were made: no object is left in a vault
/// that no row names. What cannot be destroyed is logged, never fatal.
async fn discard(keys: &Arc<KeyStore>, unused: Vec<NewKey>) {
    if unused.is_empty() {
        return;
    }
    let store = keys.clone();
    let done = tokio::task::spawn_blocking(move || {
        for key in &unused {
            if let Err(e) = store.discard(key) {
                tracing::warn!(kid = %key.kid, error = %format!("{e:#}"), "a signing key made and not used could not be destroyed");
            }
        }
    })
    .await;
    if let Err(e) = done {
        tracing::warn!(error = %e, "the task destroying unused signing keys failed");
    }
}

/// The algorithm a stored key signs with.
pub fn key_algorithm(key: &signing_key::Model) -> anyhow::Result<TokenAlgorithm> {
    TokenAlgorithm::from_name(&key.alg)
        .ok_or_else(|| anyhow!("key {} has an unknown algorithm {:?}", key.kid, key.alg))
}

async fn insert_key<C: ConnectionTrait>(
    db: &C,
    key: NewKey,
    activates_at: DateTime<Utc>,
    standby: bool,
) -> anyhow::Result<String> {
    let now = Utc::now();
    signing_key::ActiveModel {
        kid: Set(key.kid.clone()),
        private_key: Set(key.private_key),
        public_jwk: Set(key.public_jwk),
        alg: Set(key.alg.name().to_owned()),
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
    /// When a rotation on an `interval` schedule is next due: `interval` after the newest
    /// scheduled key starts (or started) signing; none while no key was ever made.
    pub fn next_rotation(&self, interval: Duration) -> Option<DateTime<Utc>> {
        self.scheduled
            .last()
            .map(|newest| newest.activates_at + interval)
    }

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

    /// The deployment's algorithm: the standby's, which the next rotation makes sign, else
    /// the newest scheduled key's; RS256 on a database with no key yet.
    pub fn algorithm(&self) -> TokenAlgorithm {
        self.standby
            .iter()
            .chain(self.scheduled.iter().rev())
            .find_map(|k| key_algorithm(k).ok())
            .unwrap_or_default()
    }
}

/// Encrypts the private keys an older version stored in clear, in one transaction; returns
/// how many there were.
pub async fn seal_keys_stored_in_clear(
    db: &DatabaseConnection,
    kek: &SigningKeySealer,
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

/// Makes sure a key signs now and a standby key is published; serve runs it at start.
/// Returns the kids it created.
pub async fn ensure_keys(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
) -> anyhow::Result<Vec<String>> {
    let now = Utc::now();
    let ring = KeyRing::load(db).await?;
    let need_signer = ring.signer(now).is_none();
    let need_standby = ring.standby.is_none();
    let custody = key_custody::custody(db).await?;
    let allowed = key_custody::verdict(custody.as_ref(), keys.home(), false);
    if !need_signer && !need_standby {
        if let Err(refused) = allowed {
            // It makes no key now; the schedule, which would, refuses until this is put right.
            tracing::warn!(reason = %refused, "this server's key store is not where the database's keys live");
        }
        return Ok(Vec::new());
    }
    // Refused before any key is made, so none is made in the wrong place.
    allowed?;
    let alg = ring.algorithm();
    let signer = if need_signer {
        Some(fresh_key(keys, alg).await?)
    } else {
        None
    };
    let standby = if need_standby {
        Some(fresh_key(keys, alg).await?)
    } else {
        None
    };
    let made: Vec<NewKey> = signer.iter().chain(&standby).cloned().collect();
    let stored = store_first_keys(db, keys, signer, standby, now, alg).await;
    let kept = stored.as_deref().unwrap_or_default();
    discard(
        keys,
        made.into_iter()
            .filter(|k| !kept.contains(&k.kid))
            .collect(),
    )
    .await;
    stored
}

/// The transaction of [`ensure_keys`]: the keys made stored unless another process made
/// some meanwhile, the store they were made in recorded. Returns the kids stored.
async fn store_first_keys(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
    signer: Option<NewKey>,
    standby: Option<NewKey>,
    now: DateTime<Utc>,
    alg: TokenAlgorithm,
) -> anyhow::Result<Vec<String>> {
    let server = audit::Author::server(audit::AuditKey::derive(keys.sealer())?);
    let txn = begin_change(db).await?;
    // Another process may have made them, or moved the keys, meanwhile.
    let custody = key_custody::custody(&txn).await?;
    let verdict = key_custody::verdict(custody.as_ref(), keys.home(), false)?;
    let ring = KeyRing::load(&txn).await?;
    let mut created = Vec::new();
    if let (Some(key), None) = (signer, ring.signer(now)) {
        let kid = insert_key(&txn, key, now, false).await?;
        let detail = json!({"role": "signing", "activates_at": now, "alg": alg.name()});
        audit::append(&txn, &server, "key.create", &kid, detail).await?;
        created.push(kid);
    }
    if let (Some(key), None) = (standby, &ring.standby) {
        let kid = insert_key(&txn, key, now, true).await?;
        let detail = json!({"role": "standby", "alg": alg.name()});
        audit::append(&txn, &server, "key.create", &kid, detail).await?;
        created.push(kid);
    }
    if created.is_empty() {
        // Another process made them meanwhile: nothing changed after all.
        return Ok(created);
    }
    key_custody::record(&txn, keys.home(), &verdict, &server).await?;
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
    /// What the key that takes over signs with.
    pub alg: TokenAlgorithm,
    /// A standby of the previous algorithm or store, withdrawn unused when the rotation
    /// changed algorithm or moved the keys.
    pub withdrawn_standby_kid: Option<String>,
    /// Where the new keys were made.
    pub key_store: KeyHome,
    /// Where the keys lived before, when the rotation moved them.
    pub moved_from: Option<KeyHome>,
}

/// Schedules the standby key to take over signing, at the earliest `publish_ahead` after it
/// was published (so every resource server caching the JWKS holds it by then) and never
/// sooner than `not_before`, and publishes a new standby key, in one transaction.
///
/// With `alg` other than the standby's, the standby (which never signed) is withdrawn and a
/// new key of `alg` takes its place: published now, signing `publish_ahead` later, so the
/// same guarantee holds across a change of algorithm. The new standby is of `alg` too, so
/// later rotations and revokes stay with it.
///
/// The keys are made in `keys`' store only when the database records that the keys live
/// there; otherwise the rotation is refused before any key is made, unless `move_store`
/// asks to move them, which it does as a change of algorithm does: the standby of the old
/// store is withdrawn, and both new keys are the new store's.
pub async fn rotate_keys(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
    alg: Option<TokenAlgorithm>,
    publish_ahead: Duration,
    not_before: DateTime<Utc>,
    move_store: bool,
    actor: &audit::Author,
) -> anyhow::Result<Rotation> {
    let custody = key_custody::custody(db).await?;
    let verdict = key_custody::verdict(custody.as_ref(), keys.home(), move_store)?;
    let moving = matches!(verdict, Verdict::Move { .. });
    let ring = KeyRing::load(db).await?;
    let alg = alg.unwrap_or_else(|| ring.algorithm());
    let next_standby = fresh_key(keys, alg).await?;
    // Without a usable standby (a database from before standby keys, one of another
    // algorithm, or of the store the keys move from) a new key takes its place.
    let usable = |standby: &signing_key::Model| key_algorithm(standby).ok() == Some(alg);
    let spare = if !moving && ring.standby.as_ref().is_some_and(usable) {
        None
    } else {
        Some(fresh_key(keys, alg).await?)
    };
    let made: Vec<NewKey> = std::iter::once(&next_standby)
        .chain(&spare)
        .cloned()
        .collect();
    let rotated = store_rotation(
        db,
        keys,
        Fresh {
            next_standby,
            spare,
            alg,
        },
        (moving, move_store),
        publish_ahead,
        not_before,
        actor,
    )
    .await;
    let kept: Vec<&str> = match &rotated {
        Ok(r) => vec![r.kid.as_str(), r.standby_kid.as_str()],
        Err(_) => Vec::new(),
    };
    let unused = made
        .into_iter()
        .filter(|k| !kept.contains(&k.kid.as_str()))
        .collect();
    discard(keys, unused).await;
    rotated
}

/// Keys made for a rotation, before its transaction.
struct Fresh {
    next_standby: NewKey,
    spare: Option<NewKey>,
    alg: TokenAlgorithm,
}

/// The transaction of [`rotate_keys`], refused as a whole when the keys or their store
/// changed since the keys were made.
async fn store_rotation(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
    fresh: Fresh,
    (moving, move_store): (bool, bool),
    publish_ahead: Duration,
    not_before: DateTime<Utc>,
    actor: &audit::Author,
) -> anyhow::Result<Rotation> {
    let Fresh {
        next_standby,
        spare,
        alg,
    } = fresh;
    let txn = begin_change(db).await?;
    let now = Utc::now();
    let custody = key_custody::custody(&txn).await?;
    let verdict = key_custody::verdict(custody.as_ref(), keys.home(), move_store)?;
    if matches!(verdict, Verdict::Move { .. }) != moving {
        bail!("the signing keys' store changed during the rotation; run it again");
    }
    let moved_from = match &verdict {
        Verdict::Move { from } => Some(from.clone()),
        _ => None,
    };
    let ring = KeyRing::load(&txn).await?;
    let usable = |standby: &signing_key::Model| {
        moved_from.is_none() && key_algorithm(standby).ok() == Some(alg)
    };
    let mut withdrawn_standby_kid = None;
    let (kid, activates_at) = match (ring.standby, spare) {
        (Some(standby), _) if usable(&standby) => {
            let activates_at = std::cmp::max(not_before, standby.created_at + publish_ahead);
            let kid = standby.kid.clone();
            let mut promoted: signing_key::ActiveModel = standby.into();
            promoted.standby = Set(false);
            promoted.activates_at = Set(activates_at);
            promoted.update(&txn).await?;
            (kid, activates_at)
        }
        (standby, Some(spare)) => {
            if let Some(standby) = standby {
                // It never signed: leaving the JWKS refuses no token.
                withdrawn_standby_kid = Some(standby.kid.clone());
                let mut withdrawn: signing_key::ActiveModel = standby.into();
                withdrawn.revoked_at = Set(Some(now));
                withdrawn.update(&txn).await?;
            }
            let activates_at = std::cmp::max(not_before, now + publish_ahead);
            (
                insert_key(&txn, spare, activates_at, false).await?,
                activates_at,
            )
        }
        (_, None) => bail!("the standby key changed during the rotation; run it again"),
    };
    let standby_kid = insert_key(&txn, next_standby, now, true).await?;
    key_custody::record(&txn, keys.home(), &verdict, actor).await?;
    let detail = json!({
        "activates_at": activates_at,
        "standby_kid": standby_kid,
        "alg": alg.name(),
        "withdrawn_standby_kid": withdrawn_standby_kid,
    });
    audit::append(&txn, actor, "key.rotate", &kid, detail).await?;
    txn.commit().await?;
    Ok(Rotation {
        kid,
        activates_at,
        standby_kid,
        alg,
        withdrawn_standby_kid,
        key_store: keys.home().clone(),
        moved_from,
    })
}

/// A key as `key list` shows it.
#[derive(Debug, Serialize)]
pub struct KeyInfo {
    /// Key id.
    pub kid: String,
    /// What it signs with.
    pub alg: String,
    /// Where its private half lives: `database` (sealed) or `pkcs11` (a token).
    pub store: String,
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
    /// When the rotation schedule next rotates it: on the newest scheduled key only, and
    /// only with a schedule.
    pub rotates_at: Option<DateTime<Utc>>,
}

/// Every key with its state now, oldest activation first; with the rotation schedule's
/// `interval`, when the newest is next rotated.
pub async fn list_keys(
    db: &DatabaseConnection,
    interval: Option<Duration>,
) -> anyhow::Result<Vec<KeyInfo>> {
    let now = Utc::now();
    let ring = KeyRing::load(db).await?;
    let rotates_at = interval.and_then(|i| ring.next_rotation(i));
    let newest = ring.scheduled.last().map(|k| k.kid.clone());
    let usable = ring.scheduled;
    let activations: Vec<_> = usable.iter().map(|k| k.activates_at).collect();
    let times = keys::key_times(&activations, now);
    let mut out: Vec<KeyInfo> = usable
        .into_iter()
        .zip(times)
        .map(|(k, t)| KeyInfo {
            rotates_at: rotates_at.filter(|_| newest.as_deref() == Some(k.kid.as_str())),
            store: key_store::store_of(&k.private_key).to_owned(),
            kid: k.kid,
            alg: k.alg,
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
            store: key_store::store_of(&k.private_key).to_owned(),
            kid: k.kid,
            alg: k.alg,
            state: KeyState::Standby,
            created_at: k.created_at,
            activates_at: None,
            retired_at: None,
            unpublish_at: None,
            revoked_at: None,
            rotates_at: None,
        });
    }
    let revoked = signing_key::Entity::find()
        .filter(signing_key::Column::RevokedAt.is_not_null())
        .all(db)
        .await?;
    out.extend(revoked.into_iter().map(|k| KeyInfo {
        store: key_store::store_of(&k.private_key).to_owned(),
        kid: k.kid,
        alg: k.alg,
        state: KeyState::Revoked,
        created_at: k.created_at,
        activates_at: (!k.standby).then_some(k.activates_at),
        retired_at: None,
        unpublish_at: k.revoked_at,
        revoked_at: k.revoked_at,
        rotates_at: None,
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
    /// The key revoked, for [`KeyStore::destroy`] once no server signs with it.
    pub revoked: signing_key::Model,
    /// When it was revoked before, for a key already revoked: nothing was written, and
    /// only its destruction is left to complete.
    pub already_revoked_at: Option<DateTime<Utc>>,
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
///
/// Refused before anything is marked when `keys` cannot destroy the key where it lives
/// (a token this process was not given), or when a new standby is to be made and `keys` is
/// not where the database's keys live. A key already revoked is returned as it is, with
/// nothing written, for its destruction to be completed.
pub async fn revoke_key(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
    kid: &str,
    actor: &audit::Author,
) -> anyhow::Result<Revocation> {
    let found = signing_key::Entity::find_by_id(kid.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| anyhow!("no key with kid {kid}"))?;
    keys.can_destroy(&found).map_err(|e| {
        service_kit::command_line::operator::Refused(format!(
            "key {kid} cannot be destroyed where it lives, which a revoke does, so nothing \
             was marked: {e:#}"
        ))
    })?;
    if let Some(at) = found.revoked_at {
        return Ok(Revocation {
            replacement_kid: None,
            standby_kid: None,
            revoked: found,
            already_revoked_at: Some(at),
        });
    }
    let ring = KeyRing::load(db).await?;
    let now = Utc::now();
    // A pending key may be signing by the time the transaction runs.
    let makes_standby =
        found.standby || found.activates_at > now || ring.signer(now).is_some_and(|s| s.kid == kid);
    let next_standby = if makes_standby {
        let custody = key_custody::custody(db).await?;
        key_custody::verdict(custody.as_ref(), keys.home(), false)?;
        Some(fresh_key(keys, ring.algorithm()).await?)
    } else {
        None
    };
    if let Some(standby) = ring.standby.filter(|s| s.kid != kid) {
        let age = (Utc::now() - standby.created_at)
            .to_std()
            .unwrap_or_default();
        if let Some(wait) = STANDBY_MIN_AGE.checked_sub(age) {
            tokio::time::sleep(wait).await;
        }
    }
    let made = next_standby.clone();
    let revoked = store_revocation(db, keys, kid, next_standby, actor).await;
    let kept = revoked.as_ref().ok().and_then(|r| r.standby_kid.clone());
    let unused = made.into_iter().filter(|k| Some(&k.kid) != kept.as_ref());
    discard(keys, unused.collect()).await;
    revoked
}

/// The transaction of [`revoke_key`].
async fn store_revocation(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
    kid: &str,
    next_standby: Option<NewKey>,
    actor: &audit::Author,
) -> anyhow::Result<Revocation> {
    let txn = begin_change(db).await?;
    let now = Utc::now();
    let ring = KeyRing::load(&txn).await?;
    let key = signing_key::Entity::find_by_id(kid.to_owned())
        .one(&txn)
        .await?
        .ok_or_else(|| anyhow!("no key with kid {kid}"))?;
    if let Some(at) = key.revoked_at {
        // Revoked meanwhile: dropping the transaction undoes the revision bump.
        return Ok(Revocation {
            replacement_kid: None,
            standby_kid: None,
            revoked: key,
            already_revoked_at: Some(at),
        });
    }
    let was_signing = ring.signer(now).is_some_and(|s| s.kid == kid);
    let was_standby = key.standby;
    let mut outcome = Revocation {
        replacement_kid: None,
        standby_kid: None,
        revoked: key.clone(),
        already_revoked_at: None,
    };
    let mut revoked: signing_key::ActiveModel = key.into();
    revoked.revoked_at = Set(Some(now));
    revoked.update(&txn).await?;
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
        let Some(next_standby) = next_standby else {
            bail!("the signing keys changed during the revoke; run it again");
        };
        // The keys' store may have moved meanwhile.
        let custody = key_custody::custody(&txn).await?;
        let verdict = key_custody::verdict(custody.as_ref(), keys.home(), false)?;
        outcome.standby_kid = Some(insert_key(&txn, next_standby, now, true).await?);
        key_custody::record(&txn, keys.home(), &verdict, actor).await?;
    }
    let detail = json!({
        "replacement_kid": outcome.replacement_kid,
        "standby_kid": outcome.standby_kid,
    });
    audit::append(&txn, actor, "key.revoke", kid, detail).await?;
    txn.commit().await?;
    Ok(outcome)
}
