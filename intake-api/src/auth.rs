//! Bearer-token verification: RS256 against the cached JWKS, nothing taken on the
//! token's own say-so.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use intake_shared::claims::{ACCESS_TOKEN_TYP, AccessTokenClaims, CLOCK_LEEWAY_SECS};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use crate::jwks::JwksCache;

/// Longest bearer token considered; ours are about 900 bytes.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// Why a request is not authenticated or not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token was sent.
    #[error("no bearer token")]
    Missing,
    /// A token was sent but is not acceptable; the reason is for logs and metrics only.
    #[error("invalid token: {0}")]
    Invalid(&'static str),
    /// The token is valid but lacks the scope the operation needs.
    #[error("insufficient scope")]
    InsufficientScope,
}

/// What an `Authorization` header states about its token before any key or clock is consulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedToken<'a> {
    /// The compact JWT, trimmed, at most `MAX_TOKEN_BYTES` long.
    pub token: &'a str,
    /// The JOSE header's `alg`, as the token claims it.
    pub alg: String,
    /// The JOSE header's `typ`, if any.
    pub typ: Option<String>,
    /// The JOSE header's `kid`, if any.
    pub kid: Option<String>,
    /// Whether the JOSE header lists critical extensions (`crit` present and not null).
    pub crit: bool,
}

#[derive(Deserialize)]
struct JoseHeader {
    alg: String,
    typ: Option<String>,
    kid: Option<String>,
    crit: Option<serde_json::Value>,
}

/// Verifies tokens for one issuer and audience.
pub struct Verifier {
    jwks: Arc<JwksCache>,
    validation: Validation,
}

impl Verifier {
    /// A verifier accepting RS256 tokens from `issuer` for `audience`.
    pub fn new(jwks: Arc<JwksCache>, issuer: &str, audience: &str) -> Self {
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = CLOCK_LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&[issuer]);
        validation.set_audience(&[audience]);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
        Self { jwks, validation }
    }

    /// The key cache.
    pub fn jwks(&self) -> &Arc<JwksCache> {
        &self.jwks
    }

    /// Checks an `Authorization` header value and the scope an operation needs.
    pub async fn authenticate(
        &self,
        authorization: Option<&[u8]>,
        required_scope: &str,
    ) -> Result<AccessTokenClaims, AuthError> {
        let parsed = parse_bearer(authorization)?;
        // The algorithm is ours to choose, never the token's: RS256 only.
        if parsed.alg != "RS256" {
            return Err(AuthError::Invalid("algorithm"));
        }
        let typ_ok = parsed.typ.as_deref().is_some_and(|t| {
            t.eq_ignore_ascii_case(ACCESS_TOKEN_TYP) || t.eq_ignore_ascii_case("application/at+jwt")
        });
        if !typ_ok {
            return Err(AuthError::Invalid("typ"));
        }
        // No extension is understood here, so a critical one must be refused (RFC 7515 4.1.11).
        if parsed.crit {
            return Err(AuthError::Invalid("crit"));
        }
        // jku, x5u and jwk headers are never read: keys come only from our JWKS.
        let kid = parsed.kid.ok_or(AuthError::Invalid("kid_missing"))?;
        let key = self
            .jwks
            .key_for(&kid)
            .await
            .ok_or(AuthError::Invalid("kid_unknown"))?;
        let claims =
            jsonwebtoken::decode::<AccessTokenClaims>(parsed.token, &key, &self.validation)
                .map_err(|e| AuthError::Invalid(classify(&e)))?
                .claims;
        if !claims.has_scope(required_scope) {
            return Err(AuthError::InsufficientScope);
        }
        Ok(claims)
    }
}

fn classify(e: &jsonwebtoken::errors::Error) -> &'static str {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "expired",
        ErrorKind::ImmatureSignature => "not_yet_valid",
        ErrorKind::InvalidIssuer => "issuer",
        ErrorKind::InvalidAudience => "audience",
        ErrorKind::InvalidSignature => "signature",
        ErrorKind::MissingRequiredClaim(_) => "claims",
        _ => "malformed",
    }
}

/// Reads the bearer token and its JOSE header from an `Authorization` value, without verifying it.
///
/// Kept pure and synchronous so the parsing of hostile headers can be fuzzed on its own.
pub fn parse_bearer(authorization: Option<&[u8]>) -> Result<ParsedToken<'_>, AuthError> {
    let token = bearer_token(authorization)?;
    let header = jose_header(token)?;
    Ok(ParsedToken {
        token,
        alg: header.alg,
        typ: header.typ,
        kid: header.kid,
        crit: header.crit.is_some(),
    })
}

fn bearer_token(authorization: Option<&[u8]>) -> Result<&str, AuthError> {
    let raw = authorization.ok_or(AuthError::Missing)?;
    let value = std::str::from_utf8(raw).map_err(|_| AuthError::Invalid("header"))?;
    let (scheme, token) = value.trim().split_once(' ').ok_or(AuthError::Missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::Missing);
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(AuthError::Missing);
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(AuthError::Invalid("too_long"));
    }
    Ok(token)
}

fn jose_header(token: &str) -> Result<JoseHeader, AuthError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Invalid("malformed"));
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| AuthError::Invalid("malformed"))?;
    serde_json::from_slice(&bytes).map_err(|_| AuthError::Invalid("malformed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bearer_headers_carry_a_token() {
        assert_eq!(bearer_token(None), Err(AuthError::Missing));
        assert_eq!(bearer_token(Some(b"Basic abc")), Err(AuthError::Missing));
        assert_eq!(bearer_token(Some(b"Bearer ")), Err(AuthError::Missing));
        assert_eq!(bearer_token(Some(b"bearer a.b.c")), Ok("a.b.c"));
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert_eq!(
            bearer_token(Some(long.as_bytes())),
            Err(AuthError::Invalid("too_long"))
        );
    }

    #[test]
    fn a_token_needs_three_parts_and_a_json_header() {
        assert!(jose_header("a.b").is_err());
        assert!(jose_header("a.b.c.d").is_err());
        assert!(jose_header("!!!.b.c").is_err());
        let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","crit":["x"]}"#);
        let parsed = jose_header(&format!("{h}.e30.")).unwrap();
        assert_eq!(parsed.alg, "none");
        assert!(parsed.crit.is_some());
    }
}
