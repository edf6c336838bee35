use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261129_000004_case_redirect_token"
    }
}

#[derive(DeriveIden)]
enum Cases {
    Table,
    RedirectTokenId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // The case names its newest link, set by the attach's update of the case row it
        // makes anyway: redeeming an older link is refused without the index of links by
        // case, which cost every attach an index entry.
        manager
            .alter_table(
                Table::alter()
                    .table(Cases::Table)
                    .add_column(uuid_null(Cases::RedirectTokenId))
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(r#"DROP INDEX IF EXISTS "idx_redirect_tokens_case_id_created_at""#)
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                r#"CREATE INDEX "idx_redirect_tokens_case_id_created_at" ON "redirect_tokens" ("case_id", "created_at")"#,
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Cases::Table)
                    .drop_column(Cases::RedirectTokenId)
                    .to_owned(),
            )
            .await
    }
}
