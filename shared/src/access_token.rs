//! The one check of an access token, for every service that takes one: the intake-api for
//! partners' requests and the auth-server for `/revocations`. What makes a token good (its
//! header, the key its `kid` names, that key's algorithm, the signature, issuer, audience and
//! lifetime) is decided here, so a check added for one service is added for both; where the
//! keys come from, and whether the token's client is still in good standing, is each
//! service's own.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::DecodingKey;
use serde::Deserialize;

use crate::claims::{
    AccessTokenClaims, BearerFault, TokenAlgorithm, TokenValidation, is_access_token_typ,
};
use crate::dpop::{self, ProofFault};
use crate::profile::Profile;
pub use crate::refusal::TokenFault;
use crate::refusal::{Refusal, TokenRefusal};

/// A published key a token may be verified with.
pub trait VerifyingKey {
    /// The key, as jsonwebtoken takes it.
    fn decoding_key(&self) -> &DecodingKey;
    /// The one algorithm it verifies: its JWK's `alg`.
    fn algorithm(&self) -> TokenAlgorithm;
}

impl<K: VerifyingKey> VerifyingKey for std::sync::Arc<K> {
    fn decoding_key(&self) -> &DecodingKey {
        (**self).decoding_key()
    }
    fn algorithm(&self) -> TokenAlgorithm {
        (**self).algorithm()
    }
}

/// A token that verified: its claims, and the key that verified it under its `kid`.
#[derive(Debug)]
pub struct Verified<K> {
    /// The token's claims.
    pub claims: AccessTokenClaims,
    /// The key its `kid` named.
    pub key: K,
    /// That `kid`.
    pub kid: String,
}

/// A token's JOSE header, as read before any key is consulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHeader {
    /// `alg`, as the token claims it.
    pub alg: String,
    /// `typ`, if any.
    pub typ: Option<String>,
    /// `kid`, if any.
    pub kid: Option<String>,
    /// Whether it lists critical extensions (`crit` present and not null).
    pub crit: bool,
}

#[derive(Deserialize)]
struct JoseHeader {
    alg: String,
    typ: Option<String>,
    kid: Option<String>,
    crit: Option<serde_json::Value>,
}

/// The header of a compact JWT: three dot-separated parts, the first base64url JSON.
pub fn read_header(token: &str) -> Result<TokenHeader, TokenFault> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenFault::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| TokenFault::Malformed)?;
    let header: JoseHeader = serde_json::from_slice(&bytes).map_err(|_| TokenFault::Malformed)?;
    Ok(TokenHeader {
        alg: header.alg,
        typ: header.typ,
        kid: header.kid,
        crit: header.crit.is_some(),
    })
}

/// The claims of `token`, and the key that verified it, when it is an access token signed by
/// the key `key_for` finds for its `kid`, with that key's algorithm, and `validation` holds
/// (issuer, audience, registered claims, lifetime). Nothing is taken on the token's word:
/// an algorithm no key can have is refused before `key_for` is asked (so `none` or HMAC
/// tokens never send anyone to the keys), `jku`, `x5u` and `jwk` headers are never read,
/// and the key's algorithm must be the token's.
pub async fn verify<K: VerifyingKey>(
    token: &str,
    validation: &TokenValidation,
    key_for: impl AsyncFnOnce(&str) -> Option<K>,
) -> Result<Verified<K>, TokenFault> {
    let header = read_header(token)?;
    let alg = TokenAlgorithm::from_name(&header.alg).ok_or(TokenFault::Algorithm)?;
    if !is_access_token_typ(header.typ.as_deref()) {
        return Err(TokenFault::Typ);
    }
    if header.crit {
        return Err(TokenFault::Crit);
    }
    let kid = header.kid.ok_or(TokenFault::KidMissing)?;
    let key = key_for(&kid).await.ok_or(TokenFault::KidUnknown)?;
    if alg != key.algorithm() {
        return Err(TokenFault::Algorithm);
    }
    let claims = jsonwebtoken::decode::<AccessTokenClaims>(
        token,
        key.decoding_key(),
        validation.for_algorithm(alg),
    )
    .map_err(|e| fault_of(&e))?
    .claims;
    Ok(Verified { claims, key, kid })
}

/// What a failed decode says of the token. jsonwebtoken's kinds are not exhaustive: any
/// other (base64, JSON, a key that cannot verify) is a token not made by us.
fn fault_of(e: &jsonwebtoken::errors::Error) -> TokenFault {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => TokenFault::Expired,
        ErrorKind::ImmatureSignature => TokenFault::NotYetValid,
        ErrorKind::InvalidIssuer => TokenFault::Issuer,
        ErrorKind::InvalidAudience => TokenFault::Audience,
        ErrorKind::InvalidSignature => TokenFault::Signature,
        ErrorKind::MissingRequiredClaim(_) => TokenFault::Claims,
        _ => TokenFault::Malformed,
    }
}

/// The token of an `Authorization` value sent under the bearer scheme.
pub fn bearer_token(authorization: Option<&[u8]>) -> Result<&str, Refusal> {
    let value = std::str::from_utf8(authorization.ok_or(Refusal::Missing)?)
        .map_err(|_| Refusal::Invalid(TokenRefusal::Unreadable))?;
    crate::claims::bearer_token(value).map_err(|fault| match fault {
        BearerFault::Missing => Refusal::Missing,
        BearerFault::TooLong => Refusal::Invalid(TokenRefusal::TooLong),
    })
}

/// The token of an `Authorization: DPoP <token>` value, or `None` when the value is not of
/// the `DPoP` scheme (it is then read as a bearer one).
pub fn dpop_token(authorization: Option<&[u8]>) -> Option<Result<&str, Refusal>> {
    let value = std::str::from_utf8(authorization?).ok()?;
    let refused = |why| Some(Err(Refusal::InvalidBoundToken(why)));
    match crate::claims::dpop_token(value) {
        Err(BearerFault::Missing) if !crate::claims::names_scheme(value, "dpop") => None,
        Err(BearerFault::Missing) => refused(TokenRefusal::Missing),
        Err(BearerFault::TooLong) => refused(TokenRefusal::TooLong),
        Ok(token) => Some(Ok(token)),
    }
}

/// Whether a token may be sent as a bearer one under `profile`: under FAPI 2.0 every token
/// is sender-constrained. Asked before the token is verified, as it costs nothing.
pub fn bearer_taken(profile: Profile) -> Result<(), Refusal> {
    if profile.allows_secrets_and_bearer() {
        Ok(())
    } else {
        Err(Refusal::Invalid(TokenRefusal::BearerNotAccepted))
    }
}

/// Whether a token that verified may be taken as bearer: not when it is bound to a key, or
/// a thief holding only the token would get in by dropping the proof.
pub fn unbound(claims: &AccessTokenClaims) -> Result<(), Refusal> {
    match claims.cnf {
        None => Ok(()),
        Some(_) => Err(Refusal::InvalidBoundToken(TokenRefusal::BoundTokenAsBearer)),
    }
}

/// The proof of a request made under the `DPoP` scheme with a token whose `claims`
/// verified: `proof` is the request's one `DPoP` header (see [`dpop::single_proof`]), which
/// must be made for `expected` by the key the token is bound to. The proof's `jti` is the
/// caller's to spend.
pub fn bound_proof(
    claims: &AccessTokenClaims,
    proof: Result<Option<&str>, ProofFault>,
    expected: dpop::Expected<'_>,
) -> Result<dpop::VerifiedProof, Refusal> {
    let bound_to = claims
        .cnf
        .as_ref()
        .map(|c| c.jkt.as_str())
        .ok_or(Refusal::InvalidBoundToken(TokenRefusal::TokenNotBound))?;
    let proof = proof
        .map_err(Refusal::InvalidProof)?
        .ok_or(Refusal::InvalidProof(ProofFault::Missing))?;
    let proof = dpop::verify(proof, expected).map_err(Refusal::InvalidProof)?;
    if proof.jkt != bound_to {
        return Err(Refusal::InvalidBoundToken(TokenRefusal::ProofKeyMismatch));
    }
    Ok(proof)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Key(DecodingKey, TokenAlgorithm);

    impl VerifyingKey for Key {
        fn decoding_key(&self) -> &DecodingKey {
            &self.0
        }
        fn algorithm(&self) -> TokenAlgorithm {
            self.1
        }
    }

    /// The outcome of a check whose key lookup answers at once, as these tests' do.
    fn at_once<F: Future>(check: F) -> F::Output {
        let mut check = std::pin::pin!(check);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match check.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(outcome) => outcome,
            std::task::Poll::Pending => panic!("the check waited on nothing"),
        }
    }

    fn header(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn a_token_needs_three_parts_and_a_json_header() {
        assert_eq!(read_header("a.b"), Err(TokenFault::Malformed));
        assert_eq!(read_header("a.b.c.d"), Err(TokenFault::Malformed));
        assert_eq!(read_header("!!!.b.c"), Err(TokenFault::Malformed));
        let parsed = read_header(&format!(
            "{}.e30.",
            header(r#"{"alg":"none","crit":["x"]}"#)
        ))
        .expect("a header");
        assert_eq!(parsed.alg, "none");
        assert!(parsed.crit);
    }

    /// Each refusal of the header is its own, and none of them asks for a key.
    #[test]
    fn the_header_is_refused_before_any_key_is_asked_for() {
        let validation = TokenValidation::new("iss", "aud");
        for (json, fault) in [
            (
                r#"{"alg":"none","typ":"at+jwt","kid":"k"}"#,
                TokenFault::Algorithm,
            ),
            (
                r#"{"alg":"HS256","typ":"at+jwt","kid":"k"}"#,
                TokenFault::Algorithm,
            ),
            (r#"{"alg":"RS256","typ":"JWT","kid":"k"}"#, TokenFault::Typ),
            (
                r#"{"alg":"RS256","typ":"at+jwt","kid":"k","crit":["b64"]}"#,
                TokenFault::Crit,
            ),
            (r#"{"alg":"RS256","typ":"at+jwt"}"#, TokenFault::KidMissing),
        ] {
            let token = format!("{}.e30.c2ln", header(json));
            let asked = std::cell::Cell::new(false);
            let refused = at_once(verify::<Key>(&token, &validation, async |_| {
                asked.set(true);
                None
            }));
            assert_eq!(refused.err(), Some(fault), "{json}");
            assert!(!asked.get(), "{json}: a key was asked for");
        }
    }

    /// The key decides the algorithm: a token claiming another than its key's is refused
    /// before its signature is checked, and an unknown `kid` is its own refusal.
    #[test]
    fn the_keys_algorithm_is_the_one_and_an_unknown_kid_is_said() {
        let validation = TokenValidation::new("iss", "aud");
        let token = format!(
            "{}.e30.c2ln",
            header(r#"{"alg":"PS256","typ":"at+jwt","kid":"k"}"#)
        );
        let rs256 =
            async |_: &str| Some(Key(DecodingKey::from_secret(b"k"), TokenAlgorithm::Rs256));
        assert_eq!(
            at_once(verify(&token, &validation, rs256)).err(),
            Some(TokenFault::Algorithm)
        );
        assert_eq!(
            at_once(verify::<Key>(&token, &validation, async |_| None)).err(),
            Some(TokenFault::KidUnknown)
        );
    }
}
