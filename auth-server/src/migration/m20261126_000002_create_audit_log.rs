use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000002_create_audit_log"
    }
}

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Seq,
    At,
    Actor,
    Action,
    Subject,
    Detail,
    Revision,
    PrevHash,
    Hash,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(AuditLog::Table)
                    .col(big_integer(AuditLog::Seq).primary_key())
                    .col(timestamp_with_time_zone(AuditLog::At))
                    .col(string(AuditLog::Actor))
                    .col(string(AuditLog::Action))
                    .col(string(AuditLog::Subject))
                    .col(text(AuditLog::Detail))
                    .col(big_integer(AuditLog::Revision))
                    .col(string(AuditLog::PrevHash))
                    .col(string(AuditLog::Hash))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(AuditLog::Table).to_owned())
            .await
    }
}
