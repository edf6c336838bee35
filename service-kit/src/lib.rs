//! The plumbing the auth-server and the intake-api both run on: database connections and
//! migrations, the HTTP server and its operational endpoints, rate limits, the store of
//! single-use ids, logs and metrics, a wrapper that keeps secrets out of them, the
//! key-encryption keys they hold, and the guard on the addresses they call partners at.

pub mod command_line;
pub mod db;
pub mod dpop_nonce;
pub mod http;
pub mod kek;
pub mod openapi;
pub mod outbound;
pub mod ratelimit;
pub mod replay;
pub mod secret;
pub mod source;
pub mod telemetry;

pub use secret::Secret;
