//! Where a partner receives its webhooks, which events, and the secrets they are signed with.

use sea_orm::entity::prelude::*;

/// One of a partner's endpoints.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_endpoints")]
pub struct Model {
    /// The endpoint's id, as the partner names it (`ep_` and its 32 hex digits).
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The partner.
    pub client_id: String,
    /// The URL events are POSTed to.
    #[sea_orm(column_type = "Text")]
    pub url: String,
    /// The signing secret, `whsec_` and base64: HMAC keys must be kept to sign.
    pub secret: String,
    /// The secret before the last rotation, still signing until `previous_secret_until`.
    pub previous_secret: Option<String>,
    /// When the previous secret stops signing.
    pub previous_secret_until: Option<DateTimeUtc>,
    /// The event types it receives, one bit each (`crate::webhooks::store::Subscription`);
    /// null for every type, those added later too.
    pub event_types: Option<i32>,
    /// Since when every round of sends to it failed; null while deliveries go through.
    pub failing_since: Option<DateTimeUtc>,
    /// When deliveries stopped (the endpoint answered 410); null while active.
    pub disabled_at: Option<DateTimeUtc>,
    /// Why deliveries stopped.
    pub disabled_reason: Option<String>,
    /// When it was first set.
    pub created_at: DateTimeUtc,
    /// When it was last changed.
    pub updated_at: DateTimeUtc,
    /// Events a second at most, as its partner asked; null for as fast as it answers.
    pub rate_limit: Option<i32>,
    /// Who made the last change ([`crate::webhooks::store::ChangedBy`]); null for changes
    /// made before this was kept.
    pub changed_by: Option<String>,
    /// How many times its events were asked to be sent again (redeliver, recover); null
    /// before the first. Replicas compare it between looks to end an endpoint's wait.
    pub resend_requests: Option<i64>,
}

/// Relations of `webhook_endpoints`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
