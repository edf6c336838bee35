//! A counter bumped by every change to clients or keys, so running servers notice
//! a change by reading one row instead of reloading everything.

use sea_orm::entity::prelude::*;

/// The single revision row.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "revision")]
pub struct Model {
    /// Always 1.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    /// Incremented in the same transaction as each change.
    pub value: i64,
}

/// Relations of `revision`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
