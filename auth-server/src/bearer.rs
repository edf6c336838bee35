//! Access tokens shown to the auth-server itself: a resource server reads `/revocations`
//! with a token of its own client, verified here against the keys this server publishes,
//! so the list of disabled clients is not open to anyone who can reach the port. A token
//! bound to a DPoP key is taken as the intake-api takes one: under the `DPoP` scheme,
//! beside a fresh proof by its key, never as a bearer token.

use chrono::{DateTime, Utc};
use shared::access_token;
use shared::claims::{AccessTokenClaims, BearerFault, TokenValidation, bearer_token, dpop_token};
use shared::dpop::VerifiedProof;
use shared::profile::Profile;

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
    /// A bound token's proof is missing, or not one for this request; the reason is for
    /// logs only.
    #[error("invalid DPoP proof: {0}")]
    InvalidProof(&'static str),
    /// Whether the proof was used before could not be told (the replay store is down): the
    /// client is to send the request again later, with a new proof.
    #[error("the replay store cannot be reached")]
    Unavailable,
    /// Server nonces are on, and the proof carries none or one no longer accepted.
    #[error("a DPoP proof without a current server nonce")]
    UseNonce,
}

impl Refusal {
    /// A label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Invalid(reason) => reason,
            Self::InsufficientScope => "scope",
            Self::InvalidProof(reason) => reason,
            Self::Unavailable => "replay_store",
            Self::UseNonce => "use_dpop_nonce",
        }
    }
}

/// What a token must be to be accepted here: signed by a key this server publishes, with
/// that key's algorithm, typed `at+jwt`, from this issuer for this audience.
pub struct BearerCheck {
    validation: TokenValidation,
    profile: Profile,
}

impl BearerCheck {
    /// Accepts the tokens this server issues as `issuer` for `audience`, as `profile` has
    /// them sent.
    pub fn new(issuer: &str, audience: &str, profile: Profile) -> Self {
        Self {
            validation: TokenValidation::new(issuer, audience),
            profile,
        }
    }

    /// The algorithms a proof may be signed with, as a `DPoP` challenge lists them.
    pub fn proof_algorithms(&self) -> &'static [&'static str] {
        self.profile.algorithms()
    }

    /// The claims of the bearer token in `authorization` when it verifies, is bound to no
    /// key, grants `scope`, and its client is registered and enabled in `snapshot`.
    pub async fn check(
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
        // Under FAPI 2.0 every token is sender-constrained: none is taken as a bearer one.
        if !self.profile.allows_secrets_and_bearer() {
            return Err(Refusal::Invalid("bearer_not_accepted"));
        }
        let claims = self.verified(snapshot, token, now).await?;
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

    /// The claims of the `Authorization: DPoP` token in `authorization` and the request's
    /// `proof` (the one `DPoP` header's value, see [`shared::dpop::single_proof`]) when
    /// the token verifies as [`Self::check`] has it, is bound to the key that made the
    /// proof, and the proof is for `method` on `url` beside this token. The proof's `jti`
    /// is the caller's to spend.
    #[allow(clippy::too_many_arguments)]
    pub async fn check_dpop(
        &self,
        snapshot: &Snapshot,
        authorization: &str,
        proof: Result<Option<&str>, &'static str>,
        method: &str,
        url: &str,
        scope: &str,
        now: DateTime<Utc>,
    ) -> Result<(AccessTokenClaims, VerifiedProof), Refusal> {
        let token = dpop_token(authorization).map_err(|fault| match fault {
            BearerFault::Missing => Refusal::Invalid("missing"),
            BearerFault::TooLong => Refusal::Invalid("too_long"),
        })?;
        let claims = self.verified(snapshot, token, now).await?;
        let bound_to = claims
            .cnf
            .as_ref()
            .map(|c| c.jkt.as_str())
            .ok_or(Refusal::Invalid("token_not_bound"))?;
        let proof = proof
            .map_err(Refusal::InvalidProof)?
            .ok_or(Refusal::InvalidProof("proof_missing"))?;
        let expected = shared::dpop::Expected {
            method,
            url,
            access_token: Some(token),
            now: now.timestamp(),
            algorithms: self.profile.algorithms(),
        };
        let proof = shared::dpop::verify(proof, expected).map_err(Refusal::InvalidProof)?;
        if proof.jkt != bound_to {
            return Err(Refusal::Invalid("proof_key_mismatch"));
        }
        if !claims.has_scope(scope) {
            return Err(Refusal::InsufficientScope);
        }
        Ok((claims, proof))
    }

    /// The claims of `token` when it verifies against a key published in `snapshot` (the
    /// one check of [`shared::access_token::verify`], as at the intake-api) and its client
    /// is registered and enabled there; what it is bound to is the caller's.
    async fn verified(
        &self,
        snapshot: &Snapshot,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<AccessTokenClaims, Refusal> {
        let published = snapshot.published_keys(now);
        let claims = access_token::verify(token, &self.validation, async |kid: &str| {
            published.into_iter().find(|k| k.kid == kid).cloned()
        })
        .await
        .map_err(|fault| Refusal::Invalid(fault.label()))?
        .claims;
        match snapshot.clients.get(&claims.client_id) {
            Some(client) if !client.disabled => Ok(claims),
            _ => Err(Refusal::Invalid("client_disabled")),
        }
    }
}
