//! Activating the cases that are due.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, Func, LockBehavior, LockType, Order, Query};
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait};
use uuid::Uuid;

use super::fan_out::queue_events;
use super::{CaseStore, StoreError, bounded, event};
use crate::entity::{case, case_event};
use crate::sandbox::World;

/// A case that has just become active.
#[derive(Debug, Clone)]
pub struct Activated {
    /// Its brand.
    pub brand: String,
    /// Its world: a sandbox case is counted apart from real ones.
    pub world: World,
    /// How late the activation was.
    pub lag: Duration,
}

/// The cases that are due and not yet active: how many, and when the longest due of them
/// fell due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// How many.
    pub due: u64,
    /// When the longest due one fell due; none when none is due.
    pub oldest_due: Option<DateTime<Utc>>,
}

/// Cases one activation pass takes at most. Every activated case is a row of the event
/// insert, with its own bind parameters, and a statement takes at most 65,535 of them on
/// PostgreSQL (32,766 on SQLite): a pass over a backlog of all due cases at once failed and
/// rolled back for ever. A full pass is followed at once by the next.
pub const ACTIVATION_BATCH: usize = 500;

impl CaseStore {
    /// Activates the cases that are due, the longest due first, at most [`ACTIVATION_BATCH`]
    /// of them, in one statement. On PostgreSQL it claims the due rows with `FOR UPDATE SKIP
    /// LOCKED`, so replicas running this at once share a backlog instead of queueing on each
    /// other, and a case a submission is updating is left for the next pass. The events go in
    /// the same transaction: a case is never activated twice, nor without its event.
    pub async fn activate_due(&self) -> Result<Vec<Activated>, StoreError> {
        let activated = bounded(self.activate_due_now()).await?;
        if !activated.is_empty() {
            self.queued.notify_one();
        }
        Ok(activated)
    }

    /// The activation backlog, read apart from the worker, so a stalled worker shows as a
    /// growing backlog rather than as no activations at all.
    pub async fn activation_backlog(&self) -> Result<Backlog, StoreError> {
        bounded(async {
            let mut query = Query::select();
            query
                .expr(Func::count(Expr::col(case::Column::Id)))
                .expr(Func::min(Expr::col(case::Column::ActivatesAt)))
                .from(case::Entity)
                // A literal, as in the pass itself, so the index of pending cases serves.
                .and_where(Expr::cust(format!(
                    r#""status" = '{}'"#,
                    case::Status::PendingActivation.as_str()
                )))
                .and_where(case::Column::ActivatesAt.lte(Utc::now()));
            let backend = self.db.get_database_backend();
            let row = self.db.query_one_raw(backend.build(&query)).await?;
            let Some(row) = row else {
                return Ok(Backlog {
                    due: 0,
                    oldest_due: None,
                });
            };
            let due: i64 = row.try_get_by_index(0)?;
            let oldest_due: Option<DateTime<Utc>> = row.try_get_by_index(1)?;
            Ok(Backlog {
                due: u64::try_from(due).unwrap_or(0),
                oldest_due,
            })
        })
        .await
    }

    async fn activate_due_now(&self) -> Result<Vec<Activated>, StoreError> {
        let now = Utc::now();
        let backend = self.db.get_database_backend();
        let mut due = Query::select();
        due.column(case::Column::Id)
            .from(case::Entity)
            // Written out, not bound: only a literal lets PostgreSQL's plans (generic ones
            // too) use the index of pending cases.
            .and_where(Expr::cust(format!(
                r#""status" = '{}'"#,
                case::Status::PendingActivation.as_str()
            )))
            .and_where(case::Column::ActivatesAt.lte(now))
            .order_by(case::Column::ActivatesAt, Order::Asc)
            .limit(ACTIVATION_BATCH as u64);
        if backend == DbBackend::Postgres {
            // SQLite has no row locks; its one writer at a time claims the rows there.
            due.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
        }
        let mut activate = Query::update();
        activate
            .table(case::Entity)
            .values([
                (case::Column::Status, case::Status::Active.as_str().into()),
                (case::Column::ActivatedAt, now.into()),
            ])
            .and_where(case::Column::Id.in_subquery(due))
            .returning(Query::returning().columns([
                case::Column::Id,
                case::Column::Brand,
                case::Column::ActivatesAt,
                case::Column::Sandbox,
            ]));
        let txn = self.begin_write().await?;
        let activated = txn
            .query_all_raw(backend.build(&activate))
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<Uuid>("", "id")?,
                    row.try_get::<String>("", "brand")?,
                    row.try_get::<DateTime<Utc>>("", "activates_at")?,
                    row.try_get::<bool>("", "sandbox")?,
                ))
            })
            .collect::<Result<Vec<_>, DbErr>>()?;
        if !activated.is_empty() {
            let events: Vec<case_event::ActiveModel> = activated
                .iter()
                .map(|(id, ..)| event(*id, "activated", None, None, now))
                .collect();
            let event_ids: Vec<Uuid> = events.iter().filter_map(|e| e.id.clone().take()).collect();
            case_event::Entity::insert_many(events)
                .exec_without_returning(&txn)
                .await?;
            txn.execute(&queue_events(&event_ids)).await?;
        }
        txn.commit().await?;
        Ok(activated
            .into_iter()
            .map(|(_, brand, activates_at, sandbox)| Activated {
                lag: (now - activates_at).to_std().unwrap_or_default(),
                brand,
                world: World::of(sandbox),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use test_support::Backend;

    use super::*;

    #[tokio::test]
    async fn the_backlog_counts_due_cases_until_they_activate() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let (store, _db) =
                super::super::test_store(backend, "intake-backlog", Duration::ZERO).await;
            let none = Backlog {
                due: 0,
                oldest_due: None,
            };
            assert_eq!(store.activation_backlog().await.unwrap(), none);

            let today = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
            let before = Utc::now();
            for email in ["a@example.com", "b@example.com"] {
                let body = crate::examples::purchase_enquiry("brand_a", email);
                let enquiry = crate::domain::parse_enquiry(&body, &["brand_a"], today).unwrap();
                store
                    .submit(&enquiry, "{}", "partner", World::Real, None)
                    .await
                    .unwrap();
            }
            let backlog = store.activation_backlog().await.unwrap();
            assert_eq!(backlog.due, 2, "{backend:?}");
            let oldest = backlog.oldest_due.expect("an oldest due case");
            assert!(
                oldest >= before - chrono::Duration::milliseconds(1) && oldest <= Utc::now(),
                "{backend:?}: {oldest} not between {before} and now"
            );

            assert_eq!(store.activate_due().await.unwrap().len(), 2);
            assert_eq!(
                store.activation_backlog().await.unwrap(),
                none,
                "{backend:?}"
            );
        }
    }
}
