use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000001_submissions_by_partner"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        // Attach asks whether the calling partner has a submission on a case: one probe of
        // this index, however many submissions other partners made on it. It serves lookups
        // by case alone as the old index did.
        db.execute_unprepared(
            r#"CREATE INDEX "idx_submissions_case_id_client_id" ON "submissions" ("case_id", "client_id")"#,
        )
        .await?;
        db.execute_unprepared(r#"DROP INDEX IF EXISTS "idx_submissions_case_id""#)
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(
            r#"CREATE INDEX "idx_submissions_case_id" ON "submissions" ("case_id")"#,
        )
        .await?;
        db.execute_unprepared(r#"DROP INDEX IF EXISTS "idx_submissions_case_id_client_id""#)
            .await?;
        Ok(())
    }
}
