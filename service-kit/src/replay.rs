//! Single-use ids (DPoP proofs' and client assertions' `jti`s): each is remembered, in one
//! store every replica shares, for as long as the item that carries it could be accepted.
//!
//! The store is the service's database unless Redis is configured, then Redis. Nothing is
//! kept in process: a proof used at one replica is spent at all of them, and no table one
//! client can fill makes another client's ids look used. When the store cannot answer, the
//! caller is told so and refuses the request: an id that cannot be recorded is never taken
//! as new.

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
        Ok(Self { service, backend })
    }

    /// Which store this is, for logs: `database` or `redis`.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Database(_) => "database",
            Backend::Redis { .. } => "redis",
        }
    }

    /// Records `id` of `owner` as used until `keep_until`; true when it was not used before
    /// (or only by an item that has expired since).
    pub async fn first_use(
        &self,
        ledger: &Ledger,
        owner: &str,
        id: &str,
        keep_until: DateTime<Utc>,
    ) -> Result<bool, Unreachable> {
        let outcome = match &self.backend {
            Backend::Database(db) => spend_in_database(db, ledger, owner, id, keep_until).await,
            Backend::Redis { client, conn } => {
                spend_in_redis(client, conn, ledger, owner, id, keep_until).await
            }
        };
        if let Err(e) = &outcome {
            metrics::counter!("replay_store_errors_total", "service" => self.service, "store" => self.kind())
                .increment(1);
            tracing::warn!(error = %e, store = self.kind(), "single-use check failed: request refused");
        }
        outcome
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
) -> Result<bool, Unreachable> {
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
        Ok(Ok(done)) => Ok(done.rows_affected() == 1),
        Ok(Err(_)) => Err(Unreachable("database error")),
        Err(_) => Err(Unreachable("database timeout")),
    }
}

/// `SET NX` with the id's remaining life as its expiry: Redis forgets it when the item
/// could no longer be accepted, never before.
async fn spend_in_redis(
    client: &redis::Client,
    slot: &tokio::sync::Mutex<Option<ConnectionManager>>,
    ledger: &Ledger,
    owner: &str,
    id: &str,
    keep_until: DateTime<Utc>,
) -> Result<bool, Unreachable> {
    let mut conn = {
        let mut slot = slot.lock().await;
        match slot.as_ref() {
            Some(conn) => conn.clone(),
            None => {
                let conn = crate::ratelimit::connect(client, REDIS_TIMEOUT)
                    .await
                    .ok_or(Unreachable("redis connect"))?;
                *slot = Some(conn.clone());
                conn
            }
        }
    };
    let ttl_ms = Ord::max((keep_until - Utc::now()).num_milliseconds(), 1000);
    let key = format!("replay:{}:{owner}:{id}", ledger.table);
    let mut set = redis::cmd("SET");
    set.arg(&key).arg(1).arg("NX").arg("PX").arg(ttl_ms);
    match tokio::time::timeout(REDIS_TIMEOUT, set.query_async::<Option<String>>(&mut conn)).await {
        Ok(Ok(set)) => Ok(set.is_some()),
        Ok(Err(_)) => Err(Unreachable("redis command")),
        Err(_) => Err(Unreachable("redis timeout")),
    }
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
