//! Partners' `Idempotency-Key`s: the request each key was first used for and, once it
//! succeeded, its answer, kept for a day so a retry gets the same answer.

use sea_orm::entity::prelude::*;

/// One partner's key.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub struct Model {
    /// The partner that sent the key: keys are per partner.
    #[sea_orm(primary_key, auto_increment = false)]
    pub client_id: String,
    /// The key as sent.
    #[sea_orm(primary_key, auto_increment = false)]
    pub idem_key: String,
    /// The operation it was used on.
    pub operation: String,
    /// SHA-256 of the request body it was used with.
    pub request_hash: String,
    /// The attempt processing it now or last: only that attempt may store the answer.
    pub attempt: Uuid,
    /// Until when the attempt holds the key; null once its answer is stored.
    pub locked_until: Option<DateTimeUtc>,
    /// The answer's status, once stored.
    pub status: Option<i16>,
    /// The answer's body, once stored.
    #[sea_orm(column_type = "Text", nullable)]
    pub response: Option<String>,
    /// When the key was first used.
    pub created_at: DateTimeUtc,
    /// When it is forgotten.
    pub expires_at: DateTimeUtc,
}

/// Relations of `idempotency_keys`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
