//! Rotation on a schedule: when the keys are due one, and the lease that lets exactly one
//! replica of several perform it.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter,
};

use super::signing_keys::{KeyRing, Rotation, rotate_keys};
use crate::audit;
use crate::entity::key_rotation_lease::{self, Column};
use crate::key_store::KeyStore;

/// Takes the rotation lease for `holder` for `lease`, unless another holder has it; whether
/// `holder` has it now. The database's clock alone says when a lease runs out, in taking and
/// renewing it alike: a replica whose clock runs ahead never takes a lease another still
/// holds, nor one whose clock runs behind keeps one past its end.
pub async fn take_lease(
    db: &DatabaseConnection,
    holder: &str,
    lease: Duration,
) -> anyhow::Result<bool> {
    let seconds = lease.num_milliseconds() as f64 / 1000.0;
    let table = Alias::new("key_rotation_lease");
    let until_col = Alias::new("until");
    let (until, lapsed) = match db.get_database_backend() {
        DbBackend::Postgres => (
            Expr::cust_with_values("now() + make_interval(secs => $1)", [seconds]),
            Expr::col((table.clone(), until_col.clone())).lte(Expr::cust("now()")),
        ),
        // SQLite's clock is the host's, which every process sharing the file has; the
        // instant is written as the other timestamps are (RFC 3339, UTC) and compared as
        // an instant, not as text.
        _ => (
            Expr::cust_with_values(
                "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', ?)",
                [format!("{seconds:+} seconds")],
            ),
            Expr::cust(r#"julianday("key_rotation_lease"."until") <= julianday('now')"#),
        ),
    };
    let taken = Query::insert()
        .into_table(table.clone())
        .columns([Alias::new("id"), Alias::new("holder"), until_col.clone()])
        .values_panic([1.into(), holder.into(), until])
        .on_conflict(
            OnConflict::column(Alias::new("id"))
                .update_columns([Alias::new("holder"), until_col])
                .action_and_where(lapsed.or(Expr::col((table, Alias::new("holder"))).eq(holder)))
                .to_owned(),
        )
        .to_owned();
    Ok(db.execute(&taken).await?.rows_affected() == 1)
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
/// has been published `publish_ahead` and not before `not_before`. A schedule never moves
/// the keys: with `keys` another store than the database's keys live in, it is refused.
pub async fn rotate_if_due(
    db: &DatabaseConnection,
    keys: &Arc<KeyStore>,
    interval: Duration,
    publish_ahead: Duration,
    not_before: DateTime<Utc>,
    actor: &audit::Author,
) -> anyhow::Result<Option<Rotation>> {
    let ring = KeyRing::load(db).await?;
    match ring.next_rotation(interval) {
        Some(due) if due <= Utc::now() => Ok(Some(
            rotate_keys(db, keys, None, publish_ahead, not_before, false, actor).await?,
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
        let minute = Duration::minutes(1);
        assert!(take_lease(&db, "a", minute).await.unwrap());
        assert!(!take_lease(&db, "b", minute).await.unwrap());
        // Its holder takes it again, for longer.
        assert!(take_lease(&db, "a", minute * 2).await.unwrap());
        // Giving up someone else's lease does nothing.
        release_lease(&db, "b").await.unwrap();
        assert!(!take_lease(&db, "b", minute).await.unwrap());
        release_lease(&db, "a").await.unwrap();
        assert!(take_lease(&db, "b", minute).await.unwrap());
        // Once it has run out, by the database's clock, another replica takes it from a
        // holder that died.
        assert!(
            take_lease(&db, "b", Duration::milliseconds(300))
                .await
                .unwrap()
        );
        assert!(!take_lease(&db, "a", minute).await.unwrap(), "still b's");
        let taken = test_support::eventually(std::time::Duration::from_secs(5), || async {
            take_lease(&db, "a", minute).await.unwrap().then_some(())
        })
        .await;
        assert!(taken.is_some(), "the lease never ran out");
    }

    /// A replica whose clock runs minutes ahead once took a lease another still held, as
    /// each compared the lease's end with its own clock: the database's clock decides
    /// now, so nothing a replica's clock says takes a live lease, and a lease written by
    /// another clock is read by the database's.
    async fn a_replica_with_a_clock_far_ahead_cannot_take_a_lease_another_holds(backend: Backend) {
        let test_db = TestDb::new(backend, "auth-rotation-skew").await;
        let db = crate::migration::SCHEMA
            .connect(&test_db.url, 2)
            .await
            .expect("migrated test database");
        // Taken by a replica on time, for a minute by the database's clock.
        assert!(
            take_lease(&db, "on-time", Duration::minutes(1))
                .await
                .unwrap()
        );
        // Another whose clock runs two minutes ahead would have called the lease lapsed.
        let fast = Utc::now() + Duration::minutes(2);
        let lease = key_rotation_lease::Entity::find_by_id(1)
            .one(&db)
            .await
            .unwrap()
            .expect("the lease row");
        assert!(lease.until < fast, "by the fast clock it has run out");
        assert!(!take_lease(&db, "fast", Duration::minutes(1)).await.unwrap());
        // A lease written with a replica's clock far behind (by an older release) has run
        // out when the database's clock says so, whatever the writer thought.
        let slow = Utc::now() - Duration::minutes(5);
        key_rotation_lease::Entity::update_many()
            .col_expr(Column::Until, Expr::value(slow + Duration::minutes(1)))
            .exec(&db)
            .await
            .unwrap();
        assert!(take_lease(&db, "fast", Duration::minutes(1)).await.unwrap());
    }

    on_both_backends!(
        the_lease_has_one_holder_until_it_is_given_up_or_runs_out,
        a_replica_with_a_clock_far_ahead_cannot_take_a_lease_another_holds,
    );
}
