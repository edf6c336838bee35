//! The case store: everything the intake-api keeps in its database, behind one type that owns
//! the connection pool, the queue writes to one case wait in, and the timing rules.
//!
//! Each change and the event describing it are written in one transaction. On PostgreSQL the
//! hot writes are single statements (one round trip, one implicit transaction) on connections
//! reused between requests ([`reused`]); a keyed request's answer follows its statement in
//! the same transaction, so keyed or not, an operation has one way of writing. The hot
//! writes are written once for both databases ([`steps`]): SQLite, which has no
//! data-modifying CTEs, runs the same statements one after another in a transaction.

mod activate;
mod attach;
mod erase;
mod fan_out;
mod idempotency;
mod redeem;
mod refer;
mod reused;
mod statements;
mod steps;
mod submit;
mod template;
mod view;
mod webhook_secrets;
mod write_queue;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{
    AccessMode, ActiveValue::Set, DatabaseBackend, DatabaseConnection, DatabaseTransaction, DbErr,
    IsolationLevel, RuntimeErr, SqliteTransactionMode, TransactionOptions, TransactionTrait,
};
use tokio::sync::{Notify, Semaphore, SemaphorePermit};
use uuid::Uuid;

pub use activate::{ACTIVATION_BATCH, Activated, Backlog};
pub use attach::{CaseRef, KeyedAttach, NewLink};
pub(crate) use erase::first_id_at;
pub use erase::{ERASED_EMAIL_PREFIX, ERASED_EVENT, ErasedCase, PURGE_BATCH, PURGED_EVENT};
pub(crate) use fan_out::event_bit;
pub use idempotency::{
    AnswerKeys, AnswerOf, Claim, KEY_TTL, Keyed, KeyedRequest, LEASE, Lease, Replayed,
    SealedAnswer, StoredAnswer, json_answer, seal_answer,
};
pub use redeem::{Redeemed, Redemption};
pub use refer::REFERRED_EVENT;
pub use statements::{HotStatement, StatementName};
pub use submit::{Outcome, Submitted};
pub use view::{CaseSummary, CaseView, EventView};
pub(crate) use webhook_secrets::SEALED_SECRET_PREFIX;
pub use webhook_secrets::{SecretSeal, is_sealed};
pub use write_queue::WriteQueue;

/// The longest a replica goes between checking an endpoint (and that its claimed events
/// are still to be sent) and handing one of them to the network. A change that stops
/// sends (disable, delete, a new URL or secret, an erasure) waits this long after it is
/// written before it is acknowledged, when the endpoint has events to send: from then on,
/// no replica sends by what it knew before the change.
pub const CHECKED_WITHIN: std::time::Duration = std::time::Duration::from_millis(500);

use crate::entity::{case_event, submission};
use crate::sandbox::World;

/// The longest one unit of database work may take, waiting for its turn included: past it
/// the request answers 503 instead of hanging on a database that stopped answering.
pub const DB_TIMEOUT: Duration = Duration::from_secs(8);

/// Why the store could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The work did not finish within [`DB_TIMEOUT`].
    #[error("database operation timed out")]
    TimedOut,
    /// The database refused or failed.
    #[error(transparent)]
    Db(#[from] DbErr),
    /// The enquiry could not be encoded for storage.
    #[error("encoding the enquiry failed")]
    Encoding(#[source] serde_json::Error),
    /// Every reference drawn for a new case was taken.
    #[error("no free case reference after {0} draws")]
    ReferencesExhausted(u32),
    /// The attempt's hold on its `Idempotency-Key` ran out and another attempt took it over.
    #[error("the idempotency key was taken over by another attempt")]
    LeaseLost,
    /// A keyed request's answer, or a webhook secret, could not be sealed for storage.
    #[error("sealing for storage failed")]
    Sealing(#[source] anyhow::Error),
}

impl StoreError {
    /// Whether a retry could succeed: the database was unreachable, busy or restarting,
    /// rather than refusing what was asked.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::TimedOut => true,
            Self::Db(DbErr::ConnectionAcquire(_) | DbErr::Conn(_)) => true,
            Self::Db(
                DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)),
            ) => sqlx_is_transient(e),
            Self::Db(_)
            | Self::Encoding(_)
            | Self::ReferencesExhausted(_)
            | Self::LeaseLost
            | Self::Sealing(_) => false,
        }
    }
}

fn sqlx_is_transient(e: &sea_orm::sqlx::Error) -> bool {
    use sea_orm::sqlx::Error;
    match e {
        Error::Io(_)
        | Error::Tls(_)
        | Error::Protocol(_)
        | Error::PoolTimedOut
        | Error::PoolClosed
        | Error::WorkerCrashed => true,
        Error::Database(db) => {
            let sqlite = db
                .try_downcast_ref::<sea_orm::sqlx::sqlite::SqliteError>()
                .is_some();
            db.code().is_some_and(|code| transient_code(&code, sqlite))
        }
        _ => false,
    }
}

/// PostgreSQL's SQLSTATEs for a lost connection (08), a serialisation failure or deadlock
/// (40001, 40P01), exhausted resources (53), a cancelled statement (57014) and a server
/// shutting down or starting (57P); SQLite's busy and locked codes, extended ones included.
fn transient_code(code: &str, sqlite: bool) -> bool {
    if sqlite {
        return code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6));
    }
    code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57P")
        || matches!(code, "40001" | "40P01" | "57014")
}

/// Runs `work` within [`DB_TIMEOUT`].
pub(crate) async fn bounded<T>(
    work: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(DB_TIMEOUT, work)
        .await
        .unwrap_or(Err(StoreError::TimedOut))
}

/// A new row's primary key: time-ordered (UUIDv7), so inserts land at the right-hand edge
/// of the key's index instead of on random pages. Ids never leave the service, so the
/// creation time they carry tells partners nothing.
fn new_row_id() -> Uuid {
    Uuid::now_v7()
}

/// Cases partner `client_id` has made at least one enquiry on: the cases it may see and
/// attach to. The same rule as who hears of a case's events, in `backend`'s placeholder.
fn enquired_by(client_id: &str, backend: DatabaseBackend) -> sea_orm::sea_query::SimpleExpr {
    let rule = match backend {
        DatabaseBackend::Postgres => fan_out::enquired_on!(case: r#""cases"."id""#, client: "$1"),
        _ => fan_out::enquired_on!(case: r#""cases"."id""#, client: "?"),
    };
    sea_orm::sea_query::Expr::cust_with_values(rule, [client_id])
}

/// `by` after `now`; the end of time when that is past what a timestamp holds.
fn later(now: DateTime<Utc>, by: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(by)
        .ok()
        .and_then(|by| now.checked_add_signed(by))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A submission of `kind` (an enquiry or a referral) on case `case_id`, its body as sent.
fn submission_row(
    case_id: Uuid,
    client_id: &str,
    received_at: DateTime<Utc>,
    payload: &str,
    kind: &str,
) -> submission::ActiveModel {
    submission::ActiveModel {
        id: Set(new_row_id()),
        case_id: Set(case_id),
        client_id: Set(client_id.to_owned()),
        received_at: Set(received_at),
        payload: Set(payload.to_owned()),
        kind: Set(kind.to_owned()),
    }
}

/// One entry of a case's history.
fn event(
    case_id: Uuid,
    kind: &str,
    client_id: Option<&str>,
    detail: Option<serde_json::Value>,
    at: DateTime<Utc>,
) -> case_event::ActiveModel {
    case_event::ActiveModel {
        id: Set(new_row_id()),
        case_id: Set(case_id),
        kind: Set(kind.to_owned()),
        client_id: Set(client_id.map(str::to_owned)),
        detail: Set(detail),
        created_at: Set(at),
    }
}

impl Timing {
    /// From the creation of a case of `world` to its activation.
    pub fn activation_delay(&self, world: World) -> Duration {
        match world {
            World::Real => self.activation_delay,
            World::Sandbox => self.sandbox_activation_delay,
        }
    }
}

/// The timing rules cases are kept by.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// From a case's creation to its activation.
    pub activation_delay: Duration,
    /// How long a redirect link can be redeemed.
    pub redirect_ttl: Duration,
    /// From a sandbox case's creation to its activation: short, so a partner practising
    /// sees the change, and its webhook, while it waits.
    pub sandbox_activation_delay: Duration,
}

/// Pool connections requests never take, so activation and readiness checks always find one.
pub const LEFT_FOR_OTHERS: u32 = 2;

/// The intake database.
#[derive(Clone)]
pub struct CaseStore {
    db: DatabaseConnection,
    /// On PostgreSQL, the hot statements' connections.
    reused: Option<Arc<reused::Reused>>,
    writes: Arc<WriteQueue>,
    /// Connections requests may hold at once: the pool's, less [`LEFT_FOR_OTHERS`].
    request_connections: Arc<Semaphore>,
    timing: Timing,
    /// [`attach::attach_lookup`], built once for the database's backend.
    attach_lookup: Arc<template::QueryTemplate<2>>,
    /// Raised when a change here may have queued webhook events.
    queued: Arc<Notify>,
}

impl CaseStore {
    /// A store over `db`, which must be migrated and have a pool of `max_connections`.
    pub fn new(db: DatabaseConnection, max_connections: u32, timing: Timing) -> Self {
        let for_requests = max_connections.saturating_sub(LEFT_FOR_OTHERS).max(1);
        let reused = (db.get_database_backend() == DatabaseBackend::Postgres).then(|| {
            Arc::new(reused::Reused::new(
                db.get_postgres_connection_pool().clone(),
            ))
        });
        let attach_lookup = Arc::new(template::QueryTemplate::new(
            db.get_database_backend(),
            attach::attach_lookup,
        ));
        Self {
            db,
            reused,
            writes: Arc::new(WriteQueue::default()),
            request_connections: Arc::new(Semaphore::new(for_requests as usize)),
            timing,
            attach_lookup,
            queued: Arc::default(),
        }
    }

    /// Raised each time a change made through this store may have queued webhook events,
    /// so the delivery worker of this replica sends them at once instead of at its next
    /// look. A raise while nobody waits is kept for the next wait; many become one.
    pub fn events_queued(&self) -> &Notify {
        &self.queued
    }

    /// Waits until a request may take a pool connection; holding the permit holds the slot.
    async fn request_connection(&self) -> Result<SemaphorePermit<'_>, StoreError> {
        self.request_connections
            .acquire()
            .await
            .map_err(|_| StoreError::TimedOut)
    }

    /// The connection pool, for readiness checks and operator commands.
    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Connections reused for the hot statements, on PostgreSQL.
    fn reused(&self) -> Option<&reused::Reused> {
        self.reused.as_deref()
    }

    /// Connections kept for reuse now, idle.
    pub fn idle_reused_connections(&self) -> usize {
        self.reused().map_or(0, reused::Reused::idle_count)
    }

    /// A write transaction. On SQLite it takes the write lock at `BEGIN`: a deferred one
    /// that read first fails at once when another writer committed meanwhile, instead of
    /// waiting for the lock.
    pub(crate) async fn begin_write(&self) -> Result<DatabaseTransaction, DbErr> {
        self.db
            .begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..Default::default()
            })
            .await
    }

    /// A read-only transaction whose reads all see the database at one moment, so an answer
    /// put together from several reads never misses a row that moved between them (on
    /// SQLite, a read transaction in WAL mode keeps the snapshot of its first read).
    pub(crate) async fn begin_snapshot(&self) -> Result<DatabaseTransaction, DbErr> {
        let postgres = self.db.get_database_backend() == DatabaseBackend::Postgres;
        self.db
            .begin_with_options(TransactionOptions {
                isolation_level: postgres.then_some(IsolationLevel::RepeatableRead),
                access_mode: postgres.then_some(AccessMode::ReadOnly),
                ..Default::default()
            })
            .await
    }

    /// Closes the pool once in-flight work is done.
    pub async fn close(&self) {
        if let Some(reused) = self.reused() {
            reused.release_all();
        }
        let _ = self.db.clone().close().await;
    }
}

/// A store on a new database of `backend`, migrated by this crate, whose cases activate and
/// links expire after `delay`: what the store's own tests start from. The database lives as
/// long as the guard.
#[cfg(test)]
pub(crate) async fn test_store(
    backend: test_support::Backend,
    name: &str,
    delay: Duration,
) -> (CaseStore, test_support::TestDb) {
    let test_db = test_support::TestDb::new(backend, name).await;
    let db = crate::migration::SCHEMA
        .connect(&test_db.url, 4)
        .await
        .unwrap();
    let timing = Timing {
        activation_delay: delay,
        redirect_ttl: Duration::from_secs(60),
        sandbox_activation_delay: delay,
    };
    (CaseStore::new(db, 4, timing), test_db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_connections_and_busy_databases_are_transient_and_refusals_are_not() {
        for code in ["08006", "40001", "40P01", "53300", "57014", "57P01"] {
            assert!(transient_code(code, false), "PostgreSQL {code}");
        }
        for code in ["23505", "22P02", "42P01"] {
            assert!(!transient_code(code, false), "PostgreSQL {code}");
        }
        for code in ["5", "517", "6"] {
            assert!(transient_code(code, true), "SQLite {code}");
        }
        for code in ["19", "2067", "1"] {
            assert!(!transient_code(code, true), "SQLite {code}");
        }
        assert!(StoreError::TimedOut.is_transient());
        assert!(
            StoreError::Db(DbErr::Query(RuntimeErr::SqlxError(Arc::new(
                sea_orm::sqlx::Error::PoolTimedOut
            ))))
            .is_transient()
        );
        assert!(!StoreError::ReferencesExhausted(3).is_transient());
        assert!(!StoreError::Db(DbErr::Custom("x".into())).is_transient());
    }
}

#[cfg(test)]
mod statement_tests {
    use sea_orm::{EntityName, EntityTrait, Iterable};

    use super::attach::ATTACH;
    use super::submit::SUBMIT;
    use super::*;
    use crate::entity::{case, case_event, redirect_token, submission};

    /// The column list of `INSERT INTO "table" (...)` in `sql`.
    fn inserted_columns(sql: &str, table: &str) -> Vec<String> {
        let start = format!(r#"INSERT INTO "{table}" ("#);
        let from = sql
            .find(&start)
            .unwrap_or_else(|| panic!("no insert into {table}"))
            + start.len();
        let to = from + sql[from..].find(')').expect("a closing bracket");
        sql[from..to]
            .split(',')
            .map(|c| c.trim().trim_matches('"').to_owned())
            .collect()
    }

    fn columns<E: EntityTrait>() -> Vec<String> {
        E::Column::iter()
            .map(|c| sea_orm::IdenStatic::as_str(&c).to_owned())
            .collect()
    }

    /// The hand-written writes name every column of each table they insert into, in the
    /// entity's order.
    #[test]
    fn hand_written_writes_insert_every_column_the_entities_have() {
        for (sql, table, expected) in [
            (
                SUBMIT.postgres(),
                case::Entity.table_name(),
                columns::<case::Entity>(),
            ),
            (
                SUBMIT.postgres(),
                submission::Entity.table_name(),
                columns::<submission::Entity>(),
            ),
            (
                SUBMIT.postgres(),
                case_event::Entity.table_name(),
                columns::<case_event::Entity>(),
            ),
            (
                ATTACH.postgres(),
                redirect_token::Entity.table_name(),
                columns::<redirect_token::Entity>(),
            ),
            (
                ATTACH.postgres(),
                case_event::Entity.table_name(),
                columns::<case_event::Entity>(),
            ),
        ] {
            assert_eq!(inserted_columns(sql, table), expected, "{table}");
        }
    }

    /// The hand-written writes, and the benchmark's activation pass, queue events for
    /// webhooks with the columns the ORM's statement queues them with.
    #[test]
    fn hand_written_writes_queue_events_as_the_orm_does() {
        let queued: Vec<String> = super::fan_out::QUEUED_COLUMNS
            .iter()
            .map(|c| sea_orm::IdenStatic::as_str(c).to_owned())
            .collect();
        let table = crate::entity::webhook_delivery::Entity.table_name();
        for sql in [
            SUBMIT.postgres(),
            ATTACH.postgres(),
            include_str!("../../../bench/activate.sql"),
        ] {
            assert_eq!(inserted_columns(sql, table), queued, "{sql}");
        }
    }

    /// Who hears of an event is one rule: the writes, and the benchmark's activation pass,
    /// queue events for the partners the ORM's statement does.
    #[test]
    fn every_write_queues_events_for_the_partners_the_rule_names() {
        use super::fan_out::hears_of;
        for (sql, rule) in [
            (
                SUBMIT.postgres(),
                hears_of!(
                    case: r#""logged"."case_id""#,
                    submitter: "$11",
                    bit: r#"CASE "logged"."kind" WHEN 'created' THEN 1 ELSE 2 END"#
                )
                .to_owned(),
            ),
            (
                ATTACH.postgres(),
                hears_of!(case: "$2", bit: "8").to_owned(),
            ),
            (
                include_str!("../../../bench/activate.sql"),
                super::fan_out::queue_rule(),
            ),
        ] {
            assert!(sql.contains(&rule), "{sql}");
        }
    }

    /// The status a referred case is stored with is the one the enquiry's upsert completes.
    #[test]
    fn the_submit_completes_cases_stored_as_referred() {
        let referred = format!(
            r#"CASE "cases"."status" WHEN '{}' THEN"#,
            case::Status::Referred.as_str()
        );
        assert_eq!(SUBMIT.postgres().matches(&referred).count(), 2);
    }

    /// Each layer of a request's future holds the layer below and moves it at least once, so
    /// what these futures weigh is copied several times per request.
    #[tokio::test]
    async fn the_futures_of_a_request_stay_small() {
        const SMALL: usize = 4 * 1024;
        let db = service_kit::db::connect("sqlite::memory:", 1)
            .await
            .unwrap();
        let timing = Timing {
            activation_delay: Duration::from_secs(1),
            redirect_ttl: Duration::from_secs(1),
            sandbox_activation_delay: Duration::from_secs(1),
        };
        let store = CaseStore::new(db, 4, timing);
        let today = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let body = crate::examples::purchase_enquiry("brand_a", "a@example.com");
        let enquiry = crate::domain::parse_enquiry(&body, &["brand_a", "brand_b"], today).unwrap();
        let case = CaseRef {
            id: Uuid::nil(),
            reference: "000000000000".into(),
            brand: "brand_a".into(),
            email: enquiry.email.as_str().into(),
        };
        let link = NewLink {
            product_uuid: Uuid::nil(),
            token_hash: "",
        };
        let sizes = [
            (
                "submit",
                std::mem::size_of_val(&store.submit(&enquiry, "{}", "c", World::Real, None)),
            ),
            (
                "find_for_attach",
                std::mem::size_of_val(&store.find_for_attach(&enquiry.email, "c")),
            ),
            (
                "attach",
                std::mem::size_of_val(&store.attach(&case, link, "c", None)),
            ),
        ];
        assert!(sizes.iter().all(|(_, size)| *size <= SMALL), "{sizes:?}");
    }
}
