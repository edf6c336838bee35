//! Schema migrations, run at start-up and by `auth-server migrate`.

use sea_orm_migration::prelude::*;

mod m20261125_000001_create_auth_tables;
mod m20261126_000001_add_standby_keys;
mod m20261126_000002_create_audit_log;
mod m20261130_000001_unique_client_names;
mod m20261202_000001_seal_audit_log;
mod m20261202_000002_add_client_brands;
mod m20261203_000001_add_private_key_jwt;
mod m20261203_000002_add_client_dpop_required;
mod m20261204_000001_add_signing_key_alg;
mod m20261205_000001_add_client_sandbox;
mod m20261208_000001_create_key_rotation_lease;
mod m20261208_000002_add_signing_key_public_jwk;
mod m20261211_000001_create_key_custody;
mod m20261211_000002_add_client_managed_by;

/// Every migration of the auth-server database, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        #[allow(unused_mut)]
        let mut migrations: Vec<Box<dyn MigrationTrait>> = vec![
            Box::new(m20261125_000001_create_auth_tables::Migration),
            Box::new(m20261126_000001_add_standby_keys::Migration),
            Box::new(m20261126_000002_create_audit_log::Migration),
            Box::new(m20261130_000001_unique_client_names::Migration),
            Box::new(m20261202_000001_seal_audit_log::Migration),
            Box::new(m20261202_000002_add_client_brands::Migration),
            Box::new(m20261203_000001_add_private_key_jwt::Migration),
            Box::new(m20261203_000002_add_client_dpop_required::Migration),
            Box::new(m20261204_000001_add_signing_key_alg::Migration),
            Box::new(m20261205_000001_add_client_sandbox::Migration),
            Box::new(service_kit::replay::CreateDpopProofs),
            Box::new(m20261208_000001_create_key_rotation_lease::Migration),
            Box::new(m20261208_000002_add_signing_key_public_jwk::Migration),
            Box::new(m20261211_000001_create_key_custody::Migration),
            Box::new(m20261211_000002_add_client_managed_by::Migration),
        ];
        #[cfg(feature = "upgrade-rehearsal")]
        migrations.push(Box::new(service_kit::db::RehearsalMigration("clients")));
        migrations
    }
}

/// This database's schema: how the binary migrates, checks and opens it.
pub const SCHEMA: service_kit::db::Schema<Migrator> =
    service_kit::db::Schema::new(7206114001, "auth-server");
