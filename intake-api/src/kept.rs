//! PostgreSQL connections kept between requests (enquiry submissions and attach).
//!
//! sqlx tests every connection handed back to its pool with a round trip (a `Sync` and its
//! `ReadyForQuery`), because a query whose future was dropped half-way can leave the
//! connection mid-protocol. Work that ran to completion leaves its connection clean, so
//! keeping that connection for the next request saves a round trip, and the database's
//! work for it, on every request. A connection whose use did not complete goes
//! back to sqlx, which tests it and closes it if it is broken.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sea_orm::sqlx::pool::PoolConnection;
use sea_orm::sqlx::{self, PgPool, Postgres};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Pool connections never kept, so activation and readiness checks always find one.
pub const LEFT_FOR_OTHERS: u32 = 2;
/// A connection kept unused for longer goes back to the pool, which tests it: one that sat
/// through a database restart is not handed to a request untested.
const MAX_IDLE: Duration = Duration::from_secs(10);
/// A connection kept for longer goes back to the pool even when always busy, so
/// connections still turn over (as the pool's own lifetime limit intends).
const MAX_KEPT: Duration = Duration::from_secs(30 * 60);

struct Idle {
    conn: PoolConnection<Postgres>,
    since: Instant,
    kept_since: Instant,
}

/// Connections taken from the pool for the hot paths and kept between requests.
pub struct KeptConnections {
    pool: PgPool,
    /// At most this many connections are taken, in use and idle together.
    permits: Semaphore,
    /// Whether clean connections are kept at all (not with a pool too small to share).
    keep: bool,
    idle: Mutex<Vec<Idle>>,
    acquire_timeout: Duration,
}

/// A connection for one request's work; call [`Kept::completed`] once the work has
/// finished normally, or it goes back to the pool to be tested.
pub struct Kept<'a> {
    conn: Option<PoolConnection<Postgres>>,
    kept_since: Instant,
    completed: bool,
    owner: &'a KeptConnections,
    _permit: SemaphorePermit<'a>,
}

impl KeptConnections {
    /// Connections of `pool`, whose size is `max_connections`, leaving
    /// [`LEFT_FOR_OTHERS`] to everything else. A pool of one is not shared: its connection
    /// is then taken one request at a time and always given back.
    pub fn new(pool: PgPool, max_connections: u32, acquire_timeout: Duration) -> Self {
        let keep = max_connections >= LEFT_FOR_OTHERS;
        let permits = max_connections.saturating_sub(LEFT_FOR_OTHERS).max(1) as usize;
        Self {
            pool,
            permits: Semaphore::new(permits),
            keep,
            idle: Mutex::new(Vec::with_capacity(permits)),
            acquire_timeout,
        }
    }

    /// A connection: the most recently used idle one, or a new one from the pool.
    pub async fn get(&self) -> Result<Kept<'_>, sqlx::Error> {
        let permit = tokio::time::timeout(self.acquire_timeout, self.permits.acquire())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let now = Instant::now();
        let (fresh, stale) = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            // The oldest idle connection is looked at on every call, so a surplus left
            // from a busier moment drains back to the pool.
            let stale = match idle.first() {
                Some(oldest) if now.duration_since(oldest.since) > MAX_IDLE => Some(idle.remove(0)),
                _ => None,
            };
            let fresh = idle.pop().filter(|c| {
                now.duration_since(c.since) <= MAX_IDLE
                    && now.duration_since(c.kept_since) <= MAX_KEPT
            });
            (fresh, stale)
        };
        drop(stale);
        let (conn, kept_since) = match fresh {
            Some(c) => (c.conn, c.kept_since),
            // Boxed: sqlx's acquire future (which may connect, with TLS) takes about 14 KiB,
            // and every future awaiting this one would carry and copy it on each request,
            // though a kept connection is almost always there.
            None => (Box::pin(self.pool.acquire()).await?, now),
        };
        Ok(Kept {
            conn: Some(conn),
            kept_since,
            completed: false,
            owner: self,
            _permit: permit,
        })
    }

    /// Runs `work` on a connection; the connection is kept only when `work` succeeded.
    pub async fn run<T>(
        &self,
        work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, sqlx::Error> {
        let mut conn = self.get().await?;
        let done = work(conn.conn()).await?;
        conn.completed();
        Ok(done)
    }

    /// Connections idle now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Gives every idle connection back to the pool; the pool can only close once they are.
    pub fn release_all(&self) {
        let drained: Vec<Idle> =
            std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        drop(drained);
    }
}

impl Kept<'_> {
    /// The connection, for running statements.
    pub fn conn(&mut self) -> &mut sqlx::PgConnection {
        self.conn
            .as_deref_mut()
            .expect("the connection is only taken on drop")
    }

    /// Marks the work done: the connection is clean and may be kept.
    pub fn completed(mut self) {
        self.completed = true;
    }
}

impl Drop for Kept<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.completed && self.owner.keep && !self.owner.pool.is_closed() {
            self.owner
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Idle {
                    conn,
                    since: Instant::now(),
                    kept_since: self.kept_since,
                });
        }
        // Otherwise the connection goes back to the pool here, which tests it first.
    }
}
