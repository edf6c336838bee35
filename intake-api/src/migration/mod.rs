//! Schema migrations, run at start-up and by `intake-api migrate`.

use sea_orm::{ConnectionTrait, DatabaseBackend, DatabaseConnection, TransactionTrait};
use sea_orm_migration::prelude::*;

mod m20261125_000001_create_case_tables;

/// Every migration of the intake database, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![Box::new(m20261125_000001_create_case_tables::Migration)]
    }
}

/// Applies pending migrations. On PostgreSQL they run in one transaction under an
/// advisory lock, so replicas starting together do not race each other.
pub async fn run(db: &DatabaseConnection) -> Result<(), DbErr> {
    if db.get_database_backend() == DatabaseBackend::Postgres {
        let txn = db.begin().await?;
        txn.execute_unprepared("SELECT pg_advisory_xact_lock(7206114002)")
            .await?;
        Migrator::up(&txn, None).await?;
        txn.commit().await
    } else {
        Migrator::up(db, None).await
    }
}
