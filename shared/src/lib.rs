//! What the auth-server, the intake-api and the partner client must agree on: the
//! access-token claim set, DPoP proofs, the scope names, the enquiry's fixed lists, and the JSON error
//! bodies partners parse.

#[cfg(feature = "verify")]
pub mod access_token;
pub mod claims;
#[cfg(feature = "verify")]
pub mod dpop;
pub mod error;
pub mod intake;
pub mod profile;
#[cfg(feature = "verify")]
pub mod refusal;
