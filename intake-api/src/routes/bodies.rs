//! The `{"message": ...}` bodies of the intake endpoints, one type per kind of answer so
//! the OpenAPI document shows each one's real text as its example.

use intake_shared::message_body;

message_body!(
    /// The body is not JSON.
    NotJson = "The request body must be valid JSON."
);
message_body!(
    /// No valid bearer token.
    Unauthenticated = "Unauthenticated."
);
message_body!(
    /// The token lacks the intake scope.
    InvalidScope = "Invalid scope(s) provided."
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
    /// The database is unavailable.
    Unavailable = "Service temporarily unavailable"
);
message_body!(
    /// No case for the e-mail address.
    CaseNotFound = "Case not found"
);
message_body!(
    /// The redirect link could not be made.
    RedirectFailed = "Failed to generate redirect link"
);
message_body!(
    /// The body could not be read (the connection failed while sending it).
    Unreadable = "The request body could not be read."
);
