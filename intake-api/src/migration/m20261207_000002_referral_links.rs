//! A referral's link names the partner that referred and the reference it was answered
//! with: a referral grants its partner nothing on the case, so its link lives beside the
//! case's own (attach's) link instead of replacing it, and redeems with the referral's
//! reference, which for another partner's customer is not the case's.
//!
//! Both columns are nullable: links made before, and attach's links, have neither, and a
//! release before this one keeps writing links without them. The index has only referral
//! links in it, so an attach pays nothing for it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261207_000002_referral_links"
    }
}

#[derive(DeriveIden)]
enum RedirectTokens {
    Table,
    ClientId,
    Reference,
}

/// The index of referral links by case and partner.
const INDEX: &str = "idx_redirect_tokens_referrals";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        for column in [
            string_null(RedirectTokens::ClientId),
            string_null(RedirectTokens::Reference),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(RedirectTokens::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .get_connection()
            .execute_unprepared(&format!(
                r#"CREATE INDEX "{INDEX}" ON "redirect_tokens" ("case_id", "client_id", "created_at") WHERE "client_id" IS NOT NULL"#
            ))
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(&format!(r#"DROP INDEX IF EXISTS "{INDEX}""#))
            .await?;
        for column in [RedirectTokens::Reference, RedirectTokens::ClientId] {
            manager
                .alter_table(
                    Table::alter()
                        .table(RedirectTokens::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
