//! JSON error bodies both services answer with, and the partner client reads.

use serde::{Deserialize, Serialize};

/// An OAuth 2.0 error body (RFC 6749 section 5.2) in the wire format partners already parse.
// Read leniently: a body from something in front of the service (a proxy, a gateway) may
// have only `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct OAuthErrorBody {
    /// The RFC 6749 error code, e.g. `invalid_client`.
    pub error: String,
    /// A human-readable explanation.
    #[serde(default)]
    pub error_description: String,
    /// What to check to fix the request, where there is something specific.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", oai(skip_serializing_if_is_none))]
    pub hint: Option<String>,
    /// The same text as `error_description`.
    #[serde(default)]
    pub message: String,
}
