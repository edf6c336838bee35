//! What the auth-server, the intake-api and the partner client must agree on: the
//! access-token claim set, the scope names, the enquiry's fixed lists, and the JSON error
//! bodies partners parse.

pub mod claims;
pub mod error;
pub mod intake;
