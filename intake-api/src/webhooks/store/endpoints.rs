//! Partners' endpoints: where each sends, which event types it receives, its signing
//! secrets (sealed) and whether it is disabled. Partners manage theirs through the API,
//! operators any through the CLI; both call these functions, and every one that takes a
//! partner acts only on that partner's endpoints.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait, Statement,
};
use serde::{Serialize, Serializer};
use shared::intake::webhook_endpoints::endpoint_name;
use shared::intake::webhooks::EventType;
use uuid::Uuid;

use crate::entity::{webhook_attempt, webhook_delivery, webhook_endpoint};
use crate::store::CHECKED_WITHIN;
use crate::store::event_bit;
use crate::store::{CaseStore, SEALED_SECRET_PREFIX, SecretSeal, StoreError};

/// The event types an endpoint receives: every one (those added later too), or the chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Subscription(Option<i32>);

impl Subscription {
    /// Every event type, those added later too.
    pub const ALL: Self = Self(None);

    /// Only `types`; none at all is every one.
    pub fn only(types: &[EventType]) -> Self {
        if types.is_empty() {
            return Self::ALL;
        }
        Self(Some(types.iter().fold(0, |mask, t| mask | event_bit(*t))))
    }

    /// The chosen types, in the catalogue's order; `None` for every one.
    pub fn types(self) -> Option<Vec<EventType>> {
        let mask = self.0?;
        Some(
            EventType::ALL
                .into_iter()
                .filter(|t| mask & event_bit(*t) != 0)
                .collect(),
        )
    }

    /// As the `event_types` column keeps it.
    pub fn stored(self) -> Option<i32> {
        self.0
    }

    /// From the `event_types` column.
    pub fn from_stored(mask: Option<i32>) -> Self {
        Self(mask)
    }
}

impl Serialize for Subscription {
    /// `null` for every type, else the names.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.types()
            .map(|types| types.iter().map(|t| t.name()).collect::<Vec<_>>())
            .serialize(s)
    }
}

/// An endpoint's id as partners and operators read it (`webhook list`).
fn serialize_endpoint_name<S: Serializer>(id: &Uuid, s: S) -> Result<S::Ok, S::Error> {
    endpoint_name(*id).serialize(s)
}

/// An endpoint as partners and operators see it (never its secrets).
#[derive(Debug, Clone, Serialize)]
pub struct EndpointView {
    /// The endpoint's id.
    #[serde(serialize_with = "serialize_endpoint_name")]
    pub id: Uuid,
    /// The partner.
    pub client_id: String,
    /// Where events go.
    pub url: String,
    /// Which events.
    pub event_types: Subscription,
    /// Whether the previous secret still signs, and until when.
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// Since when every round of sends failed, while they do.
    pub failing_since: Option<DateTime<Utc>>,
    /// When deliveries stopped, if they did.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Why.
    pub disabled_reason: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
    /// Events a second at most; none for as fast as it answers.
    pub rate_limit: Option<u32>,
    /// Who made the last change.
    pub changed_by: Option<String>,
}

/// Who changes an endpoint, as operators read it in `webhook list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedBy(String);

impl ChangedBy {
    /// Its partner, through the API.
    pub fn partner() -> Self {
        Self("partner".to_owned())
    }

    /// An operator, through the CLI: the account it ran under, when the system says.
    pub fn operator() -> Self {
        let account = ["USER", "LOGNAME"]
            .iter()
            .find_map(|name| std::env::var(name).ok())
            .filter(|name| {
                !name.is_empty() && name.len() <= 64 && !name.chars().any(char::is_control)
            });
        Self(match account {
            Some(account) => format!("operator ({account})"),
            None => "operator".to_owned(),
        })
    }

    /// The delivery worker, disabling an endpoint that failed or is gone.
    pub fn worker() -> Self {
        Self("delivery worker".to_owned())
    }

    /// As stored and shown.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<webhook_endpoint::Model> for EndpointView {
    fn from(m: webhook_endpoint::Model) -> Self {
        let now = Utc::now();
        Self {
            id: m.id,
            client_id: m.client_id,
            url: m.url,
            event_types: Subscription::from_stored(m.event_types),
            previous_secret_until: m.previous_secret_until.filter(|until| *until > now),
            failing_since: m.failing_since,
            disabled_at: m.disabled_at,
            disabled_reason: m.disabled_reason,
            created_at: m.created_at,
            updated_at: m.updated_at,
            rate_limit: m.rate_limit.and_then(|r| u32::try_from(r).ok()),
            changed_by: m.changed_by,
        }
    }
}

/// A new endpoint.
#[derive(Debug, Clone, Copy)]
pub struct NewEndpoint<'a> {
    /// The partner.
    pub client_id: &'a str,
    /// Where events go.
    pub url: &'a str,
    /// Which events.
    pub event_types: Subscription,
    /// Its signing secret, stored sealed.
    pub secret: &'a str,
    /// How many endpoints the partner may have, this one included.
    pub limit: u64,
    /// Events a second at most; none for as fast as it answers.
    pub rate_limit: Option<u32>,
    /// Who makes it.
    pub by: &'a ChangedBy,
}

/// A change to an endpoint: what is `None` stays as it is.
#[derive(Debug, Clone)]
pub struct EndpointChange {
    /// Where events go.
    pub url: Option<String>,
    /// Which events.
    pub event_types: Option<Subscription>,
    /// Disable, with the reason, or enable again (clearing the last reason).
    pub disabled: Option<Option<String>>,
    /// Events a second at most, or as fast as it answers (`Some(None)`).
    pub rate_limit: Option<Option<u32>>,
    /// Who makes the change.
    pub by: ChangedBy,
}

/// What [`CaseStore::create_endpoint`] did.
#[derive(Debug, Clone)]
pub enum Created {
    /// The endpoint.
    Made(EndpointView),
    /// The partner has as many endpoints as it may.
    AtLimit(u64),
}

/// What [`CaseStore::set_webhook`] (the CLI's one-endpoint-per-partner `set`) did.
#[derive(Debug, Clone)]
pub enum SetOutcome {
    /// A new endpoint, signing with the secret given.
    Made(EndpointView),
    /// The partner's only endpoint, with its URL changed and enabled; its secrets kept.
    Changed(EndpointView),
    /// The partner has no endpoint and no secret was given to make one with.
    NoSecret,
    /// The partner has several: `set` cannot tell which.
    Several(u64),
}

impl CaseStore {
    /// Makes `new`'s endpoint, unless its partner already has `new.limit`. Two requests of
    /// one partner racing each other cannot both pass the limit: on PostgreSQL the check
    /// holds a lock on the partner's name until the transaction ends, and SQLite runs one
    /// write transaction at a time.
    pub async fn create_endpoint(
        &self,
        new: NewEndpoint<'_>,
        seal: &SecretSeal,
    ) -> Result<Created, StoreError> {
        let now = Utc::now();
        let txn = self.begin_write().await?;
        let backend = txn.get_database_backend();
        if backend == DbBackend::Postgres {
            txn.execute_raw(Statement::from_sql_and_values(
                backend,
                "SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))",
                [new.client_id.into()],
            ))
            .await?;
        }
        let held = webhook_endpoint::Entity::find()
            .filter(webhook_endpoint::Column::ClientId.eq(new.client_id))
            .count(&txn)
            .await?;
        if held >= new.limit {
            return Ok(Created::AtLimit(new.limit));
        }
        let model = webhook_endpoint::Entity::insert(webhook_endpoint::ActiveModel {
            id: Set(Uuid::now_v7()),
            client_id: Set(new.client_id.to_owned()),
            url: Set(new.url.to_owned()),
            secret: Set(seal
                .seal(new.client_id, new.secret)
                .map_err(StoreError::Sealing)?),
            previous_secret: Set(None),
            previous_secret_until: Set(None),
            event_types: Set(new.event_types.stored()),
            failing_since: Set(None),
            disabled_at: Set(None),
            disabled_reason: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            rate_limit: Set(new.rate_limit.map(stored_rate)),
            changed_by: Set(Some(new.by.as_str().to_owned())),
            resend_requests: Set(None),
        })
        .exec_with_returning(&txn)
        .await?;
        txn.commit().await?;
        Ok(Created::Made(model.into()))
    }

    /// The endpoints of `client_id`, or every partner's, oldest first.
    pub async fn endpoints(
        &self,
        client_id: Option<&str>,
    ) -> Result<Vec<EndpointView>, StoreError> {
        let mut query = webhook_endpoint::Entity::find();
        if let Some(client_id) = client_id {
            query = query.filter(webhook_endpoint::Column::ClientId.eq(client_id));
        }
        Ok(query
            .order_by_asc(webhook_endpoint::Column::ClientId)
            .order_by_asc(webhook_endpoint::Column::CreatedAt)
            .order_by_asc(webhook_endpoint::Column::Id)
            .all(self.db())
            .await?
            .into_iter()
            .map(EndpointView::from)
            .collect())
    }

    /// Endpoint `id` of `client_id`: `None` when there is none, or it is another
    /// partner's, which a partner cannot tell apart.
    pub async fn endpoint(
        &self,
        client_id: &str,
        id: Uuid,
    ) -> Result<Option<EndpointView>, StoreError> {
        Ok(own(self.db(), client_id, id).await?.map(EndpointView::from))
    }

    /// `client_id`'s endpoint `id` with its secrets (sealed), for sending it a test event;
    /// `None` when it has none by that id.
    pub async fn endpoint_of(
        &self,
        client_id: &str,
        id: Uuid,
    ) -> Result<Option<webhook_endpoint::Model>, StoreError> {
        own(self.db(), client_id, id).await
    }

    /// Endpoint `id` with its secrets, whoever's it is: for the worker.
    pub async fn endpoint_row(
        &self,
        id: Uuid,
    ) -> Result<Option<webhook_endpoint::Model>, StoreError> {
        Ok(webhook_endpoint::Entity::find_by_id(id)
            .one(self.db())
            .await?)
    }

    /// Applies `change` to `client_id`'s endpoint `id`; `None` when it has none by that id.
    /// A change of URL or a disable returns once no replica sends by the endpoint as it was
    /// ([`CaseStore::sends_settled`]).
    pub async fn change_endpoint(
        &self,
        client_id: &str,
        id: Uuid,
        change: EndpointChange,
    ) -> Result<Option<EndpointView>, StoreError> {
        let now = Utc::now();
        let txn = self.begin_write().await?;
        let Some(m) = own(&txn, client_id, id).await? else {
            return Ok(None);
        };
        let stops = change.url.as_ref().is_some_and(|url| *url != m.url)
            || matches!(change.disabled, Some(Some(_)));
        let mut active: webhook_endpoint::ActiveModel = m.into();
        if let Some(url) = change.url {
            active.url = Set(url);
        }
        if let Some(types) = change.event_types {
            active.event_types = Set(types.stored());
        }
        match change.disabled {
            Some(Some(reason)) => {
                active.disabled_at = Set(Some(now));
                active.disabled_reason = Set(Some(reason));
            }
            Some(None) => {
                // Enabled again: its failures are counted afresh.
                active.disabled_at = Set(None);
                active.disabled_reason = Set(None);
                active.failing_since = Set(None);
            }
            None => {}
        }
        if let Some(rate) = change.rate_limit {
            active.rate_limit = Set(rate.map(stored_rate));
        }
        active.changed_by = Set(Some(change.by.0));
        active.updated_at = Set(now);
        let model = webhook_endpoint::Entity::update(active).exec(&txn).await?;
        txn.commit().await?;
        if stops {
            self.sends_settled(id).await?;
        }
        Ok(Some(model.into()))
    }

    /// Removes `client_id`'s endpoint `id`; its events not yet delivered go with it, and it
    /// returns once no replica can still send one ([`CHECKED_WITHIN`]). Whether there was
    /// one.
    pub async fn delete_endpoint(&self, client_id: &str, id: Uuid) -> Result<bool, StoreError> {
        let txn = self.begin_write().await?;
        if own(&txn, client_id, id).await?.is_none() {
            return Ok(false);
        }
        let unsent = || {
            webhook_delivery::Column::EndpointId
                .eq(id)
                .and(webhook_delivery::Column::DeliveredAt.is_null())
                .and(webhook_delivery::Column::FailedAt.is_null())
        };
        // Their failed tries go with them; the history keeps what was settled.
        let unsent_ids = webhook_delivery::Entity::find()
            .select_only()
            .column(webhook_delivery::Column::Id)
            .filter(unsent())
            .as_query()
            .to_owned();
        webhook_attempt::Entity::delete_many()
            .filter(webhook_attempt::Column::EndpointId.eq(id))
            .filter(webhook_attempt::Column::DeliveryId.in_subquery(unsent_ids))
            .exec(&txn)
            .await?;
        let dropped = webhook_delivery::Entity::delete_many()
            .filter(unsent())
            .exec(&txn)
            .await?
            .rows_affected;
        webhook_endpoint::Entity::delete_by_id(id)
            .exec(&txn)
            .await?;
        txn.commit().await?;
        if dropped > 0 {
            // Some may be out on a claim at a replica that has not checked since.
            tokio::time::sleep(CHECKED_WITHIN).await;
        }
        Ok(true)
    }

    /// Gives `client_id`'s endpoint `id` `new_secret`, sealed with `seal`; the old one
    /// keeps signing beside it until `grace_until` (not at all if that has passed). `None`
    /// when the partner has no endpoint by that id.
    pub async fn rotate_endpoint_secret(
        &self,
        client_id: &str,
        id: Uuid,
        new_secret: &str,
        grace_until: DateTime<Utc>,
        seal: &SecretSeal,
        by: &ChangedBy,
    ) -> Result<Option<EndpointView>, StoreError> {
        let txn = self.begin_write().await?;
        let Some(m) = own(&txn, client_id, id).await? else {
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
        active.changed_by = Set(Some(by.as_str().to_owned()));
        active.updated_at = Set(now);
        let updated = webhook_endpoint::Entity::update(active).exec(&txn).await?;
        txn.commit().await?;
        // The secrets sign nothing more once this returns.
        self.sends_settled(id).await?;
        Ok(Some(updated.into()))
    }

    /// Sets partner `client_id`'s only endpoint (the operator CLI's `webhook set`): makes
    /// one with `new_secret` when it has none, else points it at `url` and enables it
    /// again, keeping its secrets; changes nothing when it has several.
    pub async fn set_webhook(
        &self,
        client_id: &str,
        url: &str,
        new_secret: Option<&str>,
        seal: &SecretSeal,
        by: &ChangedBy,
    ) -> Result<SetOutcome, StoreError> {
        let held = self.endpoints(Some(client_id)).await?;
        match (held.as_slice(), new_secret) {
            ([], None) => Ok(SetOutcome::NoSecret),
            ([], Some(secret)) => {
                let new = NewEndpoint {
                    client_id,
                    url,
                    event_types: Subscription::ALL,
                    secret,
                    limit: 1,
                    rate_limit: None,
                    by,
                };
                Ok(match self.create_endpoint(new, seal).await? {
                    Created::Made(view) => SetOutcome::Made(view),
                    Created::AtLimit(_) => SetOutcome::Several(1),
                })
            }
            ([only], _) => {
                let change = EndpointChange {
                    url: Some(url.to_owned()),
                    event_types: None,
                    disabled: Some(None),
                    rate_limit: None,
                    by: by.clone(),
                };
                Ok(self
                    .change_endpoint(client_id, only.id, change)
                    .await?
                    .map_or(SetOutcome::NoSecret, SetOutcome::Changed))
            }
            (several, _) => Ok(SetOutcome::Several(several.len() as u64)),
        }
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
                .filter(Column::Id.eq(m.id))
                .filter(Column::Secret.eq(m.secret.as_str()))
                .filter(unchanged)
                .exec(self.db())
                .await?;
            sealed += done.rows_affected;
        }
        Ok(sealed)
    }

    /// Notes that a round of sends to endpoint `id` failed at `now`: since when its rounds
    /// have all failed (`now`, unless an earlier failure is already noted).
    pub async fn endpoint_failing(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        webhook_endpoint::Entity::update_many()
            .col_expr(webhook_endpoint::Column::FailingSince, Expr::value(now))
            .filter(webhook_endpoint::Column::Id.eq(id))
            .filter(webhook_endpoint::Column::FailingSince.is_null())
            .exec(self.db())
            .await?;
        Ok(self.endpoint_row(id).await?.and_then(|m| m.failing_since))
    }

    /// Notes that endpoint `id` took a delivery: it is failing no more.
    pub async fn endpoint_recovered(&self, id: Uuid) -> Result<(), StoreError> {
        webhook_endpoint::Entity::update_many()
            .col_expr(
                webhook_endpoint::Column::FailingSince,
                Expr::value(None::<DateTime<Utc>>),
            )
            .filter(webhook_endpoint::Column::Id.eq(id))
            .filter(webhook_endpoint::Column::FailingSince.is_not_null())
            .exec(self.db())
            .await?;
        Ok(())
    }

    /// Stops deliveries to endpoint `id`, saying why (the worker, on 410 Gone, an address
    /// events may not go to, or failures for longer than the deployment allows).
    pub async fn disable_endpoint(
        &self,
        id: Uuid,
        reason: &str,
        by: &ChangedBy,
    ) -> Result<(), StoreError> {
        let now = Utc::now();
        webhook_endpoint::Entity::update_many()
            .col_expr(webhook_endpoint::Column::DisabledAt, Expr::value(now))
            .col_expr(
                webhook_endpoint::Column::DisabledReason,
                Expr::value(reason),
            )
            .col_expr(
                webhook_endpoint::Column::ChangedBy,
                Expr::value(by.as_str()),
            )
            .col_expr(webhook_endpoint::Column::UpdatedAt, Expr::value(now))
            .filter(webhook_endpoint::Column::Id.eq(id))
            .exec(self.db())
            .await?;
        Ok(())
    }
}

/// `client_id`'s endpoint `id`, read in `txn`.
/// A rate as stored: the column is a signed integer.
fn stored_rate(rate: u32) -> i32 {
    i32::try_from(rate).unwrap_or(i32::MAX)
}

async fn own(
    txn: &impl ConnectionTrait,
    client_id: &str,
    id: Uuid,
) -> Result<Option<webhook_endpoint::Model>, StoreError> {
    Ok(webhook_endpoint::Entity::find_by_id(id)
        .filter(webhook_endpoint::Column::ClientId.eq(client_id))
        .one(txn)
        .await?)
}
