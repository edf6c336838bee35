use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261208_000001_create_key_rotation_lease"
    }
}

#[derive(DeriveIden)]
enum KeyRotationLease {
    Table,
    Id,
    Holder,
    Until,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One row at most: the replica that may rotate the keys on schedule, and until when.
        manager
            .create_table(
                Table::create()
                    .table(KeyRotationLease::Table)
                    .if_not_exists()
                    .col(integer(KeyRotationLease::Id).primary_key())
                    .col(string(KeyRotationLease::Holder))
                    .col(timestamp_with_time_zone(KeyRotationLease::Until))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(KeyRotationLease::Table).to_owned())
            .await
    }
}
