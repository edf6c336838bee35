//! Delivery history partners read: each try of an event (when, the answer's status or why
//! none came, how long it took, when the next one is due) in `webhook_attempts`, and an
//! index of a partner's settled events (delivered or given up on) newest first: an event's
//! id is a UUIDv7, so its order is the order of time. The index is partial so that queueing
//! and claiming an event (the hot paths) never touch it; only the write that settles it
//! does. Pending events are found by the pending indexes the worker already has.
//!
//! Tries are keyed by their event first, as deliveries are: whatever removes events (the
//! retention, a sandbox case's end, an endpoint's removal) finds their tries by the ids.
//!
//! Expand only: earlier releases neither read nor write either, so they run beside this one
//! during a rolling upgrade, and their tries are missing from the history meanwhile.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261209_000001_webhook_attempts"
    }
}

#[derive(DeriveIden)]
enum WebhookAttempts {
    Table,
    EndpointId,
    DeliveryId,
    Attempt,
    AttemptedAt,
    Status,
    Error,
    DurationMs,
    NextAttemptAt,
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
}

/// A partner's settled events, newest first.
const HISTORY_INDEX: &str = "idx_webhook_deliveries_history";
const HISTORY_INDEX_SQL: &str = r#"CREATE INDEX "idx_webhook_deliveries_history" ON "webhook_deliveries" ("client_id", "id") WHERE "delivered_at" IS NOT NULL OR "failed_at" IS NOT NULL"#;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WebhookAttempts::Table)
                    .col(uuid(WebhookAttempts::DeliveryId))
                    .col(uuid(WebhookAttempts::EndpointId))
                    .col(integer(WebhookAttempts::Attempt))
                    .col(timestamp_with_time_zone(WebhookAttempts::AttemptedAt))
                    .col(small_integer_null(WebhookAttempts::Status))
                    .col(text_null(WebhookAttempts::Error))
                    .col(integer(WebhookAttempts::DurationMs))
                    .col(timestamp_with_time_zone_null(
                        WebhookAttempts::NextAttemptAt,
                    ))
                    .primary_key(
                        Index::create()
                            .col(WebhookAttempts::DeliveryId)
                            .col(WebhookAttempts::EndpointId)
                            .col(WebhookAttempts::Attempt),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        db.execute_unprepared(HISTORY_INDEX_SQL).await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(HISTORY_INDEX)
                    .table(WebhookDeliveries::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table(WebhookAttempts::Table).to_owned())
            .await
    }
}
