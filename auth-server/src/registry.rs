//! The in-memory view of clients and keys that the token endpoint works from.
//!
//! The hot path never touches the database: a background task watches the revision row
//! and reloads this snapshot when it changes. Time-based transitions (a key starting to
//! sign, an old secret running out) are decided at request time from the dates, so they
//! happen on time on every replica without a reload.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, EntityTrait};
use shared::profile::{FAPI2_ALGORITHMS, Profile};

use crate::audit::{self, Head};
use crate::client_keys::ClientKeys;
use crate::entity::{client, client_secret, signing_key};
use crate::key_store::KeyStore;
use crate::keys::{self, KeyState, LoadedKey};
use crate::{secrets, store};

/// How often running servers look for changes made by the CLI or another replica.
pub const REVISION_POLL: Duration = Duration::from_millis(100);

/// How long a change takes, at most, to reach every running server (a few polls, to
/// ride out a slow query). Operator commands return only after it, so what they print
/// is already true everywhere, and a key rotated with no publish-ahead starts signing
/// on every replica at the same instant.
pub const PROPAGATION: Duration = Duration::from_millis(600);

/// What the token endpoint needs to know about a client.
#[derive(Debug, Clone)]
pub struct ClientEntry {
    /// Scopes it may be granted.
    pub scopes: Vec<String>,
    /// The brands a portal client is bound to, named in its portal tokens.
    pub brands: Option<Vec<String>>,
    /// Whether an operator disabled it.
    pub disabled: bool,
    /// Hashes of its secrets, with the time each stops working.
    pub secrets: Vec<([u8; 32], Option<DateTime<Utc>>)>,
    /// How it authenticates.
    pub auth: ClientAuth,
    /// Whether it gets only DPoP-bound tokens.
    pub dpop_required: bool,
    /// Whether it is a sandbox client, whose tokens say so.
    pub sandbox: bool,
}

/// How a client authenticates: one method per client.
#[derive(Debug, Clone)]
pub enum ClientAuth {
    /// With one of its secrets (client_secret_basic or client_secret_post).
    Secret,
    /// With an assertion signed by one of these keys (private_key_jwt).
    PrivateKeyJwt(Arc<ClientKeys>),
    /// With an assertion signed by one of the keys published at this URL (private_key_jwt
    /// with a `jwks_uri`), fetched when an assertion needs them.
    JwksUri(Arc<url::Url>),
}

impl ClientAuth {
    /// Whether it authenticates with an assertion, never a secret.
    pub fn is_private_key_jwt(&self) -> bool {
        !matches!(self, Self::Secret)
    }
}

/// How a presented secret compares with a client's secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretCheck {
    /// One of its secrets, valid now.
    Current,
    /// One of its secrets, but its grace after a rotation has ended.
    Expired,
    /// None of its secrets.
    Wrong,
}

impl ClientEntry {
    /// Whether `secret` is one of this client's secrets, and whether it is still valid at `now`.
    pub fn check_secret(&self, secret: &str, now: DateTime<Utc>) -> SecretCheck {
        let presented = secrets::hash_secret(secret);
        // Compare against every secret, so the time taken says nothing about which matched.
        let (current, expired) =
            self.secrets
                .iter()
                .fold((false, false), |(current, expired), (hash, expires)| {
                    let matches = secrets::hashes_match(hash, &presented);
                    let valid = expires.is_none_or(|e| now < e);
                    (current | (matches & valid), expired | (matches & !valid))
                });
        if current {
            SecretCheck::Current
        } else if expired {
            SecretCheck::Expired
        } else {
            SecretCheck::Wrong
        }
    }
}

/// How a stored client authenticates. Keys were checked when registered; any that no
/// longer load leave the client with none, so it gets no token rather than stopping the
/// reload for every other client.
fn client_auth(c: &client::Model) -> ClientAuth {
    match store::clients::AuthMethod::parse(&c.auth_method) {
        Some(store::clients::AuthMethod::ClientSecret) => ClientAuth::Secret,
        Some(store::clients::AuthMethod::PrivateKeyJwt) if c.jwks_uri.is_some() => {
            match url::Url::parse(c.jwks_uri.as_deref().unwrap_or_default()) {
                Ok(url) => ClientAuth::JwksUri(Arc::new(url)),
                Err(e) => {
                    tracing::error!(
                        client_id = %c.client_id,
                        error = %e,
                        "client JWKS URL not loaded"
                    );
                    ClientAuth::PrivateKeyJwt(Arc::new(ClientKeys::default()))
                }
            }
        }
        Some(store::clients::AuthMethod::PrivateKeyJwt) => {
            let keys =
                ClientKeys::load(c.jwks.as_deref().unwrap_or_default()).unwrap_or_else(|e| {
                    tracing::error!(
                        client_id = %c.client_id,
                        error = %e,
                        "client keys not loaded"
                    );
                    ClientKeys::default()
                });
            ClientAuth::PrivateKeyJwt(Arc::new(keys))
        }
        None => {
            // A method a later release added: this one cannot check it, so refuses it.
            tracing::error!(
                client_id = %c.client_id,
                method = %c.auth_method,
                "unknown client authentication method"
            );
            ClientAuth::PrivateKeyJwt(Arc::new(ClientKeys::default()))
        }
    }
}

/// One consistent view of clients and keys.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The revision it was loaded at.
    pub revision: i64,
    /// Clients by id.
    pub clients: HashMap<String, ClientEntry>,
    /// Keys scheduled to sign (not revoked), oldest activation first.
    pub keys: Vec<Arc<LoadedKey>>,
    /// The standby key: published, never signing until a rotation or revoke schedules it.
    pub standby: Option<Arc<LoadedKey>>,
    /// The place of the audit trail's last entry.
    pub audit_seq: i64,
    /// The head this server last logged.
    pub audit_head: Option<Head>,
}

impl Snapshot {
    /// The key that signs at `now`: the most recently activated one.
    pub fn signing_key(&self, now: DateTime<Utc>) -> Option<&Arc<LoadedKey>> {
        self.keys.iter().rev().find(|k| k.activates_at <= now)
    }

    /// The algorithm of the key signing at `now`, when `profile` is FAPI 2.0 and that is not
    /// one of FAPI 2.0's (PS256, ES256, EdDSA): the default key, RS256, is not. The server
    /// does not move on its own, as the intake-api and the tokens in flight must follow a
    /// staged `key rotate --alg`; it says so at start, in `/readyz` and in a metric.
    pub fn signing_alg_outside(
        &self,
        profile: Profile,
        now: DateTime<Utc>,
    ) -> Option<&'static str> {
        let alg = self.signing_key(now)?.alg.name();
        (profile.is_fapi2() && !FAPI2_ALGORITHMS.contains(&alg)).then_some(alg)
    }

    /// The keys to publish at `now`: pending, active, retired ones whose tokens may still
    /// be valid, and the standby.
    pub fn published_keys(&self, now: DateTime<Utc>) -> Vec<&Arc<LoadedKey>> {
        let activations: Vec<_> = self.keys.iter().map(|k| k.activates_at).collect();
        self.keys
            .iter()
            .zip(keys::key_times(&activations, now))
            .filter(|(_, t)| {
                matches!(
                    t.state(now),
                    KeyState::Pending | KeyState::Active | KeyState::Retired
                )
            })
            .map(|(k, _)| k)
            .chain(&self.standby)
            .collect()
    }
}

/// The shared, swappable snapshot.
pub struct Registry {
    current: RwLock<Arc<Snapshot>>,
    db: DatabaseConnection,
    keys: Arc<KeyStore>,
}

impl Registry {
    /// Loads the first snapshot; fails, naming the key, when a stored key cannot be loaded
    /// (a wrong key-encryption key, a key missing from its token) or none can be.
    pub async fn load(db: DatabaseConnection, keys: Arc<KeyStore>) -> anyhow::Result<Self> {
        // Every key loaded here or start-up fails; the first reload reuses them, as it
        // reuses a snapshot's keys, rather than loading each again.
        let ring = store::signing_keys::KeyRing::load(&db).await?;
        let strictly = |row: &signing_key::Model| {
            let (keys, row) = (keys.clone(), row.clone());
            async move {
                let alg = store::signing_keys::key_algorithm(&row)?;
                let loaded = tokio::task::spawn_blocking(move || keys.load(&row, alg)).await??;
                anyhow::Ok(Arc::new(loaded))
            }
        };
        let mut scheduled = Vec::with_capacity(ring.scheduled.len());
        for row in &ring.scheduled {
            scheduled.push(strictly(row).await?);
        }
        let standby = match &ring.standby {
            Some(row) => Some(strictly(row).await?),
            None => None,
        };
        let registry = Self {
            current: RwLock::new(Arc::new(Snapshot {
                keys: scheduled,
                standby,
                ..Snapshot::default()
            })),
            db,
            keys,
        };
        registry.reload().await?;
        if registry.snapshot().keys.is_empty() {
            anyhow::bail!("no signing key could be loaded");
        }
        Ok(registry)
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Where the signing keys are kept.
    pub fn keys(&self) -> &Arc<KeyStore> {
        &self.keys
    }

    /// The database this registry reads.
    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Reads everything again and swaps the snapshot in.
    pub async fn reload(&self) -> anyhow::Result<()> {
        let revision = store::current_revision(&self.db).await?;
        let previous = self.snapshot();
        let ring = store::signing_keys::KeyRing::load(&self.db).await?;
        let load = |row: &signing_key::Model| -> Option<Arc<LoadedKey>> {
            // Parsed keys are reused: parsing is the expensive part.
            let known = previous.keys.iter().chain(&previous.standby);
            if let Some(k) = known
                .into_iter()
                .find(|k| k.kid == row.kid && k.activates_at == row.activates_at)
            {
                return Some(k.clone());
            }
            let parsed =
                store::signing_keys::key_algorithm(row).and_then(|alg| self.keys.load(row, alg));
            match parsed {
                Ok(k) => Some(Arc::new(k)),
                Err(e) => {
                    tracing::error!(kid = %row.kid, error = %format!("{e:#}"), "signing key skipped");
                    None
                }
            }
        };
        let loaded: Vec<_> = ring.scheduled.iter().filter_map(load).collect();
        let standby = ring.standby.as_ref().and_then(load);
        let mut clients: HashMap<String, ClientEntry> = client::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|c| {
                let auth = client_auth(&c);
                (
                    c.client_id,
                    ClientEntry {
                        scopes: c.scopes.split(' ').map(str::to_owned).collect(),
                        brands: c
                            .brands
                            .as_deref()
                            .map(|b| store::clients::input::split_brands(Some(b)))
                            .filter(|b| !b.is_empty()),
                        disabled: c.disabled_at.is_some(),
                        secrets: Vec::new(),
                        auth,
                        dpop_required: c.dpop_required,
                        sandbox: c.sandbox,
                    },
                )
            })
            .collect();
        for s in client_secret::Entity::find().all(&self.db).await? {
            if let (Some(c), Some(hash)) = (
                clients.get_mut(&s.client_id),
                secrets::decode_hash(&s.secret_hash),
            ) {
                c.secrets.push((hash, s.expires_at));
            }
        }
        let last = audit::last_entry(&self.db).await?;
        let audit_seq = last.as_ref().map_or(0, |e| e.seq);
        let observed = last.as_ref().and_then(|e| e.as_head());
        if observed != previous.audit_head {
            if let Some(kept) = &previous.audit_head
                && !audit::holds(&self.db, kept).await?
            {
                tracing::error!(
                    kept = %kept,
                    now = audit_seq,
                    "the audit trail no longer holds the head this server logged: entries were \
                     removed or rewritten; `auth-server audit verify --head` with that head fails"
                );
            }
            // The log stream keeps every head, beyond the reach of the database.
            if let Some(head) = &observed {
                tracing::info!(head = %head, seq = head.seq, "audit trail head");
            }
        }
        if let Some(e) = last.as_ref().filter(|e| e.mac.is_none())
            && e.seq != previous.audit_seq
        {
            // Nothing writes an entry without its seal any more: release 0.2.0 without the
            // key, or a removed seal. This server seals nothing; `audit verify` names it.
            tracing::error!(
                seq = e.seq,
                "the audit trail's last entry has no seal: its seal was removed, or release \
                 0.2.0 wrote it without AUTH_KEY_ENCRYPTION_KEY; `auth-server audit verify` fails"
            );
        }
        let audit_head = observed.or_else(|| previous.audit_head.clone());
        metrics::gauge!("auth_audit_head_seq").set(audit_seq as f64);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Snapshot {
            revision,
            clients,
            keys: loaded,
            standby,
            audit_seq,
            audit_head,
        });
        Ok(())
    }

    /// Reloads if the revision moved since the snapshot was taken; says whether it did.
    pub async fn catch_up(&self) -> anyhow::Result<bool> {
        let revision = store::current_revision(&self.db).await?;
        if revision == self.snapshot().revision {
            return Ok(false);
        }
        self.reload().await.map(|_| true)
    }

    /// Reloads whenever the revision moves; runs until the task is aborted.
    pub async fn watch(self: Arc<Self>) {
        let mut failing = false;
        loop {
            tokio::time::sleep(REVISION_POLL).await;
            // The whole check is bounded: a database that stops answering must not stall it.
            let outcome = tokio::time::timeout(Duration::from_secs(5), self.catch_up())
                .await
                .unwrap_or_else(|_| Err(anyhow::anyhow!("timed out")));
            match outcome {
                Ok(reloaded) => {
                    if failing {
                        tracing::info!("database reachable again: client and key cache current");
                        failing = false;
                    }
                    if reloaded {
                        metrics::counter!("auth_registry_reloads_total", "outcome" => "ok")
                            .increment(1);
                        tracing::info!(
                            revision = self.snapshot().revision,
                            "clients and keys reloaded"
                        );
                    }
                }
                Err(e) => {
                    metrics::counter!("auth_registry_reloads_total", "outcome" => "error")
                        .increment(1);
                    if !failing {
                        tracing::warn!(error = %e, "cannot check for client and key changes; serving from the last snapshot");
                        failing = true;
                    }
                }
            }
        }
    }
}
