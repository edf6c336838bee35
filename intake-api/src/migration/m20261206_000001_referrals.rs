//! Referrals: a submission says whether it was an enquiry or a referral, and a redirect
//! link may carry no product (a referral's link continues with the enquiry instead).
//!
//! SQLite cannot drop a column's `NOT NULL`, so there the links' table is rebuilt as its
//! documentation describes: made anew, filled, the old one dropped and the new one renamed.
//! Nothing refers to the table by foreign key, so the drop touches nothing else.

use sea_orm::DatabaseBackend;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261206_000001_referrals"
    }
}

#[derive(DeriveIden)]
enum Submissions {
    Table,
    Kind,
}

#[derive(DeriveIden)]
enum Cases {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum RedirectTokens {
    Id,
    CaseId,
    TokenHash,
    ProductUuid,
    CreatedAt,
    ExpiresAt,
    UsedAt,
}

/// The table SQLite's rebuild fills before it takes the links' table's name.
const REBUILT: &str = "redirect_tokens_rebuilt";

/// The links' table as first made, but for whether a link must carry a product.
fn links_table(name: &str, product_required: bool) -> TableCreateStatement {
    let product = if product_required {
        uuid(RedirectTokens::ProductUuid)
    } else {
        uuid_null(RedirectTokens::ProductUuid)
    };
    Table::create()
        .table(Alias::new(name))
        .col(uuid(RedirectTokens::Id).primary_key())
        .col(uuid(RedirectTokens::CaseId))
        .col(string(RedirectTokens::TokenHash).unique_key())
        .col(product)
        .col(timestamp_with_time_zone(RedirectTokens::CreatedAt))
        .col(timestamp_with_time_zone(RedirectTokens::ExpiresAt))
        .col(timestamp_with_time_zone_null(RedirectTokens::UsedAt))
        .foreign_key(
            ForeignKey::create()
                .from(Alias::new(name), RedirectTokens::CaseId)
                .to(Cases::Table, Cases::Id)
                .on_delete(ForeignKeyAction::Cascade),
        )
        .to_owned()
}

/// Whether links must carry a product, on either backend.
async fn require_product(manager: &SchemaManager<'_>, required: bool) -> Result<(), DbErr> {
    let db = manager.get_connection();
    if manager.get_database_backend() == DatabaseBackend::Sqlite {
        manager.create_table(links_table(REBUILT, required)).await?;
        db.execute_unprepared(&format!(
            r#"INSERT INTO "{REBUILT}" SELECT "id", "case_id", "token_hash", "product_uuid", "created_at", "expires_at", "used_at" FROM "redirect_tokens""#
        ))
        .await?;
        db.execute_unprepared(r#"DROP TABLE "redirect_tokens""#)
            .await?;
        db.execute_unprepared(&format!(
            r#"ALTER TABLE "{REBUILT}" RENAME TO "redirect_tokens""#
        ))
        .await?;
        return Ok(());
    }
    let change = if required { "SET" } else { "DROP" };
    db.execute_unprepared(&format!(
        r#"ALTER TABLE "redirect_tokens" ALTER COLUMN "product_uuid" {change} NOT NULL"#
    ))
    .await?;
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // A default, so a release before this one keeps writing enquiries during a rolling
        // upgrade, and PostgreSQL adds the column without rewriting the table.
        manager
            .alter_table(
                Table::alter()
                    .table(Submissions::Table)
                    .add_column(string(Submissions::Kind).default("enquiry"))
                    .to_owned(),
            )
            .await?;
        require_product(manager, false).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Referrals' links go: the release before this one cannot read a link without a
        // product.
        manager
            .get_connection()
            .execute_unprepared(r#"DELETE FROM "redirect_tokens" WHERE "product_uuid" IS NULL"#)
            .await?;
        require_product(manager, true).await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Submissions::Table)
                    .drop_column(Submissions::Kind)
                    .to_owned(),
            )
            .await
    }
}
