//! The intake-api's refusals and failures other than a validation error, one type per kind
//! with its fixed text as the document's example; partners read them all as [`MessageBody`].

/// Defines a `{"message": ...}` body type for one kind of answer, with its fixed text as the
/// OpenAPI example, so each documented status shows the body partners will really get.
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

message_body!(
    /// The body is not JSON, or could not be read.
    BadRequestBody = "The request body must be valid JSON."
);
message_body!(
    /// No valid bearer token.
    Unauthenticated = "Unauthenticated."
);
message_body!(
    /// The token lacks the scope the operation needs.
    InvalidScope = "Invalid scope(s) provided."
);
message_body!(
    /// No case the partner may see for the e-mail address.
    CaseNotFound = "Case not found"
);
message_body!(
    /// Another request with the same `Idempotency-Key` is being processed.
    RequestInFlight = "A request with this Idempotency-Key is still being processed."
);
message_body!(
    /// The redirect link cannot be used (any more).
    LinkGone = "Link expired or already used"
);
message_body!(
    /// The body is over the size limit.
    TooLarge = "The request body must not exceed 64 KiB."
);
message_body!(
    /// Over the partner's rate limit.
    TooManyAttempts = "Too Many Attempts."
);
message_body!(
    /// The request failed on our side.
    ServerError = "Failed to generate redirect link"
);
message_body!(
    /// The database is unavailable.
    Unavailable = "Service temporarily unavailable"
);
