//! End-to-end tests of the auth-server over HTTP, on SQLite and on PostgreSQL, its operator
//! command line, and its logs.

mod helpers;

mod apply;
mod audit;
mod cli;
mod clients;
mod dpop_nonces;
mod fapi2;
mod jwks_uri;
mod key_custody;
mod key_schedule;
mod keys;
mod limits;
mod logs;
mod metrics;
mod outages;
mod pkcs11;
mod private_key_jwt;
mod refusals;
mod replay_store;
mod revocations;
mod secret_settings;
mod token;
