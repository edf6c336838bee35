//! Every way a call can fail, one variant per documented answer, so callers match on what to
//! do next rather than on status codes.

use std::time::Duration;

use token_client::TokenError;

use crate::wire::{MessageBody, ValidationErrorBody};

/// Why a call to the intake API did not succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No access token could be had, so the call was not made.
    #[error("no access token: {0}")]
    Token(#[from] TokenError),
    /// 400: the body is not JSON, or the `Idempotency-Key` is malformed.
    #[error("bad request (400): {message}")]
    BadRequest {
        /// The service's message.
        message: String,
    },
    /// 401 to a retry with a fresh token too: the service refuses this client's tokens.
    #[error("unauthenticated (401): {message}")]
    Unauthenticated {
        /// The service's message.
        message: String,
        /// The `WWW-Authenticate` challenge, which says why.
        challenge: Option<String>,
    },
    /// 403: the token lacks the operation's scope.
    #[error("forbidden (403): {message}")]
    Forbidden {
        /// The service's message.
        message: String,
        /// The `WWW-Authenticate` challenge, which names the scope needed.
        challenge: Option<String>,
    },
    /// 404: no case of this partner's for that e-mail address; send the customer to the
    /// enquiry form.
    #[error("case not found (404): {message}")]
    CaseNotFound {
        /// The service's message.
        message: String,
    },
    /// 409: a request with the same `Idempotency-Key` is still being processed; retry after
    /// `retry_after` to get its answer.
    #[error("a request with this Idempotency-Key is in flight (409): {message}")]
    InFlight {
        /// The service's message.
        message: String,
        /// How long to wait before retrying.
        retry_after: Option<Duration>,
    },
    /// 409 without `Retry-After`: the `Idempotency-Key` was used before with a different
    /// request; a new request needs a new key.
    #[error("Idempotency-Key reused with a different request (409): {message}")]
    KeyReused {
        /// The service's message.
        message: String,
    },
    /// 404 to a webhook endpoint operation: this partner has no endpoint by that id.
    #[error("webhook endpoint not found (404): {message}")]
    EndpointNotFound {
        /// The service's message.
        message: String,
    },
    /// 404 to a delivery history operation: this partner has no such event for that
    /// endpoint (or no such endpoint).
    #[error("webhook delivery not found (404): {message}")]
    DeliveryNotFound {
        /// The service's message.
        message: String,
    },
    /// 409 to making a webhook endpoint: this partner has as many as it may; remove one
    /// first.
    #[error("at the webhook endpoint limit (409): {message}")]
    EndpointLimit {
        /// The service's message.
        message: String,
    },
    /// 413: the body is over the service's size limit.
    #[error("request too large (413): {message}")]
    TooLarge {
        /// The service's message.
        message: String,
    },
    /// 422: the body breaks the rules (every problem by field path).
    #[error("invalid request (422): {}", .0.message)]
    Invalid(ValidationErrorBody),
    /// 429: over this partner's rate limit.
    #[error("rate limited (429): {message}")]
    RateLimited {
        /// The service's message.
        message: String,
        /// How long to wait before retrying.
        retry_after: Option<Duration>,
    },
    /// 500: on attach, the link could not be made (send the customer to the dashboard);
    /// otherwise an unexpected failure on the service's side.
    #[error("server error (500): {message}")]
    Server {
        /// The service's message.
        message: String,
    },
    /// 503: a passing outage; nothing was stored.
    #[error("service unavailable (503): {message}")]
    Unavailable {
        /// The service's message.
        message: String,
        /// How long to wait before retrying.
        retry_after: Option<Duration>,
    },
    /// A status the documents do not list (a proxy's 502, say).
    #[error("unexpected status {status}")]
    UnexpectedStatus {
        /// The status code.
        status: u16,
        /// The start of the body, as text.
        body: String,
    },
    /// A success whose body is not the documented one.
    #[error("unexpected body with status {status}")]
    UnexpectedBody {
        /// The status code.
        status: u16,
        /// Why it did not read.
        #[source]
        source: serde_json::Error,
    },
    /// The request could not be sent or its answer read (connection, timeout, TLS).
    #[error("HTTP request failed")]
    Http(#[source] reqwest::Error),
}

impl Error {
    /// The same error as a webhook endpoint operation means it: a 404 is about the
    /// endpoint, a 409 (without `Retry-After`, no key being sent) about the limit.
    pub(crate) fn about_endpoints(self) -> Self {
        match self {
            Self::CaseNotFound { message } => Self::EndpointNotFound { message },
            Self::KeyReused { message } => Self::EndpointLimit { message },
            other => other,
        }
    }

    /// The same error as a delivery history operation means it: a 404 is about the event.
    pub(crate) fn about_deliveries(self) -> Self {
        match self {
            Self::CaseNotFound { message } => Self::DeliveryNotFound { message },
            other => other,
        }
    }

    /// How long the service asked to wait before retrying, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::InFlight { retry_after, .. }
            | Self::RateLimited { retry_after, .. }
            | Self::Unavailable { retry_after, .. } => *retry_after,
            Self::Token(TokenError::Refused { retry_after, .. }) => *retry_after,
            _ => None,
        }
    }

    /// The error for a non-success answer; `body` is the answer's bytes.
    pub(crate) fn from_answer(
        status: u16,
        body: &[u8],
        retry_after: Option<Duration>,
        challenge: Option<String>,
    ) -> Self {
        if status == 422 {
            return match serde_json::from_slice::<ValidationErrorBody>(body) {
                Ok(v) => Self::Invalid(v),
                Err(_) => Self::unexpected(status, body),
            };
        }
        // A proxy in front of the service may answer these statuses without our JSON; the
        // status alone still says what to do.
        let message = match serde_json::from_slice::<MessageBody>(body) {
            Ok(b) => b.message,
            Err(_) => text_start(body),
        };
        match status {
            400 => Self::BadRequest { message },
            401 => Self::Unauthenticated { message, challenge },
            403 => Self::Forbidden { message, challenge },
            404 => Self::CaseNotFound { message },
            // Only a request still in flight is worth retrying, and only it says when.
            409 if retry_after.is_none() => Self::KeyReused { message },
            409 => Self::InFlight {
                message,
                retry_after,
            },
            413 => Self::TooLarge { message },
            429 => Self::RateLimited {
                message,
                retry_after,
            },
            500 => Self::Server { message },
            503 => Self::Unavailable {
                message,
                retry_after,
            },
            _ => Self::unexpected(status, body),
        }
    }

    fn unexpected(status: u16, body: &[u8]) -> Self {
        Self::UnexpectedStatus {
            status,
            body: text_start(body),
        }
    }
}

/// The first 1 KiB of a body as text: enough to see what answered, never a whole page.
fn text_start(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(1024)]);
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Error {
        Error::from_answer(
            status,
            body.as_bytes(),
            Some(Duration::from_secs(7)),
            Some("Bearer".into()),
        )
    }

    /// A case's name, the answer's status and body, and what the error must be.
    type Case = (&'static str, u16, &'static str, fn(&Error) -> bool);

    #[test]
    fn every_documented_status_maps_to_its_variant() {
        let m = r#"{"message":"m"}"#;
        let cases: &[Case] = &[
            (
                "bad request",
                400,
                m,
                |e| matches!(e, Error::BadRequest { message } if message == "m"),
            ),
            (
                "unauthenticated keeps the challenge",
                401,
                m,
                |e| matches!(e, Error::Unauthenticated { challenge: Some(c), .. } if c == "Bearer"),
            ),
            ("forbidden keeps the challenge", 403, m, |e| {
                matches!(
                    e,
                    Error::Forbidden {
                        challenge: Some(_),
                        ..
                    }
                )
            }),
            ("case not found", 404, m, |e| {
                matches!(e, Error::CaseNotFound { .. })
            }),
            ("in flight keeps retry-after", 409, m, |e| {
                e.retry_after() == Some(Duration::from_secs(7))
                    && matches!(e, Error::InFlight { .. })
            }),
            ("too large", 413, m, |e| matches!(e, Error::TooLarge { .. })),
            (
                "validation keeps field messages",
                422,
                r#"{"message":"The given data was invalid.","errors":{"email":["bad"]}}"#,
                |e| matches!(e, Error::Invalid(v) if v.errors["email"] == ["bad"]),
            ),
            ("rate limited keeps retry-after", 429, m, |e| {
                e.retry_after() == Some(Duration::from_secs(7))
                    && matches!(e, Error::RateLimited { .. })
            }),
            (
                "server error",
                500,
                m,
                |e| matches!(e, Error::Server { message } if message == "m"),
            ),
            ("unavailable keeps retry-after", 503, m, |e| {
                e.retry_after() == Some(Duration::from_secs(7))
                    && matches!(e, Error::Unavailable { .. })
            }),
            (
                "a proxy's 503 page is still unavailable",
                503,
                "<html>down</html>",
                |e| matches!(e, Error::Unavailable { message, .. } if message == "<html>down</html>"),
            ),
            (
                "an undocumented status",
                502,
                "bad gateway",
                |e| matches!(e, Error::UnexpectedStatus { status: 502, body } if body == "bad gateway"),
            ),
            ("a 422 that is not ours", 422, "nope", |e| {
                matches!(e, Error::UnexpectedStatus { status: 422, .. })
            }),
        ];
        for (name, status, body, expected) in cases {
            let e = answer(*status, body);
            assert!(expected(&e), "{name}: got {e:?}");
        }
        // A reused key is the 409 that says nothing about when to retry.
        let reused = br#"{"message":"Idempotency-Key reused with a different request."}"#;
        let e = Error::from_answer(409, reused, None, None);
        assert!(
            matches!(&e, Error::KeyReused { .. }) && e.retry_after().is_none(),
            "a reused key: got {e:?}"
        );
    }

    #[test]
    fn an_unexpected_body_is_cut_to_a_kilobyte() {
        let long = "x".repeat(10_000);
        let Error::UnexpectedStatus { body, .. } = answer(502, &long) else {
            panic!("not unexpected")
        };
        assert_eq!(body.len(), 1024);
    }
}
