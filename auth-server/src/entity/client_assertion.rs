//! A client assertion already used to get a token.

use sea_orm::entity::prelude::*;

/// One spent assertion, kept until it would have expired anyway.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "client_assertions")]
pub struct Model {
    /// The client whose assertion it was.
    #[sea_orm(primary_key, auto_increment = false)]
    pub client_id: String,
    /// Its `jti`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub jti: String,
    /// When it could no longer be accepted; the row may go after that.
    pub expires_at: DateTimeUtc,
}

/// Relations of `client_assertions`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
