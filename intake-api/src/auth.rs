//! Access-token verification against the cached JWKS, each key with the algorithm its JWK
//! names, nothing taken on the token's own say-so; a DPoP-bound token only beside a proof made with its key.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use shared::access_token;
use shared::claims::{AccessTokenClaims, CLOCK_LEEWAY_SECS, TokenValidation};
use shared::dpop::{self, ProofFault, VerifiedProof};
use shared::profile::Profile;
use shared::refusal::{TokenRefusal, Unvetted};

use crate::jwks::{JwksCache, TokenKey};
use crate::revocations::RevokedClients;

pub use shared::access_token::dpop_token;
pub use shared::claims::MAX_TOKEN_BYTES;
pub use shared::refusal::Refusal;

/// What an `Authorization` header states about its token before any key or clock is consulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedToken<'a> {
    /// The compact JWT, trimmed, at most `MAX_TOKEN_BYTES` long.
    pub token: &'a str,
    /// Its JOSE header, as the token claims it.
    pub header: access_token::TokenHeader,
}

/// How many verified tokens are remembered by default. Partners reuse a token for its
/// whole lifetime, so a few per partner covers every one of them; only tokens whose
/// signature verified get in, so the bound is against surprises, not attackers.
pub const VERIFIED_TOKENS: usize = 4096;

/// A token whose signature and claims verified, and the key that verified it.
struct Verified {
    claims: Arc<AccessTokenClaims>,
    key: Arc<TokenKey>,
    kid: String,
}

/// Verifies tokens for one issuer and audience.
pub struct Verifier {
    jwks: Arc<JwksCache>,
    /// Clients whose tokens are refused though they verify.
    revoked: Option<Arc<RevokedClients>>,
    validation: TokenValidation,
    /// Verified tokens by their exact text, so a partner's next request with the same token
    /// costs a lookup instead of an RSA verification.
    verified: RwLock<HashMap<String, Verified>>,
    capacity: usize,
    profile: Profile,
}

impl Verifier {
    /// A verifier accepting tokens from `issuer` for `audience`, each with the algorithm of
    /// the key that signed it, sent as `profile` has them sent.
    pub fn new(jwks: Arc<JwksCache>, issuer: &str, audience: &str, profile: Profile) -> Self {
        Self {
            jwks,
            revoked: None,
            validation: TokenValidation::new(issuer, audience),
            verified: RwLock::new(HashMap::new()),
            capacity: VERIFIED_TOKENS,
            profile,
        }
    }

    /// The profile tokens are taken under.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Remembers up to `capacity` verified tokens (0: verify the signature of every request).
    pub fn with_verified_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Refuses the tokens of the clients on `revoked`.
    pub fn with_revocations(mut self, revoked: Arc<RevokedClients>) -> Self {
        self.revoked = Some(revoked);
        self
    }

    /// The key cache.
    pub fn jwks(&self) -> &Arc<JwksCache> {
        &self.jwks
    }

    /// The revocation list, if one is checked.
    pub fn revocations(&self) -> Option<&Arc<RevokedClients>> {
        self.revoked.as_ref()
    }

    /// Checks the token of an `Authorization` header value; scopes are the caller's to check.
    pub async fn authenticate(
        &self,
        authorization: Option<&[u8]>,
    ) -> Result<Arc<AccessTokenClaims>, Refusal> {
        let token = access_token::bearer_token(authorization)?;
        access_token::bearer_taken(self.profile)?;
        let claims = self.claims_of(token).await?;
        access_token::unbound(&claims)?;
        Ok(claims)
    }

    /// Checks an `Authorization: DPoP` token and the request's one `DPoP` proof (see
    /// [`dpop::single_proof`]), made for `method` on `url` (the URL the client called) with
    /// the key the token is bound to. Returns the token's claims and the proof, whose `jti`
    /// the caller makes single-use.
    pub async fn authenticate_dpop(
        &self,
        token: &str,
        proof: Result<Option<&str>, ProofFault>,
        method: &str,
        url: &str,
    ) -> Result<(Arc<AccessTokenClaims>, VerifiedProof), Refusal> {
        let claims = Box::pin(self.claims_of(token))
            .await
            .map_err(Refusal::under_dpop)?;
        let expected = dpop::Expected {
            method,
            url,
            access_token: Some(token),
            now: chrono::Utc::now().timestamp(),
            algorithms: self.profile.algorithms(),
        };
        let proof = access_token::bound_proof(&claims, proof, expected)?;
        Ok((claims, proof))
    }

    /// The claims of a token that verifies and whose client is in good standing.
    async fn claims_of(&self, token: &str) -> Result<Arc<AccessTokenClaims>, Refusal> {
        let claims = match self.remembered(token) {
            Some(claims) => claims,
            // Boxed: the first request of a token is the rare one, and its future (a JWKS
            // refresh within) would otherwise weigh on every request's.
            None => Box::pin(self.verify(token)).await?,
        };
        if let Some(revoked) = &self.revoked {
            if !revoked.is_current() {
                return Err(Refusal::Unvetted(if revoked.is_loaded() {
                    Unvetted::RevocationsStale
                } else {
                    Unvetted::RevocationsNotLoaded
                }));
            }
            if revoked.contains(&claims.client_id) {
                return Err(Refusal::Invalid(TokenRefusal::ClientDisabled));
            }
        }
        Ok(claims)
    }

    /// A token verified before, while it is still within its lifetime and the key that
    /// verified it is still the one published under its kid: a key dropped from the JWKS
    /// (or replaced by a refresh) sends its tokens through full verification again.
    fn remembered(&self, token: &str) -> Option<Arc<AccessTokenClaims>> {
        let verified = self.verified.read().unwrap_or_else(|e| e.into_inner());
        let entry = verified.get(token)?;
        if !within_lifetime(&entry.claims, chrono::Utc::now().timestamp()) {
            return None;
        }
        let current = self.jwks.lookup(&entry.kid)?;
        Arc::ptr_eq(&current, &entry.key).then(|| entry.claims.clone())
    }

    async fn verify(&self, token: &str) -> Result<Arc<AccessTokenClaims>, Refusal> {
        let verified = access_token::verify(token, &self.validation, async |kid: &str| {
            self.jwks.key_for(kid).await
        })
        .await
        .map_err(|fault| Refusal::Invalid(fault.into()))?;
        let claims = Arc::new(verified.claims);
        self.remember(token, &claims, verified.key, verified.kid);
        Ok(claims)
    }

    fn remember(
        &self,
        token: &str,
        claims: &Arc<AccessTokenClaims>,
        key: Arc<TokenKey>,
        kid: String,
    ) {
        if self.capacity == 0 {
            return;
        }
        let mut verified = self.verified.write().unwrap_or_else(|e| e.into_inner());
        if verified.len() >= self.capacity {
            let now = chrono::Utc::now().timestamp();
            verified.retain(|_, v| within_lifetime(&v.claims, now));
            if verified.len() >= self.capacity {
                verified.clear();
            }
        }
        verified.insert(
            token.to_owned(),
            Verified {
                claims: claims.clone(),
                key,
                kid,
            },
        );
    }
}

/// The lifetime check jsonwebtoken applies, with the same leeway.
fn within_lifetime(claims: &AccessTokenClaims, now: i64) -> bool {
    let leeway = CLOCK_LEEWAY_SECS as i64;
    claims.exp >= now - leeway && claims.nbf <= now + leeway
}

/// Reads the bearer token and its JOSE header from an `Authorization` value, without verifying it.
///
/// Kept pure and synchronous so the parsing of hostile headers can be fuzzed on its own.
pub fn parse_bearer(authorization: Option<&[u8]>) -> Result<ParsedToken<'_>, Refusal> {
    let token = access_token::bearer_token(authorization)?;
    let header =
        access_token::read_header(token).map_err(|fault| Refusal::Invalid(fault.into()))?;
    Ok(ParsedToken { token, header })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::claims::TokenAlgorithm;

    fn claims(exp: i64) -> Arc<AccessTokenClaims> {
        Arc::new(AccessTokenClaims {
            iss: "iss".into(),
            sub: "c".into(),
            client_id: "c".into(),
            aud: "aud".into(),
            scope: "s".into(),
            iat: exp - 900,
            nbf: exp - 900,
            exp,
            jti: "j".into(),
            brands: None,
            cnf: None,
            sandbox: false,
        })
    }

    #[test]
    fn the_lifetime_check_has_jsonwebtokens_leeway() {
        let leeway = CLOCK_LEEWAY_SECS as i64;
        let now = 1_800_000_000;
        assert!(within_lifetime(&claims(now), now));
        assert!(within_lifetime(&claims(now - leeway), now));
        assert!(!within_lifetime(&claims(now - leeway - 1), now));
        let mut early = (*claims(now + 900)).clone();
        early.nbf = now + leeway + 1;
        assert!(!within_lifetime(&early, now));
    }

    #[test]
    fn remembered_tokens_stay_within_capacity_dropping_expired_ones_first() {
        let jwks = Arc::new(JwksCache::new("http://127.0.0.1:9/jwks.json").unwrap());
        let verifier =
            Verifier::new(jwks, "iss", "aud", Profile::Standard).with_verified_capacity(2);
        let key = Arc::new(TokenKey {
            key: jsonwebtoken::DecodingKey::from_secret(b"k"),
            alg: TokenAlgorithm::Rs256,
        });
        let now = chrono::Utc::now().timestamp();
        let len = || verifier.verified.read().unwrap().len();
        verifier.remember("expired", &claims(now - 3600), key.clone(), "k".into());
        verifier.remember("a", &claims(now + 600), key.clone(), "k".into());
        assert_eq!(len(), 2);
        // Full: the expired token makes room.
        verifier.remember("b", &claims(now + 600), key.clone(), "k".into());
        assert_eq!(len(), 2);
        assert!(!verifier.verified.read().unwrap().contains_key("expired"));
        // Full of live tokens: start over rather than grow.
        verifier.remember("c", &claims(now + 600), key.clone(), "k".into());
        assert_eq!(len(), 1);
        let off = Verifier::new(verifier.jwks.clone(), "iss", "aud", Profile::Standard)
            .with_verified_capacity(0);
        off.remember("a", &claims(now + 600), key, "k".into());
        assert_eq!(off.verified.read().unwrap().len(), 0);
    }

    #[test]
    fn only_bearer_headers_carry_a_token() {
        use access_token::bearer_token;
        assert_eq!(bearer_token(None), Err(Refusal::Missing));
        assert_eq!(bearer_token(Some(b"Basic abc")), Err(Refusal::Missing));
        assert_eq!(bearer_token(Some(b"Bearer ")), Err(Refusal::Missing));
        assert_eq!(bearer_token(Some(b"bearer a.b.c")), Ok("a.b.c"));
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert_eq!(
            bearer_token(Some(long.as_bytes())),
            Err(Refusal::Invalid(TokenRefusal::TooLong))
        );
        assert_eq!(
            bearer_token(Some(b"Bearer \xff")),
            Err(Refusal::Invalid(TokenRefusal::Unreadable))
        );
    }
}
