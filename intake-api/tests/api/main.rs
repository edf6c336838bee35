//! End-to-end tests of the intake-api over HTTP, against a real auth-server, on SQLite and
//! on PostgreSQL, and the properties of its enquiry parser.

mod helpers;

mod activation;
mod attach;
mod bearer;
mod case_status;
mod cases;
mod cli;
mod dpop;
mod enquiry_properties;
mod erasure;
mod fapi2;
mod faults;
mod hostile_input;
mod idempotency;
mod in_flight;
mod jwks;
mod metrics;
mod partner_isolation;
mod rate_limits;
mod redeem;
mod referrals;
mod replicas;
mod reused_connections;
mod revocation;
mod sandbox;
mod schema_versions;
mod validation;
mod webhook_addresses;
mod webhook_catalogue;
mod webhook_deliveries;
mod webhook_endpoints;
mod webhooks;
