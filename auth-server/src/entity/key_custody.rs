//! Where the deployment's signing keys are made and kept, as the database records it, so
//! that no command or server makes one anywhere else by a missing setting.

use sea_orm::entity::prelude::*;

/// The single custody row, once keys were made with this release.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "key_custody")]
pub struct Model {
    /// Always 1.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    /// `database` (sealed under the key-encryption key) or `pkcs11` (inside a token).
    pub store: String,
    /// The PKCS#11 token's label, for `pkcs11`.
    pub token_label: Option<String>,
    /// The token's serial number when it was recorded, for the operator.
    pub token_serial: Option<String>,
    /// When it was recorded (made first, or moved).
    pub recorded_at: DateTimeUtc,
}

/// Relations of `key_custody`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
