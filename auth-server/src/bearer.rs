//! Access tokens shown to the auth-server itself: a resource server reads `/revocations`
//! with a token of its own client, verified here against the keys this server publishes,
//! so the list of disabled clients is not open to anyone who can reach the port. A token
//! bound to a DPoP key is taken as the intake-api takes one: under the `DPoP` scheme,
//! beside a fresh proof by its key, never as a bearer token.

use chrono::{DateTime, Utc};
use shared::access_token;
use shared::claims::{AccessTokenClaims, TokenValidation};
use shared::dpop::{ProofFault, VerifiedProof};
use shared::profile::Profile;
pub use shared::refusal::Refusal;
use shared::refusal::TokenRefusal;

use crate::registry::Snapshot;

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
        scope: &'static str,
        now: DateTime<Utc>,
    ) -> Result<AccessTokenClaims, Refusal> {
        let token = access_token::bearer_token(authorization.map(str::as_bytes))?;
        access_token::bearer_taken(self.profile)?;
        let claims = self.verified(snapshot, token, now).await?;
        access_token::unbound(&claims)?;
        granted(claims, scope)
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
        proof: Result<Option<&str>, ProofFault>,
        method: &str,
        url: &str,
        scope: &'static str,
        now: DateTime<Utc>,
    ) -> Result<(AccessTokenClaims, VerifiedProof), Refusal> {
        let token = access_token::dpop_token(Some(authorization.as_bytes()))
            .unwrap_or(Err(Refusal::InvalidBoundToken(TokenRefusal::Missing)))?;
        let claims = self
            .verified(snapshot, token, now)
            .await
            .map_err(Refusal::under_dpop)?;
        let expected = shared::dpop::Expected {
            method,
            url,
            access_token: Some(token),
            now: now.timestamp(),
            algorithms: self.profile.algorithms(),
        };
        let proof = access_token::bound_proof(&claims, proof, expected)?;
        Ok((granted(claims, scope)?, proof))
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
        .map_err(|fault| Refusal::Invalid(fault.into()))?
        .claims;
        match snapshot.clients.get(&claims.client_id) {
            Some(client) if !client.disabled => Ok(claims),
            // Gone from the registry since it was issued: as good as disabled.
            Some(_) | None => Err(Refusal::Invalid(TokenRefusal::ClientDisabled)),
        }
    }
}

/// `claims` when they grant `scope`.
fn granted(claims: AccessTokenClaims, scope: &'static str) -> Result<AccessTokenClaims, Refusal> {
    if claims.has_scope(scope) {
        Ok(claims)
    } else {
        Err(Refusal::InsufficientScope(scope))
    }
}
