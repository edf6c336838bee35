//! Database connection set-up shared by both services: SQLite for the embedded default,
//! PostgreSQL in production, with the same timeouts on both.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection};
use url::Url;

/// How long a query may wait for a pooled connection before the request fails fast.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an operator command waits for its first connection: longer than a request
/// may, since nobody is queued behind it, and a command run in a container just started
/// met slow first connections and failed name lookups (looked up again meanwhile).
pub const OPERATOR_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one statement may run on PostgreSQL.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to `url` (`sqlite://...` or `postgres://...`), creating the SQLite file's
/// directory when it does not exist yet.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<DatabaseConnection> {
    if let Some(dir) = sqlite_file(url).as_deref().and_then(Path::parent)
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the database directory {}", dir.display()))?;
    }
    connect_pool(url, max_connections, true, ACQUIRE_TIMEOUT).await
}

/// A pool whose connections, new or pooled, are waited for `wait` at most (sea-orm gives
/// sqlx one timeout for both).
async fn connect_pool(
    url: &str,
    max_connections: u32,
    create: bool,
    wait: Duration,
) -> anyhow::Result<DatabaseConnection> {
    let mut opts = ConnectOptions::new(url.to_owned());
    opts.max_connections(max_connections)
        .min_connections(1)
        .connect_timeout(wait)
        .acquire_timeout(wait)
        .idle_timeout(Duration::from_secs(300))
        // No ping before every checkout: it is a round trip per request. A connection that
        // died meanwhile fails its query instead (answered 503) and leaves the pool.
        .test_before_acquire(false)
        .sqlx_logging(false)
        .map_sqlx_sqlite_opts(move |o| {
            // WAL lets readers run beside the one writer; the busy timeout makes writers
            // from several processes (the CLI beside a running server) queue, not fail.
            let o = o
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(5))
                .foreign_keys(true);
            if create {
                o
            } else {
                o.create_if_missing(false)
            }
        });
    if url.starts_with("postgres") {
        opts.statement_timeout(STATEMENT_TIMEOUT);
    }
    Database::connect(opts)
        .await
        .with_context(|| format!("cannot connect to the database at {}", redact_url(url)))
}

/// The file of a file-backed SQLite URL, if `url` is one, as sqlx itself reads it.
fn sqlite_file(url: &str) -> Option<PathBuf> {
    if !url.starts_with("sqlite:") {
        return None;
    }
    if url.contains(":memory:") || url.contains("mode=memory") {
        return None;
    }
    let options = SqliteConnectOptions::from_str(url).ok()?;
    Some(options.get_filename().to_owned())
}

/// A database an operator command needs is missing, unreachable or not migrated.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DatabaseNotReady(String);

/// Opens the existing database at `url`, migrated to `M`, for an operator command of
/// `binary`: nothing is created and no migration runs, so a command pointed at the wrong
/// place fails instead of working on a new, empty database.
pub async fn open_existing<M: sea_orm_migration::MigratorTrait>(
    url: &str,
    max_connections: u32,
    binary: &str,
) -> anyhow::Result<DatabaseConnection> {
    if let Some(file) = sqlite_file(url)
        && !file.exists()
    {
        return Err(DatabaseNotReady(format!(
            "there is no database at {}; run `{binary} migrate` with it first (nothing was \
             created)",
            file.display()
        ))
        .into());
    }
    let db = connect_looking_up(url, max_connections, OPERATOR_CONNECT_TIMEOUT)
        .await
        .map_err(|e| DatabaseNotReady(format!("{e:#}")))?;
    check_schema::<M>(&db, url, binary).await?;
    Ok(db)
}

/// How long to wait before looking the database's host up again.
const LOOKUP_RETRY: Duration = Duration::from_millis(500);

/// Connects as [`connect_pool`] does, for operator commands, looking the host up again
/// until `wait` has passed when its name did not resolve: the driver retries a refused
/// connection but not a failed lookup, and a command started in a container just started
/// (or on a busy host) met its resolver not answering yet.
async fn connect_looking_up(
    url: &str,
    max_connections: u32,
    wait: Duration,
) -> anyhow::Result<DatabaseConnection> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match connect_pool(url, max_connections, false, left.max(LOOKUP_RETRY)).await {
            Err(e) if lookup_failed(&e) && left > LOOKUP_RETRY => {
                tokio::time::sleep(LOOKUP_RETRY).await;
            }
            answer => return answer,
        }
    }
}

/// Whether `e` is a failed look-up of the database's host name (the standard library's
/// words for any `getaddrinfo` failure).
fn lookup_failed(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .to_string()
            .contains("failed to lookup address information")
    })
}

/// Where the database's schema stands against the migrations this build knows.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SchemaStatus {
    /// No migration of this service has ever been applied (no migration table).
    pub empty: bool,
    /// This build's migrations the database has not had, oldest first.
    pub pending: Vec<String>,
    /// Migrations applied by a later release, which this build does not know.
    pub newer: Vec<String>,
}

/// Reads which of `M`'s migrations `db` has had, without changing anything: the migration
/// library itself refuses a database that has a migration it does not know, which would
/// stop an earlier release from running beside (or instead of) the release that migrated.
pub async fn schema_status<'c, M: sea_orm_migration::MigratorTrait>(
    db: impl sea_orm_migration::IntoSchemaManagerConnection<'c>,
) -> Result<SchemaStatus, sea_orm::DbErr> {
    use sea_orm::EntityTrait;
    use sea_orm_migration::seaql_migrations;
    let known: Vec<String> = M::migrations()
        .iter()
        .map(|m| m.name().to_owned())
        .collect();
    let table = M::migration_table_name().to_string();
    let manager = sea_orm_migration::SchemaManager::new(db);
    if !manager.has_table(&table).await? {
        return Ok(SchemaStatus {
            empty: true,
            pending: known,
            newer: Vec::new(),
        });
    }
    let applied: Vec<String> = seaql_migrations::Entity::find()
        .all(manager.get_connection())
        .await?
        .into_iter()
        .map(|row| row.version)
        .collect();
    let mut newer: Vec<String> = applied
        .iter()
        .filter(|v| !known.contains(v))
        .cloned()
        .collect();
    newer.sort();
    Ok(SchemaStatus {
        empty: applied.is_empty(),
        pending: known.into_iter().filter(|m| !applied.contains(m)).collect(),
        newer,
    })
}

/// Fails unless `db` has every migration of `M`, which a server or command of `binary`
/// needs; migrations of a later release are logged and left alone, since each release's
/// migrations keep the previous release working (README, "Upgrades and rollbacks").
pub async fn check_schema<M: sea_orm_migration::MigratorTrait>(
    db: &DatabaseConnection,
    url: &str,
    binary: &str,
) -> anyhow::Result<()> {
    let status = schema_status::<M>(db)
        .await
        .map_err(|e| DatabaseNotReady(format!("cannot read the database's schema version: {e}")))?;
    let described = redact_url(url);
    if status.empty {
        return Err(DatabaseNotReady(format!(
            "the database at {described} has no {binary} schema; run `{binary} migrate` with \
             it first"
        ))
        .into());
    }
    if !status.pending.is_empty() {
        return Err(DatabaseNotReady(format!(
            "the database at {described} is behind this version of {binary} ({} migration(s) \
             pending: {}); run `{binary} migrate` with it first",
            status.pending.len(),
            status.pending.join(", ")
        ))
        .into());
    }
    log_newer(&status.newer);
    Ok(())
}

fn log_newer(newer: &[String]) {
    if !newer.is_empty() {
        tracing::info!(
            migrations = %newer.join(", "),
            "the database has migrations of a later release; this release runs on it unchanged"
        );
    }
}

/// `url` with any password replaced, fit for logs and errors.
pub fn redact_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        // Whatever it holds stays unsaid.
        Err(_) => "(an unreadable database URL)".to_owned(),
    }
}

/// Applies `M`'s pending migrations in one transaction. On PostgreSQL it runs under an
/// advisory lock (`lock_id`, one per service), so replicas starting together do not race.
/// Migrations of a later release are left as they are; a database that has those and lacks
/// some of ours was migrated by another line of releases, and is refused.
pub async fn migrate<M: sea_orm_migration::MigratorTrait>(
    db: &DatabaseConnection,
    lock_id: i64,
) -> Result<(), sea_orm::DbErr> {
    use sea_orm::{ConnectionTrait, DatabaseBackend, TransactionTrait};
    let txn = db.begin().await?;
    if db.get_database_backend() == DatabaseBackend::Postgres {
        txn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({lock_id})"))
            .await?;
    }
    let status = schema_status::<M>(&txn).await?;
    if status.newer.is_empty() {
        M::up(&txn, None).await?;
    } else if status.pending.is_empty() {
        log_newer(&status.newer);
    } else {
        return Err(sea_orm::DbErr::Migration(format!(
            "the database has migrations this release does not know ({}) and lacks some it \
             needs ({}): it was migrated by a release of another line; nothing was changed",
            status.newer.join(", "),
            status.pending.join(", ")
        )));
    }
    txn.commit().await
}

/// Connects to `url` with a pool of `max_connections`, after applying `M`'s pending
/// migrations ([`migrate`]).
pub async fn connect_migrated<M: sea_orm_migration::MigratorTrait>(
    url: &str,
    max_connections: u32,
    lock_id: i64,
) -> anyhow::Result<DatabaseConnection> {
    // SQLite caches the schema per connection, and a connection that cached it while a
    // migration was changing it can fail to prepare statements that need the new indexes
    // (an upsert's `ON CONFLICT` target): migrate on a connection of its own, then open the
    // pool on the finished schema.
    let migrating = connect(url, 1).await?;
    migrate::<M>(&migrating, lock_id)
        .await
        .context("database migration failed")?;
    migrating.close().await?;
    connect(url, max_connections).await
}

/// One service's schema as its binary handles it: its migrations (`M`), the PostgreSQL
/// advisory lock they run under, and the binary named in what an operator is told to run.
pub struct Schema<M> {
    lock_id: i64,
    binary: &'static str,
    migrator: std::marker::PhantomData<fn() -> M>,
}

impl<M: sea_orm_migration::MigratorTrait> Schema<M> {
    /// The schema of `binary`, whose migrations take the advisory lock `lock_id`.
    pub const fn new(lock_id: i64, binary: &'static str) -> Self {
        Self {
            lock_id,
            binary,
            migrator: std::marker::PhantomData,
        }
    }

    /// Applies pending migrations ([`migrate`]).
    pub async fn migrate(&self, db: &DatabaseConnection) -> Result<(), sea_orm::DbErr> {
        migrate::<M>(db, self.lock_id).await
    }

    /// A pool of `max_connections` on the database at `url`, migrated first.
    pub async fn connect(
        &self,
        url: &str,
        max_connections: u32,
    ) -> anyhow::Result<DatabaseConnection> {
        connect_migrated::<M>(url, max_connections, self.lock_id).await
    }

    /// The pool a server runs on: migrated first when `migrate` says so (the one-process
    /// launcher, SQLite), otherwise only checked to have every migration this build needs
    /// ([`check_schema`]), since in production `migrate` runs once, before a new release's
    /// replicas start, and serving replicas of the previous release keep running beside
    /// them.
    pub async fn connect_serving(
        &self,
        url: &str,
        max_connections: u32,
        migrate: bool,
    ) -> anyhow::Result<DatabaseConnection> {
        if migrate {
            return self.connect(url, max_connections).await;
        }
        self.open_existing(url, max_connections).await
    }

    /// The existing, migrated database for an operator command ([`open_existing`]).
    pub async fn open_existing(
        &self,
        url: &str,
        max_connections: u32,
    ) -> anyhow::Result<DatabaseConnection> {
        open_existing::<M>(url, max_connections, self.binary).await
    }
}

/// Whether a server migrates its database at start when not told: yes for SQLite, which
/// has one process serving it; no for PostgreSQL, where replicas of two releases may share
/// it during a rolling upgrade and `migrate` is a step of its own.
pub fn migrates_by_default(url: &str) -> bool {
    url.starts_with("sqlite:")
}

/// A migration only rehearsal builds have (each service's `upgrade-rehearsal` feature): a
/// nullable column on `table` that no release reads, the kind of change the expand rule
/// allows, so that an upgrade and its rollback can be rehearsed (scripts/check-upgrade.sh)
/// before a next release exists.
pub struct RehearsalMigration(pub &'static str);

impl sea_orm_migration::MigrationName for RehearsalMigration {
    fn name(&self) -> &str {
        "m29991231_000001_upgrade_rehearsal"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl sea_orm_migration::MigrationTrait for RehearsalMigration {
    async fn up(&self, manager: &sea_orm_migration::SchemaManager) -> Result<(), sea_orm::DbErr> {
        use sea_orm_migration::prelude::{Alias, ColumnDef, Table};
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new(self.0))
                    .add_column(
                        ColumnDef::new(Alias::new("upgrade_rehearsal"))
                            .text()
                            .null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &sea_orm_migration::SchemaManager) -> Result<(), sea_orm::DbErr> {
        use sea_orm_migration::prelude::{Alias, Table};
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new(self.0))
                    .drop_column(Alias::new("upgrade_rehearsal"))
                    .to_owned(),
            )
            .await
    }
}

/// Publishes the pool's use as gauges every few seconds, until the task is aborted.
pub async fn report_pool_use(service: &'static str, db: DatabaseConnection) {
    use sea_orm::DatabaseBackend;
    loop {
        let (size, idle) = match db.get_database_backend() {
            DatabaseBackend::Postgres => {
                let p = db.get_postgres_connection_pool();
                (p.size(), p.num_idle() as u32)
            }
            DatabaseBackend::Sqlite => {
                let p = db.get_sqlite_connection_pool();
                (p.size(), p.num_idle() as u32)
            }
            _ => return,
        };
        metrics::gauge!("db_pool_connections", "service" => service, "state" => "in_use")
            .set(f64::from(size.saturating_sub(idle)));
        metrics::gauge!("db_pool_connections", "service" => service, "state" => "idle")
            .set(f64::from(idle));
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_files_are_found_for_relative_and_absolute_paths() {
        assert_eq!(
            sqlite_file("sqlite://data/auth.db?mode=rwc"),
            Some(PathBuf::from("data/auth.db"))
        );
        assert_eq!(
            sqlite_file("sqlite:///tmp/x/a.db"),
            Some(PathBuf::from("/tmp/x/a.db"))
        );
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://localhost/test"), None);
    }

    /// A host whose name does not resolve is looked up again until the wait is over, then
    /// the command is told why.
    #[tokio::test]
    async fn a_failed_lookup_is_tried_again_until_the_wait_ends() {
        let started = std::time::Instant::now();
        let wait = Duration::from_millis(1600);
        let e = connect_looking_up("postgres://u@no-such-host.invalid/db", 1, wait)
            .await
            .expect_err("nothing there");
        assert!(lookup_failed(&e), "{e:#}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1000),
            "gave up after {took:?}"
        );
        // Anything else is answered at once: a refused connection is the driver's to retry.
        let e = connect_looking_up("sqlite:///no/such/dir/x.db?mode=ro", 1, wait)
            .await
            .expect_err("no file");
        assert!(!lookup_failed(&e), "{e:#}");
    }

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db:5432/auth"),
            "postgres://app:***@db:5432/auth"
        );
        assert_eq!(
            redact_url("postgres://root@127.0.0.1/test"),
            "postgres://root@127.0.0.1/test"
        );
    }
}
