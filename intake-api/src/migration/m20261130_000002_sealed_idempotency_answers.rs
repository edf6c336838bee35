use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000002_sealed_idempotency_answers"
    }
}

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    SealedResponse,
    CaseId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Answers are sealed into a column of their own, `response` left null: an answer in
        // clear is one 0.1.0 stored, told apart without guessing at the text.
        manager
            .alter_table(
                Table::alter()
                    .table(IdempotencyKeys::Table)
                    .add_column(text_null(IdempotencyKeys::SealedResponse))
                    .to_owned(),
            )
            .await?;
        // The case an answer is about, so erasure finds it. No index: erasure is rare and
        // the table holds a day of keys, while every keyed request would pay for one.
        manager
            .alter_table(
                Table::alter()
                    .table(IdempotencyKeys::Table)
                    .add_column(uuid_null(IdempotencyKeys::CaseId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [IdempotencyKeys::CaseId, IdempotencyKeys::SealedResponse] {
            manager
                .alter_table(
                    Table::alter()
                        .table(IdempotencyKeys::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
