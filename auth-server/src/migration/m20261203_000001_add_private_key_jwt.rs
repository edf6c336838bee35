use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261203_000001_add_private_key_jwt"
    }
}

#[derive(DeriveIden)]
enum Clients {
    Table,
    AuthMethod,
    Jwks,
    JwksUri,
}

#[derive(DeriveIden)]
enum ClientAssertions {
    Table,
    ClientId,
    Jti,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds only one at a time. Every existing client
        // authenticates with a secret, and the previous release, which knows nothing of
        // these columns, keeps working beside them.
        let columns = [
            string(Clients::AuthMethod)
                .default("client_secret")
                .to_owned(),
            text_null(Clients::Jwks),
            text_null(Clients::JwksUri),
        ];
        for column in columns {
            manager
                .alter_table(
                    Table::alter()
                        .table(Clients::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        // The assertions already spent, shared by every replica: the primary key is what
        // refuses a second use.
        manager
            .create_table(
                Table::create()
                    .table(ClientAssertions::Table)
                    .col(string(ClientAssertions::ClientId))
                    .col(string(ClientAssertions::Jti))
                    .col(timestamp_with_time_zone(ClientAssertions::ExpiresAt))
                    .primary_key(
                        Index::create()
                            .col(ClientAssertions::ClientId)
                            .col(ClientAssertions::Jti),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("client_assertions_expires_at")
                    .table(ClientAssertions::Table)
                    .col(ClientAssertions::ExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ClientAssertions::Table).to_owned())
            .await?;
        for column in [Clients::JwksUri, Clients::Jwks, Clients::AuthMethod] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Clients::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
