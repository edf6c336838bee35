use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261203_000002_add_client_dpop_required"
    }
}

#[derive(DeriveIden)]
enum Clients {
    Table,
    DpopRequired,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // With a default, so the previous release keeps inserting clients; every existing
        // client may still get bearer tokens.
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .add_column(boolean(Clients::DpopRequired).default(false))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .drop_column(Clients::DpopRequired)
                    .to_owned(),
            )
            .await
    }
}
