//! What the auth-server and the intake-api must agree on, and the plumbing both use:
//! the access-token claim set, scope names, JSON error bodies, telemetry and database set-up.

pub mod claims;
pub mod db;
pub mod error;
pub mod http;
pub mod ratelimit;
pub mod secret;
pub mod telemetry;

pub use secret::Secret;
