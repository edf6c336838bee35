use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000001_create_auth_tables"
    }
}

#[derive(DeriveIden)]
enum Clients {
    Table,
    ClientId,
    Name,
    Scopes,
    DisabledAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ClientSecrets {
    Table,
    Id,
    ClientId,
    SecretHash,
    CreatedAt,
    ExpiresAt,
}

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    Kid,
    PrivateKey,
    CreatedAt,
    ActivatesAt,
    RevokedAt,
}

#[derive(DeriveIden)]
enum Revision {
    Table,
    Id,
    Value,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Clients::Table)
                    .col(string(Clients::ClientId).primary_key())
                    .col(string(Clients::Name))
                    .col(string(Clients::Scopes))
                    .col(timestamp_with_time_zone_null(Clients::DisabledAt))
                    .col(timestamp_with_time_zone(Clients::CreatedAt))
                    .col(timestamp_with_time_zone(Clients::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ClientSecrets::Table)
                    .col(uuid(ClientSecrets::Id).primary_key())
                    .col(string(ClientSecrets::ClientId))
                    .col(string(ClientSecrets::SecretHash))
                    .col(timestamp_with_time_zone(ClientSecrets::CreatedAt))
                    .col(timestamp_with_time_zone_null(ClientSecrets::ExpiresAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ClientSecrets::Table, ClientSecrets::ClientId)
                            .to(Clients::Table, Clients::ClientId)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_client_secrets_client_id")
                    .table(ClientSecrets::Table)
                    .col(ClientSecrets::ClientId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SigningKeys::Table)
                    .col(string(SigningKeys::Kid).primary_key())
                    .col(text(SigningKeys::PrivateKey))
                    .col(timestamp_with_time_zone(SigningKeys::CreatedAt))
                    .col(timestamp_with_time_zone(SigningKeys::ActivatesAt))
                    .col(timestamp_with_time_zone_null(SigningKeys::RevokedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Revision::Table)
                    .col(integer(Revision::Id).primary_key())
                    .col(big_integer(Revision::Value))
                    .to_owned(),
            )
            .await?;
        let seed = Query::insert()
            .into_table(Revision::Table)
            .columns([Revision::Id, Revision::Value])
            .values_panic([1.into(), 0.into()])
            .to_owned();
        manager.exec_stmt(seed).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            Revision::Table.into_iden(),
            SigningKeys::Table.into_iden(),
            ClientSecrets::Table.into_iden(),
            Clients::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(t).to_owned())
                .await?;
        }
        Ok(())
    }
}
