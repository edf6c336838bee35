use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000001_add_standby_keys"
    }
}

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    Standby,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // A standby key is published but has no activation date yet: the next rotation or
        // revoke switches to it, and every resource server already holds it by then.
        manager
            .alter_table(
                Table::alter()
                    .table(SigningKeys::Table)
                    .add_column(boolean(SigningKeys::Standby).default(false))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(SigningKeys::Table)
                    .drop_column(SigningKeys::Standby)
                    .to_owned(),
            )
            .await
    }
}
