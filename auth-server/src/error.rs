//! OAuth 2.0 errors of the token endpoint, in the wire format partners already parse.

use shared::dpop::ProofFault;
use shared::error::OAuthErrorBody;

const INVALID_REQUEST: &str = "The request is missing a required parameter, includes an invalid parameter value, includes a parameter more than once, or is otherwise malformed.";
const UNSUPPORTED_GRANT_TYPE: &str =
    "The authorization grant type is not supported by the authorization server.";
const INVALID_CLIENT: &str = "Client authentication failed";
const PRIVATE_KEY_JWT_ONLY: &str = "Client authentication failed: this server follows FAPI 2.0 and accepts only private_key_jwt (a client_assertion signed with PS256, ES256 or EdDSA), never a client secret";
const ASSERTION_JTI: &str = "Client authentication failed: the client assertion's jti must be 1 to 255 bytes with no control characters";
const ASSERTION_PREDATES_REPLAY_STORE: &str = "Client authentication failed: the client assertion was made before the server's record of used assertions begins, so it cannot be shown unused; make a new one, with an iat of now";
const INVALID_SCOPE: &str = "The requested scope is invalid, unknown, or malformed";
const TEMPORARILY_UNAVAILABLE: &str = "The authorization server is currently unable to handle the request due to a temporary overloading or maintenance of the server.";
const TOO_MANY_REQUESTS: &str = "Too Many Attempts.";
const USE_DPOP_NONCE: &str = "Authorization server requires nonce in DPoP proof";
const SERVER_ERROR: &str = "The authorization server encountered an unexpected condition which prevented it from fulfilling the request.";

/// Why a client failed to authenticate. Operators see it in the metric and the log line; the
/// client is answered `invalid_client` whatever it is, so a caller cannot learn which ids
/// exist or which of them are disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFailure {
    /// The id names no client.
    UnknownClient,
    /// The client exists; the secret is none of its secrets, or there is no secret.
    WrongSecret,
    /// The secret is one of the client's, past the grace its rotation gave it.
    ExpiredSecret,
    /// The secret is right, but an operator disabled the client.
    DisabledClient,
    /// The `Authorization` header cannot be read as Basic credentials.
    MalformedCredentials,
    /// A secret for a client registered for `private_key_jwt`, or an assertion for one
    /// registered for a secret.
    WrongAuthMethod,
    /// A secret and an assertion in one request (RFC 6749 section 2.3: one method).
    MultipleAuthMethods,
    /// The assertion is not a JWT, or lacks a claim it must have.
    AssertionMalformed,
    /// The assertion is signed with `none`, a shared secret, or an algorithm its key is
    /// not for.
    AssertionAlgorithm,
    /// None of the client's keys verifies the assertion.
    AssertionSignature,
    /// `iss` and `sub` are not both the client's id (or the `client_id` sent beside it).
    AssertionIssuer,
    /// `aud` names neither the issuer nor the token endpoint.
    AssertionAudience,
    /// `exp` has passed.
    AssertionExpired,
    /// `exp` is further ahead than an assertion may live.
    AssertionLifetime,
    /// `iat` or `nbf` is in the future.
    AssertionNotYetValid,
    /// The `jti` is empty, over 255 bytes or holds a control character: refused before it
    /// reaches the replay store.
    AssertionJti,
    /// The assertion's `jti` was used before.
    AssertionReplayed,
    /// The assertion was made (by its `iat`, or by the earliest its `exp` allows) before the
    /// replay store's memory begins: Redis restarted or was flushed since, and the assertion
    /// may have been used before.
    AssertionPredatesReplayStore,
    /// The client's keys are published at a JWKS URL, and this server has never fetched a
    /// usable JWKS from it (the partner's server is down, or answers something else).
    JwksUnavailable,
    /// A secret, or no assertion, under FAPI 2.0, which takes private_key_jwt only.
    SecretNotAccepted,
}

impl ClientFailure {
    /// Its label in metrics and logs.
    pub fn reason(self) -> &'static str {
        match self {
            Self::UnknownClient => "unknown_client",
            Self::WrongSecret => "wrong_secret",
            Self::ExpiredSecret => "expired_secret",
            Self::DisabledClient => "disabled_client",
            Self::MalformedCredentials => "malformed_credentials",
            Self::WrongAuthMethod => "wrong_auth_method",
            Self::MultipleAuthMethods => "multiple_auth_methods",
            Self::AssertionMalformed => "assertion_malformed",
            Self::AssertionAlgorithm => "assertion_algorithm",
            Self::AssertionSignature => "assertion_signature",
            Self::AssertionIssuer => "assertion_issuer",
            Self::AssertionAudience => "assertion_audience",
            Self::AssertionExpired => "assertion_expired",
            Self::AssertionLifetime => "assertion_lifetime",
            Self::AssertionNotYetValid => "assertion_not_yet_valid",
            Self::AssertionJti => "assertion_jti",
            Self::AssertionReplayed => "assertion_replayed",
            Self::AssertionPredatesReplayStore => "assertion_predates_replay_store",
            Self::JwksUnavailable => "jwks_unavailable",
            Self::SecretNotAccepted => "secret_not_accepted",
        }
    }
}

/// Why a token request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// A parameter is missing, repeated or malformed; the hint says what to check.
    #[error("invalid_request: {hint}")]
    InvalidRequest {
        /// What to check.
        hint: String,
    },
    /// The body is larger than the endpoint takes.
    #[error("invalid_request: body too large")]
    BodyTooLarge,
    /// `grant_type` is missing or not `client_credentials`.
    #[error("unsupported_grant_type")]
    UnsupportedGrantType,
    /// Unknown client, wrong or expired secret, disabled client.
    #[error("invalid_client ({})", failure.reason())]
    InvalidClient {
        /// Whether the request carried an `Authorization` header (answered with a challenge).
        used_authorization_header: bool,
        /// Which of those it was; never part of the answer.
        failure: ClientFailure,
    },
    /// A scope is unknown or not granted to the client.
    #[error("invalid_scope: {scope}")]
    InvalidScope {
        /// The offending scope.
        scope: String,
    },
    /// The `DPoP` proof is not acceptable (RFC 9449 section 5); the reason is for metrics
    /// and logs, the hint for the client.
    #[error("invalid_dpop_proof ({reason})")]
    InvalidDpopProof {
        /// Which check failed.
        reason: ProofFault,
        /// The algorithms a proof may be signed with, for the hint.
        algorithms: &'static [&'static str],
    },
    /// The proof carries no nonce, or one this server no longer accepts (RFC 9449 section
    /// 8): the answer's `DPoP-Nonce` header holds the one to use.
    #[error("use_dpop_nonce")]
    UseDpopNonce,
    /// Something failed on our side; details are in the log, not the response.
    #[error("server_error")]
    ServerError,
    /// The database, which a client assertion must be recorded in before it is honoured,
    /// cannot be reached; the request may be repeated.
    #[error("temporarily_unavailable")]
    TemporarilyUnavailable,
    /// Too many requests, or too many failed authentications, from this client and address.
    #[error("too_many_requests")]
    TooManyRequests {
        /// Seconds until the limit resets.
        retry_after_secs: u64,
    },
}

impl OAuthError {
    /// `invalid_request` naming the parameter to check.
    pub fn parameter(param: &str) -> Self {
        Self::InvalidRequest {
            hint: format!("Check the `{param}` parameter"),
        }
    }

    /// The HTTP status it is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidRequest { .. }
            | Self::UnsupportedGrantType
            | Self::InvalidScope { .. }
            | Self::InvalidDpopProof { .. }
            | Self::UseDpopNonce => 400,
            Self::BodyTooLarge => 413,
            Self::InvalidClient { .. } => 401,
            Self::ServerError => 500,
            Self::TemporarilyUnavailable => 503,
            Self::TooManyRequests { .. } => 429,
        }
    }

    /// A short label for metrics and logs; finer than the error code, which for a failed
    /// client authentication is always `invalid_client`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidRequest { .. } => "invalid_request",
            Self::BodyTooLarge => "body_too_large",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::InvalidClient { failure, .. } => failure.reason(),
            Self::InvalidScope { .. } => "invalid_scope",
            Self::InvalidDpopProof { reason, .. } => reason.label(),
            Self::UseDpopNonce => "use_dpop_nonce",
            Self::ServerError => "server_error",
            Self::TemporarilyUnavailable => "temporarily_unavailable",
            Self::TooManyRequests { .. } => "too_many_requests",
        }
    }

    /// The JSON body.
    pub fn body(&self) -> OAuthErrorBody {
        let (error, description, hint) = match self {
            Self::InvalidRequest { hint } => {
                ("invalid_request", INVALID_REQUEST, Some(hint.clone()))
            }
            Self::BodyTooLarge => (
                "invalid_request",
                INVALID_REQUEST,
                Some("The request body must not exceed 8 KiB".to_owned()),
            ),
            Self::UnsupportedGrantType => (
                "unsupported_grant_type",
                UNSUPPORTED_GRANT_TYPE,
                Some("Check that all required parameters have been provided".to_owned()),
            ),
            // The one failure told apart in the answer: it depends on the deployment alone,
            // whatever the client, so it says nothing of any client.
            Self::InvalidClient {
                failure: ClientFailure::SecretNotAccepted,
                ..
            } => ("invalid_client", PRIVATE_KEY_JWT_ONLY, None),
            // Told only to the assertion's signer (the signature is checked first), and about
            // its own assertion.
            Self::InvalidClient {
                failure: ClientFailure::AssertionJti,
                ..
            } => ("invalid_client", ASSERTION_JTI, None),
            // The same for every client: it says only that the store restarted.
            Self::InvalidClient {
                failure: ClientFailure::AssertionPredatesReplayStore,
                ..
            } => ("invalid_client", ASSERTION_PREDATES_REPLAY_STORE, None),
            Self::InvalidClient { .. } => ("invalid_client", INVALID_CLIENT, None),
            Self::InvalidScope { scope } => (
                "invalid_scope",
                INVALID_SCOPE,
                Some(format!("Check the `{scope}` scope")),
            ),
            Self::InvalidDpopProof { reason, algorithms } => (
                "invalid_dpop_proof",
                reason.problem(),
                Some(format!(
                    "Send one DPoP header: a new proof signed with {}, for POST on the token \
                     endpoint's URL ({reason})",
                    algorithms.join(", ")
                )),
            ),
            Self::UseDpopNonce => (
                "use_dpop_nonce",
                USE_DPOP_NONCE,
                Some(
                    "Make a new proof with the nonce of this answer's DPoP-Nonce header in its \
                     `nonce` claim"
                        .to_owned(),
                ),
            ),
            Self::ServerError => ("server_error", SERVER_ERROR, None),
            Self::TemporarilyUnavailable => {
                ("temporarily_unavailable", TEMPORARILY_UNAVAILABLE, None)
            }
            Self::TooManyRequests { retry_after_secs } => (
                "too_many_requests",
                TOO_MANY_REQUESTS,
                Some(format!("Retry after {retry_after_secs} seconds")),
            ),
        };
        OAuthErrorBody {
            error: error.to_owned(),
            error_description: description.to_owned(),
            hint,
            message: description.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_its_status_and_code() {
        let cases = [
            (
                OAuthError::parameter("client_id"),
                400,
                "invalid_request",
                Some("Check the `client_id` parameter"),
            ),
            (
                OAuthError::UnsupportedGrantType,
                400,
                "unsupported_grant_type",
                Some("Check that all required parameters have been provided"),
            ),
            (
                OAuthError::InvalidClient {
                    used_authorization_header: false,
                    failure: ClientFailure::WrongSecret,
                },
                401,
                "invalid_client",
                None,
            ),
            (
                OAuthError::InvalidScope { scope: "x".into() },
                400,
                "invalid_scope",
                Some("Check the `x` scope"),
            ),
            (
                OAuthError::BodyTooLarge,
                413,
                "invalid_request",
                Some("The request body must not exceed 8 KiB"),
            ),
            (
                OAuthError::InvalidDpopProof {
                    reason: ProofFault::Htu,
                    algorithms: &shared::dpop::ALGORITHMS,
                },
                400,
                "invalid_dpop_proof",
                Some(
                    "Send one DPoP header: a new proof signed with ES256, PS256, RS256, EdDSA, \
                     for POST on the token endpoint's URL (proof_htu)",
                ),
            ),
            (
                OAuthError::UseDpopNonce,
                400,
                "use_dpop_nonce",
                Some(
                    "Make a new proof with the nonce of this answer's DPoP-Nonce header in its \
                     `nonce` claim",
                ),
            ),
            (OAuthError::ServerError, 500, "server_error", None),
            (
                OAuthError::TemporarilyUnavailable,
                503,
                "temporarily_unavailable",
                None,
            ),
            (
                OAuthError::TooManyRequests {
                    retry_after_secs: 7,
                },
                429,
                "too_many_requests",
                Some("Retry after 7 seconds"),
            ),
        ];
        for (err, status, code, hint) in cases {
            let body = err.body();
            assert_eq!(err.status(), status, "{err:?}");
            assert_eq!(body.error, code);
            assert_eq!(body.hint.as_deref(), hint);
            assert_eq!(body.message, body.error_description);
        }
    }

    #[test]
    fn every_client_failure_is_answered_the_same_and_counted_apart() {
        let failures = [
            ClientFailure::UnknownClient,
            ClientFailure::WrongSecret,
            ClientFailure::ExpiredSecret,
            ClientFailure::DisabledClient,
            ClientFailure::MalformedCredentials,
            ClientFailure::WrongAuthMethod,
            ClientFailure::MultipleAuthMethods,
            ClientFailure::AssertionMalformed,
            ClientFailure::AssertionAlgorithm,
            ClientFailure::AssertionSignature,
            ClientFailure::AssertionIssuer,
            ClientFailure::AssertionAudience,
            ClientFailure::AssertionExpired,
            ClientFailure::AssertionLifetime,
            ClientFailure::AssertionNotYetValid,
            ClientFailure::AssertionReplayed,
            ClientFailure::JwksUnavailable,
        ];
        let answer = |failure| {
            let e = OAuthError::InvalidClient {
                used_authorization_header: false,
                failure,
            };
            (e.status(), e.body())
        };
        let mut reasons: Vec<_> = failures.iter().map(|f| f.reason()).collect();
        for failure in failures {
            assert_eq!(
                answer(failure),
                answer(ClientFailure::UnknownClient),
                "{failure:?}"
            );
        }
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), failures.len(), "{reasons:?}");
    }

    /// A `jti` the store cannot keep is the client's mistake, and it is told which.
    #[test]
    fn a_bad_jti_is_told_as_such_and_never_as_an_outage() {
        let assertion = OAuthError::InvalidClient {
            used_authorization_header: false,
            failure: ClientFailure::AssertionJti,
        };
        assert_eq!(assertion.status(), 401);
        assert_eq!(assertion.reason(), "assertion_jti");
        let body = assertion.body();
        assert_eq!(body.error, "invalid_client");
        assert!(body.error_description.contains("jti"), "{body:?}");
        let proof = OAuthError::InvalidDpopProof {
            reason: ProofFault::Jti,
            algorithms: &shared::dpop::ALGORITHMS,
        };
        assert_eq!(proof.status(), 400);
        let body = proof.body();
        assert_eq!(body.error, "invalid_dpop_proof");
        assert!(body.error_description.contains("jti"), "{body:?}");
    }
}
