//! Client secrets: generated here, shown once, kept only as a hash.

use aws_lc_rs::digest::{SHA256, digest};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use service_kit::Secret;

/// A new secret: 256 random bits, base64url (43 characters).
pub fn generate_secret() -> anyhow::Result<Secret<String>> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| anyhow::anyhow!("no randomness available"))?;
    Ok(Secret::new(URL_SAFE_NO_PAD.encode(bytes)))
}

/// The stored form of a secret.
///
/// A single SHA-256 is enough here, unlike for passwords: the secret is 256 random bits,
/// so there is nothing to guess, and a slow hash would put its cost on every token request.
pub fn hash_secret(secret: &str) -> [u8; 32] {
    let d = digest(&SHA256, secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The hash as stored in the database.
pub fn encode_hash(hash: &[u8; 32]) -> String {
    URL_SAFE_NO_PAD.encode(hash)
}

/// Parses a stored hash.
pub fn decode_hash(stored: &str) -> Option<[u8; 32]> {
    URL_SAFE_NO_PAD.decode(stored).ok()?.try_into().ok()
}

/// Compares two hashes in constant time.
pub fn hashes_match(a: &[u8; 32], b: &[u8; 32]) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a, b).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_carry_256_bits_and_differ() {
        let a = generate_secret().unwrap();
        let b = generate_secret().unwrap();
        assert_eq!(a.expose().len(), 43);
        assert_ne!(a.expose(), b.expose());
    }

    #[test]
    fn a_hash_round_trips_and_matches_only_its_secret() {
        let h = hash_secret("abc");
        assert_eq!(decode_hash(&encode_hash(&h)), Some(h));
        assert!(hashes_match(&h, &hash_secret("abc")));
        assert!(!hashes_match(&h, &hash_secret("abd")));
        assert_eq!(decode_hash("short"), None);
    }
}
