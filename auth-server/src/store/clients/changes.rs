//! One change to a stored client, written with its audit entry inside a change transaction
//! the caller holds: what `client set-...` and `apply` both make.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
use serde_json::json;

use super::input::{RegisteredKeys, split_brands};
use super::{BrandsSet, DpopSet, KeysSet, stored_keys};
use crate::audit;
use crate::entity::client;

/// Saves `found` as `edit` leaves it, with its change time.
pub(super) async fn save<C: ConnectionTrait>(
    txn: &C,
    found: client::Model,
    edit: impl FnOnce(&mut client::ActiveModel),
) -> anyhow::Result<client::Model> {
    let mut active: client::ActiveModel = found.into();
    edit(&mut active);
    active.updated_at = Set(Utc::now());
    Ok(active.update(txn).await?)
}

/// Binds `found` to `brands` (none: bound to none), with its `client.set_brands` entry.
pub(super) async fn write_brands<C: ConnectionTrait>(
    txn: &C,
    actor: &audit::Author,
    found: client::Model,
    brands: Option<Vec<String>>,
) -> anyhow::Result<BrandsSet> {
    let client_id = found.client_id.clone();
    let previous = split_brands(found.brands.as_deref());
    let stored = brands.as_ref().map(|b| b.join(" "));
    save(txn, found, |a| a.brands = Set(stored)).await?;
    let brands = brands.unwrap_or_default();
    let detail = json!({"brands": brands, "previous_brands": previous});
    audit::append(txn, actor, "client.set_brands", &client_id, detail).await?;
    Ok(BrandsSet {
        client_id,
        brands,
        previous_brands: previous,
    })
}

/// Makes `found` get only DPoP-bound tokens, or not, with its `client.set_dpop` entry.
pub(super) async fn write_dpop<C: ConnectionTrait>(
    txn: &C,
    actor: &audit::Author,
    found: client::Model,
    required: bool,
) -> anyhow::Result<DpopSet> {
    let client_id = found.client_id.clone();
    let previously = found.dpop_required;
    save(txn, found, |a| a.dpop_required = Set(required)).await?;
    let detail = json!({"dpop_required": required, "previously_required": previously});
    audit::append(txn, actor, "client.set_dpop", &client_id, detail).await?;
    Ok(DpopSet {
        client_id,
        dpop_required: required,
        previously_required: previously,
    })
}

/// Replaces `found`'s keys, or the URL they come from, with its `client.set_keys` entry.
pub(super) async fn write_keys<C: ConnectionTrait>(
    txn: &C,
    actor: &audit::Author,
    found: client::Model,
    keys: &RegisteredKeys,
) -> anyhow::Result<KeysSet> {
    let client_id = found.client_id.clone();
    let previous = stored_keys(found.jwks.as_deref());
    let previous_uri = found.jwks_uri.clone();
    let (jwks, jwks_uri) = keys.columns();
    let stored_uri = jwks_uri.clone();
    save(txn, found, |a| {
        a.jwks = Set(jwks);
        a.jwks_uri = Set(stored_uri);
    })
    .await?;
    let summary = keys.summary();
    let mut detail = json!({"keys": summary, "previous_keys": previous});
    // Named only when a URL is involved, so entries of inline keys read as before.
    if jwks_uri.is_some() || previous_uri.is_some() {
        detail["jwks_uri"] = json!(jwks_uri);
        detail["previous_jwks_uri"] = json!(previous_uri);
    }
    audit::append(txn, actor, "client.set_keys", &client_id, detail).await?;
    Ok(KeysSet {
        client_id,
        keys: summary,
        previous_keys: previous,
        jwks_uri,
        previous_jwks_uri: previous_uri,
    })
}

/// Disables `found` (from now) or enables it, with its `client.disable` or `client.enable`
/// entry.
pub(super) async fn write_disabled<C: ConnectionTrait>(
    txn: &C,
    actor: &audit::Author,
    found: client::Model,
    disabled: bool,
) -> anyhow::Result<client::Model> {
    let now = Utc::now();
    let updated = save(txn, found, |a| a.disabled_at = Set(disabled.then_some(now))).await?;
    let action = if disabled {
        "client.disable"
    } else {
        "client.enable"
    };
    audit::append(txn, actor, action, &updated.client_id, json!({})).await?;
    Ok(updated)
}
