//! Why a token could not be had, or a client not built.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;
use shared::error::OAuthErrorBody;

/// Why no access token could be had. `Clone`, so every call waiting on one token request
/// gets its failure.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token endpoint refused: `invalid_client` (wrong, expired or disabled
    /// credentials), `invalid_scope`, `too_many_requests`...
    #[error("the token endpoint refused ({status}): {}", .body.error)]
    Refused {
        /// The status code.
        status: u16,
        /// The RFC 6749 error body.
        body: OAuthErrorBody,
        /// How long to wait before retrying, on 429.
        retry_after: Option<Duration>,
    },
    /// The token endpoint answered with something that is not a bearer token or an RFC 6749
    /// error.
    #[error("the token endpoint answered {status} with an unexpected body")]
    UnexpectedResponse {
        /// The status code.
        status: u16,
    },
    /// The token request could not be sent or its answer read.
    #[error("the token request failed")]
    Http(#[source] Arc<reqwest::Error>),
    /// The client assertion could not be signed with the client's key.
    #[error("signing the client assertion failed: {0}")]
    Signing(String),
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A URL does not parse, or cannot be a base.
    #[error("the {which} URL is not usable: {reason}")]
    InvalidUrl {
        /// Which URL: `token` or `intake`.
        which: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be made (its TLS set-up failed).
    #[error("the HTTP client could not be built")]
    Http(#[source] reqwest::Error),
    /// A private key for client assertions does not load.
    #[error("the assertion key is not usable: {0}")]
    InvalidKey(String),
}

/// A `Retry-After` of delay-seconds, the form both services send.
pub fn retry_after(value: Option<&HeaderValue>) -> Option<Duration> {
    let secs = value?.to_str().ok()?.trim().parse::<u64>().ok()?;
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_delay_seconds_only() {
        let read = |s: &str| retry_after(Some(&HeaderValue::from_str(s).unwrap()));
        assert_eq!(read("30"), Some(Duration::from_secs(30)));
        assert_eq!(read(" 1 "), Some(Duration::from_secs(1)));
        assert_eq!(read("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after(None), None);
    }
}
