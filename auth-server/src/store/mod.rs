//! Everything the auth-server reads from and writes to its database.
//!
//! Every change bumps the revision row in the same transaction, which is how running
//! servers learn of it within a fraction of a second.
//!
//! Split by what it keeps: clients and their secrets, spent client assertions, signing
//! keys, and the audit trail's seals; the revision and the change transaction here serve
//! them all.

pub mod assertions;
pub mod audit_trail;
pub mod clients;
pub mod key_custody;
pub mod key_schedule;
pub mod signing_keys;

/// How a client authenticates: the one store type the other crates name, at this path.
pub use clients::AuthMethod;

use anyhow::anyhow;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait,
    QueryFilter, TransactionTrait,
};

use crate::entity::revision;

/// Marks a change to clients or keys, for the running servers to pick up.
pub(crate) async fn bump_revision<C: ConnectionTrait>(db: &C) -> anyhow::Result<()> {
    revision::Entity::update_many()
        .col_expr(
            revision::Column::Value,
            Expr::col(revision::Column::Value).add(1),
        )
        .filter(revision::Column::Id.eq(1))
        .exec(db)
        .await?;
    Ok(())
}

/// The current revision: changes whenever a client or key changes.
pub async fn current_revision(db: &DatabaseConnection) -> anyhow::Result<i64> {
    let row = revision::Entity::find_by_id(1)
        .one(db)
        .await?
        .ok_or_else(|| anyhow!("the revision row is missing; run `auth-server migrate`"))?;
    Ok(row.value)
}

/// Opens a transaction for a change to clients or keys. Bumping the revision first takes
/// its row lock, so changes from several processes (replicas starting, the CLI) run one
/// after another: each sees what the one before it left, and audit entries follow each
/// other without gaps.
async fn begin_change(db: &DatabaseConnection) -> anyhow::Result<DatabaseTransaction> {
    let txn = db.begin().await?;
    bump_revision(&txn).await?;
    Ok(txn)
}
