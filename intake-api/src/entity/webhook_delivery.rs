//! The webhook outbox: one row per event and endpoint, written in the transaction of the
//! change it reports, and worked off by the delivery worker.

use sea_orm::entity::prelude::*;

/// One event for one endpoint.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_deliveries")]
pub struct Model {
    /// The event's id (its `case_events` row): its `webhook-id`, the same for every partner
    /// it goes to.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The partner it goes to.
    #[sea_orm(primary_key, auto_increment = false)]
    pub client_id: String,
    /// The endpoint it goes to; the nil id when a server that knows one endpoint per
    /// partner queued it (0.2.0, during a rolling upgrade), until the worker adopts it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: Uuid,
    /// The case it is about.
    pub case_id: Uuid,
    /// `case.created`, `case.referred`, `case.updated`, `case.activated` or `product.attached`.
    pub event_type: String,
    /// When the change happened: the event's `timestamp`.
    pub created_at: DateTimeUtc,
    /// When it is next tried.
    pub next_attempt_at: DateTimeUtc,
    /// Until when a worker holds it for sending.
    pub locked_until: Option<DateTimeUtc>,
    /// Tries so far.
    pub attempts: i32,
    /// When the partner acknowledged it (2xx).
    pub delivered_at: Option<DateTimeUtc>,
    /// When retrying stopped.
    pub failed_at: Option<DateTimeUtc>,
    /// The last answer's status, if one came.
    pub last_status: Option<i16>,
    /// What went wrong last.
    #[sea_orm(column_type = "Text", nullable)]
    pub last_error: Option<String>,
}

/// Relations of `webhook_deliveries`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
