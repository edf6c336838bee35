//! Every way an intake request can fail, and the answer each gets.
//!
//! Handlers and extractors return [`IntakeError`] with `?`; it documents every status the
//! intake-api produces in the OpenAPI document and answers with our JSON bodies. Causes on
//! our side (the database, randomness, configuration) go to the log with their chain, never
//! to the partner.

use std::fmt::Write as _;

use poem::IntoResponse;
use poem_openapi::ApiResponse;
use poem_openapi::payload::Json;
use poem_openapi::registry::{MetaResponses, Registry};

use shared::profile::Profile;
use shared::refusal::Unvetted;

use crate::auth::Refusal;
use crate::domain::ValidationErrors;
use crate::sandbox::Trigger;
use crate::store::StoreError;
use shared::intake::ValidationErrorBody;
use shared::intake::messages::{
    BadRequestBody, CaseNotFound, InvalidScope, RequestInFlight, ServerError, TooLarge,
    TooManyAttempts, Unauthenticated, Unavailable,
};

impl From<ValidationErrors> for ValidationErrorBody {
    fn from(errors: ValidationErrors) -> Self {
        Self {
            message: ValidationErrorBody::MESSAGE.into(),
            errors: errors.into_map(),
        }
    }
}

/// Seconds a partner is asked to wait after a passing outage.
pub const RETRY_AFTER_SECS: u32 = 5;

/// Seconds a partner is asked to wait for an attempt in flight with the same key.
pub const KEY_IN_FLIGHT_RETRY_SECS: u32 = 1;

/// Why an intake request was not done.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// The body is not JSON.
    #[error("the request body is not JSON")]
    NotJson,
    /// The body could not be read (the connection failed while sending it).
    #[error("the request body could not be read")]
    Unreadable,
    /// The `Idempotency-Key` header is empty or too long.
    #[error("malformed Idempotency-Key")]
    BadIdempotencyKey,
    /// Another attempt with the same `Idempotency-Key` is being processed.
    #[error("a request with this Idempotency-Key is in flight")]
    KeyInFlight,
    /// The `Idempotency-Key` was used with a different request.
    #[error("Idempotency-Key reused with a different request")]
    KeyReused,
    /// The answer to the request first sent with the `Idempotency-Key` was erased with its
    /// customer's data.
    #[error("the answer to this Idempotency-Key was erased")]
    AnswerErased,
    /// No bearer token, or one that does not verify; answered as the deployment's profile
    /// has tokens sent.
    #[error("not authenticated: {0}")]
    Unauthenticated(Refusal, Profile),
    /// The token lacks the scope the operation needs, named here.
    #[error("the token lacks the required scope {0}")]
    Forbidden(&'static str),
    /// No case the partner may see.
    #[error("no case found")]
    CaseNotFound,
    /// No webhook endpoint of the partner's by that id.
    #[error("no webhook endpoint found")]
    EndpointNotFound,
    /// No event of the partner's by that id for that endpoint.
    #[error("no webhook delivery found")]
    DeliveryNotFound,
    /// The partner has as many webhook endpoints as it may.
    #[error("at the limit of {0} webhook endpoints")]
    EndpointLimit(u64),
    /// The body is larger than the endpoint takes.
    #[error("the request body is too large")]
    PayloadTooLarge,
    /// The body is JSON but breaks rules; every problem is listed.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// Over the partner's rate limit.
    #[error("rate limited for {retry_after_secs} s")]
    TooManyRequests {
        /// Seconds until the window resets.
        retry_after_secs: u64,
    },
    /// The customer's redirect link could not be made or stored.
    #[error("the redirect link could not be made")]
    RedirectFailed(#[source] anyhow::Error),
    /// Something failed on our side that retrying will not fix.
    #[error("the request failed")]
    Internal(#[source] anyhow::Error),
    /// The database is unavailable for now; a retry may succeed.
    #[error("the database is unavailable")]
    Unavailable(#[source] StoreError),
    /// The token cannot be vetted until the revocation list is fetched again; a retry
    /// (on another replica, or later) may succeed.
    #[error("cannot vet tokens: {0}")]
    Unvetted(Unvetted),
    /// A sandbox client asked for this failure by its customer's address.
    #[error("sandbox trigger {0:?}")]
    Triggered(Trigger),
}

impl From<Refusal> for IntakeError {
    fn from(e: Refusal) -> Self {
        match e {
            Refusal::InsufficientScope(scope) => Self::Forbidden(scope),
            Refusal::Unvetted(why) => Self::Unvetted(why),
            other => Self::Unauthenticated(other, Profile::Standard),
        }
    }
}

impl From<StoreError> for IntakeError {
    fn from(e: StoreError) -> Self {
        if matches!(e, StoreError::LeaseLost) {
            // Another attempt with the key took over; it answers for the request.
            Self::KeyInFlight
        } else if e.is_transient() {
            Self::Unavailable(e)
        } else {
            Self::Internal(e.into())
        }
    }
}

/// The answers of [`IntakeError`], one per status, as partners see them.
#[derive(ApiResponse)]
enum ErrorResponse {
    /// The body is not JSON (`{"message":"The request body must be valid JSON."}`), or the
    /// `Idempotency-Key` header is empty or longer than 255 characters.
    #[oai(status = 400)]
    BadRequest(Json<BadRequestBody>),
    /// No valid bearer token: `{"message":"Unauthenticated."}`; `WWW-Authenticate` says why in
    /// `error_description` (expired, not valid yet, another issuer or audience, an unknown key,
    /// malformed). Get a new token and retry once. For a DPoP-bound token the challenge is
    /// `DPoP error="invalid_token"` or `DPoP error="invalid_dpop_proof"`, with `algs`.
    #[oai(status = 401)]
    Unauthorized(
        Json<Unauthenticated>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// The token lacks the operation's scope (`enquiry:case:intake:create` for partners'
    /// operations, `enquiry:referral:create` for referrals, `webhooks:manage` for webhooks):
    /// `{"message":"Invalid scope(s) provided."}`.
    #[oai(status = 403)]
    Forbidden(
        Json<InvalidScope>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// No case of yours for this e-mail address or reference: `{"message":"Case not found"}`.
    /// On attach, send the customer to the enquiry form instead. On a webhook endpoint: no
    /// endpoint of yours by that id (`{"message":"Webhook endpoint not found"}`).
    #[oai(status = 404)]
    NotFound(Json<CaseNotFound>),
    /// Another request with this `Idempotency-Key` is still being processed:
    /// `{"message":"A request with this Idempotency-Key is still being processed."}`; retry
    /// after `Retry-After` seconds to get its answer. Or the key was used before with a
    /// different request: `{"message":"Idempotency-Key reused with a different request."}`
    /// (no `Retry-After`: use a new key for a new request). Or the customer's data was erased
    /// since the key's first request: its answer is gone and the key stays spent
    /// (`{"message":"The answer to this Idempotency-Key was erased with the customer's data;
    /// send a new request with a new key."}`, no `Retry-After`). Making a webhook endpoint:
    /// you have as many as a partner may (`{"message":"You have 10 webhook endpoints, the
    /// most a partner may have: remove one first."}`).
    #[oai(status = 409)]
    Conflict(
        Json<RequestInFlight>,
        #[oai(header = "Retry-After")] Option<u32>,
    ),
    /// The body is larger than 64 KiB.
    #[oai(status = 413)]
    PayloadTooLarge(Json<TooLarge>),
    /// The body breaks the rules; every problem is listed by field path.
    #[oai(status = 422)]
    Invalid(Json<ValidationErrorBody>),
    /// Too many requests from this partner: `{"message":"Too Many Attempts."}`. Wait
    /// `Retry-After` seconds.
    #[oai(status = 429)]
    TooManyRequests(Json<TooManyAttempts>, #[oai(header = "Retry-After")] u64),
    /// Attach (or a referral): the link could not be made: `{"message":"Failed to generate
    /// redirect link"}`; send the customer to the customer dashboard instead. Other
    /// operations: an unexpected failure on our side.
    #[oai(status = 500)]
    Failed(Json<ServerError>),
    /// A passing outage; nothing was stored. Retry after `Retry-After` seconds. (A sandbox
    /// client's `unavailable-after-storing@sandbox.example` gets this after storing, as a
    /// timeout on the way would: retry with the same `Idempotency-Key`.)
    #[oai(status = 503)]
    Unavailable(Json<Unavailable>, #[oai(header = "Retry-After")] u32),
}

/// The body text of a 409 for a key whose answer was erased.
const ERASED_MESSAGE: &str = "The answer to this Idempotency-Key was erased with the customer's \
                              data; send a new request with a new key.";

/// The body text of a 500 that is not about a redirect link.
const INTERNAL_MESSAGE: &str = "The request could not be completed.";

impl IntakeError {
    /// The status it is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Self::NotJson | Self::Unreadable | Self::BadIdempotencyKey => 400,
            Self::Unauthenticated(..) => 401,
            Self::Forbidden(_) => 403,
            Self::CaseNotFound | Self::EndpointNotFound | Self::DeliveryNotFound => 404,
            Self::KeyInFlight | Self::KeyReused | Self::AnswerErased | Self::EndpointLimit(_) => {
                409
            }
            Self::PayloadTooLarge => 413,
            Self::Invalid(_) => 422,
            Self::TooManyRequests { .. } => 429,
            Self::RedirectFailed(_) | Self::Internal(_) => 500,
            Self::Unavailable(_) | Self::Unvetted(_) => 503,
            Self::Triggered(trigger) => match trigger {
                Trigger::AttachNotFound => 404,
                Trigger::AttachFails => 500,
                _ => 503,
            },
        }
    }

    fn response(self) -> ErrorResponse {
        match self {
            Self::NotJson => ErrorResponse::BadRequest(Json(BadRequestBody::default())),
            Self::Unreadable => ErrorResponse::BadRequest(Json(BadRequestBody {
                message: "The request body could not be read.".into(),
            })),
            Self::BadIdempotencyKey => ErrorResponse::BadRequest(Json(BadRequestBody {
                message: "The Idempotency-Key header must be 1 to 255 characters.".into(),
            })),
            Self::KeyInFlight => ErrorResponse::Conflict(
                Json(RequestInFlight::default()),
                Some(KEY_IN_FLIGHT_RETRY_SECS),
            ),
            // 409, not the draft's 422: the request itself is valid, the key's history is
            // what conflicts with it.
            Self::KeyReused => ErrorResponse::Conflict(
                Json(RequestInFlight {
                    message: "Idempotency-Key reused with a different request.".into(),
                }),
                None,
            ),
            // The key stays spent: processed again, a late retry would make the erased case
            // again.
            Self::AnswerErased => ErrorResponse::Conflict(
                Json(RequestInFlight {
                    message: ERASED_MESSAGE.into(),
                }),
                None,
            ),
            Self::Unauthenticated(reason, profile) => {
                let algs = shared::dpop::challenge_algs(profile.algorithms());
                // RFC 6750 3.1: no error code when the request carried no token at all.
                let challenge = match reason {
                    // Under FAPI 2.0 the one scheme taken is DPoP's, so it is the one named.
                    Refusal::Missing if profile.is_fapi2() => format!(r#"DPoP algs="{algs}""#),
                    Refusal::Invalid(why) if profile.is_fapi2() => format!(
                        r#"DPoP error="invalid_token", error_description="{}", algs="{algs}""#,
                        why.problem()
                    ),
                    Refusal::Missing => "Bearer".to_owned(),
                    Refusal::Invalid(why) => format!(
                        r#"Bearer error="invalid_token", error_description="{}""#,
                        why.problem()
                    ),
                    Refusal::InsufficientScope(_) | Refusal::Unvetted(_) => {
                        r#"Bearer error="invalid_token""#.into()
                    }
                    Refusal::InvalidProof(why) => format!(
                        r#"DPoP error="invalid_dpop_proof", error_description="{}", algs="{algs}""#,
                        why.problem(),
                    ),
                    Refusal::InvalidBoundToken(why) => format!(
                        r#"DPoP error="invalid_token", error_description="{}", algs="{algs}""#,
                        why.problem(),
                    ),
                    Refusal::UseDpopNonce => format!(
                        r#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof", algs="{algs}""#
                    ),
                };
                ErrorResponse::Unauthorized(Json(Unauthenticated::default()), challenge)
            }
            Self::Forbidden(scope) => ErrorResponse::Forbidden(
                Json(InvalidScope::default()),
                format!(r#"Bearer error="insufficient_scope", scope="{scope}""#),
            ),
            Self::CaseNotFound => ErrorResponse::NotFound(Json(CaseNotFound::default())),
            Self::EndpointNotFound => ErrorResponse::NotFound(Json(CaseNotFound {
                message: "Webhook endpoint not found".into(),
            })),
            Self::DeliveryNotFound => ErrorResponse::NotFound(Json(CaseNotFound {
                message: "Webhook delivery not found".into(),
            })),
            Self::EndpointLimit(limit) => ErrorResponse::Conflict(
                Json(RequestInFlight {
                    message: format!(
                        "You have {limit} webhook endpoints, the most a partner may have: \
                         remove one first."
                    ),
                }),
                None,
            ),
            Self::PayloadTooLarge => ErrorResponse::PayloadTooLarge(Json(TooLarge::default())),
            Self::Invalid(errors) => ErrorResponse::Invalid(Json(errors.into())),
            Self::TooManyRequests { retry_after_secs } => {
                ErrorResponse::TooManyRequests(Json(TooManyAttempts::default()), retry_after_secs)
            }
            Self::RedirectFailed(cause) => {
                tracing::error!(error = %chain(&*cause), "failed to generate redirect link");
                ErrorResponse::Failed(Json(ServerError::default()))
            }
            Self::Internal(cause) => {
                tracing::error!(error = %chain(&*cause), "request failed");
                ErrorResponse::Failed(Json(ServerError {
                    message: INTERNAL_MESSAGE.into(),
                }))
            }
            Self::Unavailable(cause) => {
                tracing::error!(error = %chain(&cause), "database unavailable");
                ErrorResponse::Unavailable(Json(Unavailable::default()), RETRY_AFTER_SECS)
            }
            // Logged once, when the list goes stale, by the refresher; not per request.
            Self::Unvetted(_) => {
                ErrorResponse::Unavailable(Json(Unavailable::default()), RETRY_AFTER_SECS)
            }
            // The answers a real failure gets, without its error log and out of the HTTP
            // metrics: nothing failed.
            Self::Triggered(trigger) => {
                service_kit::telemetry::record(
                    service_kit::telemetry::OUTCOME,
                    service_kit::telemetry::REHEARSED,
                );
                metrics::counter!("intake_sandbox_rehearsals_total", "trigger" => trigger.name())
                    .increment(1);
                Self::rehearsal(trigger)
            }
        }
    }

    /// The answer a sandbox client asked for by `trigger`.
    fn rehearsal(trigger: Trigger) -> ErrorResponse {
        match trigger {
            Trigger::AttachNotFound => ErrorResponse::NotFound(Json(CaseNotFound::default())),
            Trigger::AttachFails => ErrorResponse::Failed(Json(ServerError::default())),
            _ => ErrorResponse::Unavailable(Json(Unavailable::default()), RETRY_AFTER_SECS),
        }
    }
}

/// An error and its causes on one line, outermost first; a cause whose text an outer error
/// already repeats is not written twice.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            let _ = write!(line, ": {text}");
        }
        source = cause.source();
    }
    line
}

impl IntoResponse for IntakeError {
    fn into_response(self) -> poem::Response {
        self.response().into_response()
    }
}

impl ApiResponse for IntakeError {
    fn meta() -> MetaResponses {
        ErrorResponse::meta()
    }

    fn register(registry: &mut Registry) {
        ErrorResponse::register(registry);
    }
}

impl From<IntakeError> for poem::Error {
    fn from(e: IntakeError) -> Self {
        let message = e.to_string();
        let mut error = poem::Error::from_response(e.into_response());
        error.set_error_message(message);
        error
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use shared::access_token::TokenFault;
    use shared::refusal::TokenRefusal;

    /// Status, `WWW-Authenticate`, `Retry-After` and body of an answer.
    type Answer = (u16, Option<String>, Option<String>, Value);
    /// An error and the status, headers and body it must be answered with.
    type Case = (
        IntakeError,
        u16,
        Option<&'static str>,
        Option<&'static str>,
        Value,
    );

    async fn answer(e: IntakeError) -> Answer {
        let resp = e.into_response();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let (challenge, retry) = (header("www-authenticate"), header("retry-after"));
        let status = resp.status().as_u16();
        let body = resp.into_body().into_string().await.unwrap();
        (
            status,
            challenge,
            retry,
            serde_json::from_str(&body).unwrap(),
        )
    }

    fn message(text: &str) -> Value {
        json!({ "message": text })
    }

    #[tokio::test]
    async fn every_error_maps_to_its_status_headers_and_body() {
        let mut invalid = ValidationErrors::default();
        invalid.add("email", "The email field is required.");
        let db_down = StoreError::TimedOut;
        let cases: Vec<Case> = vec![
            (
                IntakeError::NotJson,
                400,
                None,
                None,
                message("The request body must be valid JSON."),
            ),
            (
                IntakeError::Unreadable,
                400,
                None,
                None,
                message("The request body could not be read."),
            ),
            (
                Refusal::Missing.into(),
                401,
                Some("Bearer"),
                None,
                message("Unauthenticated."),
            ),
            (
                Refusal::Invalid(TokenRefusal::Fault(TokenFault::Expired)).into(),
                401,
                Some(
                    r#"Bearer error="invalid_token", error_description="The access token expired""#,
                ),
                None,
                message("Unauthenticated."),
            ),
            (
                Refusal::Invalid(TokenRefusal::Fault(TokenFault::KidUnknown)).into(),
                401,
                Some(
                    r#"Bearer error="invalid_token", error_description="The access token is signed with an unknown key""#,
                ),
                None,
                message("Unauthenticated."),
            ),
            (
                Refusal::InsufficientScope("enquiry:case:intake:create").into(),
                403,
                Some(r#"Bearer error="insufficient_scope", scope="enquiry:case:intake:create""#),
                None,
                message("Invalid scope(s) provided."),
            ),
            (
                IntakeError::BadIdempotencyKey,
                400,
                None,
                None,
                message("The Idempotency-Key header must be 1 to 255 characters."),
            ),
            (
                IntakeError::AnswerErased,
                409,
                None,
                None,
                message(
                    "The answer to this Idempotency-Key was erased with the customer's data; \
                     send a new request with a new key.",
                ),
            ),
            (
                IntakeError::CaseNotFound,
                404,
                None,
                None,
                message("Case not found"),
            ),
            (
                IntakeError::KeyInFlight,
                409,
                None,
                Some("1"),
                message("A request with this Idempotency-Key is still being processed."),
            ),
            (
                StoreError::LeaseLost.into(),
                409,
                None,
                Some("1"),
                message("A request with this Idempotency-Key is still being processed."),
            ),
            (
                IntakeError::KeyReused,
                409,
                None,
                None,
                message("Idempotency-Key reused with a different request."),
            ),
            (
                IntakeError::PayloadTooLarge,
                413,
                None,
                None,
                message("The request body must not exceed 64 KiB."),
            ),
            (
                invalid.into(),
                422,
                None,
                None,
                json!({"message": "The given data was invalid.", "errors": {"email": ["The email field is required."]}}),
            ),
            (
                IntakeError::TooManyRequests {
                    retry_after_secs: 7,
                },
                429,
                None,
                Some("7"),
                message("Too Many Attempts."),
            ),
            (
                IntakeError::RedirectFailed(anyhow::anyhow!("no portal")),
                500,
                None,
                None,
                message("Failed to generate redirect link"),
            ),
            (
                StoreError::Encoding(serde_json::from_str::<Value>("{").unwrap_err()).into(),
                500,
                None,
                None,
                message(INTERNAL_MESSAGE),
            ),
            (
                db_down.into(),
                503,
                None,
                Some("5"),
                message("Service temporarily unavailable"),
            ),
        ];
        for (error, status, challenge, retry, body) in cases {
            let described = format!("{error:?}");
            assert_eq!(error.status(), status, "{described}");
            let got = answer(error).await;
            assert_eq!(
                got,
                (
                    status,
                    challenge.map(str::to_owned),
                    retry.map(str::to_owned),
                    body
                ),
                "{described}"
            );
        }
    }

    #[test]
    fn each_documented_status_appears_once() {
        let statuses: Vec<u16> = IntakeError::meta()
            .responses
            .iter()
            .filter_map(|r| r.status)
            .collect();
        assert_eq!(statuses, [400, 401, 403, 404, 409, 413, 422, 429, 500, 503]);
    }
}
