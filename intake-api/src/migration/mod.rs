//! Schema migrations, run at start-up and by `intake-api migrate`.

use sea_orm::DatabaseConnection;
use sea_orm_migration::prelude::*;

mod m20261125_000001_create_case_tables;
mod m20261127_000001_indexes_for_scale;
mod m20261128_000001_submissions_by_partner;
mod m20261129_000001_redirect_tokens_by_case;
mod m20261129_000002_idempotency_keys;
mod m20261129_000003_webhooks;
mod m20261129_000004_case_redirect_token;

/// Every migration of the intake database, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        #[allow(unused_mut)]
        let mut migrations: Vec<Box<dyn MigrationTrait>> = vec![
            Box::new(m20261125_000001_create_case_tables::Migration),
            Box::new(m20261127_000001_indexes_for_scale::Migration),
            Box::new(m20261128_000001_submissions_by_partner::Migration),
            Box::new(m20261129_000001_redirect_tokens_by_case::Migration),
            Box::new(m20261129_000002_idempotency_keys::Migration),
            Box::new(m20261129_000003_webhooks::Migration),
            Box::new(m20261129_000004_case_redirect_token::Migration),
        ];
        #[cfg(feature = "upgrade-rehearsal")]
        migrations.push(Box::new(service_kit::db::RehearsalMigration("cases")));
        migrations
    }
}

/// Applies pending migrations (see [`service_kit::db::migrate`]).
pub async fn run(db: &DatabaseConnection) -> Result<(), DbErr> {
    service_kit::db::migrate::<Migrator>(db, LOCK_ID).await
}

/// A pool of `max_connections` on the migrated database at `url`.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<DatabaseConnection> {
    service_kit::db::connect_migrated::<Migrator>(url, max_connections, LOCK_ID).await
}

/// A pool of `max_connections` for the server on the database at `url`, migrated first when
/// `migrate` says so, otherwise checked ([`service_kit::db::connect_serving`]).
pub async fn connect_serving(
    url: &str,
    max_connections: u32,
    migrate: bool,
) -> anyhow::Result<DatabaseConnection> {
    service_kit::db::connect_serving::<Migrator>(
        url,
        max_connections,
        LOCK_ID,
        migrate,
        "intake-api",
    )
    .await
}

/// The existing, migrated database at `url`, for an operator command: nothing is created
/// or migrated ([`service_kit::db::open_existing`]).
pub async fn open_existing(url: &str, max_connections: u32) -> anyhow::Result<DatabaseConnection> {
    service_kit::db::open_existing::<Migrator>(url, max_connections, "intake-api").await
}

/// The PostgreSQL advisory lock migrations of this database run under.
const LOCK_ID: i64 = 7206114002;
