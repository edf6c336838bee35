//! One entry of the audit trail: who changed what, when, chained to the entry before it.

use sea_orm::entity::prelude::*;

/// An operator's (or the server's own) change, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_log")]
pub struct Model {
    /// 1, 2, 3...: a gap means an entry was removed.
    #[sea_orm(primary_key, auto_increment = false)]
    pub seq: i64,
    /// When the change was made.
    pub at: DateTimeUtc,
    /// Who made it.
    pub actor: String,
    /// What was done, e.g. `client.disable`.
    pub action: String,
    /// What it was done to: a client id or a kid.
    pub subject: String,
    /// What changed, as JSON; never a secret.
    #[sea_orm(column_type = "Text")]
    pub detail: String,
    /// The revision the change brought the database to.
    pub revision: i64,
    /// The hash of the entry before (empty for the first).
    pub prev_hash: String,
    /// SHA-256 over this entry's fields and `prev_hash`, base64url: anyone can recompute
    /// it, so it shows accidents, not an insider's rewrite.
    pub hash: String,
    /// HMAC-SHA256 under a key derived from the key-encryption key, over this entry and the
    /// MAC before it, base64url; none until sealed (entries written without the key).
    pub mac: Option<String>,
}

/// Relations of `audit_log`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
