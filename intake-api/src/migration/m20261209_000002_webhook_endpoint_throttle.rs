//! Per-endpoint settings of the delivery worker and of operators' view: `rate_limit`, the
//! events a second its partner lets us send it (null: as fast as it answers), and
//! `changed_by`, who made the endpoint's last change (its partner, an operator, or the
//! worker disabling it). Nullable columns: earlier releases neither read nor write them
//! (a rate limit set while they run holds only on this release's replicas).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261209_000002_webhook_endpoint_throttle"
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    RateLimit,
    ChangedBy,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column a statement: SQLite adds one at a time.
        for column in [
            integer_null(WebhookEndpoints::RateLimit),
            string_null(WebhookEndpoints::ChangedBy),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookEndpoints::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [WebhookEndpoints::ChangedBy, WebhookEndpoints::RateLimit] {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookEndpoints::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
