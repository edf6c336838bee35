//! Webhooks in the database: partners' endpoints and their secrets, and (`outbox`) the
//! events as the delivery worker claims them and records their outcomes, and as operators
//! list and resend them. Events are queued by the changes they report (`store::outbox`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde::Serialize;

use crate::entity::{webhook_delivery, webhook_endpoint};
use crate::store::{CaseStore, SEALED_SECRET_PREFIX, SecretSeal, StoreError};

mod outbox;

pub use outbox::{DeliveryView, DueDelivery, TryOutcome};

/// A partner's endpoint as the operator CLI shows it (never the secrets).
#[derive(Debug, Clone, Serialize)]
pub struct EndpointView {
    /// The partner.
    pub client_id: String,
    /// Where events go.
    pub url: String,
    /// Whether the previous secret still signs, and until when.
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// When deliveries stopped, if they did.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Why.
    pub disabled_reason: Option<String>,
    /// When it was first set.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
}

impl From<webhook_endpoint::Model> for EndpointView {
    fn from(m: webhook_endpoint::Model) -> Self {
        Self {
            client_id: m.client_id,
            url: m.url,
            previous_secret_until: m.previous_secret_until,
            disabled_at: m.disabled_at,
            disabled_reason: m.disabled_reason,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

impl CaseStore {
    /// Sets (or replaces) partner `client_id`'s endpoint, enabling it again if it was
    /// disabled; a new endpoint gets `new_secret`, stored sealed with `seal`, an existing
    /// one keeps its secrets. Returns the endpoint and the secret when it made one; `None`,
    /// changing nothing, when there is no endpoint and no `new_secret` to make one with.
    pub async fn set_webhook(
        &self,
        client_id: &str,
        url: &str,
        new_secret: Option<&str>,
        seal: &SecretSeal,
    ) -> Result<Option<(EndpointView, Option<String>)>, StoreError> {
        let now = Utc::now();
        let txn = self.begin_write().await?;
        let existing = webhook_endpoint::Entity::find_by_id(client_id)
            .one(&txn)
            .await?;
        let (model, created) = match (existing, new_secret) {
            (Some(m), _) => {
                let mut active: webhook_endpoint::ActiveModel = m.into();
                active.url = Set(url.to_owned());
                active.disabled_at = Set(None);
                active.disabled_reason = Set(None);
                active.updated_at = Set(now);
                let model = webhook_endpoint::Entity::update(active).exec(&txn).await?;
                (model, None)
            }
            (None, None) => return Ok(None),
            (None, Some(new_secret)) => {
                let model = webhook_endpoint::Entity::insert(webhook_endpoint::ActiveModel {
                    client_id: Set(client_id.to_owned()),
                    url: Set(url.to_owned()),
                    secret: Set(seal
                        .seal(client_id, new_secret)
                        .map_err(StoreError::Sealing)?),
                    previous_secret: Set(None),
                    previous_secret_until: Set(None),
                    disabled_at: Set(None),
                    disabled_reason: Set(None),
                    created_at: Set(now),
                    updated_at: Set(now),
                })
                .exec_with_returning(&txn)
                .await?;
                (model, Some(new_secret.to_owned()))
            }
        };
        txn.commit().await?;
        Ok(Some((model.into(), created)))
    }

    /// Every endpoint.
    pub async fn webhooks(&self) -> Result<Vec<EndpointView>, StoreError> {
        Ok(webhook_endpoint::Entity::find()
            .order_by_asc(webhook_endpoint::Column::ClientId)
            .all(self.db())
            .await?
            .into_iter()
            .map(EndpointView::from)
            .collect())
    }

    /// The endpoint of `client_id` with its secrets, if it has one.
    pub async fn webhook(
        &self,
        client_id: &str,
    ) -> Result<Option<webhook_endpoint::Model>, StoreError> {
        Ok(webhook_endpoint::Entity::find_by_id(client_id)
            .one(self.db())
            .await?)
    }

    /// Removes `client_id`'s endpoint; its events not yet delivered are dropped with it.
    /// Whether there was one.
    pub async fn remove_webhook(&self, client_id: &str) -> Result<bool, StoreError> {
        let txn = self.begin_write().await?;
        webhook_delivery::Entity::delete_many()
            .filter(webhook_delivery::Column::ClientId.eq(client_id))
            .filter(webhook_delivery::Column::DeliveredAt.is_null())
            .filter(webhook_delivery::Column::FailedAt.is_null())
            .exec(&txn)
            .await?;
        let removed = webhook_endpoint::Entity::delete_by_id(client_id)
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(removed.rows_affected == 1)
    }

    /// Gives `client_id`'s endpoint `new_secret`, sealed with `seal`; the old one keeps
    /// signing beside it until `grace_until`. None when the partner has no endpoint.
    pub async fn rotate_webhook_secret(
        &self,
        client_id: &str,
        new_secret: &str,
        grace_until: DateTime<Utc>,
        seal: &SecretSeal,
    ) -> Result<Option<EndpointView>, StoreError> {
        let txn = self.begin_write().await?;
        let Some(m) = webhook_endpoint::Entity::find_by_id(client_id)
            .one(&txn)
            .await?
        else {
            return Ok(None);
        };
        let now = Utc::now();
        let old = seal
            .sealed(client_id, &m.secret)
            .map_err(StoreError::Sealing)?;
        let new = seal
            .seal(client_id, new_secret)
            .map_err(StoreError::Sealing)?;
        let mut active: webhook_endpoint::ActiveModel = m.into();
        active.secret = Set(new);
        active.previous_secret = Set((grace_until > now).then_some(old));
        active.previous_secret_until = Set((grace_until > now).then_some(grace_until));
        active.updated_at = Set(now);
        let updated = webhook_endpoint::Entity::update(active).exec(&txn).await?;
        txn.commit().await?;
        Ok(Some(updated.into()))
    }

    /// Seals every endpoint secret still stored in clear, as 0.2.0's first builds kept them;
    /// run at each start. A row changed meanwhile (a rotation by the CLI, another replica
    /// sealing it first) is left as that change made it. Returns the endpoints sealed.
    pub async fn seal_webhook_secrets(&self, seal: &SecretSeal) -> Result<u64, StoreError> {
        use webhook_endpoint::Column;
        let in_clear = webhook_endpoint::Entity::find()
            .filter(
                Column::Secret
                    .not_like(format!("{SEALED_SECRET_PREFIX}%"))
                    .or(Column::PreviousSecret.not_like(format!("{SEALED_SECRET_PREFIX}%"))),
            )
            .all(self.db())
            .await?;
        let mut sealed = 0;
        for m in in_clear {
            let secret = seal
                .sealed(&m.client_id, &m.secret)
                .map_err(StoreError::Sealing)?;
            let previous = m
                .previous_secret
                .as_deref()
                .map(|p| seal.sealed(&m.client_id, p))
                .transpose()
                .map_err(StoreError::Sealing)?;
            let unchanged = match &m.previous_secret {
                Some(p) => Column::PreviousSecret.eq(p.as_str()),
                None => Column::PreviousSecret.is_null(),
            };
            let done = webhook_endpoint::Entity::update_many()
                .col_expr(Column::Secret, Expr::value(secret))
                .col_expr(Column::PreviousSecret, Expr::value(previous))
                .filter(Column::ClientId.eq(m.client_id.as_str()))
                .filter(Column::Secret.eq(m.secret.as_str()))
                .filter(unchanged)
                .exec(self.db())
                .await?;
            sealed += done.rows_affected;
        }
        Ok(sealed)
    }

    /// Stops deliveries to `client_id`'s endpoint, saying why.
    pub async fn disable_webhook(&self, client_id: &str, reason: &str) -> Result<(), StoreError> {
        let now = Utc::now();
        webhook_endpoint::Entity::update_many()
            .col_expr(webhook_endpoint::Column::DisabledAt, Expr::value(now))
            .col_expr(
                webhook_endpoint::Column::DisabledReason,
                Expr::value(reason),
            )
            .col_expr(webhook_endpoint::Column::UpdatedAt, Expr::value(now))
            .filter(webhook_endpoint::Column::ClientId.eq(client_id))
            .exec(self.db())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
