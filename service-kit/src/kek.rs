//! Key-encryption keys: 32 random bytes, given to a service as base64 in an environment
//! variable (`AUTH_KEY_ENCRYPTION_KEY`, `INTAKE_KEY_ENCRYPTION_KEY`) and never stored in its
//! database, so what the database holds sealed cannot be opened from the database alone.

use anyhow::anyhow;
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, KeyType, Salt};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::Secret;

/// Length of a key-encryption key and of each key derived from it, in bytes.
pub const KEY_LEN: usize = 32;

/// A service's key-encryption key, parsed; `Debug` never shows it.
pub struct KeyEncryptionKey {
    bytes: Secret<[u8; KEY_LEN]>,
    variable: &'static str,
}

impl std::fmt::Debug for KeyEncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyEncryptionKey({}, [REDACTED])", self.variable)
    }
}

impl KeyEncryptionKey {
    /// Parses the base64 of 32 random bytes; `variable` names the setting in errors.
    pub fn from_base64(variable: &'static str, encoded: &Secret<String>) -> anyhow::Result<Self> {
        let decoded = STANDARD
            .decode(encoded.expose().trim())
            .map_err(|_| anyhow!("{variable} is not valid base64"))?;
        let bytes: [u8; KEY_LEN] = decoded
            .try_into()
            .map_err(|_| anyhow!("{variable} must be the base64 of exactly {KEY_LEN} bytes"))?;
        Ok(Self {
            bytes: Secret::new(bytes),
            variable,
        })
    }

    /// Parses `encoded`, or says how to make one when it is not set: the services never
    /// fall back to keeping in clear what this key seals.
    pub fn required(
        variable: &'static str,
        encoded: Option<&Secret<String>>,
        why: &str,
    ) -> anyhow::Result<Self> {
        let encoded = encoded.ok_or_else(|| {
            anyhow!(
                "{variable} is not set: {why}. Make one with `openssl rand -base64 32`, keep it \
                 with your other secrets, and give every replica the same one."
            )
        })?;
        Self::from_base64(variable, encoded)
    }

    /// The setting the key came from, for error messages.
    pub fn variable(&self) -> &'static str {
        self.variable
    }

    /// The key itself as an AES-256-GCM key.
    pub fn aes_256_gcm(&self) -> anyhow::Result<LessSafeKey> {
        aes_256_gcm(self.bytes.expose(), self.variable)
    }

    /// A key of its own for `purpose` (HKDF-SHA256, RFC 5869): keys for different purposes
    /// are independent, so one use can never be turned against another.
    pub fn derive(&self, purpose: &str) -> anyhow::Result<Secret<[u8; KEY_LEN]>> {
        let prk = Salt::new(HKDF_SHA256, &[]).extract(self.bytes.expose());
        let mut out = [0u8; KEY_LEN];
        let info = [purpose.as_bytes()];
        prk.expand(&info, Len32)
            .and_then(|okm| okm.fill(&mut out))
            .map_err(|_| anyhow!("cannot derive a key from {}", self.variable))?;
        Ok(Secret::new(out))
    }

    /// A key of its own for `purpose`, as an AES-256-GCM key.
    pub fn derive_aes_256_gcm(&self, purpose: &str) -> anyhow::Result<LessSafeKey> {
        aes_256_gcm(self.derive(purpose)?.expose(), self.variable)
    }
}

struct Len32;

impl KeyType for Len32 {
    fn len(&self) -> usize {
        KEY_LEN
    }
}

fn aes_256_gcm(bytes: &[u8; KEY_LEN], variable: &str) -> anyhow::Result<LessSafeKey> {
    let key = UnboundKey::new(&AES_256_GCM, bytes)
        .map_err(|_| anyhow!("{variable} is not a usable AES-256 key"))?;
    Ok(LessSafeKey::new(key))
}

/// Seals `plain` with `key` (AES-256-GCM under a random nonce) as the nonce, the ciphertext
/// and the tag, in that order: the one layout every sealed value of ours is stored in.
/// `aad` is bound in, so what is sealed for one row does not open on another.
pub fn seal(key: &LessSafeKey, aad: &[u8], plain: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut nonce = [0u8; NONCE_LEN];
    aws_lc_rs::rand::fill(&mut nonce).map_err(|_| anyhow!("no randomness for a nonce"))?;
    let mut blob = Vec::with_capacity(NONCE_LEN + plain.len() + AES_256_GCM.tag_len());
    blob.extend_from_slice(&nonce);
    blob.extend_from_slice(plain);
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut blob[NONCE_LEN..],
        )
        .map_err(|_| anyhow!("cannot seal a value"))?;
    blob.extend_from_slice(tag.as_ref());
    Ok(blob)
}

/// Opens what [`seal`] made with the same `key` and `aad`; `None` when either differs or the
/// blob was altered, which the caller names in its own terms.
pub fn open(key: &LessSafeKey, aad: &[u8], blob: &[u8]) -> Option<Vec<u8>> {
    if blob.len() < NONCE_LEN {
        return None;
    }
    let (nonce, sealed) = blob.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut in_out = sealed.to_vec();
    let plain = key.open_in_place(nonce, Aad::from(aad), &mut in_out).ok()?;
    Some(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> KeyEncryptionKey {
        KeyEncryptionKey::from_base64("TEST_KEK", &Secret::new(STANDARD.encode([byte; 32])))
            .unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_binding() {
        let a = key(7).derive_aes_256_gcm("one").unwrap();
        let b = key(7).derive_aes_256_gcm("two").unwrap();
        let blob = seal(&a, b"row 1", b"the value").unwrap();
        assert!(!blob.windows(9).any(|w| w == b"the value"));
        assert_ne!(
            blob,
            seal(&a, b"row 1", b"the value").unwrap(),
            "a fresh nonce each time"
        );
        assert_eq!(
            open(&a, b"row 1", &blob).as_deref(),
            Some(&b"the value"[..])
        );
        assert_eq!(open(&a, b"row 2", &blob), None);
        assert_eq!(open(&b, b"row 1", &blob), None);
        let mut altered = blob.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert_eq!(open(&a, b"row 1", &altered), None);
        assert_eq!(open(&a, b"row 1", &blob[..5]), None);
    }

    #[test]
    fn only_the_base64_of_32_bytes_is_a_key() {
        for (case, encoded) in [
            ("not base64", "not base64!".to_owned()),
            ("16 bytes", STANDARD.encode([1u8; 16])),
            ("33 bytes", STANDARD.encode([1u8; 33])),
            ("empty", String::new()),
        ] {
            let err = KeyEncryptionKey::from_base64("TEST_KEK", &Secret::new(encoded.clone()))
                .expect_err(case);
            assert!(err.to_string().contains("TEST_KEK"), "{case}: {err}");
            assert!(
                encoded.is_empty() || !err.to_string().contains(&encoded),
                "{case}"
            );
        }
        let spaced = format!(" {}\n", STANDARD.encode([1u8; 32]));
        assert!(KeyEncryptionKey::from_base64("TEST_KEK", &Secret::new(spaced)).is_ok());
    }

    #[test]
    fn a_missing_key_is_named_with_how_to_make_one() {
        let err = KeyEncryptionKey::required("TEST_KEK", None, "answers are sealed").unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("TEST_KEK is not set: answers are sealed"),
            "{message}"
        );
        assert!(message.contains("openssl rand -base64 32"), "{message}");
    }

    #[test]
    fn derived_keys_differ_by_purpose_and_by_key_and_never_show() {
        let a = key(7);
        let derive = |k: &KeyEncryptionKey, purpose| *k.derive(purpose).unwrap().expose();
        assert_eq!(derive(&a, "one"), derive(&a, "one"));
        assert_ne!(derive(&a, "one"), derive(&a, "two"));
        assert_ne!(derive(&a, "one"), derive(&key(8), "one"));
        assert_ne!(derive(&a, "one"), [7u8; 32]);
        assert!(!format!("{a:?}").contains(&STANDARD.encode([7u8; 32])));
    }
}
