use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000002_add_client_brands"
    }
}

#[derive(DeriveIden)]
enum Clients {
    Table,
    Brands,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Nullable, so 0.1.0 keeps working on the migrated database; its portal clients
        // are bound to no brand and redeem nothing until an operator binds them.
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .add_column(text_null(Clients::Brands))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .drop_column(Clients::Brands)
                    .to_owned(),
            )
            .await
    }
}
