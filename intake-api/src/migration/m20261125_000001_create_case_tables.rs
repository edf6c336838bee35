use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000001_create_case_tables"
    }
}

#[derive(DeriveIden)]
enum Cases {
    Table,
    Id,
    Reference,
    Brand,
    Email,
    Status,
    Enquiry,
    ProductUuid,
    CreatedAt,
    UpdatedAt,
    ActivatesAt,
    ActivatedAt,
}

#[derive(DeriveIden)]
enum Submissions {
    Table,
    Id,
    CaseId,
    ClientId,
    ReceivedAt,
    Payload,
}

#[derive(DeriveIden)]
enum CaseEvents {
    Table,
    Id,
    CaseId,
    Kind,
    ClientId,
    Detail,
    CreatedAt,
}

#[derive(DeriveIden)]
enum RedirectTokens {
    Table,
    Id,
    CaseId,
    TokenHash,
    ProductUuid,
    CreatedAt,
    ExpiresAt,
    UsedAt,
}

fn case_fk<T: IntoIden + 'static>(
    table: T,
    column: impl IntoIden + 'static,
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(table, column)
        .to(Cases::Table, Cases::Id)
        .on_delete(ForeignKeyAction::Cascade)
        .to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Cases::Table)
                    .col(uuid(Cases::Id).primary_key())
                    .col(string(Cases::Reference).unique_key())
                    .col(string(Cases::Brand))
                    .col(string(Cases::Email))
                    .col(string(Cases::Status))
                    .col(json(Cases::Enquiry))
                    .col(uuid_null(Cases::ProductUuid))
                    .col(timestamp_with_time_zone(Cases::CreatedAt))
                    .col(timestamp_with_time_zone(Cases::UpdatedAt))
                    .col(timestamp_with_time_zone(Cases::ActivatesAt))
                    .col(timestamp_with_time_zone_null(Cases::ActivatedAt))
                    .to_owned(),
            )
            .await?;
        // One case per brand and e-mail, whatever the concurrency.
        manager
            .create_index(
                Index::create()
                    .name("ux_cases_brand_email")
                    .table(Cases::Table)
                    .col(Cases::Brand)
                    .col(Cases::Email)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_cases_status_activates_at")
                    .table(Cases::Table)
                    .col(Cases::Status)
                    .col(Cases::ActivatesAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_cases_email_updated_at")
                    .table(Cases::Table)
                    .col(Cases::Email)
                    .col(Cases::UpdatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Submissions::Table)
                    .col(uuid(Submissions::Id).primary_key())
                    .col(uuid(Submissions::CaseId))
                    .col(string(Submissions::ClientId))
                    .col(timestamp_with_time_zone(Submissions::ReceivedAt))
                    .col(text(Submissions::Payload))
                    .foreign_key(&mut case_fk(Submissions::Table, Submissions::CaseId))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_submissions_case_id")
                    .table(Submissions::Table)
                    .col(Submissions::CaseId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(CaseEvents::Table)
                    .col(uuid(CaseEvents::Id).primary_key())
                    .col(uuid(CaseEvents::CaseId))
                    .col(string(CaseEvents::Kind))
                    .col(string_null(CaseEvents::ClientId))
                    .col(json_null(CaseEvents::Detail))
                    .col(timestamp_with_time_zone(CaseEvents::CreatedAt))
                    .foreign_key(&mut case_fk(CaseEvents::Table, CaseEvents::CaseId))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_case_events_case_id")
                    .table(CaseEvents::Table)
                    .col(CaseEvents::CaseId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(RedirectTokens::Table)
                    .col(uuid(RedirectTokens::Id).primary_key())
                    .col(uuid(RedirectTokens::CaseId))
                    .col(string(RedirectTokens::TokenHash).unique_key())
                    .col(uuid(RedirectTokens::ProductUuid))
                    .col(timestamp_with_time_zone(RedirectTokens::CreatedAt))
                    .col(timestamp_with_time_zone(RedirectTokens::ExpiresAt))
                    .col(timestamp_with_time_zone_null(RedirectTokens::UsedAt))
                    .foreign_key(&mut case_fk(RedirectTokens::Table, RedirectTokens::CaseId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            RedirectTokens::Table.into_iden(),
            CaseEvents::Table.into_iden(),
            Submissions::Table.into_iden(),
            Cases::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(t).to_owned())
                .await?;
        }
        Ok(())
    }
}
