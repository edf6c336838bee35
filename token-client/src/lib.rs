//! Access tokens as an OAuth 2.0 client keeps them (client credentials grant): fetched with
//! a client secret or a `private_key_jwt` assertion, cached and renewed before they expire
//! with a single token request in flight, and bound to a DPoP key when one is given.
//!
//! The partner client re-exports all of it; the intake-api uses it for its own calls to the
//! auth-server, without the partner client's intake API types.

#![warn(missing_docs)]

mod dpop_key;
mod error;
mod token;

pub use dpop_key::DpopKey;
pub use error::{BuildError, TokenError, retry_after};
pub use token::{
    AccessToken, AssertionAlgorithm, AssertionKey, AuthMethod, ClientAuthentication, ClientSecret,
    Credentials, DEFAULT_RENEW_BEFORE, TokenSource,
};
