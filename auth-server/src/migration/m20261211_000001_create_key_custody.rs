use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261211_000001_create_key_custody"
    }
}

#[derive(DeriveIden)]
enum KeyCustody {
    Table,
    Id,
    Store,
    TokenLabel,
    TokenSerial,
    RecordedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One row at most: where the deployment's signing keys are made and kept. A new table,
        // which the previous release never reads.
        manager
            .create_table(
                Table::create()
                    .table(KeyCustody::Table)
                    .if_not_exists()
                    .col(integer(KeyCustody::Id).primary_key())
                    .col(string(KeyCustody::Store))
                    .col(string_null(KeyCustody::TokenLabel))
                    .col(string_null(KeyCustody::TokenSerial))
                    .col(timestamp_with_time_zone(KeyCustody::RecordedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(KeyCustody::Table).to_owned())
            .await
    }
}
