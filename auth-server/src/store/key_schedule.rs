//! Rotation on a schedule: when the keys are due one, and the lease that lets exactly one
//! replica of several perform it.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};

use super::signing_keys::{KeyRing, Rotation, rotate_keys};
use crate::audit;
use crate::entity::key_rotation_lease::{self, Column};
use crate::key_store::KeyStore;

/// When a rotation on an `interval` schedule is next due: `interval` after the newest
/// scheduled key starts (or started) signing; none while no key was ever made.
pub fn next_rotation(ring: &KeyRing, interval: Duration) -> Option<DateTime<Utc>> {
    ring.scheduled
        .last()
        .map(|newest| newest.activates_at + interval)
}

/// Takes the rotation lease for `holder` until `until`, unless another holder has it past
/// `now`; whether `holder` has it now.
pub async fn take_lease(
    db: &DatabaseConnection,
    holder: &str,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> anyhow::Result<bool> {
    let lapsed = Expr::col((key_rotation_lease::Entity, Column::Until))
        .lte(now)
        .or(Expr::col((key_rotation_lease::Entity, Column::Holder)).eq(holder));
    let taken = key_rotation_lease::Entity::insert(key_rotation_lease::ActiveModel {
        id: Set(1),
        holder: Set(holder.to_owned()),
        until: Set(until),
    })
    .on_conflict(
        OnConflict::column(Column::Id)
            .update_columns([Column::Holder, Column::Until])
            .action_and_where(lapsed)
            .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(taken == 1)
}

/// Gives the lease up, if `holder` has it, so the next rotation may fall to any replica.
pub async fn release_lease(db: &DatabaseConnection, holder: &str) -> anyhow::Result<()> {
    key_rotation_lease::Entity::delete_many()
        .filter(Column::Id.eq(1))
        .filter(Column::Holder.eq(holder))
        .exec(db)
        .await?;
    Ok(())
}

/// Rotates the keys as `key rotate` does, as `actor`, when a rotation on an `interval`
/// schedule is due by what the database holds now: the caller holds the lease, so this
/// reading is not raced by another replica's rotation. The new key starts signing once it
/// has been published `publish_ahead` and not before `not_before`.
pub async fn rotate_if_due(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
    interval: Duration,
    publish_ahead: Duration,
    not_before: DateTime<Utc>,
    actor: &audit::Author,
) -> anyhow::Result<Option<Rotation>> {
    let ring = KeyRing::load(db).await?;
    match next_rotation(&ring, interval) {
        Some(due) if due <= Utc::now() => Ok(Some(
            rotate_keys(db, keys, None, publish_ahead, not_before, actor).await?,
        )),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use test_support::{Backend, TestDb, on_both_backends};

    use super::*;

    async fn the_lease_has_one_holder_until_it_is_given_up_or_runs_out(backend: Backend) {
        let test_db = TestDb::new(backend, "auth-rotation-lease").await;
        let db = crate::migration::SCHEMA
            .connect(&test_db.url, 2)
            .await
            .expect("migrated test database");
        let now = Utc::now();
        let minute = Duration::minutes(1);
        assert!(take_lease(&db, "a", now, now + minute).await.unwrap());
        assert!(!take_lease(&db, "b", now, now + minute).await.unwrap());
        // Its holder takes it again, for longer.
        assert!(take_lease(&db, "a", now, now + minute * 2).await.unwrap());
        // Giving up someone else's lease does nothing.
        release_lease(&db, "b").await.unwrap();
        assert!(!take_lease(&db, "b", now, now + minute).await.unwrap());
        release_lease(&db, "a").await.unwrap();
        assert!(take_lease(&db, "b", now, now + minute).await.unwrap());
        // Once it has run out, another replica takes it from a holder that died.
        let later = now + minute * 2;
        assert!(!take_lease(&db, "a", now, later).await.unwrap());
        assert!(take_lease(&db, "a", later, later + minute).await.unwrap());
    }

    on_both_backends!(the_lease_has_one_holder_until_it_is_given_up_or_runs_out);
}
