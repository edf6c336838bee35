//! Schema migrations, run at start-up and by `intake-api migrate`.

use sea_orm_migration::prelude::*;

mod m20261125_000001_create_case_tables;
mod m20261127_000001_indexes_for_scale;
mod m20261128_000001_submissions_by_partner;
mod m20261129_000001_redirect_tokens_by_case;
mod m20261129_000002_idempotency_keys;
mod m20261129_000003_webhooks;
mod m20261129_000004_case_redirect_token;
mod m20261130_000002_sealed_idempotency_answers;
mod m20261201_000001_webhooks_due_by_partner;
mod m20261205_000001_sandbox_cases;
mod m20261206_000001_referrals;
mod m20261207_000002_referral_links;
mod m20261208_000001_webhook_endpoints;
mod m20261208_000002_webhook_failing_since;
mod m20261209_000001_webhook_attempts;
mod m20261209_000002_webhook_endpoint_throttle;
mod m20261210_000001_webhook_resend_requests;

/// Every migration of the intake database, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        #[allow(unused_mut)]
        let mut migrations: Vec<Box<dyn MigrationTrait>> = vec![
            Box::new(m20261125_000001_create_case_tables::Migration),
            Box::new(m20261127_000001_indexes_for_scale::Migration),
            Box::new(m20261128_000001_submissions_by_partner::Migration),
            Box::new(m20261129_000001_redirect_tokens_by_case::Migration),
            Box::new(m20261129_000002_idempotency_keys::Migration),
            Box::new(m20261129_000003_webhooks::Migration),
            Box::new(m20261129_000004_case_redirect_token::Migration),
            Box::new(m20261130_000002_sealed_idempotency_answers::Migration),
            Box::new(m20261201_000001_webhooks_due_by_partner::Migration),
            Box::new(m20261205_000001_sandbox_cases::Migration),
            Box::new(m20261206_000001_referrals::Migration),
            Box::new(service_kit::replay::CreateDpopProofs),
            Box::new(m20261207_000002_referral_links::Migration),
            Box::new(m20261208_000001_webhook_endpoints::Migration),
            Box::new(m20261208_000002_webhook_failing_since::Migration),
            Box::new(m20261209_000001_webhook_attempts::Migration),
            Box::new(m20261209_000002_webhook_endpoint_throttle::Migration),
            Box::new(m20261210_000001_webhook_resend_requests::Migration),
        ];
        #[cfg(feature = "upgrade-rehearsal")]
        migrations.push(Box::new(service_kit::db::RehearsalMigration("cases")));
        migrations
    }
}

/// This database's schema: how the binary migrates, checks and opens it.
pub const SCHEMA: service_kit::db::Schema<Migrator> =
    service_kit::db::Schema::new(7206114002, "intake-api");
