//! Which replica may rotate the signing keys on schedule, and until when: a lease, so that
//! of several replicas that find a rotation due at once exactly one performs it.

use sea_orm::entity::prelude::*;

/// The single lease row, once a replica has taken it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "key_rotation_lease")]
pub struct Model {
    /// Always 1.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    /// The replica holding it.
    pub holder: String,
    /// When it runs out, if its holder has not given it up sooner.
    pub until: DateTimeUtc,
}

/// Relations of `key_rotation_lease`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
