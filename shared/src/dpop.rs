//! DPoP proofs (RFC 9449): what the auth-server checks before binding a token to a key, and
//! what a resource server checks with every request such a token comes with.
//!
//! A proof is a JWT the client signs with its own key for one request: its header carries the
//! public key, its claims the request's method and URL, when it was made, a unique `jti`
//! and, beside an access token, the token's hash. Single use is the caller's to enforce,
//! keeping the `jti` until [`VerifiedProof::keep_until`]: only it knows where used ones are
//! kept.

use aws_lc_rs::digest::{SHA256, digest};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, ThumbprintHash};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// The `typ` of a proof's header.
pub const PROOF_TYP: &str = "dpop+jwt";

/// The algorithms a proof may be signed with, as `algs=` and the metadata list them:
/// asymmetric only, never `none` or an HMAC.
pub const ALGORITHMS: [&str; 4] = crate::profile::STANDARD_ALGORITHMS;

/// The longest proof read: an RSA-4096 key in the header and the claims fit well within it.
pub const MAX_PROOF_BYTES: usize = 4096;

/// How old a proof may be: it is made for one request and sent at once.
pub const MAX_AGE_SECS: i64 = 300;

/// How far in the future a proof's `iat` may be, for clocks that run ahead: the same as a
/// client assertion's.
pub const MAX_AHEAD_SECS: i64 = crate::claims::CLOCK_AHEAD_SECS;

/// The request a proof must be for.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The HTTP method, upper case.
    pub method: &'a str,
    /// The URL the client called, as it called it: scheme, host, port and path (a query or
    /// fragment is not compared).
    pub url: &'a str,
    /// The access token sent beside it, whose hash the proof must carry (`ath`); none at
    /// the token endpoint.
    pub access_token: Option<&'a str>,
    /// Now, in seconds since the epoch.
    pub now: i64,
    /// The algorithms a proof may be signed with: the deployment profile's.
    pub algorithms: &'a [&'a str],
}

/// A proof that checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedProof {
    /// The JWK SHA-256 thumbprint (RFC 7638) of the proof's key: what a bound token's
    /// `cnf.jkt` names.
    pub jkt: String,
    /// The proof's unique id, to be refused if seen again until [`Self::keep_until`].
    pub jti: String,
    /// When the proof says it was made, in seconds since the epoch.
    pub iat: i64,
    /// The server nonce the proof carries (RFC 9449 section 8), if any: the caller checks
    /// it when it hands nonces out.
    pub nonce: Option<String>,
}

impl VerifiedProof {
    /// The first second, since the epoch, at which this proof is refused as too old: its
    /// `jti` must be remembered until then, and need not be after.
    pub fn keep_until(&self) -> i64 {
        self.iat.saturating_add(MAX_AGE_SECS + 1)
    }
}

pub use crate::refusal::ProofFault;

/// The request's one `DPoP` header, given all its values: `None` when there is none, and a
/// refusal for several (RFC 9449 section 4.3: which one was meant is not ours to guess) or
/// for one that is not text.
pub fn single_proof<'a, V>(
    values: impl IntoIterator<Item = &'a V>,
) -> Result<Option<&'a str>, ProofFault>
where
    V: AsRef<[u8]> + ?Sized + 'a,
{
    let mut values = values.into_iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => header_text(value.as_ref()).map(Some),
        (Some(_), Some(_)) => Err(ProofFault::Multiple),
    }
}

/// A header value as text, on the terms `http`'s `HeaderValue::to_str` sets: visible ASCII
/// and tabs only, so a proof is read the same whatever the header type holding it.
fn header_text(value: &[u8]) -> Result<&str, ProofFault> {
    if !value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return Err(ProofFault::Malformed);
    }
    std::str::from_utf8(value).map_err(|_| ProofFault::Malformed)
}

#[derive(Deserialize)]
struct ProofClaims {
    jti: Option<String>,
    htm: Option<String>,
    htu: Option<String>,
    iat: Option<i64>,
    ath: Option<String>,
    nonce: Option<String>,
}

/// Members that only a private or symmetric key has: a proof carrying one is refused, as
/// a client that sends its private key has lost it.
const PRIVATE_MEMBERS: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/// Checks `proof` against the request it must be for, and returns its key's thumbprint
/// and its `jti`.
pub fn verify(proof: &str, expected: Expected<'_>) -> Result<VerifiedProof, ProofFault> {
    let proof = proof.trim();
    if proof.is_empty() || proof.len() > MAX_PROOF_BYTES {
        return Err(ProofFault::Size);
    }
    let (signing_input, signature) = proof.rsplit_once('.').ok_or(ProofFault::Malformed)?;
    let (header, claims) = signing_input
        .split_once('.')
        .filter(|(_, claims)| !claims.contains('.'))
        .ok_or(ProofFault::Malformed)?;
    let (key, cached) = match ProofKey::cached(header) {
        Some(key) => (key, true),
        None => (
            Arc::new(ProofKey::read(header, expected.algorithms)?),
            false,
        ),
    };
    // The profile's list is checked here too: a header read under another list is cached.
    if !expected.algorithms.contains(&key.alg) {
        return Err(ProofFault::Alg);
    }
    let signed =
        jsonwebtoken::crypto::verify(signature, signing_input.as_bytes(), &key.key, key.algorithm)
            .map_err(|_| ProofFault::Malformed)?;
    if !signed {
        return Err(ProofFault::Signature);
    }
    // Only headers whose key made a good signature are kept, each read once.
    if !cached {
        ProofKey::keep(header, key.clone());
    }
    let claims = URL_SAFE_NO_PAD
        .decode(claims)
        .map_err(|_| ProofFault::Malformed)?;
    let claims: ProofClaims = serde_json::from_slice(&claims).map_err(|_| ProofFault::Malformed)?;
    let jti = claims
        .jti
        .filter(|j| crate::claims::is_acceptable_jti(j))
        .ok_or(ProofFault::Jti)?;
    if claims.htm.as_deref() != Some(expected.method) {
        return Err(ProofFault::Htm);
    }
    if !same_target(claims.htu.as_deref().ok_or(ProofFault::Htu)?, expected.url) {
        return Err(ProofFault::Htu);
    }
    let iat = claims.iat.ok_or(ProofFault::Iat)?;
    let now = expected.now;
    if iat > now.saturating_add(MAX_AHEAD_SECS) || iat < now.saturating_sub(MAX_AGE_SECS) {
        return Err(ProofFault::Iat);
    }
    if let Some(token) = expected.access_token
        && claims.ath.as_deref() != Some(token_hash(token).as_str())
    {
        return Err(ProofFault::Ath);
    }
    Ok(VerifiedProof {
        jkt: key.jkt.clone(),
        jti,
        iat,
        nonce: claims.nonce,
    })
}

/// What a proof's header says, once checked: its algorithm, its key ready to verify with,
/// and the key's thumbprint. A client signs every proof with the same key, so its proofs
/// share one header, and the header's work (JSON, the JWK, the thumbprint) is done once.
struct ProofKey {
    alg: &'static str,
    algorithm: Algorithm,
    key: DecodingKey,
    jkt: String,
}

/// How many proof headers are remembered: a few per client; when full, all are forgotten.
const CACHED_HEADERS: usize = 4096;

fn header_cache() -> &'static RwLock<HashMap<String, Arc<ProofKey>>> {
    static HEADERS: OnceLock<RwLock<HashMap<String, Arc<ProofKey>>>> = OnceLock::new();
    HEADERS.get_or_init(Default::default)
}

impl ProofKey {
    fn cached(header: &str) -> Option<Arc<Self>> {
        let cache = header_cache().read().unwrap_or_else(|e| e.into_inner());
        cache.get(header).cloned()
    }

    fn keep(header: &str, key: Arc<Self>) {
        let mut cache = header_cache().write().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHED_HEADERS {
            cache.clear();
        }
        cache.insert(header.to_owned(), key);
    }

    /// Reads a proof's base64url JOSE header, trusting nothing in it: the `typ`, an
    /// algorithm of `algorithms`, no critical extension, and one public key of the kind the
    /// algorithm signs with.
    fn read(header: &str, algorithms: &[&str]) -> Result<Self, ProofFault> {
        let bytes = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| ProofFault::Malformed)?;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&bytes).map_err(|_| ProofFault::Malformed)?;
        if header.get("typ").and_then(|t| t.as_str()) != Some(PROOF_TYP) {
            return Err(ProofFault::Typ);
        }
        let alg = header.get("alg").and_then(|a| a.as_str());
        if !alg.is_some_and(|a| algorithms.contains(&a)) {
            return Err(ProofFault::Alg);
        }
        let (alg, algorithm) = match alg {
            Some("ES256") => ("ES256", Algorithm::ES256),
            Some("PS256") => ("PS256", Algorithm::PS256),
            Some("RS256") => ("RS256", Algorithm::RS256),
            Some("EdDSA") => ("EdDSA", Algorithm::EdDSA),
            _ => return Err(ProofFault::Alg),
        };
        if header.get("crit").is_some() {
            return Err(ProofFault::Crit);
        }
        let raw_jwk = header
            .get("jwk")
            .and_then(|j| j.as_object())
            .ok_or(ProofFault::Jwk)?;
        if PRIVATE_MEMBERS.iter().any(|m| raw_jwk.contains_key(*m)) {
            return Err(ProofFault::PrivateKey);
        }
        let jwk: Jwk = serde_json::from_value(serde_json::Value::Object(raw_jwk.clone()))
            .map_err(|_| ProofFault::Jwk)?;
        if !key_fits(&jwk.algorithm, algorithm) {
            return Err(ProofFault::Jwk);
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| ProofFault::Jwk)?;
        let jkt = jwk
            .thumbprint(ThumbprintHash::SHA256)
            .map_err(|_| ProofFault::Jwk)?;
        Ok(Self {
            alg,
            algorithm,
            key,
            jkt,
        })
    }
}

/// Whether `jwk` is a key of the kind `algorithm` signs with: the header's `alg` alone never
/// decides how a key is used.
fn key_fits(jwk: &AlgorithmParameters, algorithm: Algorithm) -> bool {
    match (jwk, algorithm) {
        // FAPI 2.0 (5.4.1) asks for 2048 bits at least, as client keys are held to.
        (AlgorithmParameters::RSA(rsa), Algorithm::RS256 | Algorithm::PS256) => URL_SAFE_NO_PAD
            .decode(&rsa.n)
            .is_ok_and(|n| modulus_bits(&n) >= MIN_RSA_BITS),
        (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES256) => {
            ec.curve == EllipticCurve::P256
        }
        (AlgorithmParameters::OctetKeyPair(okp), Algorithm::EdDSA) => {
            okp.curve == EllipticCurve::Ed25519
        }
        _ => false,
    }
}

/// The smallest RSA modulus a proof's key may have, in bits.
pub const MIN_RSA_BITS: usize = 2048;

/// The bit length of a big-endian unsigned number.
fn modulus_bits(n: &[u8]) -> usize {
    let n = &n[n.iter().take_while(|b| **b == 0).count()..];
    n.first()
        .map_or(0, |first| n.len() * 8 - first.leading_zeros() as usize)
}

/// Whether a proof's `htu` names `url`: the same scheme, host, port and path, the query and
/// fragment of either left out (RFC 9449 section 4.3).
fn same_target(htu: &str, url: &str) -> bool {
    // As clients send it, most often: the URL itself, which needs no parsing.
    if htu == url {
        return true;
    }
    let target = |u: &str| {
        url::Url::parse(u).ok().map(|u| {
            (
                u.scheme().to_owned(),
                u.host_str().map(str::to_owned),
                u.port_or_known_default(),
                u.path().to_owned(),
            )
        })
    };
    matches!((target(htu), target(url)), (Some(a), Some(b)) if a == b)
}

/// The `ath` of an access token: the base64url SHA-256 of its ASCII text.
pub fn token_hash(access_token: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest(&SHA256, access_token.as_bytes()).as_ref())
}

/// The `algs` parameter of a `DPoP` challenge, for a deployment accepting `algorithms`.
pub fn challenge_algs(algorithms: &[&str]) -> String {
    algorithms.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    use jsonwebtoken::EncodingKey;
    use serde_json::{Value, json};

    const URL: &str = "https://intake.example/partners/external/intake";
    const NOW: i64 = 1_800_000_000;

    struct Key {
        encoding: EncodingKey,
        jwk: Value,
    }

    fn p256() -> Key {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let point = pair.public_key().as_ref();
        let jwk = json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..]),
        });
        Key {
            encoding: EncodingKey::from_ec_der(pair.to_pkcs8v1().unwrap().as_ref()),
            jwk,
        }
    }

    fn claims(token: Option<&str>) -> Value {
        let mut claims = json!({"jti": "proof-1", "htm": "POST", "htu": URL, "iat": NOW});
        if let Some(token) = token {
            claims["ath"] = json!(token_hash(token));
        }
        claims
    }

    /// A proof signed by `signer` whose header carries `jwk`, edited by `header`: written
    /// here, so that headers no client library would make can be sent too.
    fn proof_with(
        signer: &Key,
        jwk: &Value,
        claims: &Value,
        header: impl FnOnce(&mut Value),
    ) -> String {
        let mut h = json!({"typ": PROOF_TYP, "alg": "ES256", "jwk": jwk});
        header(&mut h);
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(h.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature =
            jsonwebtoken::crypto::sign(input.as_bytes(), &signer.encoding, Algorithm::ES256)
                .unwrap();
        format!("{input}.{signature}")
    }

    fn proof(key: &Key, claims: &Value) -> String {
        proof_with(key, &key.jwk, claims, |_| {})
    }

    fn expected(token: Option<&str>) -> Expected<'_> {
        Expected {
            method: "POST",
            url: URL,
            access_token: token,
            now: NOW,
            algorithms: &ALGORITHMS,
        }
    }

    #[test]
    fn under_fapi2_only_its_algorithms_and_rsa_keys_of_2048_bits_are_taken() {
        let key = p256();
        let fapi = Expected {
            algorithms: &crate::profile::FAPI2_ALGORITHMS,
            ..expected(None)
        };
        assert!(verify(&proof(&key, &claims(None)), fapi).is_ok());
        let rs256 = proof_with(&key, &key.jwk, &claims(None), |h| h["alg"] = json!("RS256"));
        assert_eq!(verify(&rs256, fapi), Err(ProofFault::Alg));
        assert_eq!(verify(&rs256, expected(None)), Err(ProofFault::Jwk));
        // A 1024-bit modulus is refused before any signature is looked at, whatever the
        // profile; 2048 bits pass that check.
        let rsa = |bytes: usize| {
            let mut n = vec![0xc5_u8; bytes];
            n[bytes - 1] = 0x01;
            json!({"kty": "RSA", "n": URL_SAFE_NO_PAD.encode(&n), "e": "AQAB"})
        };
        for (bytes, refusal) in [(128, ProofFault::Jwk), (256, ProofFault::Signature)] {
            let small = proof_with(&key, &rsa(bytes), &claims(None), |h| {
                h["alg"] = json!("PS256")
            });
            assert_eq!(verify(&small, fapi), Err(refusal), "{bytes} bytes");
        }
        assert_eq!(modulus_bits(&[0, 0x01, 0xff]), 9);
        assert_eq!(modulus_bits(&[]), 0);
    }

    #[test]
    fn only_a_single_textual_proof_header_is_read() {
        let none: [&[u8]; 0] = [];
        assert_eq!(single_proof(none), Ok(None));
        assert_eq!(single_proof([b"a.b.c".as_slice()]), Ok(Some("a.b.c")));
        assert_eq!(
            single_proof([b"a.b.c".as_slice(), b"d.e.f".as_slice()]),
            Err(ProofFault::Multiple)
        );
        assert_eq!(
            single_proof(["a.b.\u{e9}".as_bytes()]),
            Err(ProofFault::Malformed)
        );
        assert_eq!(
            single_proof([b"a\x01".as_slice()]),
            Err(ProofFault::Malformed)
        );
    }

    #[test]
    fn a_proofs_id_is_kept_until_the_proof_is_too_old_to_be_accepted() {
        let key = p256();
        let checked = verify(&proof(&key, &claims(None)), expected(None)).unwrap();
        assert_eq!(checked.iat, NOW);
        // The last second it is accepted at, then the first it is refused at.
        let at = |now| {
            verify(
                &proof(&key, &claims(None)),
                Expected {
                    now,
                    ..expected(None)
                },
            )
        };
        assert!(at(checked.keep_until() - 1).is_ok());
        assert_eq!(at(checked.keep_until()), Err(ProofFault::Iat));
    }

    #[test]
    fn a_proof_for_the_request_yields_its_keys_thumbprint() {
        let key = p256();
        let checked = verify(&proof(&key, &claims(Some("tok"))), expected(Some("tok"))).unwrap();
        assert_eq!(checked.jti, "proof-1");
        let jwk: Jwk = serde_json::from_value(key.jwk.clone()).unwrap();
        assert_eq!(checked.jkt, jwk.thumbprint(ThumbprintHash::SHA256).unwrap());
        assert_eq!(checked.jkt.len(), 43);
        // At the token endpoint there is no token, and no ath to check.
        assert!(verify(&proof(&key, &claims(None)), expected(None)).is_ok());
        // The query and the default port are not part of the comparison.
        let mut c = claims(None);
        c["htu"] = json!("https://INTAKE.example:443/partners/external/intake?x=1");
        assert!(verify(&proof(&key, &c), expected(None)).is_ok());
    }

    #[test]
    fn a_proof_from_a_clock_up_to_a_minute_fast_is_accepted() {
        let key = p256();
        for ahead in [10, MAX_AHEAD_SECS] {
            let mut c = claims(None);
            c["iat"] = json!(NOW + ahead);
            assert!(verify(&proof(&key, &c), expected(None)).is_ok(), "{ahead}");
        }
        assert_eq!(MAX_AHEAD_SECS, crate::claims::CLOCK_AHEAD_SECS);
    }

    #[test]
    fn a_proof_for_anything_else_is_refused_with_its_reason() {
        let key = p256();
        let other = p256();
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut c = claims(Some("tok"));
            f(&mut c);
            proof(&key, &c)
        };
        let cases: Vec<(&str, String, ProofFault)> = vec![
            (
                "another method",
                edit(&|c| c["htm"] = json!("GET")),
                ProofFault::Htm,
            ),
            (
                "another URL",
                edit(&|c| {
                    c["htu"] = json!("https://intake.example/partners/external/intake/attach")
                }),
                ProofFault::Htu,
            ),
            (
                "another host",
                edit(&|c| c["htu"] = json!("https://evil.example/partners/external/intake")),
                ProofFault::Htu,
            ),
            (
                "http for https",
                edit(&|c| c["htu"] = json!("http://intake.example/partners/external/intake")),
                ProofFault::Htu,
            ),
            (
                "too old",
                edit(&|c| c["iat"] = json!(NOW - MAX_AGE_SECS - 1)),
                ProofFault::Iat,
            ),
            (
                "from the future",
                edit(&|c| c["iat"] = json!(NOW + MAX_AHEAD_SECS + 1)),
                ProofFault::Iat,
            ),
            (
                "a minute and a second ahead",
                edit(&|c| c["iat"] = json!(NOW + 61)),
                ProofFault::Iat,
            ),
            (
                "iat the largest number",
                edit(&|c| c["iat"] = json!(i64::MAX)),
                ProofFault::Iat,
            ),
            (
                "iat the smallest number",
                edit(&|c| c["iat"] = json!(i64::MIN)),
                ProofFault::Iat,
            ),
            (
                "no iat",
                edit(&|c| {
                    c.as_object_mut().unwrap().remove("iat");
                }),
                ProofFault::Iat,
            ),
            (
                "a jti with a NUL, which no database keeps alike",
                edit(&|c| c["jti"] = json!("id\u{0}1")),
                ProofFault::Jti,
            ),
            (
                "a jti over 255 bytes",
                edit(&|c| c["jti"] = json!("j".repeat(256))),
                ProofFault::Jti,
            ),
            (
                "no jti",
                edit(&|c| {
                    c.as_object_mut().unwrap().remove("jti");
                }),
                ProofFault::Jti,
            ),
            (
                "another token's hash",
                edit(&|c| c["ath"] = json!(token_hash("other"))),
                ProofFault::Ath,
            ),
            (
                "no ath",
                edit(&|c| {
                    c.as_object_mut().unwrap().remove("ath");
                }),
                ProofFault::Ath,
            ),
            (
                "signed by a key not in the header",
                proof_with(&other, &key.jwk, &claims(Some("tok")), |_| {}),
                ProofFault::Signature,
            ),
            (
                "typ JWT",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h["typ"] = json!("JWT")
                }),
                ProofFault::Typ,
            ),
            (
                "alg none",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h["alg"] = json!("none")
                }),
                ProofFault::Alg,
            ),
            (
                "alg HS256",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h["alg"] = json!("HS256")
                }),
                ProofFault::Alg,
            ),
            (
                "alg RS256 on an EC key",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h["alg"] = json!("RS256")
                }),
                ProofFault::Jwk,
            ),
            (
                "no jwk",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h.as_object_mut().unwrap().remove("jwk");
                }),
                ProofFault::Jwk,
            ),
            (
                "a private key in the jwk",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h["jwk"]["d"] = json!("c2VjcmV0")
                }),
                ProofFault::PrivateKey,
            ),
            (
                "a symmetric key",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h["jwk"] = json!({"kty": "oct", "k": "c2VjcmV0"})
                }),
                ProofFault::PrivateKey,
            ),
            (
                "a critical extension",
                proof_with(&key, &key.jwk, &claims(Some("tok")), |h| {
                    h["crit"] = json!(["x"])
                }),
                ProofFault::Crit,
            ),
            ("not a JWT", "abc".to_owned(), ProofFault::Malformed),
            (
                "too long",
                "a".repeat(MAX_PROOF_BYTES + 1),
                ProofFault::Size,
            ),
        ];
        for (case, proof, reason) in cases {
            assert_eq!(verify(&proof, expected(Some("tok"))), Err(reason), "{case}");
        }
    }
}
