//! The public keys a `private_key_jwt` client signs its assertions with: checked when an
//! operator registers them, then ready to verify with.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Serialize;
use serde_json::Value;

/// Most keys one client may register: enough for a rollover, few enough that trying each
/// on an assertion without a `kid` stays cheap.
pub const MAX_KEYS: usize = 10;

/// Largest JWKS read, from a file or from a client's JWKS URL.
pub const MAX_JWKS_BYTES: usize = 64 * 1024;

/// Smallest RSA modulus accepted, in bits.
pub const MIN_RSA_BITS: usize = 2048;

/// Members only a private or symmetric JWK has (RFC 7518 section 6).
const PRIVATE_MEMBERS: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/// What kind of key it is, which decides the algorithms it verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KeyKind {
    /// RSA, at least 2048 bits.
    #[serde(rename = "RSA")]
    Rsa,
    /// EC on P-256.
    #[serde(rename = "EC P-256")]
    P256,
    /// OKP Ed25519.
    #[serde(rename = "OKP Ed25519")]
    Ed25519,
}

impl KeyKind {
    /// The algorithms an assertion signed with a key of this kind may name.
    pub fn algorithms(self) -> &'static [Algorithm] {
        match self {
            Self::Rsa => &[Algorithm::RS256, Algorithm::PS256],
            Self::P256 => &[Algorithm::ES256],
            Self::Ed25519 => &[Algorithm::EdDSA],
        }
    }
}

/// Every algorithm an assertion may be signed with, as the metadata lists them.
pub const SIGNING_ALGORITHMS: [&str; 4] = ["RS256", "PS256", "ES256", "EdDSA"];

/// One registered key, ready to verify with.
#[derive(Clone)]
pub struct ClientKey {
    /// Its `kid`, when it has one.
    pub kid: Option<String>,
    /// Its kind.
    pub kind: KeyKind,
    /// The one algorithm it is for, when its JWK names one.
    pub alg: Option<Algorithm>,
    /// The key.
    pub key: DecodingKey,
}

impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKey")
            .field("kid", &self.kid)
            .field("kind", &self.kind)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl ClientKey {
    /// Whether an assertion naming `alg` may be checked with this key: the key's kind, and
    /// its own `alg` when it names one, decide; the header only chooses among those.
    pub fn fits(&self, alg: Algorithm) -> bool {
        self.kind.algorithms().contains(&alg) && self.alg.is_none_or(|a| a == alg)
    }
}

/// How a registered key is shown to operators and in the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeySummary {
    /// Its `kid`, when it has one.
    pub kid: Option<String>,
    /// Its kind.
    pub kind: KeyKind,
    /// The algorithm its JWK names, if any.
    pub alg: Option<String>,
}

/// A client's public keys, every one checked; none by default.
#[derive(Debug, Clone, Default)]
pub struct ClientKeys {
    keys: Vec<ClientKey>,
    stored: String,
}

/// Why a JWKS was refused: every problem found, each naming the key it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the JWKS is refused: {}", .0.join("; "))]
pub struct KeysRefused(pub Vec<String>);

impl ClientKeys {
    /// Whether every key is pinned to RS256 (its JWK's `alg`): such a client cannot sign an
    /// assertion FAPI 2.0 takes until it registers another key.
    pub fn only_rs256(&self) -> bool {
        !self.keys.is_empty() && self.keys.iter().all(|k| k.alg == Some(Algorithm::RS256))
    }

    /// Parses and checks a JWKS as an operator registers it: public signing keys only,
    /// of the kinds assertions may be signed with, at most [`MAX_KEYS`].
    pub fn parse(text: &str) -> Result<Self, KeysRefused> {
        let refused = |p: String| KeysRefused(vec![p]);
        let document: Value =
            serde_json::from_str(text).map_err(|e| refused(format!("it is not JSON ({e})")))?;
        let Some(members) = document.get("keys").and_then(Value::as_array) else {
            return Err(refused(
                "a JWKS is a JSON object with a `keys` array (RFC 7517 section 5)".into(),
            ));
        };
        if members.is_empty() {
            return Err(refused("it holds no key".into()));
        }
        if members.len() > MAX_KEYS {
            return Err(refused(format!(
                "it holds {} keys; a client may register at most {MAX_KEYS}",
                members.len()
            )));
        }
        let mut problems = Vec::new();
        let mut keys: Vec<ClientKey> = Vec::new();
        let mut jwks = Vec::new();
        for (i, member) in members.iter().enumerate() {
            let name = match member.get("kid").and_then(Value::as_str) {
                Some(kid) => format!("key {i} (kid {kid:?})"),
                None => format!("key {i}"),
            };
            match check_key(member) {
                Ok((key, jwk)) => {
                    if key.kid.is_some() && keys.iter().any(|k| k.kid == key.kid) {
                        problems.push(format!("{name}: another key has the same kid"));
                    }
                    keys.push(key);
                    jwks.push(jwk);
                }
                Err(problem) => problems.push(format!("{name}: {problem}")),
            }
        }
        if !problems.is_empty() {
            return Err(KeysRefused(problems));
        }
        // Stored as jsonwebtoken writes it back: only the members it knows, so nothing
        // the operator's file carried beside the keys is kept.
        let stored = serde_json::to_string(&JwkSet { keys: jwks })
            .map_err(|e| refused(format!("it cannot be written back ({e})")))?;
        Ok(Self { keys, stored })
    }

    /// Loads keys stored by [`ClientKeys::parse`].
    pub fn load(stored: &str) -> Result<Self, KeysRefused> {
        Self::parse(stored)
    }

    /// The keys.
    pub fn keys(&self) -> &[ClientKey] {
        &self.keys
    }

    /// The JWKS to store.
    pub fn stored(&self) -> &str {
        &self.stored
    }

    /// The keys as operators see them.
    pub fn summary(&self) -> Vec<KeySummary> {
        self.keys
            .iter()
            .map(|k| KeySummary {
                kid: k.kid.clone(),
                kind: k.kind,
                alg: k.alg.map(|a| format!("{a:?}")),
            })
            .collect()
    }

    /// Whether one of the keys has this `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// The keys that may have signed an assertion whose header names `kid` and `alg`:
    /// the one with that `kid`, or without one, every key that fits the algorithm.
    pub fn candidates<'a>(
        &'a self,
        kid: Option<&'a str>,
        alg: Algorithm,
    ) -> impl Iterator<Item = &'a ClientKey> + 'a {
        self.keys
            .iter()
            .filter(move |k| kid.is_none_or(|kid| k.kid.as_deref() == Some(kid)))
            .filter(move |k| k.fits(alg))
    }
}

/// Checks one JWK; the problem, without the key's name, when it is refused.
fn check_key(member: &Value) -> Result<(ClientKey, Jwk), String> {
    let Some(object) = member.as_object() else {
        return Err("not a JSON object".into());
    };
    let private: Vec<&str> = PRIVATE_MEMBERS
        .into_iter()
        .filter(|m| object.contains_key(*m))
        .collect();
    let kty = object.get("kty").and_then(Value::as_str).unwrap_or("");
    if kty == "oct" {
        return Err(
            "a symmetric key (kty \"oct\"): register the public half of a key pair \
                    (RSA, EC P-256 or OKP Ed25519)"
                .into(),
        );
    }
    if !private.is_empty() {
        return Err(format!(
            "holds private key material ({}): register only the public key, and keep the \
             private key with the partner",
            private
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !matches!(kty, "RSA" | "EC" | "OKP") {
        return Err(format!(
            "kty {kty:?} is not supported: RSA, EC (P-256) or OKP (Ed25519)"
        ));
    }
    let jwk: Jwk =
        serde_json::from_value(member.clone()).map_err(|e| format!("not a readable JWK ({e})"))?;
    let kind = match &jwk.algorithm {
        AlgorithmParameters::RSA(rsa) => {
            let bits = modulus_bits(&rsa.n).ok_or("`n` is not base64url")?;
            if bits < MIN_RSA_BITS {
                return Err(format!(
                    "a {bits}-bit RSA key: at least {MIN_RSA_BITS} bits"
                ));
            }
            KeyKind::Rsa
        }
        AlgorithmParameters::EllipticCurve(ec) => {
            if ec.curve != EllipticCurve::P256 {
                return Err(format!("curve {:?}: only P-256 is accepted", ec.curve));
            }
            let point = [vec![4u8], decode(&ec.x)?, decode(&ec.y)?].concat();
            aws_lc_rs::signature::ParsedPublicKey::new(
                &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
                point,
            )
            .map_err(|_| "`x` and `y` are not a point on P-256")?;
            KeyKind::P256
        }
        AlgorithmParameters::OctetKeyPair(okp) => {
            if okp.curve != EllipticCurve::Ed25519 {
                return Err(format!("curve {:?}: only Ed25519 is accepted", okp.curve));
            }
            aws_lc_rs::signature::ParsedPublicKey::new(
                &aws_lc_rs::signature::ED25519,
                decode(&okp.x)?,
            )
            .map_err(|_| "`x` is not an Ed25519 public key")?;
            KeyKind::Ed25519
        }
        _ => return Err("not an RSA, EC or OKP key".into()),
    };
    match &jwk.common.public_key_use {
        None | Some(PublicKeyUse::Signature) => {}
        Some(_) => return Err("its `use` is not \"sig\"".into()),
    }
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(named) => {
            let alg = Algorithm::try_from(named)
                .ok()
                .filter(|a| kind.algorithms().contains(a))
                .ok_or_else(|| {
                    format!(
                        "alg {named} is not one a {} key signs assertions with ({})",
                        serde_json::to_value(kind)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default(),
                        kind.algorithms()
                            .iter()
                            .map(|a| format!("{a:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
            Some(alg)
        }
    };
    let key = DecodingKey::from_jwk(&jwk).map_err(|e| format!("not a usable key ({e})"))?;
    Ok((
        ClientKey {
            kid: jwk.common.key_id.clone(),
            kind,
            alg,
            key,
        },
        jwk,
    ))
}

fn decode(member: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD
        .decode(member)
        .map_err(|_| "a coordinate is not base64url".to_owned())
}

/// The size of an RSA modulus given as base64url, in bits.
fn modulus_bits(n: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(n).ok()?;
    let first = bytes.iter().position(|b| *b != 0)?;
    let significant = &bytes[first..];
    Some(significant.len() * 8 - significant[0].leading_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An EC P-256 public key (RFC 7515 appendix A.3).
    fn ec_key() -> Value {
        json!({
            "kty": "EC", "crv": "P-256", "kid": "ec",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
        })
    }

    /// An Ed25519 public key (RFC 8037 appendix A.2).
    fn ed_key() -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})
    }

    /// An RSA public key of `bytes` modulus bytes (not a real modulus: the size is what
    /// the check reads).
    fn rsa_key(bytes: usize) -> Value {
        let mut n = vec![0xc5u8; bytes];
        n[bytes - 1] |= 1;
        json!({"kty": "RSA", "kid": "rsa", "e": "AQAB", "n": URL_SAFE_NO_PAD.encode(n)})
    }

    fn jwks(keys: Vec<Value>) -> String {
        json!({ "keys": keys }).to_string()
    }

    fn with(mut key: Value, member: &str, value: Value) -> Value {
        key[member] = value;
        key
    }

    #[test]
    fn each_rule_of_a_registered_jwks_names_its_problem() {
        let d = json!("AAAA");
        let cases: Vec<(&str, String, Option<&str>)> = vec![
            (
                "public keys of each kind",
                jwks(vec![rsa_key(256), ec_key(), ed_key()]),
                None,
            ),
            ("not JSON", "{keys".into(), Some("not JSON")),
            (
                "no keys array",
                json!({"kty": "EC"}).to_string(),
                Some("`keys` array"),
            ),
            ("empty", jwks(vec![]), Some("holds no key")),
            (
                "too many",
                jwks(
                    (0..11)
                        .map(|i| with(ed_key(), "kid", json!(i.to_string())))
                        .collect(),
                ),
                Some("at most 10"),
            ),
            (
                "RSA private key",
                jwks(vec![with(rsa_key(256), "d", d.clone())]),
                Some("private key material (`d`)"),
            ),
            (
                "EC private key",
                jwks(vec![with(ec_key(), "d", d.clone())]),
                Some("private key material"),
            ),
            (
                "OKP private key",
                jwks(vec![with(ed_key(), "d", d.clone())]),
                Some("private key material"),
            ),
            (
                "RSA primes",
                jwks(vec![with(
                    with(rsa_key(256), "p", d.clone()),
                    "q",
                    d.clone(),
                )]),
                Some("(`p`, `q`)"),
            ),
            (
                "symmetric",
                jwks(vec![json!({"kty": "oct", "k": "c2VjcmV0"})]),
                Some("symmetric"),
            ),
            (
                "short RSA",
                jwks(vec![rsa_key(128)]),
                Some("1024-bit RSA key"),
            ),
            (
                "P-384",
                jwks(vec![with(ec_key(), "crv", json!("P-384"))]),
                Some("only P-256"),
            ),
            (
                "off the curve",
                jwks(vec![with(
                    ec_key(),
                    "y",
                    json!(URL_SAFE_NO_PAD.encode([1u8; 32])),
                )]),
                Some("not a point on P-256"),
            ),
            (
                "unknown kty",
                jwks(vec![json!({"kty": "XYZ", "x": "a"})]),
                Some("kty \"XYZ\""),
            ),
            (
                "encryption key",
                jwks(vec![with(ec_key(), "use", json!("enc"))]),
                Some("`use`"),
            ),
            (
                "alg of another kind",
                jwks(vec![with(ec_key(), "alg", json!("RS256"))]),
                Some("alg RS256"),
            ),
            (
                "HMAC alg",
                jwks(vec![with(rsa_key(256), "alg", json!("HS256"))]),
                Some("alg HS256"),
            ),
            (
                "same kid twice",
                jwks(vec![ed_key(), ed_key()]),
                Some("same kid"),
            ),
        ];
        for (name, text, expected) in cases {
            match (ClientKeys::parse(&text), expected) {
                (Ok(_), None) => {}
                (Err(e), Some(wanted)) => {
                    assert!(e.to_string().contains(wanted), "{name}: {e}")
                }
                (got, wanted) => panic!("{name}: got {got:?}, wanted {wanted:?}"),
            }
        }
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = jwks(vec![
            with(ec_key(), "d", json!("AAAA")),
            ed_key(),
            json!({"kty": "oct", "k": "c2VjcmV0"}),
        ]);
        let KeysRefused(problems) = ClientKeys::parse(&text).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("key 0 (kid \"ec\")"),
            "{problems:?}"
        );
        assert!(problems[1].starts_with("key 2:"), "{problems:?}");
    }

    #[test]
    fn the_stored_form_loads_again_without_foreign_members() {
        let keys =
            ClientKeys::parse(&jwks(vec![with(ec_key(), "x5u", json!("https://x"))])).unwrap();
        let again = ClientKeys::load(keys.stored()).unwrap();
        assert_eq!(again.summary(), keys.summary());
        assert_eq!(again.stored(), keys.stored());
    }

    #[test]
    fn a_key_verifies_only_the_algorithms_of_its_kind_and_alg() {
        let keys = ClientKeys::parse(&jwks(vec![
            rsa_key(256),
            with(
                with(rsa_key(256), "kid", json!("ps")),
                "alg",
                json!("PS256"),
            ),
            ec_key(),
            ed_key(),
        ]))
        .unwrap();
        let kids = |kid, alg| -> Vec<String> {
            keys.candidates(kid, alg)
                .map(|k| k.kid.clone().unwrap())
                .collect()
        };
        assert_eq!(kids(None, Algorithm::RS256), ["rsa"]);
        assert_eq!(kids(None, Algorithm::PS256), ["rsa", "ps"]);
        assert_eq!(kids(Some("ps"), Algorithm::RS256), Vec::<String>::new());
        assert_eq!(kids(None, Algorithm::ES256), ["ec"]);
        assert_eq!(kids(Some("ec"), Algorithm::EdDSA), Vec::<String>::new());
        assert_eq!(kids(None, Algorithm::HS256), Vec::<String>::new());
        assert_eq!(kids(None, Algorithm::ES384), Vec::<String>::new());
        assert_eq!(kids(Some("nope"), Algorithm::EdDSA), Vec::<String>::new());
    }

    #[test]
    fn only_keys_pinned_to_rs256_leave_a_client_without_a_fapi2_algorithm() {
        let pinned = |alg| with(rsa_key(256), "alg", json!(alg));
        let only = |keys: Vec<Value>| ClientKeys::parse(&jwks(keys)).unwrap().only_rs256();
        assert!(only(vec![pinned("RS256")]));
        assert!(!only(vec![pinned("RS256"), ec_key()]));
        // Unpinned, an RSA key may sign PS256.
        assert!(!only(vec![rsa_key(256)]));
        assert!(!only(vec![pinned("PS256")]));
        assert!(!ClientKeys::default().only_rs256());
    }
}
