//! The bodies of the intake-api's refusals and failures: the validation errors, and a
//! `{"message": ...}` type for each other kind, with its fixed text as the OpenAPI example.

pub use shared::intake::ValidationErrorBody;
use shared::message_body;

use crate::domain::ValidationErrors;

impl From<ValidationErrors> for ValidationErrorBody {
    fn from(errors: ValidationErrors) -> Self {
        Self {
            message: "The given data was invalid.".into(),
            errors: errors.into_map(),
        }
    }
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
