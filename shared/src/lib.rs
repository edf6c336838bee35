//! What the auth-server and the intake-api must agree on: the access-token claim set, the
//! scope names, and the JSON error bodies partners parse.

pub mod claims;
pub mod error;
