use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261129_000002_idempotency_keys"
    }
}

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    ClientId,
    IdemKey,
    Operation,
    RequestHash,
    Attempt,
    LockedUntil,
    Status,
    Response,
    CreatedAt,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyKeys::Table)
                    .col(string(IdempotencyKeys::ClientId))
                    .col(string(IdempotencyKeys::IdemKey))
                    .col(string(IdempotencyKeys::Operation))
                    .col(string(IdempotencyKeys::RequestHash))
                    .col(uuid(IdempotencyKeys::Attempt))
                    .col(timestamp_with_time_zone_null(IdempotencyKeys::LockedUntil))
                    .col(small_integer_null(IdempotencyKeys::Status))
                    .col(text_null(IdempotencyKeys::Response))
                    .col(timestamp_with_time_zone(IdempotencyKeys::CreatedAt))
                    .col(timestamp_with_time_zone(IdempotencyKeys::ExpiresAt))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyKeys::ClientId)
                            .col(IdempotencyKeys::IdemKey),
                    )
                    .to_owned(),
            )
            .await?;
        // The purge of expired keys finds them without reading the others.
        manager
            .create_index(
                Index::create()
                    .name("idx_idempotency_keys_expires_at")
                    .table(IdempotencyKeys::Table)
                    .col(IdempotencyKeys::ExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(IdempotencyKeys::Table).to_owned())
            .await
    }
}
