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

/// Defines a `{"message": ...}` body type for one kind of answer, with its fixed text as the
/// OpenAPI example, so each documented status shows the body partners will really get.
#[macro_export]
macro_rules! message_body {
    ($(#[$meta:meta])* $name:ident = $text:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, poem_openapi::Object)]
        #[oai(example)]
        pub struct $name {
            /// What happened, for people.
            pub message: String,
        }

        impl poem_openapi::types::Example for $name {
            fn example() -> Self {
                Self {
                    message: $text.to_owned(),
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                <Self as poem_openapi::types::Example>::example()
            }
        }
    };
}
