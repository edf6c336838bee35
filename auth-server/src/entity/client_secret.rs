//! A client's secret, kept only as a hash.

use sea_orm::entity::prelude::*;

/// One secret of one client; a client has two while an old one is in its grace period.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "client_secrets")]
pub struct Model {
    /// Row identifier.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The client it authenticates.
    pub client_id: String,
    /// SHA-256 of the secret, hex-encoded.
    pub secret_hash: String,
    /// When the secret was issued.
    pub created_at: DateTimeUtc,
    /// When it stops working; unset while it is the current secret.
    pub expires_at: Option<DateTimeUtc>,
}

/// Relations of `client_secrets`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
