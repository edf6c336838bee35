//! Clients as `client list` and `client show` read them: never a secret or a hash.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use serde::Serialize;

use super::input::{split_brands, split_scopes};
use super::{AuthMethod, find_client, stored_keys};
use crate::client_keys::KeySummary;
use crate::entity::{client, client_secret};
use crate::secrets;

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
    /// What keeps it as code: `apply` for a client a clients file made or adopted (the only
    /// ones `apply` changes); none for a client made by hand.
    pub managed_by: Option<String>,
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
        keys: stored_keys(c.jwks.as_deref()),
        jwks_uri: c.jwks_uri,
        client_id: c.client_id,
        name: c.name,
        scopes: split_scopes(&c.scopes),
        brands: split_brands(c.brands.as_deref()),
        sandbox: c.sandbox,
        disabled: c.disabled_at.is_some(),
        disabled_at: c.disabled_at,
        created_at: c.created_at,
        managed_by: c.managed_by,
    }
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
