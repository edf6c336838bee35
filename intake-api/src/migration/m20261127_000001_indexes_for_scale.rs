use sea_orm::DatabaseBackend;
use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000001_indexes_for_scale"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        // At millions of cases every update and attach wrote a new entry into every index
        // of `cases`, as `updated_at` was indexed: no update could stay on its page (HOT).
        // Attach finds a customer's case by e-mail alone (one row per brand at most).
        db.execute_unprepared(r#"DROP INDEX IF EXISTS "idx_cases_email_updated_at""#)
            .await?;
        db.execute_unprepared(r#"CREATE INDEX "idx_cases_email" ON "cases" ("email")"#)
            .await?;
        // Activation looks only at pending cases: an index of those alone stays small
        // however many cases are active.
        db.execute_unprepared(r#"DROP INDEX IF EXISTS "idx_cases_status_activates_at""#)
            .await?;
        db.execute_unprepared(
            r#"CREATE INDEX "idx_cases_pending_activates_at" ON "cases" ("activates_at") WHERE "status" = 'pending_activation'"#,
        )
        .await?;
        if db.get_database_backend() == DatabaseBackend::Postgres {
            // Room on each page for an updated row's new version beside the old one.
            db.execute_unprepared(r#"ALTER TABLE "cases" SET (fillfactor = 80)"#)
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for statement in [
            r#"DROP INDEX IF EXISTS "idx_cases_pending_activates_at""#,
            r#"DROP INDEX IF EXISTS "idx_cases_email""#,
            r#"CREATE INDEX "idx_cases_status_activates_at" ON "cases" ("status", "activates_at")"#,
            r#"CREATE INDEX "idx_cases_email_updated_at" ON "cases" ("email", "updated_at")"#,
        ] {
            db.execute_unprepared(statement).await?;
        }
        Ok(())
    }
}
