use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261129_000001_redirect_tokens_by_case"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Redeeming a link asks whether its case has a newer one: one probe of this index,
        // however many links were ever made.
        manager
            .get_connection()
            .execute_unprepared(
                r#"CREATE INDEX "idx_redirect_tokens_case_id_created_at" ON "redirect_tokens" ("case_id", "created_at")"#,
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(r#"DROP INDEX IF EXISTS "idx_redirect_tokens_case_id_created_at""#)
            .await?;
        Ok(())
    }
}
