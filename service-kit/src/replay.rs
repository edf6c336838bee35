//! Single-use ids (DPoP proofs' and client assertions' `jti`s): each is remembered, in one
//! store every replica shares, for as long as the item that carries it could be accepted.
//!
//! The store is the service's database unless Redis is configured, then Redis. Nothing is
//! kept in process: a proof used at one replica is spent at all of them, and no table one
//! client can fill makes another client's ids look used. When the store cannot answer, the
//! caller is told so and refuses the request: an id that cannot be recorded is never taken
//! as new.
//!
//! Redis may forget (a restart without persistence, a flush): it keeps a marker of since
//! when it remembers, [`MEMORY_MARKER`], written by the first check that finds it missing
//! (by Redis's clock, so every replica reads the same moment). An item made before that
//! moment may have been used before it and cannot be shown unused: it is refused as
//! [`Use::MadeBeforeMemory`], and its client makes a new one. The marker is read in the same
//! script as the id is recorded: no round trip is added.
//!
//! Whether the store answers is known without a request: every use counts, and
//! [`ReplayStore::watch`] asks it every few seconds, for `/readyz` and the gauge
//! `replay_store_available`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;
use sea_orm::sea_query::{Alias, Expr, OnConflict, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection};
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{string, timestamp_with_time_zone};

use crate::Secret;

/// How long recording an id may take before the store counts as unreachable.
const DATABASE_TIMEOUT: Duration = Duration::from_secs(2);
/// The same for one Redis command (and for connecting).
const REDIS_TIMEOUT: Duration = Duration::from_millis(500);

/// Seconds a client is told to wait before sending again when the store cannot be reached.
pub const RETRY_AFTER_SECS: u64 = 5;

/// How often [`ReplayStore::watch`] asks the store whether it answers.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);

/// Where one kind of id is kept in the database: a table whose primary key is (owner, id),
/// with the time after which the id may be forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ledger {
    /// The table.
    pub table: &'static str,
    /// What the id is unique within: the client, or the proof's key.
    pub owner: &'static str,
    /// The id's column.
    pub id: &'static str,
}

/// DPoP proofs' ids, by the thumbprint of the key that signed them (both services).
pub const DPOP_PROOFS: Ledger = Ledger {
    table: "dpop_proofs",
    owner: "jkt",
    id: "jti",
};

/// The Redis key holding the moment, in milliseconds since the epoch by Redis's clock, since
/// which the store remembers every id recorded.
pub const MEMORY_MARKER: &str = "replay:remembers-since";

/// What the store says of an id it was asked to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Not used before (or only by an item that has expired since): recorded now.
    First,
    /// Used before, at this replica or another.
    Again,
    /// The item was made before the store's memory begins (Redis restarted or was
    /// flushed since): it may have been used before, so it is refused as if it had been.
    MadeBeforeMemory,
}

/// The store could not say whether an id was used before.
#[derive(Debug, thiserror::Error)]
#[error("the replay store cannot be reached: {0}")]
pub struct Unreachable(&'static str);

enum Backend {
    Database(DatabaseConnection),
    Redis {
        client: redis::Client,
        conn: tokio::sync::Mutex<Option<ConnectionManager>>,
    },
}

/// The ids already used, shared by every replica.
pub struct ReplayStore {
    service: &'static str,
    backend: Backend,
    /// Whether the store answered its last use or question.
    available: AtomicBool,
}

impl ReplayStore {
    /// A store in Redis at `redis_url` when given (an invalid URL is an error), in `db`
    /// otherwise.
    pub fn new(
        service: &'static str,
        db: DatabaseConnection,
        redis_url: Option<&Secret<String>>,
    ) -> anyhow::Result<Self> {
        let backend = match redis_url {
            Some(url) => Backend::Redis {
                client: redis::Client::open(url.expose().as_str()).map_err(|e| {
                    anyhow::anyhow!("REDIS_URL is not a valid Redis URL ({:?})", e.kind())
                })?,
                conn: tokio::sync::Mutex::new(None),
            },
            None => Backend::Database(db),
        };
        let store = Self {
            service,
            backend,
            available: AtomicBool::new(true),
        };
        store.show(true);
        Ok(store)
    }

    /// Which store this is, for logs: `database` or `redis`.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Database(_) => "database",
            Backend::Redis { .. } => "redis",
        }
    }

    /// Records `id` of `owner`, carried by an item made at `made_at` (by its own word), as
    /// used until `keep_until`. The database never forgets before `keep_until`, so only Redis
    /// answers [`Use::MadeBeforeMemory`].
    pub async fn first_use(
        &self,
        ledger: &Ledger,
        owner: &str,
        id: &str,
        made_at: DateTime<Utc>,
        keep_until: DateTime<Utc>,
    ) -> Result<Use, Unreachable> {
        let outcome = match &self.backend {
            Backend::Database(db) => spend_in_database(db, ledger, owner, id, keep_until).await,
            Backend::Redis { client, conn } => {
                let item = RedisItem {
                    key: format!("replay:{}:{owner}:{id}", ledger.table),
                    made_at,
                    keep_until,
                };
                spend_in_redis(self.service, client, conn, item).await
            }
        };
        if let Err(e) = &outcome {
            metrics::counter!("replay_store_errors_total", "service" => self.service, "store" => self.kind())
                .increment(1);
            tracing::warn!(error = %e, store = self.kind(), "single-use check failed: request refused");
        }
        self.record(outcome.is_ok());
        outcome
    }

    /// Writes Redis's marker of since when it remembers, when it has none (a new Redis, at
    /// the first start): items made before a store was ever used are not refused later for
    /// predating it. The database needs none; an unreachable Redis is left to the first
    /// check, which writes the marker as well.
    pub async fn prime(&self) {
        let Backend::Redis { client, conn } = &self.backend else {
            return;
        };
        let Ok(mut conn) = connection(client, conn).await else {
            return;
        };
        let primed = tokio::time::timeout(
            REDIS_TIMEOUT,
            PRIME
                .prepare_invoke()
                .key(MEMORY_MARKER)
                .invoke_async::<i64>(&mut conn),
        )
        .await;
        if let Ok(Ok(1)) = primed {
            tracing::info!(
                marker = MEMORY_MARKER,
                "the replay store (Redis) remembers used ids from now on"
            );
        }
    }

    /// Whether the store answered its last use, or the last question [`Self::watch`] asked.
    pub fn is_available(&self) -> bool {
        self.available.load(Ordering::Relaxed)
    }

    /// Asks the store whether it answers, every [`WATCH_EVERY`], so that its outage shows
    /// (and its return) while no request needs it; runs until the task is aborted.
    pub async fn watch(&self) {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let answers = match &self.backend {
                Backend::Database(db) => {
                    matches!(
                        tokio::time::timeout(DATABASE_TIMEOUT, db.ping()).await,
                        Ok(Ok(()))
                    )
                }
                Backend::Redis { client, conn } => ping_redis(client, conn).await.is_ok(),
            };
            self.record(answers);
        }
    }

    /// Records whether the store answered; a change is logged and shown on the gauge.
    fn record(&self, answers: bool) {
        if self.available.swap(answers, Ordering::Relaxed) != answers {
            self.show(answers);
            if answers {
                tracing::info!(store = self.kind(), "the replay store answers again");
            } else {
                tracing::error!(
                    store = self.kind(),
                    "the replay store cannot be reached: DPoP proofs and client assertions are \
                     refused until it answers"
                );
            }
        }
    }

    fn show(&self, answers: bool) {
        metrics::gauge!("replay_store_available", "service" => self.service, "store" => self.kind())
            .set(if answers { 1.0 } else { 0.0 });
    }

    /// Forgets the ids of `ledger` kept until before `now`; Redis forgets them by itself.
    pub async fn prune(&self, ledger: &Ledger, now: DateTime<Utc>) -> Result<u64, sea_orm::DbErr> {
        let Backend::Database(db) = &self.backend else {
            return Ok(0);
        };
        prune_ledger(db, ledger, now).await
    }
}

/// Forgets the ids of `ledger` in `db` kept until before `now`.
async fn prune_ledger(
    db: &DatabaseConnection,
    ledger: &Ledger,
    now: DateTime<Utc>,
) -> Result<u64, sea_orm::DbErr> {
    let delete = Query::delete()
        .from_table(Alias::new(ledger.table))
        .and_where(Expr::col(Alias::new(EXPIRES_AT)).lte(now))
        .to_owned();
    let deleted = db.execute(&delete).await?;
    Ok(deleted.rows_affected())
}

/// The column every ledger keeps its ids' expiry in.
const EXPIRES_AT: &str = "expires_at";

/// One statement, so that two replicas recording the same id at once cannot both win: the
/// insert, or the take-over of a row whose item has expired; a live row is left as it is.
async fn spend_in_database(
    db: &DatabaseConnection,
    ledger: &Ledger,
    owner: &str,
    id: &str,
    keep_until: DateTime<Utc>,
) -> Result<Use, Unreachable> {
    let table = Alias::new(ledger.table);
    let upsert = Query::insert()
        .into_table(table.clone())
        .columns([
            Alias::new(ledger.owner),
            Alias::new(ledger.id),
            Alias::new(EXPIRES_AT),
        ])
        .values_panic([owner.into(), id.into(), keep_until.into()])
        .on_conflict(
            OnConflict::columns([Alias::new(ledger.owner), Alias::new(ledger.id)])
                .update_column(Alias::new(EXPIRES_AT))
                .action_and_where(Expr::col((table, Alias::new(EXPIRES_AT))).lte(Utc::now()))
                .to_owned(),
        )
        .to_owned();
    match tokio::time::timeout(DATABASE_TIMEOUT, db.execute(&upsert)).await {
        Ok(Ok(done)) if done.rows_affected() == 1 => Ok(Use::First),
        Ok(Ok(_)) => Ok(Use::Again),
        Ok(Err(_)) => Err(Unreachable("database error")),
        Err(_) => Err(Unreachable("database timeout")),
    }
}

/// An id to record in Redis: its key, when its item was made, and until when to keep it.
struct RedisItem {
    key: String,
    made_at: DateTime<Utc>,
    keep_until: DateTime<Utc>,
}

/// One script, so the marker is read (and written when missing) in the round trip that
/// records the id: `SET NX` with the id's remaining life as its expiry, so Redis forgets it
/// when the item could no longer be accepted, never before. An item made in a second before
/// the marker's is not recorded: items say when they were made to the second, and one made
/// in the marker's own second is taken (a fresh proof is never refused for being too
/// quick; one used in the fraction of a second before a restart is the rest). Answers the
/// outcome (1 first, 0 again, -1 made before the memory began) and whether the marker was
/// missing.
const SPEND_SCRIPT: &str = r"
if redis.replicate_commands then redis.replicate_commands() end
local created = 0
local since = redis.call('GET', KEYS[1])
if not since then
  local t = redis.call('TIME')
  since = string.format('%.0f', t[1] * 1000 + math.floor(t[2] / 1000))
  redis.call('SET', KEYS[1], since)
  created = 1
end
if tonumber(ARGV[1]) < math.floor(tonumber(since) / 1000) then return {-1, created} end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return {1, created} end
return {0, created}
";

static SPEND: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(SPEND_SCRIPT));

/// Writes the marker, by Redis's clock, when there is none; 1 when it wrote it.
const PRIME_SCRIPT: &str = r"
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
redis.call('SET', KEYS[1], string.format('%.0f', t[1] * 1000 + math.floor(t[2] / 1000)))
return 1
";

static PRIME: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(PRIME_SCRIPT));

/// `PING` on the connection the ids are recorded through.
async fn ping_redis(
    client: &redis::Client,
    slot: &tokio::sync::Mutex<Option<ConnectionManager>>,
) -> Result<(), Unreachable> {
    let mut conn = connection(client, slot).await?;
    match tokio::time::timeout(
        REDIS_TIMEOUT,
        redis::cmd("PING").query_async::<String>(&mut conn),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) => Err(Unreachable("redis command")),
        Err(_) => Err(Unreachable("redis timeout")),
    }
}

/// The store's Redis connection, made at first use and shared after.
async fn connection(
    client: &redis::Client,
    slot: &tokio::sync::Mutex<Option<ConnectionManager>>,
) -> Result<ConnectionManager, Unreachable> {
    let mut slot = slot.lock().await;
    if let Some(conn) = slot.as_ref() {
        return Ok(conn.clone());
    }
    let conn = crate::ratelimit::connect(client, REDIS_TIMEOUT)
        .await
        .ok_or(Unreachable("redis connect"))?;
    *slot = Some(conn.clone());
    Ok(conn)
}

async fn spend_in_redis(
    service: &'static str,
    client: &redis::Client,
    slot: &tokio::sync::Mutex<Option<ConnectionManager>>,
    item: RedisItem,
) -> Result<Use, Unreachable> {
    let mut conn = connection(client, slot).await?;
    let ttl_ms = Ord::max((item.keep_until - Utc::now()).num_milliseconds(), 1000);
    let mut invocation = SPEND.prepare_invoke();
    invocation
        .key(MEMORY_MARKER)
        .key(&item.key)
        .arg(item.made_at.timestamp())
        .arg(ttl_ms);
    let answer = tokio::time::timeout(
        REDIS_TIMEOUT,
        invocation.invoke_async::<(i64, i64)>(&mut conn),
    )
    .await;
    let (outcome, marker_created) = match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => return Err(Unreachable("redis command")),
        Err(_) => return Err(Unreachable("redis timeout")),
    };
    if marker_created == 1 {
        metrics::counter!("replay_store_memory_resets_total", "service" => service).increment(1);
        tracing::warn!(
            marker = MEMORY_MARKER,
            "the replay store (Redis) had no record of since when it remembers used ids: it \
             restarted without persistence or was flushed; DPoP proofs and client assertions \
             made before now are refused, and their clients make new ones"
        );
    }
    Ok(match outcome {
        1 => Use::First,
        0 => Use::Again,
        _ => Use::MadeBeforeMemory,
    })
}

/// Creates a ledger's table: the primary key is what refuses a second use, the index on
/// the expiry what keeps pruning cheap.
pub async fn create_ledger(manager: &SchemaManager<'_>, ledger: &Ledger) -> Result<(), DbErr> {
    manager
        .create_table(
            Table::create()
                .table(Alias::new(ledger.table))
                .if_not_exists()
                .col(string(Alias::new(ledger.owner)))
                .col(string(Alias::new(ledger.id)))
                .col(timestamp_with_time_zone(Alias::new(EXPIRES_AT)))
                .primary_key(
                    Index::create()
                        .col(Alias::new(ledger.owner))
                        .col(Alias::new(ledger.id)),
                )
                .to_owned(),
        )
        .await?;
    manager
        .create_index(
            Index::create()
                .if_not_exists()
                .name(format!("{}_{EXPIRES_AT}", ledger.table))
                .table(Alias::new(ledger.table))
                .col(Alias::new(EXPIRES_AT))
                .to_owned(),
        )
        .await
}

/// The migration that adds [`DPOP_PROOFS`], the same in both services' schemas.
pub struct CreateDpopProofs;

impl MigrationName for CreateDpopProofs {
    fn name(&self) -> &str {
        "m20261207_000001_create_dpop_proofs"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateDpopProofs {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        create_ledger(manager, &DPOP_PROOFS).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(
                Table::drop()
                    .table(Alias::new(DPOP_PROOFS.table))
                    .to_owned(),
            )
            .await
    }
}
