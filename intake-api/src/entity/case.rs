//! A customer's case: one per brand and e-mail address.

use sea_orm::entity::prelude::*;

/// A case starts `pending_activation` (or `referred`, until its enquiry) and becomes `active` at `activates_at`.
pub const STATUS_PENDING: &str = "pending_activation";
/// A case staff of its brand can service.
pub const STATUS_ACTIVE: &str = "active";
/// A case a partner referred, waiting for the customer's enquiry: no activation touches
/// it, and the first enquiry makes it `pending_activation`.
pub const STATUS_REFERRED: &str = "referred";

/// One case.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "cases")]
pub struct Model {
    /// Internal identifier.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The case reference partners see: digits, unique, not sequential.
    #[sea_orm(unique)]
    pub reference: String,
    /// The brand the case belongs to.
    pub brand: String,
    /// The applicant's e-mail address, trimmed and lower-cased.
    pub email: String,
    /// `referred`, `pending_activation` or `active`.
    pub status: String,
    /// The enquiry as last applied, normalised.
    pub enquiry: Json,
    /// The eligibility-engine product attached last.
    pub product_uuid: Option<Uuid>,
    /// When the case was created.
    pub created_at: DateTimeUtc,
    /// When it was last changed.
    pub updated_at: DateTimeUtc,
    /// When it becomes active.
    pub activates_at: DateTimeUtc,
    /// When it became active.
    pub activated_at: Option<DateTimeUtc>,
    /// The newest redirect link made for it: only that one may be redeemed.
    pub redirect_token_id: Option<Uuid>,
    /// Made by a sandbox client: apart from real cases, which have their own case for the
    /// same brand and e-mail.
    pub sandbox: bool,
}

/// Relations of `cases`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
