//! HTTP routes of the auth-server.

pub mod discovery;
pub mod token;
