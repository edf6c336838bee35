//! Signing keys: generation, encryption at rest, the JWK form, and which key does what when.
//!
//! All RSA and ECDSA work goes through aws-lc-rs, whose private-key operations are constant-time
//! (the pure-Rust `rsa` crate's are not: RUSTSEC-2023-0071).

use anyhow::{Context, anyhow};
use aws_lc_rs::aead::LessSafeKey;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::hmac;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _, RSA_PKCS1_SHA256, RSA_PSS_SHA256,
};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{DateTime, Duration, Utc};
use poem_openapi::Object;
use serde::{Deserialize, Serialize};
use service_kit::Secret;
use shared::claims::{ACCESS_TOKEN_TYP, CLOCK_LEEWAY_SECS, TOKEN_TTL_SECS, TokenAlgorithm};

/// How long a retired key stays in the JWKS after its last signature: the longest a
/// token it signed can stay valid, plus the resource servers' clock leeway and a margin.
pub fn retired_key_publish_window() -> Duration {
    Duration::seconds(TOKEN_TTL_SECS + CLOCK_LEEWAY_SECS as i64 + 30)
}

/// The auth-server's key-encryption key, prepared: AES-256-GCM over each stored signing
/// key, and the root of the keys derived from it for other uses (the audit trail's seal).
pub struct SigningKeySealer(LessSafeKey, service_kit::kek::KeyEncryptionKey);

impl std::fmt::Debug for SigningKeySealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKeySealer([REDACTED])")
    }
}

impl SigningKeySealer {
    /// Parses the base64 of 32 random bytes (`AUTH_KEY_ENCRYPTION_KEY`).
    pub fn from_base64(encoded: &Secret<String>) -> anyhow::Result<Self> {
        Self::from_kek(service_kit::kek::KeyEncryptionKey::from_base64(
            VARIABLE, encoded,
        )?)
    }

    /// The key itself seals the signing keys, as it always has: keys sealed by earlier
    /// versions still open. It stays the root of the keys derived for other uses.
    pub fn from_kek(kek: service_kit::kek::KeyEncryptionKey) -> anyhow::Result<Self> {
        Ok(Self(kek.aes_256_gcm()?, kek))
    }

    /// An HMAC-SHA256 key for one use, named by `purpose`: HKDF keeps it independent of the
    /// key-encryption key and of the keys derived for other purposes.
    pub fn derive_hmac_key(&self, purpose: &str) -> anyhow::Result<hmac::Key> {
        Ok(hmac::Key::new(
            hmac::HMAC_SHA256,
            self.1.derive(purpose)?.expose(),
        ))
    }
}

/// The setting the key-encryption key is read from.
pub const VARIABLE: &str = "AUTH_KEY_ENCRYPTION_KEY";

const PLAIN_KEY_PREFIX: &str = "pkcs8:";
const SEALED_KEY_PREFIX: &str = "aes256gcm:";

/// Encrypts a PKCS#8 private key for storage. The kid is bound in as associated data so a
/// sealed key cannot be swapped onto another row.
pub fn seal_private_key(kek: &SigningKeySealer, kid: &str, pkcs8: &[u8]) -> anyhow::Result<String> {
    let blob = service_kit::kek::seal(&kek.0, kid.as_bytes(), pkcs8)
        .map_err(|_| anyhow!("cannot encrypt the private key"))?;
    Ok(format!("{SEALED_KEY_PREFIX}{}", STANDARD.encode(blob)))
}

/// Whether a stored private key is in clear, as older versions could store one.
pub fn stored_in_clear(stored: &str) -> bool {
    stored.starts_with(PLAIN_KEY_PREFIX)
}

/// Decodes a stored private key back to PKCS#8; a key stored in clear by an older version
/// is read too, so that it can be sealed.
pub fn open_private_key(
    kek: &SigningKeySealer,
    kid: &str,
    stored: &str,
) -> anyhow::Result<Vec<u8>> {
    if let Some(b64) = stored.strip_prefix(PLAIN_KEY_PREFIX) {
        return STANDARD
            .decode(b64)
            .with_context(|| format!("stored key {kid} is corrupt"));
    }
    let b64 = stored
        .strip_prefix(SEALED_KEY_PREFIX)
        .ok_or_else(|| anyhow!("stored key {kid} has an unknown format"))?;
    let blob = STANDARD
        .decode(b64)
        .with_context(|| format!("stored key {kid} is corrupt"))?;
    service_kit::kek::open(&kek.0, kid.as_bytes(), &blob).ok_or_else(|| {
        anyhow!(
            "cannot decrypt signing key {kid}: AUTH_KEY_ENCRYPTION_KEY is not the key it was \
             sealed with (or the row was altered)"
        )
    })
}

/// A freshly generated key pair, as PKCS#8 DER, with its kid.
pub struct GeneratedKey {
    /// RFC 7638 thumbprint of the public key.
    pub kid: String,
    /// What it signs with.
    pub alg: TokenAlgorithm,
    /// The private key; never logged.
    pub pkcs8: Secret<Vec<u8>>,
}

/// Generates a new signing key for `alg`: RSA-2048 for RS256 and PS256, P-256 for ES256.
pub fn generate_key(alg: TokenAlgorithm) -> anyhow::Result<GeneratedKey> {
    let pair = match alg {
        TokenAlgorithm::Rs256 | TokenAlgorithm::Ps256 => InProcess::Rsa(
            RsaKeyPair::generate(KeySize::Rsa2048)
                .map_err(|_| anyhow!("RSA key generation failed"))?,
        ),
        TokenAlgorithm::Es256 => InProcess::Ec(
            EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
                .map_err(|_| anyhow!("P-256 key generation failed"))?,
        ),
    };
    let der = match &pair {
        InProcess::Rsa(p) => p.as_der().map(|d| d.as_ref().to_vec()),
        InProcess::Ec(p) => p.to_pkcs8v1().map(|d| d.as_ref().to_vec()),
    }
    .map_err(|_| anyhow!("cannot encode the new key as PKCS#8"))?;
    Ok(GeneratedKey {
        kid: pair.jwk(alg, String::new()).thumbprint(),
        alg,
        pkcs8: Secret::new(der),
    })
}

/// A public key in JWK form (RFC 7517), as published in the JWKS: an RSA key (`n`, `e`)
/// or a P-256 one (`crv`, `x`, `y`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Object)]
pub struct Jwk {
    /// Key type: `RSA` or `EC`.
    pub kty: String,
    /// Intended use: always `sig`.
    #[serde(rename = "use")]
    #[oai(rename = "use")]
    pub use_: String,
    /// The algorithm the key signs with, and the only one to verify its tokens with:
    /// `RS256` (the default), `PS256` or `ES256`.
    pub alg: String,
    /// Key id, as in the `kid` header of the tokens it signs.
    pub kid: String,
    /// RSA modulus, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[oai(skip_serializing_if_is_none)]
    pub n: Option<String>,
    /// RSA public exponent, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[oai(skip_serializing_if_is_none)]
    pub e: Option<String>,
    /// EC curve: `P-256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[oai(skip_serializing_if_is_none)]
    pub crv: Option<String>,
    /// EC point's x coordinate, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[oai(skip_serializing_if_is_none)]
    pub x: Option<String>,
    /// EC point's y coordinate, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[oai(skip_serializing_if_is_none)]
    pub y: Option<String>,
}

/// A member only one key type has, empty on the other: every key this server makes has its
/// type's members.
fn field(member: &Option<String>) -> &str {
    member.as_deref().unwrap_or_default()
}

impl Jwk {
    /// An RSA public key of modulus `n` and exponent `e` (big-endian, no leading zeros).
    pub fn rsa(alg: TokenAlgorithm, kid: String, n: &[u8], e: &[u8]) -> Self {
        Self {
            kty: "RSA".into(),
            n: Some(URL_SAFE_NO_PAD.encode(n)),
            e: Some(URL_SAFE_NO_PAD.encode(e)),
            ..Self::empty(alg, kid)
        }
    }

    /// A P-256 public key of coordinates `x` and `y` (32 bytes each).
    pub fn p256(alg: TokenAlgorithm, kid: String, x: &[u8], y: &[u8]) -> Self {
        Self {
            kty: "EC".into(),
            crv: Some("P-256".into()),
            x: Some(URL_SAFE_NO_PAD.encode(x)),
            y: Some(URL_SAFE_NO_PAD.encode(y)),
            ..Self::empty(alg, kid)
        }
    }

    fn empty(alg: TokenAlgorithm, kid: String) -> Self {
        Self {
            kty: String::new(),
            use_: "sig".into(),
            alg: alg.name().into(),
            kid,
            n: None,
            e: None,
            crv: None,
            x: None,
            y: None,
        }
    }

    /// The same key under `kid`.
    pub fn with_kid(self, kid: String) -> Self {
        Self { kid, ..self }
    }

    /// RFC 7638 thumbprint (SHA-256, base64url): the key's kid.
    pub fn thumbprint(&self) -> String {
        // The required members in lexicographic order, no whitespace: the RFC's canonical form.
        let canonical = if self.kty == "EC" {
            format!(
                r#"{{"crv":"{}","kty":"EC","x":"{}","y":"{}"}}"#,
                field(&self.crv),
                field(&self.x),
                field(&self.y)
            )
        } else {
            format!(
                r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
                field(&self.e),
                field(&self.n)
            )
        };
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes());
        URL_SAFE_NO_PAD.encode(digest.as_ref())
    }

    /// The key ready to verify tokens with.
    fn decoding_key(&self) -> anyhow::Result<jsonwebtoken::DecodingKey> {
        Ok(if self.kty == "EC" {
            jsonwebtoken::DecodingKey::from_ec_components(field(&self.x), field(&self.y))?
        } else {
            jsonwebtoken::DecodingKey::from_rsa_components(field(&self.n), field(&self.e))?
        })
    }
}

/// A private key kept outside this process (inside a PKCS#11 token, say): it signs what it
/// is given and never leaves where it is.
pub trait ExternalKey: Send + Sync {
    /// The signature of `message` as `alg` wants it: RSASSA-PKCS1-v1_5 or RSASSA-PSS with
    /// SHA-256, or ECDSA P-256 with SHA-256 as `r || s`.
    fn sign(&self, alg: TokenAlgorithm, message: &[u8]) -> anyhow::Result<Vec<u8>>;
}

/// A private key in this process, of the type its algorithm needs.
enum InProcess {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

/// A private key: in this process, or kept elsewhere.
enum Pair {
    InProcess(InProcess),
    External(std::sync::Arc<dyn ExternalKey>),
}

impl InProcess {
    fn parse(alg: TokenAlgorithm, pkcs8: &[u8]) -> Result<Self, aws_lc_rs::error::KeyRejected> {
        Ok(match alg {
            TokenAlgorithm::Rs256 | TokenAlgorithm::Ps256 => {
                Self::Rsa(RsaKeyPair::from_pkcs8(pkcs8)?)
            }
            TokenAlgorithm::Es256 => Self::Ec(EcdsaKeyPair::from_pkcs8(
                &ECDSA_P256_SHA256_FIXED_SIGNING,
                pkcs8,
            )?),
        })
    }

    /// Its public half.
    fn jwk(&self, alg: TokenAlgorithm, kid: String) -> Jwk {
        match self {
            Self::Rsa(pair) => {
                let public = pair.public_key();
                Jwk::rsa(
                    alg,
                    kid,
                    public.modulus().big_endian_without_leading_zero(),
                    public.exponent().big_endian_without_leading_zero(),
                )
            }
            // The uncompressed point: 0x04, then x and y of 32 bytes each.
            Self::Ec(pair) => {
                let point = pair.public_key().as_ref();
                Jwk::p256(alg, kid, &point[1..33], &point[33..65])
            }
        }
    }
}

/// A signing key parsed once and kept in memory, so a token costs one signature and no
/// key parsing.
pub struct LoadedKey {
    /// Key id.
    pub kid: String,
    /// What it signs with.
    pub alg: TokenAlgorithm,
    /// When it was generated.
    pub created_at: DateTime<Utc>,
    /// When it starts signing.
    pub activates_at: DateTime<Utc>,
    /// Its public half.
    pub jwk: Jwk,
    /// Its public half, ready to verify a token this server is shown (`/revocations`).
    pub verifier: jsonwebtoken::DecodingKey,
    pair: Pair,
    header_b64: String,
}

impl shared::access_token::VerifyingKey for LoadedKey {
    fn decoding_key(&self) -> &jsonwebtoken::DecodingKey {
        &self.verifier
    }
    fn algorithm(&self) -> TokenAlgorithm {
        self.alg
    }
}

impl std::fmt::Debug for LoadedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field("activates_at", &self.activates_at)
            .finish_non_exhaustive()
    }
}

impl LoadedKey {
    /// Parses a PKCS#8 key for `alg` and prepares its JWT header.
    pub fn new(
        kid: String,
        alg: TokenAlgorithm,
        created_at: DateTime<Utc>,
        activates_at: DateTime<Utc>,
        pkcs8: &[u8],
    ) -> anyhow::Result<Self> {
        let pair = InProcess::parse(alg, pkcs8).map_err(|e| anyhow!("key {kid} rejected: {e}"))?;
        let jwk = pair.jwk(alg, kid.clone());
        Self::with_pair(
            kid,
            alg,
            created_at,
            activates_at,
            jwk,
            Pair::InProcess(pair),
        )
    }

    /// A key kept elsewhere, whose public half is `jwk`, signing through `key`.
    pub fn external(
        kid: String,
        alg: TokenAlgorithm,
        created_at: DateTime<Utc>,
        activates_at: DateTime<Utc>,
        jwk: Jwk,
        key: std::sync::Arc<dyn ExternalKey>,
    ) -> anyhow::Result<Self> {
        Self::with_pair(kid, alg, created_at, activates_at, jwk, Pair::External(key))
    }

    fn with_pair(
        kid: String,
        alg: TokenAlgorithm,
        created_at: DateTime<Utc>,
        activates_at: DateTime<Utc>,
        jwk: Jwk,
        pair: Pair,
    ) -> anyhow::Result<Self> {
        let verifier = jwk.decoding_key()?;
        let mut header = jsonwebtoken::Header::new(alg.jwt());
        header.typ = Some(ACCESS_TOKEN_TYP.to_owned());
        header.kid = Some(kid.clone());
        let header_b64 = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?);
        Ok(Self {
            kid,
            alg,
            created_at,
            activates_at,
            jwk,
            verifier,
            pair,
            header_b64,
        })
    }

    /// Signs `claims` as a compact JWS with this key's prepared header: not through
    /// `jsonwebtoken::encode`, which parses the private key again for every token.
    pub fn sign_jwt<T: Serialize>(&self, claims: &T) -> anyhow::Result<String> {
        let payload = serde_json::to_vec(claims)?;
        let mut jwt = String::with_capacity(self.header_b64.len() + payload.len() * 4 / 3 + 350);
        jwt.push_str(&self.header_b64);
        jwt.push('.');
        URL_SAFE_NO_PAD.encode_string(&payload, &mut jwt);
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let signature = match &self.pair {
            Pair::InProcess(InProcess::Rsa(pair)) => {
                let padding = if self.alg == TokenAlgorithm::Ps256 {
                    &RSA_PSS_SHA256
                } else {
                    &RSA_PKCS1_SHA256
                };
                let mut signature = vec![0u8; pair.public_modulus_len()];
                pair.sign(padding, &rng, jwt.as_bytes(), &mut signature)
                    .map_err(|_| anyhow!("RSA signing failed"))?;
                signature
            }
            // The fixed encoding, r then s, is what JWS wants (RFC 7518 section 3.4).
            Pair::InProcess(InProcess::Ec(pair)) => pair
                .sign(&rng, jwt.as_bytes())
                .map_err(|_| anyhow!("ECDSA signing failed"))?
                .as_ref()
                .to_vec(),
            Pair::External(key) => key.sign(self.alg, jwt.as_bytes())?,
        };
        jwt.push('.');
        URL_SAFE_NO_PAD.encode_string(&signature, &mut jwt);
        Ok(jwt)
    }
}

/// Where a key is in its life. Follows from its own dates and those of the key after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// Published, with no activation scheduled: the key the next rotation or revoke
    /// switches to.
    Standby,
    /// Published, not signing yet: resource servers fetch it before it is used.
    Pending,
    /// Published and signing.
    Active,
    /// Published, no longer signing; its tokens may still be valid.
    Retired,
    /// Every token it signed has expired: no longer published.
    Expired,
    /// Withdrawn in an emergency: never published or used again.
    Revoked,
}

/// Dates that decide a key's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyTimes {
    /// When the key starts signing.
    pub activates_at: DateTime<Utc>,
    /// When a later key took over, if one has.
    pub retired_at: Option<DateTime<Utc>>,
}

impl KeyTimes {
    /// The key's state at `now`.
    pub fn state(&self, now: DateTime<Utc>) -> KeyState {
        if self.activates_at > now {
            return KeyState::Pending;
        }
        match self.retired_at {
            Some(r) if r <= now && now < r + retired_key_publish_window() => KeyState::Retired,
            Some(r) if r <= now => KeyState::Expired,
            _ => KeyState::Active,
        }
    }

    /// When the key leaves the JWKS, once it is known.
    pub fn unpublish_at(&self) -> Option<DateTime<Utc>> {
        self.retired_at.map(|r| r + retired_key_publish_window())
    }
}

/// For keys sorted by activation (oldest first, revoked ones left out), each key's dates:
/// a key is retired when the next one starts signing.
pub fn key_times(activations: &[DateTime<Utc>], now: DateTime<Utc>) -> Vec<KeyTimes> {
    activations
        .iter()
        .enumerate()
        .map(|(i, &activates_at)| {
            // The next key that has started signing by `now` retires this one; a later
            // pending key does not, yet.
            let retired_at = activations[i + 1..]
                .first()
                .copied()
                .filter(|next| *next <= now);
            KeyTimes {
                activates_at,
                retired_at,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_pending_key_does_not_retire_the_active_one() {
        let times = key_times(&[t(0), t(300)], t(100));
        assert_eq!(times[0].state(t(100)), KeyState::Active);
        assert_eq!(times[1].state(t(100)), KeyState::Pending);
    }

    #[test]
    fn a_retired_key_stays_published_until_its_tokens_expire() {
        let times = key_times(&[t(0), t(300)], t(400));
        assert_eq!(times[0].state(t(400)), KeyState::Retired);
        assert_eq!(times[1].state(t(400)), KeyState::Active);
        let last_token_expiry = t(300 + TOKEN_TTL_SECS + CLOCK_LEEWAY_SECS as i64);
        let times = key_times(&[t(0), t(300)], last_token_expiry);
        assert_eq!(times[0].state(last_token_expiry), KeyState::Retired);
        let later = last_token_expiry + Duration::seconds(31);
        let times = key_times(&[t(0), t(300)], later);
        assert_eq!(times[0].state(later), KeyState::Expired);
    }

    #[test]
    fn sealed_keys_open_only_with_the_same_kek_and_kid() {
        let kek = SigningKeySealer::from_base64(&Secret::new(STANDARD.encode([7u8; 32]))).unwrap();
        let other =
            SigningKeySealer::from_base64(&Secret::new(STANDARD.encode([8u8; 32]))).unwrap();
        let sealed = seal_private_key(&kek, "kid1", b"private").unwrap();
        assert!(!sealed.contains(&STANDARD.encode(b"private")));
        assert!(!stored_in_clear(&sealed));
        assert_eq!(open_private_key(&kek, "kid1", &sealed).unwrap(), b"private");
        assert!(open_private_key(&other, "kid1", &sealed).is_err());
        assert!(open_private_key(&kek, "kid2", &sealed).is_err());
        let legacy = format!("pkcs8:{}", STANDARD.encode(b"private"));
        assert!(stored_in_clear(&legacy));
        assert_eq!(open_private_key(&kek, "kid1", &legacy).unwrap(), b"private");
    }

    #[test]
    fn key_encryption_key_must_be_32_bytes_of_base64() {
        assert!(SigningKeySealer::from_base64(&Secret::new("not base64!".into())).is_err());
        assert!(SigningKeySealer::from_base64(&Secret::new(STANDARD.encode([1u8; 16]))).is_err());
    }

    #[test]
    fn a_signed_token_verifies_with_jsonwebtoken_against_the_jwk_for_each_algorithm() {
        for alg in TokenAlgorithm::ALL {
            let generated = generate_key(alg).unwrap();
            assert_eq!(generated.alg, alg);
            let key = LoadedKey::new(
                generated.kid.clone(),
                alg,
                t(0),
                t(0),
                generated.pkcs8.expose(),
            )
            .unwrap();
            let claims = serde_json::json!({"sub": "c1", "exp": 4_000_000_000i64});
            let jwt = key.sign_jwt(&claims).unwrap();
            let header = jsonwebtoken::decode_header(&jwt).unwrap();
            assert_eq!(header.alg, alg.jwt());
            assert_eq!(header.kid.as_deref(), Some(generated.kid.as_str()));
            assert_eq!(header.typ.as_deref(), Some("at+jwt"));
            // Verified from the published JWK alone, as a resource server does.
            let published: jsonwebtoken::jwk::Jwk =
                serde_json::from_value(serde_json::to_value(&key.jwk).unwrap()).unwrap();
            let dk = jsonwebtoken::DecodingKey::from_jwk(&published).unwrap();
            let mut v = jsonwebtoken::Validation::new(alg.jwt());
            v.required_spec_claims.clear();
            let data = jsonwebtoken::decode::<serde_json::Value>(&jwt, &dk, &v).unwrap();
            assert_eq!(data.claims["sub"], "c1");
            assert_eq!(key.jwk.alg, alg.name());
            assert_eq!(key.jwk.thumbprint(), generated.kid);
            // The key's own algorithm only: an RSA key's token is not taken as the other
            // RSA algorithm.
            for other in TokenAlgorithm::ALL.into_iter().filter(|o| *o != alg) {
                let mut v = jsonwebtoken::Validation::new(other.jwt());
                v.required_spec_claims.clear();
                assert!(jsonwebtoken::decode::<serde_json::Value>(&jwt, &dk, &v).is_err());
            }
        }
    }

    #[test]
    fn a_key_does_not_load_as_another_type() {
        let rsa = generate_key(TokenAlgorithm::Rs256).unwrap();
        let ec = generate_key(TokenAlgorithm::Es256).unwrap();
        assert!(
            LoadedKey::new(
                rsa.kid,
                TokenAlgorithm::Es256,
                t(0),
                t(0),
                rsa.pkcs8.expose()
            )
            .is_err()
        );
        assert!(
            LoadedKey::new(ec.kid, TokenAlgorithm::Ps256, t(0), t(0), ec.pkcs8.expose()).is_err()
        );
    }

    #[test]
    fn thumbprints_follow_rfc_7638() {
        // RFC 7638 section 3.1's example key and thumbprint.
        let jwk: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": "",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
            "e": "AQAB",
        }))
        .unwrap();
        assert_eq!(
            jwk.thumbprint(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }
}
