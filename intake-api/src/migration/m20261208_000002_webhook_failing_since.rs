//! When an endpoint's deliveries started failing (null while they go through), so one that
//! fails for longer than the deployment allows is disabled, and its partner sees since when.
//! A nullable column: earlier releases neither read nor write it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261208_000002_webhook_failing_since"
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    FailingSince,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookEndpoints::Table)
                    .add_column(timestamp_with_time_zone_null(
                        WebhookEndpoints::FailingSince,
                    ))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookEndpoints::Table)
                    .drop_column(WebhookEndpoints::FailingSince)
                    .to_owned(),
            )
            .await
    }
}
