use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261204_000001_add_signing_key_alg"
    }
}

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    Alg,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Every key made before this column is an RSA key signing RS256, and the previous
        // release, still running during a rolling upgrade, inserts keys without it.
        manager
            .alter_table(
                Table::alter()
                    .table(SigningKeys::Table)
                    .add_column(string(SigningKeys::Alg).default("RS256"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(SigningKeys::Table)
                    .drop_column(SigningKeys::Alg)
                    .to_owned(),
            )
            .await
    }
}
