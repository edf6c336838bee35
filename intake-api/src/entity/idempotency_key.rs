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
    /// HMAC-SHA256 of the request body it was used with, under a key derived from
    /// `INTAKE_KEY_ENCRYPTION_KEY` (`hmac1:` and base64url); 0.1.0 stored a plain SHA-256
    /// (base64url, no prefix).
    pub request_hash: String,
    /// The attempt processing it now or last: only that attempt may store the answer.
    pub attempt: Uuid,
    /// Until when the attempt holds the key; null once its answer is stored.
    pub locked_until: Option<DateTimeUtc>,
    /// The answer's status, once stored.
    pub status: Option<i16>,
    /// The answer's body in clear, as 0.1.0 stored it; null in every row stored since.
    #[sea_orm(column_type = "Text", nullable)]
    pub response: Option<String>,
    /// The answer's body sealed (AES-256-GCM) under a key derived from
    /// `INTAKE_KEY_ENCRYPTION_KEY`, once stored; null again once its case was erased.
    #[sea_orm(column_type = "Text", nullable)]
    pub sealed_response: Option<String>,
    /// The case the answer is about, for erasure.
    pub case_id: Option<Uuid>,
    /// When the key was first used.
    pub created_at: DateTimeUtc,
    /// When it is forgotten.
    pub expires_at: DateTimeUtc,
}

/// Relations of `idempotency_keys`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
