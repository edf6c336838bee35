//! A database per test: a SQLite file in a fresh directory, or a PostgreSQL database of its
//! own, removed when the test ends. A test that names a service's schema gets it already
//! migrated, copied from a template migrated once, the way crates.io's test databases are.

use std::path::{Path, PathBuf};

use sea_orm::{ConnectionTrait, Database, DatabaseBackend, DatabaseConnection, DbErr, Statement};
use sea_orm_migration::MigratorTrait;
use tokio::sync::OnceCell;

/// Which database a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file in a fresh temporary directory.
    Sqlite,
    /// A fresh database on the PostgreSQL server at `TEST_POSTGRES_URL`.
    Postgres,
}

/// The tables a test database starts with: one service's, migrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// The auth-server's.
    Auth,
    /// The intake-api's.
    Intake,
}

impl Schema {
    /// The service's short name, which names its databases.
    fn service(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::Intake => "intake",
        }
    }

    /// The names of the service's migrations, oldest first.
    fn migration_names(self) -> Vec<String> {
        let migrations = match self {
            Self::Auth => auth_server::migration::Migrator::migrations(),
            Self::Intake => intake_api::migration::Migrator::migrations(),
        };
        migrations.iter().map(|m| m.name().to_owned()).collect()
    }

    /// The template's name: a new migration makes a new template, so no test starts from an
    /// out-of-date one. (A migration edited in place keeps its name: remove its template
    /// after such an edit, as the README says.)
    fn template_name(self) -> String {
        format!(
            "{}_template_{:016x}",
            self.service(),
            fnv1a(self.migration_names().join("\n").as_bytes())
        )
    }

    async fn migrate(self, db: &DatabaseConnection) -> Result<(), DbErr> {
        match self {
            Self::Auth => auth_server::migration::SCHEMA.migrate(db).await,
            Self::Intake => intake_api::migration::SCHEMA.migrate(db).await,
        }
    }

    /// This process's note of the template's name, so it is looked for once per process.
    fn known(self, backend: Backend) -> &'static OnceCell<String> {
        static AUTH_SQLITE: OnceCell<String> = OnceCell::const_new();
        static AUTH_POSTGRES: OnceCell<String> = OnceCell::const_new();
        static INTAKE_SQLITE: OnceCell<String> = OnceCell::const_new();
        static INTAKE_POSTGRES: OnceCell<String> = OnceCell::const_new();
        match (self, backend) {
            (Self::Auth, Backend::Sqlite) => &AUTH_SQLITE,
            (Self::Auth, Backend::Postgres) => &AUTH_POSTGRES,
            (Self::Intake, Backend::Sqlite) => &INTAKE_SQLITE,
            (Self::Intake, Backend::Postgres) => &INTAKE_POSTGRES,
        }
    }
}

/// 64-bit FNV-1a: stable across builds and toolchains, unlike `std`'s hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where the PostgreSQL tests create their databases. The tests fail (never skip) when
/// this server does not answer.
pub fn postgres_admin_url() -> String {
    std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A database that exists for one test and is removed when dropped.
pub struct TestDb {
    /// URL to connect to it.
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    Dir(PathBuf),
    Postgres { admin_url: String, name: String },
}

impl TestDb {
    /// Creates an empty database; `prefix` names it after the service under test.
    pub async fn new(backend: Backend, prefix: &str) -> Self {
        Self::create(backend, prefix, None).await
    }

    /// Creates a database holding the auth-server's tables, migrated.
    pub async fn auth(backend: Backend) -> Self {
        Self::with_schema(backend, Schema::Auth).await
    }

    /// Creates a database holding the intake-api's tables, migrated.
    pub async fn intake(backend: Backend) -> Self {
        Self::with_schema(backend, Schema::Intake).await
    }

    /// Creates a database holding `schema`'s tables, migrated.
    pub async fn with_schema(backend: Backend, schema: Schema) -> Self {
        Self::create(backend, schema.service(), Some(schema)).await
    }

    async fn create(backend: Backend, prefix: &str, schema: Option<Schema>) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        match backend {
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!("{prefix}-test-{id}"));
                std::fs::create_dir_all(&dir).expect("temporary directory");
                let file = dir.join(format!("{prefix}.db"));
                if let Some(schema) = schema {
                    let template = sqlite_template(schema).await;
                    std::fs::copy(template, &file).expect("template copied");
                }
                Self {
                    url: format!("sqlite://{}?mode=rwc", file.display()),
                    cleanup: Cleanup::Dir(dir),
                }
            }
            Backend::Postgres => {
                let admin_url = postgres_admin_url();
                let name = format!("{prefix}_test_{id}").replace('-', "_");
                let create = match schema {
                    Some(schema) => {
                        let template = postgres_template(schema).await;
                        format!("CREATE DATABASE \"{name}\" TEMPLATE \"{template}\"")
                    }
                    None => format!("CREATE DATABASE \"{name}\""),
                };
                let admin = connect_admin(&admin_url).await;
                admin
                    .execute_unprepared(&create)
                    .await
                    .expect("create test database");
                let _ = admin.close().await;
                Self {
                    url: replace_database(&admin_url, &name),
                    cleanup: Cleanup::Postgres { admin_url, name },
                }
            }
        }
    }
}

async fn connect_admin(admin_url: &str) -> DatabaseConnection {
    Database::connect(admin_url).await.unwrap_or_else(|e| {
        panic!("PostgreSQL at TEST_POSTGRES_URL ({admin_url}) is required by this test: {e}")
    })
}

/// The advisory lock held while a template is made: test processes run at once, and each
/// template must be made by one of them only.
const TEMPLATE_LOCK: i64 = 7206114099;

/// The name of `schema`'s template database on PostgreSQL, made if this is the first test
/// to need it.
async fn postgres_template(schema: Schema) -> String {
    schema
        .known(Backend::Postgres)
        .get_or_init(|| make_postgres_template(schema))
        .await
        .clone()
}

async fn make_postgres_template(schema: Schema) -> String {
    let template = schema.template_name();
    let admin_url = postgres_admin_url();
    let admin = connect_admin(&admin_url).await;
    // The lock is held by a transaction; CREATE DATABASE cannot run inside one, so it runs
    // beside it on another of the pool's connections.
    let lock = sea_orm::TransactionTrait::begin(&admin)
        .await
        .expect("transaction");
    lock.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({TEMPLATE_LOCK})"))
        .await
        .expect("template lock");
    let exists = admin
        .query_one_raw(Statement::from_sql_and_values(
            DatabaseBackend::Postgres,
            "SELECT 1 FROM pg_database WHERE datname = $1",
            [template.clone().into()],
        ))
        .await
        .expect("pg_database")
        .is_some();
    if !exists {
        // Migrated under another name and renamed when done, so a process that died half-way
        // leaves no template to copy, only a leftover to drop.
        let building = format!("{template}_building");
        for sql in [
            format!("DROP DATABASE IF EXISTS \"{building}\" WITH (FORCE)"),
            format!("CREATE DATABASE \"{building}\""),
        ] {
            admin.execute_unprepared(&sql).await.expect(&sql);
        }
        let db = Database::connect(replace_database(&admin_url, &building))
            .await
            .expect("connect to the template");
        schema.migrate(&db).await.expect("template migrated");
        // CREATE DATABASE ... TEMPLATE refuses while anyone is connected to the template.
        db.close().await.expect("template connection closed");
        for sql in [
            format!("ALTER DATABASE \"{building}\" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"),
            format!("ALTER DATABASE \"{building}\" RENAME TO \"{template}\""),
        ] {
            admin.execute_unprepared(&sql).await.expect(&sql);
        }
    }
    lock.commit().await.expect("template lock released");
    let _ = admin.close().await;
    template
}

/// The path of `schema`'s template file for SQLite, made if this is the first test to need it.
async fn sqlite_template(schema: Schema) -> PathBuf {
    let path = schema
        .known(Backend::Sqlite)
        .get_or_init(|| make_sqlite_template(schema))
        .await;
    PathBuf::from(path)
}

async fn make_sqlite_template(schema: Schema) -> String {
    let dir = std::env::temp_dir().join("partner-intake-test-templates");
    std::fs::create_dir_all(&dir).expect("template directory");
    let template = dir.join(format!("{}.db", schema.template_name()));
    if !template.exists() {
        // Built under a name of its own and renamed into place, so no process copies a
        // half-migrated file; two processes building at once each rename a whole one.
        let id = uuid::Uuid::new_v4().simple();
        let building = dir.join(format!("{}.{id}.building", schema.template_name()));
        migrate_sqlite_file(&building, schema).await;
        std::fs::rename(&building, &template).expect("template renamed into place");
    }
    template.display().to_string()
}

/// Migrates a new SQLite file at `path`. sqlx leaves SQLite's rollback journal on, so the
/// file holds everything once closed: no write-ahead log stays beside it.
async fn migrate_sqlite_file(path: &Path, schema: Schema) {
    let db = Database::connect(format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .expect("template file");
    schema.migrate(&db).await.expect("template migrated");
    db.close().await.expect("template closed");
}

/// `url` pointing at database `name` instead.
fn replace_database(url: &str, name: &str) -> String {
    let mut url = url::Url::parse(url).expect("TEST_POSTGRES_URL is a URL");
    url.set_path(&format!("/{name}"));
    url.into()
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Postgres { admin_url, name } => {
                let (admin_url, name) = (admin_url.clone(), name.clone());
                // Drop runs inside the test's runtime: use a thread with its own.
                let _ = std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    rt.block_on(async {
                        if let Ok(admin) = Database::connect(admin_url.as_str()).await {
                            let _ = admin
                                .execute_unprepared(&format!(
                                    "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                                ))
                                .await;
                            let _ = admin.close().await;
                        }
                    });
                })
                .join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_name_is_swapped_in_a_postgres_url() {
        assert_eq!(
            replace_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            replace_database("postgres://u:p@h/db?sslmode=disable", "y"),
            "postgres://u:p@h/y?sslmode=disable"
        );
        assert_eq!(replace_database("postgres://h", "z"), "postgres://h/z");
    }

    #[test]
    fn a_template_is_named_after_its_service_and_migrations() {
        for schema in [Schema::Auth, Schema::Intake] {
            let name = schema.template_name();
            assert!(name.starts_with(&format!("{}_template_", schema.service())));
            // PostgreSQL truncates identifiers at 63 bytes, with `_building` added while made.
            assert!(name.len() + "_building".len() <= 63, "{name}");
            assert_eq!(name, schema.template_name(), "stable");
        }
        assert_ne!(Schema::Auth.template_name(), Schema::Intake.template_name());
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    /// Every migration of the service is recorded as applied, and its tables are there.
    async fn starts_migrated(db: &TestDb, schema: Schema, table: &str) {
        let conn = Database::connect(db.url.as_str())
            .await
            .expect("test database");
        let backend = conn.get_database_backend();
        let applied = conn
            .query_all_raw(Statement::from_string(
                backend,
                "SELECT version FROM seaql_migrations ORDER BY version",
            ))
            .await
            .expect("migrations recorded")
            .iter()
            .map(|row| row.try_get::<String>("", "version").expect("version"))
            .collect::<Vec<_>>();
        assert_eq!(applied, schema.migration_names());
        conn.execute_unprepared(&format!("SELECT count(*) FROM {table}"))
            .await
            .unwrap_or_else(|e| panic!("{table} missing: {e}"));
        let _ = conn.close().await;
    }

    async fn each_test_database_starts_with_its_services_tables_migrated(backend: Backend) {
        let (auth, intake) = (TestDb::auth(backend).await, TestDb::intake(backend).await);
        starts_migrated(&auth, Schema::Auth, "signing_keys").await;
        starts_migrated(&intake, Schema::Intake, "cases").await;
        // A second one is a copy as well, not the first test's database.
        let again = TestDb::intake(backend).await;
        assert_ne!(again.url, intake.url);
        starts_migrated(&again, Schema::Intake, "cases").await;
    }

    #[tokio::test]
    async fn each_test_database_starts_with_its_services_tables_migrated_on_sqlite() {
        each_test_database_starts_with_its_services_tables_migrated(Backend::Sqlite).await
    }

    #[tokio::test]
    async fn each_test_database_starts_with_its_services_tables_migrated_on_postgres() {
        each_test_database_starts_with_its_services_tables_migrated(Backend::Postgres).await
    }
}
