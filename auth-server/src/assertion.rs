//! Client assertions (RFC 7523 section 2.2, OpenID Connect Core section 9
//! `private_key_jwt`): a JWT a client signs with its own private key to authenticate at
//! the token endpoint, in place of a secret.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use service_kit::Secret;
use shared::claims::CLOCK_AHEAD_SECS;

use crate::client_keys::{ClientKeys, SIGNING_ALGORITHMS};
use crate::error::ClientFailure;

/// The `client_assertion_type` of a JWT client assertion.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Longest `client_assertion` read: room for an RS256 signature of a 4096-bit key and
/// generous claims, well inside the body limit.
pub const MAX_ASSERTION_CHARS: usize = 4096;

/// Longest an assertion may live, from now to its `exp`: it is a credential in transit,
/// and every `jti` is remembered until its assertion expires.
pub const MAX_LIFETIME_SECS: i64 = 3600;

/// Clock difference tolerated on `exp` between the client and us, in seconds; `iat` and
/// `nbf` may be ahead by [`CLOCK_AHEAD_SECS`].
pub const LEEWAY_SECS: i64 = 5;

/// The claims read from an assertion; each is checked, none trusted before the signature.
#[derive(Debug, Deserialize)]
struct Claims {
    iss: Option<String>,
    sub: Option<String>,
    aud: Option<Audience>,
    exp: Option<i64>,
    iat: Option<i64>,
    nbf: Option<i64>,
    jti: Option<String>,
}

/// `aud`: one value or several (RFC 7519 section 4.1.3).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn contains_any(&self, wanted: &[&str]) -> bool {
        match self {
            Self::One(a) => wanted.contains(&a.as_str()),
            Self::Many(all) => all.iter().any(|a| wanted.contains(&a.as_str())),
        }
    }
}

/// An assertion as sent: its header and claims read, nothing about it verified yet.
#[derive(Debug)]
pub struct ClientAssertion {
    token: Secret<String>,
    /// The header's algorithm and kid, or why the header is refused: told only once the
    /// client is known, so that the refusal is counted against it.
    header: Result<(Algorithm, Option<String>), ClientFailure>,
    claims: Claims,
}

/// An assertion that authenticated its client: its `jti` must now be spent, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpentAssertion {
    /// Its `jti`.
    pub jti: String,
    /// When it could no longer be accepted anyway: the `jti` need not be kept after.
    pub expires_at: DateTime<Utc>,
    /// When it was made, by its own word: its `iat` (or `nbf`); without either, the earliest
    /// its `exp` allows. A replay store that forgot what it knew before this moment cannot
    /// show it unused.
    pub made_at: DateTime<Utc>,
}

impl ClientAssertion {
    /// Reads an assertion's header and claims; refused here only when the claims cannot
    /// be read.
    pub fn read(token: &str) -> Result<Self, ClientFailure> {
        let claims: Claims = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|_| ClientFailure::AssertionMalformed)?;
        let header = jsonwebtoken::decode_header(token)
            .map(|h| (h.alg, h.kid))
            .map_err(|_| unreadable_header(token));
        Ok(Self {
            token: Secret::new(token.to_owned()),
            header,
            claims,
        })
    }

    /// The client it claims to come from: its `iss`, not yet verified.
    pub fn issuer(&self) -> Option<&str> {
        self.claims.iss.as_deref()
    }

    /// The algorithm its header names (`RS256`...), if it can be read.
    pub fn algorithm(&self) -> Option<&'static str> {
        match self.header.as_ref().ok()?.0 {
            Algorithm::RS256 => Some("RS256"),
            Algorithm::PS256 => Some("PS256"),
            Algorithm::ES256 => Some("ES256"),
            Algorithm::EdDSA => Some("EdDSA"),
            _ => None,
        }
    }

    /// The `kid` its header names, if it can be read.
    pub fn kid(&self) -> Option<&str> {
        self.header.as_ref().ok()?.1.as_deref()
    }

    /// Checks the assertion as `client_id`'s, against its keys, for any of `audiences`, at
    /// `now`: the signature first, so that nothing is said about the claims of a forgery.
    pub fn verify(
        &self,
        client_id: &str,
        keys: &ClientKeys,
        audiences: &[&str],
        now: DateTime<Utc>,
    ) -> Result<SpentAssertion, ClientFailure> {
        let c = &self.claims;
        if c.iss.as_deref() != Some(client_id) || c.sub.as_deref() != Some(client_id) {
            return Err(ClientFailure::AssertionIssuer);
        }
        self.check_signature(keys)?;
        let (Some(exp), Some(jti), Some(aud)) = (c.exp, c.jti.as_deref(), c.aud.as_ref()) else {
            return Err(ClientFailure::AssertionMalformed);
        };
        if !shared::claims::is_acceptable_jti(jti) {
            return Err(ClientFailure::AssertionJti);
        }
        if !aud.contains_any(audiences) {
            return Err(ClientFailure::AssertionAudience);
        }
        // Saturating: the claims are the client's numbers, any i64 at all.
        let now_secs = now.timestamp();
        if exp.saturating_add(LEEWAY_SECS) <= now_secs {
            return Err(ClientFailure::AssertionExpired);
        }
        if exp > now_secs.saturating_add(MAX_LIFETIME_SECS + LEEWAY_SECS) {
            return Err(ClientFailure::AssertionLifetime);
        }
        if [c.iat, c.nbf]
            .into_iter()
            .flatten()
            .any(|t| t > now_secs.saturating_add(CLOCK_AHEAD_SECS))
        {
            return Err(ClientFailure::AssertionNotYetValid);
        }
        let expires_at = DateTime::from_timestamp(exp.saturating_add(LEEWAY_SECS), 0)
            .ok_or(ClientFailure::AssertionMalformed)?;
        let made = c
            .iat
            .or(c.nbf)
            .unwrap_or_else(|| exp.saturating_sub(MAX_LIFETIME_SECS + LEEWAY_SECS));
        // A time no date holds is long ago: such an assertion cannot be shown unused by a
        // store that forgot.
        let made_at = DateTime::from_timestamp(made, 0).unwrap_or(DateTime::<Utc>::MIN_UTC);
        Ok(SpentAssertion {
            jti: jti.to_owned(),
            expires_at,
            made_at,
        })
    }

    /// Whether one of `keys` signed it: the keys decide the algorithm, the header only
    /// picks among those they allow.
    fn check_signature(&self, keys: &ClientKeys) -> Result<(), ClientFailure> {
        let (alg, kid) = self.header.clone()?;
        if !SIGNING_ALGORITHMS.contains(&format!("{alg:?}").as_str()) {
            return Err(ClientFailure::AssertionAlgorithm);
        }
        let kid = kid.as_deref();
        let mut candidates = keys.candidates(kid, alg).peekable();
        if candidates.peek().is_none() {
            // A key named by its kid exists, but is not for this algorithm.
            return Err(
                if kid.is_some() && keys.keys().iter().any(|k| k.kid.as_deref() == kid) {
                    ClientFailure::AssertionAlgorithm
                } else {
                    ClientFailure::AssertionSignature
                },
            );
        }
        // Only the signature here: the claims are checked above, each with its own reason.
        let mut validation = Validation::new(alg);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let verified = candidates.any(|k| {
            jsonwebtoken::decode::<serde::de::IgnoredAny>(self.token.expose(), &k.key, &validation)
                .is_ok()
        });
        if verified {
            Ok(())
        } else {
            Err(ClientFailure::AssertionSignature)
        }
    }
}

/// Why a header could not be read: an algorithm we never accept (`none`, or one
/// jsonwebtoken does not know) is told apart from a token that is not a JWT at all.
fn unreadable_header(token: &str) -> ClientFailure {
    let alg = token
        .split('.')
        .next()
        .and_then(|h| URL_SAFE_NO_PAD.decode(h).ok())
        .and_then(|h| serde_json::from_slice::<serde_json::Value>(&h).ok())
        .and_then(|h| h.get("alg").cloned());
    match alg {
        Some(serde_json::Value::String(_)) => ClientFailure::AssertionAlgorithm,
        _ => ClientFailure::AssertionMalformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::{Value, json};

    const ID: &str = "client-1";
    const ISSUER: &str = "https://auth.example";
    const ENDPOINT: &str = "https://auth.example/oauth/token";

    /// A fresh Ed25519 key pair: the signing key and the client's JWKS.
    fn key_pair(kid: &str) -> (EncodingKey, ClientKeys) {
        use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new())
            .expect("key generated");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("key parsed");
        let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": x}]});
        (
            EncodingKey::from_ed_der(pkcs8.as_ref()),
            ClientKeys::parse(&jwks.to_string()).expect("keys accepted"),
        )
    }

    fn claims(now: i64) -> Value {
        json!({"iss": ID, "sub": ID, "aud": ISSUER, "exp": now + 60, "iat": now, "jti": "j1"})
    }

    fn sign(key: &EncodingKey, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, key).expect("signed")
    }

    fn check(token: &str, keys: &ClientKeys, now: DateTime<Utc>) -> Result<(), ClientFailure> {
        ClientAssertion::read(token)?
            .verify(ID, keys, &[ISSUER, ENDPOINT], now)
            .map(|_| ())
    }

    #[test]
    fn each_rule_of_an_assertion_has_its_own_reason() {
        use ClientFailure::*;
        let now = Utc::now();
        let t = now.timestamp();
        let (key, keys) = key_pair("k1");
        let (other_key, _) = key_pair("k1");
        let with = |member: &str, value: Value| {
            let mut c = claims(t);
            c[member] = value;
            c
        };
        let without = |member: &str| {
            let mut c = claims(t);
            c.as_object_mut().unwrap().remove(member);
            c
        };
        let hs256 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(t),
            &EncodingKey::from_secret(b"shared"),
        )
        .unwrap();
        let unsigned = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims(t).to_string())
        );
        let cases: Vec<(&str, String, Result<(), ClientFailure>)> = vec![
            ("good", sign(&key, Some("k1"), &claims(t)), Ok(())),
            ("good without kid", sign(&key, None, &claims(t)), Ok(())),
            (
                "aud the token endpoint",
                sign(&key, None, &with("aud", json!(ENDPOINT))),
                Ok(()),
            ),
            (
                "aud a list",
                sign(&key, None, &with("aud", json!(["x", ISSUER]))),
                Ok(()),
            ),
            ("not a JWT", "abc".into(), Err(AssertionMalformed)),
            (
                "claims not JSON",
                format!(
                    "{}.bm9wZQ.c2ln",
                    sign(&key, None, &claims(t)).split('.').next().unwrap()
                ),
                Err(AssertionMalformed),
            ),
            ("alg none", unsigned, Err(AssertionAlgorithm)),
            ("HS256", hs256, Err(AssertionAlgorithm)),
            (
                "another key",
                sign(&other_key, Some("k1"), &claims(t)),
                Err(AssertionSignature),
            ),
            (
                "unknown kid",
                sign(&key, Some("k2"), &claims(t)),
                Err(AssertionSignature),
            ),
            (
                "sub not iss",
                sign(&key, None, &with("sub", json!("other"))),
                Err(AssertionIssuer),
            ),
            (
                "iss another client",
                sign(&key, None, &with("iss", json!("other"))),
                Err(AssertionIssuer),
            ),
            (
                "no exp",
                sign(&key, None, &without("exp")),
                Err(AssertionMalformed),
            ),
            (
                "no jti",
                sign(&key, None, &without("jti")),
                Err(AssertionMalformed),
            ),
            (
                "a jti with a NUL, which PostgreSQL cannot keep",
                sign(&key, None, &with("jti", json!("j\u{0}1"))),
                Err(AssertionJti),
            ),
            (
                "an empty jti",
                sign(&key, None, &with("jti", json!(""))),
                Err(AssertionJti),
            ),
            (
                "a jti over 255 bytes",
                sign(&key, None, &with("jti", json!("j".repeat(256)))),
                Err(AssertionJti),
            ),
            (
                "no aud",
                sign(&key, None, &without("aud")),
                Err(AssertionMalformed),
            ),
            (
                "exp a string",
                sign(&key, None, &with("exp", json!("soon"))),
                Err(AssertionMalformed),
            ),
            (
                "wrong aud",
                sign(&key, None, &with("aud", json!("https://elsewhere"))),
                Err(AssertionAudience),
            ),
            (
                "expired",
                sign(&key, None, &with("exp", json!(t - 10))),
                Err(AssertionExpired),
            ),
            (
                "expired within leeway",
                sign(&key, None, &with("exp", json!(t - 2))),
                Ok(()),
            ),
            (
                "over an hour",
                sign(&key, None, &with("exp", json!(t + 3700))),
                Err(AssertionLifetime),
            ),
            (
                "iat over a minute ahead",
                sign(&key, None, &with("iat", json!(t + 61))),
                Err(AssertionNotYetValid),
            ),
            (
                "nbf over a minute ahead",
                sign(&key, None, &with("nbf", json!(t + 61))),
                Err(AssertionNotYetValid),
            ),
            (
                "iat a clock 10 s fast",
                sign(&key, None, &with("iat", json!(t + 10))),
                Ok(()),
            ),
            (
                "nbf a clock 10 s fast",
                sign(&key, None, &with("nbf", json!(t + 10))),
                Ok(()),
            ),
            (
                "iat and nbf a minute ahead",
                sign(
                    &key,
                    None,
                    &json!({"iss": ID, "sub": ID, "aud": ISSUER, "exp": t + 120, "iat": t + 60, "nbf": t + 60, "jti": "j1"}),
                ),
                Ok(()),
            ),
            (
                "exp the largest number",
                sign(&key, None, &with("exp", json!(i64::MAX))),
                Err(AssertionLifetime),
            ),
            (
                "exp the smallest number",
                sign(&key, None, &with("exp", json!(i64::MIN))),
                Err(AssertionExpired),
            ),
            (
                "iat the largest number",
                sign(&key, None, &with("iat", json!(i64::MAX))),
                Err(AssertionNotYetValid),
            ),
            (
                "nbf the largest number",
                sign(&key, None, &with("nbf", json!(i64::MAX))),
                Err(AssertionNotYetValid),
            ),
            (
                "iat and nbf the smallest number",
                sign(
                    &key,
                    None,
                    &json!({"iss": ID, "sub": ID, "aud": ISSUER, "exp": t + 60, "iat": i64::MIN, "nbf": i64::MIN, "jti": "j1"}),
                ),
                Ok(()),
            ),
        ];
        for (name, token, expected) in cases {
            assert_eq!(check(&token, &keys, now), expected, "{name}");
        }
    }

    #[test]
    fn a_key_of_another_kind_is_never_tried() {
        let t = Utc::now().timestamp();
        let (_, keys) = key_pair("k1");
        // An ES256 header with the Ed25519 key's kid: the key decides, not the header.
        let es = aws_lc_rs::signature::EcdsaKeyPair::generate_pkcs8(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &aws_lc_rs::rand::SystemRandom::new(),
        )
        .unwrap();
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        let token =
            jsonwebtoken::encode(&header, &claims(t), &EncodingKey::from_ec_der(es.as_ref()))
                .unwrap();
        assert_eq!(
            check(&token, &keys, Utc::now()),
            Err(ClientFailure::AssertionAlgorithm)
        );
    }

    #[test]
    fn a_spent_assertion_is_kept_until_it_expires() {
        let now = Utc::now();
        let (key, keys) = key_pair("k1");
        let token = sign(&key, None, &claims(now.timestamp()));
        let spent = ClientAssertion::read(&token)
            .unwrap()
            .verify(ID, &keys, &[ISSUER], now)
            .unwrap();
        assert_eq!(spent.jti, "j1");
        assert_eq!(
            spent.expires_at.timestamp(),
            now.timestamp() + 60 + LEEWAY_SECS
        );
        assert_eq!(spent.made_at.timestamp(), now.timestamp(), "its iat");
    }

    /// Without `iat` (nor `nbf`), an assertion may have been made as early as its `exp`
    /// allows, and is dated so for a replay store that forgot.
    #[test]
    fn an_assertion_without_iat_is_dated_by_the_earliest_its_exp_allows() {
        let now = Utc::now();
        let (key, keys) = key_pair("k1");
        let mut c = claims(now.timestamp());
        c.as_object_mut().unwrap().remove("iat");
        let spent = ClientAssertion::read(&sign(&key, None, &c))
            .unwrap()
            .verify(ID, &keys, &[ISSUER], now)
            .unwrap();
        assert_eq!(
            spent.made_at.timestamp(),
            now.timestamp() + 60 - MAX_LIFETIME_SECS - LEEWAY_SECS
        );
    }
}
