//! Every accepted enquiry and referral, kept exactly as the partner sent it.

use sea_orm::entity::prelude::*;

/// A submission of an enquiry.
pub const KIND_ENQUIRY: &str = "enquiry";
/// A submission of a referral, made before the customer's enquiry.
pub const KIND_REFERRAL: &str = "referral";

/// One accepted submission.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "submissions")]
pub struct Model {
    /// Row identifier.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The case it created or updated.
    pub case_id: Uuid,
    /// The partner that sent it.
    pub client_id: String,
    /// When it was received.
    pub received_at: DateTimeUtc,
    /// The request body as sent.
    #[sea_orm(column_type = "Text")]
    pub payload: String,
    /// [`KIND_ENQUIRY`] or [`KIND_REFERRAL`].
    pub kind: String,
}

/// Relations of `submissions`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
