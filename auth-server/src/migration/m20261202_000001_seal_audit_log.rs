use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000001_seal_audit_log"
    }
}

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Mac,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Nullable: the previous release appends without it, and the entries already there
        // are sealed by the first process that holds the key, which a migration does not.
        manager
            .alter_table(
                Table::alter()
                    .table(AuditLog::Table)
                    .add_column(ColumnDef::new(AuditLog::Mac).string().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(AuditLog::Table)
                    .drop_column(AuditLog::Mac)
                    .to_owned(),
            )
            .await
    }
}
