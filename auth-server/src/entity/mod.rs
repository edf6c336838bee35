//! Database tables of the auth-server.

pub mod audit_entry;
pub mod client;
pub mod client_assertion;
pub mod client_secret;
pub mod key_custody;
pub mod key_rotation_lease;
pub mod revision;
pub mod signing_key;
