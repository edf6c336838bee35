//! `resend_requests` on each webhook endpoint: how many times a partner or an operator asked
//! for its events to be sent again (redeliver, recover). Every replica reads it with its
//! look for due endpoints, so a request made at any replica, or by the CLI, cuts short the
//! wait a replica keeps between tries of an endpoint that looked down. Nullable: earlier
//! releases neither read nor write it (their replicas keep their own waits).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261210_000001_webhook_resend_requests"
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    ResendRequests,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookEndpoints::Table)
                    .add_column(big_integer_null(WebhookEndpoints::ResendRequests))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookEndpoints::Table)
                    .drop_column(WebhookEndpoints::ResendRequests)
                    .to_owned(),
            )
            .await
    }
}
