use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261208_000002_add_signing_key_public_jwk"
    }
}

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    PublicJwk,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Nullable: a key sealed in the database carries its public half in its private one,
        // and the previous release goes on inserting such keys without it.
        manager
            .alter_table(
                Table::alter()
                    .table(SigningKeys::Table)
                    .add_column(text_null(SigningKeys::PublicJwk))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(SigningKeys::Table)
                    .drop_column(SigningKeys::PublicJwk)
                    .to_owned(),
            )
            .await
    }
}
