//! Schema migrations, run at start-up and by `auth-server migrate`.

use sea_orm::DatabaseConnection;
use sea_orm_migration::prelude::*;

mod m20261125_000001_create_auth_tables;

/// Every migration of the auth-server database, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![Box::new(m20261125_000001_create_auth_tables::Migration)]
    }
}

/// Applies pending migrations (see [`intake_shared::db::migrate`]).
pub async fn run(db: &DatabaseConnection) -> Result<(), DbErr> {
    intake_shared::db::migrate::<Migrator>(db, 7206114001).await
}
