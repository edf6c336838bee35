//! The history of a case, written in the same transaction as each change.

use sea_orm::entity::prelude::*;

/// One event: `created`, `updated`, `activated` or `product_attached`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "case_events")]
pub struct Model {
    /// Row identifier.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The case.
    pub case_id: Uuid,
    /// What happened.
    pub kind: String,
    /// The partner that caused it, if one did.
    pub client_id: Option<String>,
    /// Details, e.g. the attached product.
    pub detail: Option<Json>,
    /// When it happened.
    pub created_at: DateTimeUtc,
}

/// Relations of `case_events`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
