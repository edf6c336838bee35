use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261129_000003_webhooks"
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    ClientId,
    Url,
    Secret,
    PreviousSecret,
    PreviousSecretUntil,
    DisabledAt,
    DisabledReason,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    Id,
    ClientId,
    CaseId,
    EventType,
    CreatedAt,
    NextAttemptAt,
    LockedUntil,
    Attempts,
    DeliveredAt,
    FailedAt,
    LastStatus,
    LastError,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WebhookEndpoints::Table)
                    .col(string(WebhookEndpoints::ClientId).primary_key())
                    .col(text(WebhookEndpoints::Url))
                    .col(string(WebhookEndpoints::Secret))
                    .col(string_null(WebhookEndpoints::PreviousSecret))
                    .col(timestamp_with_time_zone_null(
                        WebhookEndpoints::PreviousSecretUntil,
                    ))
                    .col(timestamp_with_time_zone_null(WebhookEndpoints::DisabledAt))
                    .col(string_null(WebhookEndpoints::DisabledReason))
                    .col(timestamp_with_time_zone(WebhookEndpoints::CreatedAt))
                    .col(timestamp_with_time_zone(WebhookEndpoints::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(WebhookDeliveries::Table)
                    .col(uuid(WebhookDeliveries::Id))
                    .col(string(WebhookDeliveries::ClientId))
                    .col(uuid(WebhookDeliveries::CaseId))
                    .col(string(WebhookDeliveries::EventType))
                    .col(timestamp_with_time_zone(WebhookDeliveries::CreatedAt))
                    .col(timestamp_with_time_zone(WebhookDeliveries::NextAttemptAt))
                    .col(timestamp_with_time_zone_null(
                        WebhookDeliveries::LockedUntil,
                    ))
                    .col(integer(WebhookDeliveries::Attempts))
                    .col(timestamp_with_time_zone_null(
                        WebhookDeliveries::DeliveredAt,
                    ))
                    .col(timestamp_with_time_zone_null(WebhookDeliveries::FailedAt))
                    .col(small_integer_null(WebhookDeliveries::LastStatus))
                    .col(text_null(WebhookDeliveries::LastError))
                    .primary_key(
                        Index::create()
                            .col(WebhookDeliveries::Id)
                            .col(WebhookDeliveries::ClientId),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        // The worker's question, "what is due", reads only the pending deliveries, in the
        // order each partner's events for a case must go.
        db.execute_unprepared(
            r#"CREATE INDEX "idx_webhook_deliveries_pending" ON "webhook_deliveries" ("client_id", "case_id", "created_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#,
        )
        .await?;
        db.execute_unprepared(
            r#"CREATE INDEX "idx_webhook_deliveries_due" ON "webhook_deliveries" ("next_attempt_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#,
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(WebhookDeliveries::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(WebhookEndpoints::Table).to_owned())
            .await
    }
}
