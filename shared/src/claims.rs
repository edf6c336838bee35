//! The access token both services agree on (RFC 9068 profile).

use serde::{Deserialize, Serialize};

/// Lifetime of every access token, in seconds (spec section 8).
pub const TOKEN_TTL_SECS: i64 = 900;

/// The JOSE `typ` header of an access token (RFC 9068 section 2.1).
pub const ACCESS_TOKEN_TYP: &str = "at+jwt";

/// Longest bearer token either service reads; ours are about 900 bytes.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// Whether a JOSE `typ` names an access token: `at+jwt`, or its full media type
/// `application/at+jwt` (RFC 9068 section 2.1), in any case.
pub fn is_access_token_typ(typ: Option<&str>) -> bool {
    typ.is_some_and(|t| {
        t.eq_ignore_ascii_case(ACCESS_TOKEN_TYP) || t.eq_ignore_ascii_case("application/at+jwt")
    })
}

/// Why an `Authorization` value yields no token to verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BearerFault {
    /// No `Bearer` scheme, or nothing after it: no token was sent.
    Missing,
    /// Longer than [`MAX_TOKEN_BYTES`].
    TooLong,
}

/// The token of an `Authorization: Bearer <token>` value (scheme in any case, surrounding
/// space trimmed), read the same way by every service that takes one.
pub fn bearer_token(value: &str) -> Result<&str, BearerFault> {
    scheme_token(value, "bearer")
}

/// The token of an `Authorization: DPoP <token>` value, read as [`bearer_token`] reads
/// a bearer one.
pub fn dpop_token(value: &str) -> Result<&str, BearerFault> {
    scheme_token(value, "dpop")
}

/// Whether an `Authorization` value is of `scheme` (its first word, in any case), whatever
/// follows it.
pub fn names_scheme(value: &str, scheme: &str) -> bool {
    let first = value.trim_start().split(' ').next().unwrap_or_default();
    first.eq_ignore_ascii_case(scheme)
}

fn scheme_token<'a>(value: &'a str, wanted: &str) -> Result<&'a str, BearerFault> {
    let (scheme, token) = value.trim().split_once(' ').ok_or(BearerFault::Missing)?;
    if !scheme.eq_ignore_ascii_case(wanted) {
        return Err(BearerFault::Missing);
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(BearerFault::Missing);
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(BearerFault::TooLong);
    }
    Ok(token)
}

/// Leeway on `exp` and `nbf` a resource server may allow for clock skew.
pub const CLOCK_LEEWAY_SECS: u64 = 30;

/// How far ahead of ours a partner's clock may run: a client assertion's or a DPoP proof's
/// `iat` or `nbf` up to this many seconds in the future is accepted, one further refused.
/// FAPI 2.0 (5.3.2.1) asks for at least 10 and at most 60.
pub const CLOCK_AHEAD_SECS: i64 = 60;

/// The longest `jti` a client assertion or a DPoP proof may carry, in bytes: a UUID or
/// 128 random bits need far less.
pub const MAX_JTI_BYTES: usize = 255;

/// The rule for a single-use id (a client assertion's or a DPoP proof's `jti`): 1 to
/// [`MAX_JTI_BYTES`] bytes and no control character. Checked before the id goes near the
/// replay store, so that what a client sends is refused as the client's mistake, never met
/// as a store failure (PostgreSQL cannot keep U+0000 in text).
pub fn is_acceptable_jti(jti: &str) -> bool {
    (1..=MAX_JTI_BYTES).contains(&jti.len()) && !jti.chars().any(char::is_control)
}

/// Scope names partners can be granted (spec section 5.3).
pub mod scopes {
    /// Creating case referral data.
    pub const REFERRAL_CREATE: &str = "enquiry:referral:create";
    /// Creating cases through the enquiry intake method.
    pub const CASE_INTAKE_CREATE: &str = "enquiry:case:intake:create";
    /// Redeeming a customer's redirect link: for a brand's customer portal, not partners.
    pub const PORTAL_REDIRECT_REDEEM: &str = "portal:redirect:redeem";
    /// Reading the auth-server's list of disabled clients: for resource servers (the
    /// intake-api's own client), not partners.
    pub const REVOCATIONS_READ: &str = "revocations:read";
    /// Managing the partner's own webhook endpoints and reading their event catalogue.
    pub const WEBHOOKS_MANAGE: &str = "webhooks:manage";
    /// Every scope the authorization server knows.
    pub const ALL: [&str; 5] = [
        REFERRAL_CREATE,
        CASE_INTAKE_CREATE,
        PORTAL_REDIRECT_REDEEM,
        REVOCATIONS_READ,
        WEBHOOKS_MANAGE,
    ];

    /// Whether `scope` is one the authorization server knows.
    pub fn is_known(scope: &str) -> bool {
        ALL.contains(&scope)
    }
}

/// Brand identifiers as a portal client is bound to them (`auth-server client create
/// --brands`) and as the intake-api's `INTAKE_BRANDS` names them.
pub mod brands {
    /// Most brands one client may be bound to: keeps the token well under the resource
    /// server's size limit.
    pub const MAX_PER_CLIENT: usize = 8;
    /// Longest brand identifier.
    pub const MAX_CHARS: usize = 64;

    /// Whether `brand` is a well-formed identifier: lower-case ASCII letters, digits, `_` or
    /// `-`, at most [`MAX_CHARS`] long. Whether the intake-api is configured with it is for
    /// the intake-api to say.
    pub fn is_well_formed(brand: &str) -> bool {
        !brand.is_empty()
            && brand.len() <= MAX_CHARS
            && brand
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    }
}

/// Claims of an access token; timestamps are integer seconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessTokenClaims {
    /// Issuer: the authorization server's URL.
    pub iss: String,
    /// Subject: the client the token was issued to.
    pub sub: String,
    /// The client the token was issued to (RFC 9068 section 2.2).
    pub client_id: String,
    /// Audience: the resource servers the token is meant for.
    pub aud: String,
    /// Granted scopes, space-separated.
    pub scope: String,
    /// Issued at.
    pub iat: i64,
    /// Not valid before.
    pub nbf: i64,
    /// Expires at.
    pub exp: i64,
    /// Unique token identifier.
    pub jti: String,
    /// The brands whose customers' links a portal client redeems; only in tokens granting
    /// `portal:redirect:redeem`, and absent for a portal client bound to no brand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brands: Option<Vec<String>>,
    /// The key the token is bound to (RFC 9449 section 6): only in DPoP-bound tokens, which
    /// are good only beside a proof made with that key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnf: Option<Confirmation>,
    /// A sandbox client's token (`auth-server client create --sandbox`): what it makes at
    /// the intake-api lives apart from real cases. Absent, so false, from every other token.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox: bool,
}

/// A token's confirmation claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmation {
    /// The JWK SHA-256 thumbprint (RFC 7638) of the key the token is bound to.
    pub jkt: String,
}

/// The algorithms an access token may be signed with. Each signing key has one, named in
/// its JWK: RS256 (the spec's, and the default), or PS256 or ES256 for a deployment that
/// follows FAPI 2.0. A deployment moves from one to another by a staged key rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TokenAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    #[default]
    Rs256,
    /// RSASSA-PSS with SHA-256.
    Ps256,
    /// ECDSA on P-256 with SHA-256.
    Es256,
}

impl TokenAlgorithm {
    /// Every algorithm, in the order the metadata lists them.
    pub const ALL: [Self; 3] = [Self::Rs256, Self::Ps256, Self::Es256];

    /// The JOSE name (`alg`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Ps256 => "PS256",
            Self::Es256 => "ES256",
        }
    }

    /// The algorithm of a JOSE name, exactly as JOSE spells it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The same algorithm for jsonwebtoken.
    #[cfg(feature = "verify")]
    pub const fn jwt(self) -> jsonwebtoken::Algorithm {
        match self {
            Self::Rs256 => jsonwebtoken::Algorithm::RS256,
            Self::Ps256 => jsonwebtoken::Algorithm::PS256,
            Self::Es256 => jsonwebtoken::Algorithm::ES256,
        }
    }
}

impl std::fmt::Display for TokenAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TokenAlgorithm {
    type Err = String;

    /// Any case, so an operator's `es256` is understood.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("{s:?} is not one of RS256, PS256, ES256"))
    }
}

/// What every access token must be besides well signed and its client in good standing:
/// signed with the algorithm of the key its `kid` names (never the token's own choice), from
/// `issuer`, for `audience`, its registered claims present, and within its lifetime give or
/// take [`CLOCK_LEEWAY_SECS`]. Both the resource servers and the auth-server (reading
/// `/revocations`) check tokens by it.
#[cfg(feature = "verify")]
pub struct TokenValidation([jsonwebtoken::Validation; 3]);

#[cfg(feature = "verify")]
impl TokenValidation {
    /// The checks for tokens from `issuer` for `audience`, one set per algorithm.
    pub fn new(issuer: &str, audience: &str) -> Self {
        Self(TokenAlgorithm::ALL.map(|alg| {
            let mut validation = jsonwebtoken::Validation::new(alg.jwt());
            validation.leeway = CLOCK_LEEWAY_SECS;
            validation.validate_nbf = true;
            validation.set_issuer(&[issuer]);
            validation.set_audience(&[audience]);
            validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
            validation
        }))
    }

    /// The checks for a token verified by a key of `alg`: only that algorithm is accepted.
    pub fn for_algorithm(&self, alg: TokenAlgorithm) -> &jsonwebtoken::Validation {
        &self.0[alg as usize]
    }
}

impl AccessTokenClaims {
    /// Whether the token grants `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scope.split(' ').any(|s| s == scope)
    }

    /// The brands the token is bound to; none when it names none.
    pub fn brands(&self) -> &[String] {
        self.brands.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jti_is_1_to_255_bytes_without_control_characters() {
        let cases = [
            (
                "a uuid",
                "8f14e45f-ceea-467f-a8b5-1e5d7c4a1b2c".to_owned(),
                true,
            ),
            ("one byte", "x".to_owned(), true),
            ("255 bytes", "x".repeat(255), true),
            ("empty", String::new(), false),
            ("256 bytes", "x".repeat(256), false),
            // 128 characters, 256 bytes: the bound is in bytes, what a store keeps.
            ("multibyte over the bound", "é".repeat(128), false),
            ("a NUL", "id\u{0}1".to_owned(), false),
            ("a newline", "id\n1".to_owned(), false),
            ("a C1 control", "id\u{85}1".to_owned(), false),
            ("a DEL", "id\u{7f}".to_owned(), false),
        ];
        for (name, jti, ok) in cases {
            assert_eq!(is_acceptable_jti(&jti), ok, "{name}");
        }
    }

    #[test]
    fn algorithm_names_read_in_any_case_and_only_those() {
        for alg in TokenAlgorithm::ALL {
            assert_eq!(TokenAlgorithm::from_name(alg.name()), Some(alg));
            assert_eq!(alg.name().to_lowercase().parse::<TokenAlgorithm>(), Ok(alg));
        }
        assert_eq!(TokenAlgorithm::from_name("es256"), None);
        assert!("HS256".parse::<TokenAlgorithm>().is_err());
        assert!("none".parse::<TokenAlgorithm>().is_err());
    }

    #[cfg(feature = "verify")]
    #[test]
    fn each_algorithm_validates_with_itself_alone() {
        let checks = TokenValidation::new("https://issuer", "intake-api");
        for alg in TokenAlgorithm::ALL {
            assert_eq!(checks.for_algorithm(alg).algorithms, vec![alg.jwt()]);
        }
    }
}
