use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000001_add_client_sandbox"
    }
}

#[derive(DeriveIden)]
enum Clients {
    Table,
    Sandbox,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // With a default, so the previous release keeps inserting clients; every existing
        // client is a real one, and its tokens stay as they were.
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .add_column(boolean(Clients::Sandbox).default(false))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .drop_column(Clients::Sandbox)
                    .to_owned(),
            )
            .await
    }
}
