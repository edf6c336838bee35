//! Access tokens shown to the auth-server itself: a resource server reads `/revocations`
//! with a token of its own client, verified here against the keys this server publishes,
//! so the list of disabled clients is not open to anyone who can reach the port.

use chrono::{DateTime, Utc};
use shared::claims::{
    AccessTokenClaims, BearerFault, TokenValidation, bearer_token, is_access_token_typ,
};

use crate::registry::Snapshot;

/// Why a bearer token was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `Authorization: Bearer` header.
    #[error("no bearer token")]
    Missing,
    /// A token that does not verify, has expired, or whose client is disabled; the reason is
    /// for logs only.
    #[error("invalid token: {0}")]
    Invalid(&'static str),
    /// A valid token without the scope the endpoint needs.
    #[error("insufficient scope")]
    InsufficientScope,
}

impl Refusal {
    /// A label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Invalid(reason) => reason,
            Self::InsufficientScope => "scope",
        }
    }
}

/// What a token must be to be accepted here: signed by a key this server publishes, with
/// that key's algorithm, typed `at+jwt`, from this issuer for this audience.
pub struct BearerCheck {
    validation: TokenValidation,
}

impl BearerCheck {
    /// Accepts the tokens this server issues as `issuer` for `audience`.
    pub fn new(issuer: &str, audience: &str) -> Self {
        Self {
            validation: TokenValidation::new(issuer, audience),
        }
    }

    /// The claims of the token in `authorization` when it verifies, grants `scope`, and its
    /// client is registered and enabled in `snapshot`.
    pub fn check(
        &self,
        snapshot: &Snapshot,
        authorization: Option<&str>,
        scope: &str,
        now: DateTime<Utc>,
    ) -> Result<AccessTokenClaims, Refusal> {
        let token =
            bearer_token(authorization.ok_or(Refusal::Missing)?).map_err(|fault| match fault {
                BearerFault::Missing => Refusal::Missing,
                BearerFault::TooLong => Refusal::Invalid("too_long"),
            })?;
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| Refusal::Invalid("malformed"))?;
        if !is_access_token_typ(header.typ.as_deref()) {
            return Err(Refusal::Invalid("typ"));
        }
        let kid = header.kid.ok_or(Refusal::Invalid("kid_missing"))?;
        let key = snapshot
            .published_keys(now)
            .into_iter()
            .find(|k| k.kid == kid)
            .ok_or(Refusal::Invalid("kid_unknown"))?;
        // The key decides the algorithm, never the token.
        if header.alg != key.alg.jwt() {
            return Err(Refusal::Invalid("algorithm"));
        }
        let validation = self.validation.for_algorithm(key.alg);
        let claims = jsonwebtoken::decode::<AccessTokenClaims>(token, &key.verifier, validation)
            .map_err(|_| Refusal::Invalid("verification"))?
            .claims;
        match snapshot.clients.get(&claims.client_id) {
            Some(client) if !client.disabled => {}
            _ => return Err(Refusal::Invalid("client_disabled")),
        }
        // A token bound to a key is good only beside a proof made with it, as at the
        // intake-api: a thief holding only the token gets nowhere by sending it as bearer.
        if claims.cnf.is_some() {
            return Err(Refusal::Invalid("bound_token_as_bearer"));
        }
        if !claims.has_scope(scope) {
            return Err(Refusal::InsufficientScope);
        }
        Ok(claims)
    }
}
