use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000001_sandbox_cases"
    }
}

#[derive(DeriveIden)]
enum Cases {
    Table,
    Sandbox,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // A sandbox client's cases live beside the real ones: one case per brand and e-mail
        // in each, so a partner practising with a real customer's address makes a case of
        // its own instead of changing the customer's. Every existing case is real.
        manager
            .alter_table(
                Table::alter()
                    .table(Cases::Table)
                    .add_column(boolean(Cases::Sandbox).default(false))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        db.execute_unprepared(
            r#"CREATE UNIQUE INDEX "ux_cases_brand_email_sandbox" ON "cases" ("brand", "email", "sandbox")"#,
        )
        .await?;
        db.execute_unprepared(r#"DROP INDEX "ux_cases_brand_email""#)
            .await?;
        // Sandbox cases past their retention are found without reading the real ones.
        db.execute_unprepared(
            r#"CREATE INDEX "idx_cases_sandbox_created_at" ON "cases" ("created_at") WHERE "sandbox""#,
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(r#"DROP INDEX "idx_cases_sandbox_created_at""#)
            .await?;
        // Sandbox cases go first: beside real ones, they would break the old key.
        db.execute_unprepared(r#"DELETE FROM "cases" WHERE "sandbox""#)
            .await?;
        db.execute_unprepared(
            r#"CREATE UNIQUE INDEX "ux_cases_brand_email" ON "cases" ("brand", "email")"#,
        )
        .await?;
        db.execute_unprepared(r#"DROP INDEX "ux_cases_brand_email_sandbox""#)
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Cases::Table)
                    .drop_column(Cases::Sandbox)
                    .to_owned(),
            )
            .await
    }
}
