//! Partners' `Idempotency-Key`s: a key is claimed before its request is processed, and the
//! request's answer is stored with the change it made, in the same transaction, so a retry
//! of a request whose change committed gets the same answer and changes nothing, whatever
//! the first attempt's caller heard.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{ActiveValue::Set, ColumnTrait, DatabaseTransaction, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::{CaseStore, StoreError, bounded, new_row_id};
use crate::entity::idempotency_key::{self, Column};

/// How long a key and its answer are kept.
pub const KEY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long an attempt holds its key. Every unit of a request's database work is bounded
/// ([`super::DB_TIMEOUT`]), so an attempt still holding its key past this has died, and a
/// retry may take the key over; an attempt that fails releases its key at once.
pub const LEASE: Duration = Duration::from_secs(30);

/// A request sent with an `Idempotency-Key`.
#[derive(Debug, Clone)]
pub struct KeyedRequest<'a> {
    /// The partner: keys are per partner.
    pub client_id: &'a str,
    /// The key as sent.
    pub key: &'a str,
    /// The operation, so a key reused on another operation is a different request.
    pub operation: &'static str,
    /// A digest of the request body.
    pub request_hash: String,
}

/// A successful answer, as stored and replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    /// Its status.
    pub status: u16,
    /// Its JSON body.
    pub body: String,
}

/// An attempt's hold on a key: only the holder stores the answer.
#[derive(Debug, Clone)]
pub struct Lease {
    client_id: String,
    key: String,
    attempt: Uuid,
}

/// What claiming a key found.
#[derive(Debug)]
pub enum Claim {
    /// The key is new (or its earlier attempt died or failed): process the request.
    Granted(Lease),
    /// The same request succeeded before: answer as it was answered.
    Replay(StoredAnswer),
    /// Another attempt with the key is being processed.
    InFlight,
    /// The key was used for a different request.
    Mismatch,
}

impl CaseStore {
    /// Claims `request`'s key for a new attempt, or says why it cannot be.
    pub async fn claim(&self, request: &KeyedRequest<'_>) -> Result<Claim, StoreError> {
        bounded(async {
            let _connection = self.request_connection().await?;
            // A key found neither claimable nor stored was purged in between: look again.
            for _ in 0..2 {
                if let Some(claim) = Box::pin(self.try_claim(request)).await? {
                    return Ok(claim);
                }
            }
            Ok(Claim::InFlight)
        })
        .await
    }

    async fn try_claim(&self, request: &KeyedRequest<'_>) -> Result<Option<Claim>, StoreError> {
        let now = Utc::now();
        let attempt = new_row_id();
        let claimable = Expr::col((idempotency_key::Entity, Column::ExpiresAt))
            .lte(now)
            .or(Expr::col((idempotency_key::Entity, Column::Status))
                .is_null()
                .and(Expr::col((idempotency_key::Entity, Column::LockedUntil)).lte(now))
                .and(Expr::col((idempotency_key::Entity, Column::Operation)).eq(request.operation))
                .and(
                    Expr::col((idempotency_key::Entity, Column::RequestHash))
                        .eq(request.request_hash.as_str()),
                ));
        let claimed = idempotency_key::Entity::insert(idempotency_key::ActiveModel {
            client_id: Set(request.client_id.to_owned()),
            idem_key: Set(request.key.to_owned()),
            operation: Set(request.operation.to_owned()),
            request_hash: Set(request.request_hash.clone()),
            attempt: Set(attempt),
            locked_until: Set(Some(later(now, LEASE))),
            status: Set(None),
            response: Set(None),
            created_at: Set(now),
            expires_at: Set(later(now, KEY_TTL)),
        })
        .on_conflict(
            OnConflict::columns([Column::ClientId, Column::IdemKey])
                .update_columns([
                    Column::Operation,
                    Column::RequestHash,
                    Column::Attempt,
                    Column::LockedUntil,
                    Column::Status,
                    Column::Response,
                    Column::CreatedAt,
                    Column::ExpiresAt,
                ])
                .action_and_where(claimable)
                .to_owned(),
        )
        .exec_without_returning(&self.db)
        .await?;
        if claimed == 1 {
            return Ok(Some(Claim::Granted(Lease {
                client_id: request.client_id.to_owned(),
                key: request.key.to_owned(),
                attempt,
            })));
        }
        let Some(held) = idempotency_key::Entity::find_by_id((
            request.client_id.to_owned(),
            request.key.to_owned(),
        ))
        .one(&self.db)
        .await?
        else {
            return Ok(None);
        };
        if held.operation != request.operation || held.request_hash != request.request_hash {
            return Ok(Some(Claim::Mismatch));
        }
        Ok(Some(match (held.status, held.response) {
            (Some(status), Some(body)) => Claim::Replay(StoredAnswer {
                status: u16::try_from(status).unwrap_or(500),
                body,
            }),
            _ => Claim::InFlight,
        }))
    }

    /// Gives a failed attempt's key back, so a retry with it is processed afresh. If the
    /// attempt's change did commit after all, its answer is stored and stays.
    pub async fn release(&self, lease: &Lease) {
        let released = bounded(async {
            idempotency_key::Entity::delete_many()
                .filter(Column::ClientId.eq(lease.client_id.as_str()))
                .filter(Column::IdemKey.eq(lease.key.as_str()))
                .filter(Column::Attempt.eq(lease.attempt))
                .filter(Column::Status.is_null())
                .exec(&self.db)
                .await?;
            Ok(())
        })
        .await;
        if let Err(e) = released {
            tracing::warn!(error = %e, "an idempotency key could not be released; it frees itself when its lease ends");
        }
    }

    /// Forgets the keys older than [`KEY_TTL`]; returns how many.
    pub async fn purge_expired_keys(&self) -> Result<u64, StoreError> {
        bounded(async {
            let purged = idempotency_key::Entity::delete_many()
                .filter(Column::ExpiresAt.lt(Utc::now()))
                .exec(&self.db)
                .await?;
            Ok(purged.rows_affected)
        })
        .await
    }
}

/// Stores `answer` for the attempt holding `lease`, inside the transaction of the change it
/// answers; fails, so the change rolls back, if the attempt no longer holds the key.
pub(super) async fn store_answer(
    txn: &DatabaseTransaction,
    lease: &Lease,
    answer: &StoredAnswer,
) -> Result<(), StoreError> {
    let stored = idempotency_key::Entity::update_many()
        .col_expr(Column::Status, Expr::value(answer.status as i16))
        .col_expr(Column::Response, Expr::value(answer.body.as_str()))
        .col_expr(Column::LockedUntil, Expr::value(None::<DateTime<Utc>>))
        .filter(Column::ClientId.eq(lease.client_id.as_str()))
        .filter(Column::IdemKey.eq(lease.key.as_str()))
        .filter(Column::Attempt.eq(lease.attempt))
        .filter(Column::Status.is_null())
        .exec(txn)
        .await?;
    if stored.rows_affected == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

fn later(now: DateTime<Utc>, by: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(by)
        .ok()
        .and_then(|by| now.checked_add_signed(by))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, Statement};

    use super::super::{Submitted, Timing};
    use super::*;

    use test_support::{Backend, TestDb};

    /// A store on a new database of `backend`, migrated by this crate; the database lives
    /// as long as the guard.
    async fn store(backend: Backend) -> (CaseStore, TestDb) {
        let test_db = TestDb::new(backend, "intake-keys").await;
        let db = crate::migration::SCHEMA
            .connect(&test_db.url, 4)
            .await
            .unwrap();
        let timing = Timing {
            activation_delay: Duration::from_secs(60),
            redirect_ttl: Duration::from_secs(60),
        };
        (CaseStore::new(db, 4, timing), test_db)
    }

    fn request<'a>(key: &'a str, hash: &str) -> KeyedRequest<'a> {
        KeyedRequest {
            client_id: "partner",
            key,
            operation: "submitEnquiry",
            request_hash: hash.to_owned(),
        }
    }

    async fn set(store: &CaseStore, sql: &str) {
        store
            .db
            .execute_raw(Statement::from_string(store.db.get_database_backend(), sql))
            .await
            .unwrap();
    }

    fn lease(claim: Claim) -> Lease {
        match claim {
            Claim::Granted(lease) => lease,
            other => panic!("not granted: {other:?}"),
        }
    }

    /// A retry after an answer the partner never heard (a 503 whose change committed) gets
    /// the committed answer; a retry after a change that did not commit is processed.
    #[tokio::test]
    async fn an_answer_stored_with_its_change_outlives_the_release_of_its_key() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            an_answer_stored_with_its_change_outlives_the_release_of_its_key_on(backend).await;
        }
    }

    async fn an_answer_stored_with_its_change_outlives_the_release_of_its_key_on(backend: Backend) {
        let (store, _db) = store(backend).await;
        let today = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let body = crate::examples::purchase_enquiry("brand_a", "a@example.com");
        let enquiry = crate::domain::parse_enquiry(&body, &["brand_a"], today).unwrap();
        let answer = |s: &Submitted| StoredAnswer {
            status: 201,
            body: s.reference.clone(),
        };

        let held = lease(store.claim(&request("k", "h")).await.unwrap());
        assert!(matches!(
            store.claim(&request("k", "h")).await.unwrap(),
            Claim::InFlight
        ));
        let submitted = store
            .submit(&enquiry, "{}", "partner", Some((&held, &answer)))
            .await
            .unwrap();
        store.release(&held).await;
        match store.claim(&request("k", "h")).await.unwrap() {
            Claim::Replay(stored) => assert_eq!(stored.body, submitted.reference),
            other => panic!("not replayed: {other:?}"),
        }
        assert!(matches!(
            store.claim(&request("k", "other")).await.unwrap(),
            Claim::Mismatch
        ));

        let failed = lease(store.claim(&request("k2", "h")).await.unwrap());
        store.release(&failed).await;
        lease(store.claim(&request("k2", "h")).await.unwrap());
    }

    #[tokio::test]
    async fn a_dead_attempt_loses_its_key_and_cannot_store_over_its_successor() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            a_dead_attempt_loses_its_key_and_cannot_store_over_its_successor_on(backend).await;
        }
    }

    async fn a_dead_attempt_loses_its_key_and_cannot_store_over_its_successor_on(backend: Backend) {
        let (store, _db) = store(backend).await;
        let dead = lease(store.claim(&request("k", "h")).await.unwrap());
        set(
            &store,
            "UPDATE idempotency_keys SET locked_until = '2000-01-01 00:00:00+00:00'",
        )
        .await;
        let successor = lease(store.claim(&request("k", "h")).await.unwrap());
        let answer = StoredAnswer {
            status: 200,
            body: "{}".into(),
        };
        let txn = store.begin_write().await.unwrap();
        assert!(matches!(
            store_answer(&txn, &dead, &answer).await,
            Err(StoreError::LeaseLost)
        ));
        txn.rollback().await.unwrap();
        let txn = store.begin_write().await.unwrap();
        store_answer(&txn, &successor, &answer).await.unwrap();
        txn.commit().await.unwrap();
        assert!(matches!(
            store.claim(&request("k", "h")).await.unwrap(),
            Claim::Replay(_)
        ));
    }

    #[tokio::test]
    async fn expired_keys_are_purged_and_free() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            expired_keys_are_purged_and_free_on(backend).await;
        }
    }

    async fn expired_keys_are_purged_and_free_on(backend: Backend) {
        let (store, _db) = store(backend).await;
        lease(store.claim(&request("old", "h")).await.unwrap());
        lease(store.claim(&request("new", "h")).await.unwrap());
        set(
            &store,
            "UPDATE idempotency_keys SET expires_at = '2000-01-01 00:00:00+00:00' WHERE idem_key = 'old'",
        )
        .await;
        // An expired key is free even before the purge, whatever it was used for.
        lease(store.claim(&request("old", "other")).await.unwrap());
        set(
            &store,
            "UPDATE idempotency_keys SET expires_at = '2000-01-01 00:00:00+00:00' WHERE idem_key = 'old'",
        )
        .await;
        assert_eq!(store.purge_expired_keys().await.unwrap(), 1);
        assert!(matches!(
            store.claim(&request("new", "h")).await.unwrap(),
            Claim::InFlight
        ));
    }
}
