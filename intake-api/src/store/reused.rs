//! PostgreSQL connections reused from one request to the next for the hot statements.
//!
//! sqlx tests every connection handed back to its pool with a round trip, because a query
//! whose future was dropped half-way can leave the connection mid-protocol. A statement that
//! ran to completion leaves its connection clean, so the next request takes it as it is and
//! saves that round trip (`bench/RESULTS.md`, "Why the hot paths look as they do"). A
//! connection whose statement did not complete (an error, a timeout, a dropped request) is
//! never reused: it goes back to sqlx, which tests it.
//!
//! The statements are sea-orm's own [`Statement`]s, bound the way sea-orm binds them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::sqlx::pool::PoolConnection;
use sea_orm::sqlx::postgres::PgRow;
use sea_orm::sqlx::{self, Connection, PgPool, Postgres};
use sea_orm::{ConnAcquireErr, DbErr, RuntimeErr, Statement, Values};
use sea_query_sqlx::SqlxValues;

/// A connection unused for longer goes back to the pool, which tests it: one that sat
/// through a database restart is not handed to a request untested.
const MAX_IDLE: Duration = Duration::from_secs(10);
/// A connection reused for longer goes back to the pool even when always busy, so
/// connections still turn over as the pool's own lifetime limit intends.
const MAX_REUSED: Duration = Duration::from_secs(30 * 60);

struct Idle {
    conn: PoolConnection<Postgres>,
    since: Instant,
    first_taken: Instant,
}

/// Clean connections waiting for the next request. Callers bound how many are taken at once
/// (the store's request permits), so at most that many are ever kept.
pub struct Reused {
    pool: PgPool,
    idle: Mutex<Vec<Idle>>,
}

impl Reused {
    /// Connections of `pool`.
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `statement` and returns its first row, if any.
    pub async fn fetch_optional(&self, mut statement: Statement) -> Result<Option<PgRow>, DbErr> {
        let (mut conn, first_taken) = self.take().await?;
        let row = query(&mut statement)
            .fetch_optional(&mut *conn)
            .await
            .map_err(query_error)?;
        self.put_back(conn, first_taken);
        Ok(row)
    }

    /// Runs `first`, then the statement `then` makes of `first`'s first row, in one
    /// transaction: both take effect, or neither. `then` also reads what its caller wants of
    /// that row; its statement returns a row when it did its part. When it returns none, the
    /// transaction is rolled back and the answer is `None`, else it is what `then` read.
    pub async fn fetch_then<T, E: From<DbErr>>(
        &self,
        mut first: Statement,
        then: impl FnOnce(Option<&PgRow>) -> Result<(Statement, T), E>,
    ) -> Result<Option<T>, E> {
        let (mut conn, first_taken) = self.take().await?;
        let mut txn = conn.begin().await.map_err(query_error)?;
        let row = query(&mut first)
            .fetch_optional(&mut *txn)
            .await
            .map_err(query_error)?;
        // On an error from here on the transaction is dropped, which rolls it back, and
        // its connection goes back to sqlx, which tests it.
        let (mut second, read) = then(row.as_ref())?;
        let done = query(&mut second)
            .fetch_optional(&mut *txn)
            .await
            .map_err(query_error)?
            .is_some();
        if done {
            txn.commit().await.map_err(query_error)?;
        } else {
            txn.rollback().await.map_err(query_error)?;
        }
        self.put_back(conn, first_taken);
        Ok(done.then_some(read))
    }

    /// Runs `statement` for its effect (any rows it returns are read and dropped).
    pub async fn execute(&self, statement: Statement) -> Result<(), DbErr> {
        self.fetch_optional(statement).await.map(drop)
    }

    /// The most recently used idle connection, or a new one from the pool.
    async fn take(&self) -> Result<(PoolConnection<Postgres>, Instant), DbErr> {
        let now = Instant::now();
        let (fresh, stale) = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            // The oldest is looked at on every call, so a surplus left from a busier
            // moment drains back to the pool.
            let stale = match idle.first() {
                Some(oldest) if now.duration_since(oldest.since) > MAX_IDLE => Some(idle.remove(0)),
                _ => None,
            };
            let fresh = idle.pop().filter(|c| {
                now.duration_since(c.since) <= MAX_IDLE
                    && now.duration_since(c.first_taken) <= MAX_REUSED
            });
            (fresh, stale)
        };
        drop(stale);
        match fresh {
            Some(c) => Ok((c.conn, c.first_taken)),
            // Boxed: sqlx's acquire future (which may connect, with TLS) weighs kilobytes,
            // which every future awaiting this one would hold and copy on each request.
            None => Box::pin(self.pool.acquire())
                .await
                .map(|conn| (conn, now))
                .map_err(acquire_error),
        }
    }

    fn put_back(&self, conn: PoolConnection<Postgres>, first_taken: Instant) {
        if self.pool.is_closed() {
            return;
        }
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Idle {
                conn,
                since: Instant::now(),
                first_taken,
            });
    }

    /// Connections idle now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Gives every idle connection back to the pool; the pool only closes once they are.
    pub fn release_all(&self) {
        let drained = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        drop(drained);
    }
}

/// `statement` with its values (moved out) bound as sea-orm binds them. The text is sea-orm's statement,
/// whose values travel as parameters, never in the text.
fn query(statement: &mut Statement) -> sqlx::query::Query<'_, Postgres, SqlxValues> {
    let values = statement.values.take().unwrap_or(Values(Vec::new()));
    sqlx::query_with(
        sqlx::AssertSqlSafe(statement.sql.as_str()),
        SqlxValues(values),
    )
}

/// The errors sea-orm itself reports for a failed acquire and a failed query, so callers
/// read both paths alike.
fn acquire_error(e: sqlx::Error) -> DbErr {
    match e {
        sqlx::Error::PoolTimedOut => DbErr::ConnectionAcquire(ConnAcquireErr::Timeout),
        sqlx::Error::PoolClosed => DbErr::ConnectionAcquire(ConnAcquireErr::ConnectionClosed),
        e => DbErr::Conn(RuntimeErr::SqlxError(Arc::new(e))),
    }
}

/// A row's column that could not be read as the type asked for.
pub fn decode_error(e: sqlx::Error) -> DbErr {
    DbErr::Type(e.to_string())
}

/// See [`acquire_error`].
fn query_error(e: sqlx::Error) -> DbErr {
    DbErr::Query(RuntimeErr::SqlxError(Arc::new(e)))
}
