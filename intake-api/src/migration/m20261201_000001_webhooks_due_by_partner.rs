use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000001_webhooks_due_by_partner"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        // A claim walks one partner's pending events in the order they fall due and stops
        // after the few it takes, however long the backlog; the same index answers which
        // partners have anything due with one probe each. It replaces the index on the due
        // time alone, which served neither without reading every pending row.
        db.execute_unprepared(
            r#"CREATE INDEX "idx_webhook_deliveries_partner_due" ON "webhook_deliveries" ("client_id", "next_attempt_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#,
        )
        .await?;
        db.execute_unprepared(r#"DROP INDEX "idx_webhook_deliveries_due""#)
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(
            r#"CREATE INDEX "idx_webhook_deliveries_due" ON "webhook_deliveries" ("next_attempt_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#,
        )
        .await?;
        db.execute_unprepared(r#"DROP INDEX "idx_webhook_deliveries_partner_due""#)
            .await?;
        Ok(())
    }
}
