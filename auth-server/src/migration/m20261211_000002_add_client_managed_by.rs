use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261211_000002_add_client_managed_by"
    }
}

#[derive(DeriveIden)]
enum Clients {
    Table,
    ManagedBy,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Nullable, and null for every client there is: none was marked as a file's, so
        // `apply` takes none of them over unless told to (`--adopt`), and the previous
        // release goes on inserting clients without it.
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .add_column(string_null(Clients::ManagedBy))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Clients::Table)
                    .drop_column(Clients::ManagedBy)
                    .to_owned(),
            )
            .await
    }
}
