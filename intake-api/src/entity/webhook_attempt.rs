//! One try to deliver an event to an endpoint, as its partner's delivery history shows it.

use sea_orm::entity::prelude::*;

/// A row of `webhook_attempts`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_attempts")]
pub struct Model {
    /// The event (its `webhook_deliveries` id).
    #[sea_orm(primary_key, auto_increment = false)]
    pub delivery_id: Uuid,
    /// The endpoint tried.
    #[sea_orm(primary_key, auto_increment = false)]
    pub endpoint_id: Uuid,
    /// Which try of the event this was, from 1.
    #[sea_orm(primary_key, auto_increment = false)]
    pub attempt: i32,
    /// When the request was sent.
    pub attempted_at: DateTimeUtc,
    /// The answer's status; none when no answer came.
    pub status: Option<i16>,
    /// What went wrong; none for a delivered try.
    #[sea_orm(column_type = "Text", nullable)]
    pub error: Option<String>,
    /// How long the endpoint took to answer (or to fail), in milliseconds.
    pub duration_ms: i32,
    /// When the event is tried next, after a try that will be followed by another.
    pub next_attempt_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
