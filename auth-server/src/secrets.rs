//! Client secrets: generated here and shown once, or chosen by an operator (`client
//! ensure`), and kept only as a hash.

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

/// The fewest characters a secret an operator chooses may have: as much as 24 random bytes
/// in base64 carry, where a generated one has 43.
pub const MIN_CHOSEN_CHARS: usize = 32;

/// A secret an operator chose, read from environment variable `var` and checked as
/// [`refuse_chosen`] checks: none when `var` is not set, or why it is refused (never
/// quoting it).
pub fn chosen_from_env(var: &str, longest: usize) -> Result<Option<Secret<String>>, String> {
    let Some(value) = std::env::var_os(var) else {
        return Ok(None);
    };
    let value = value
        .into_string()
        .map_err(|_| "it is not UTF-8".to_owned())?;
    match refuse_chosen(&value, longest) {
        Some(problem) => Err(problem),
        None => Ok(Some(Secret::new(value))),
    }
}

/// Why a secret an operator chose cannot be a client's, if it cannot: too short to be
/// out of reach of guessing, longer than the token endpoint takes (`longest`), or holding
/// a control character or surrounding white space, which a file's trailing newline or a
/// paste leaves and the partner's copy would not have. Never quotes the secret.
pub fn refuse_chosen(secret: &str, longest: usize) -> Option<String> {
    let chars = secret.chars().count();
    if secret.is_empty() {
        Some("it is empty".into())
    } else if chars < MIN_CHOSEN_CHARS {
        Some(format!(
            "it is shorter than {MIN_CHOSEN_CHARS} characters, too weak for a client secret \
             (`openssl rand -base64 32` makes one)"
        ))
    } else if chars > longest {
        Some(format!(
            "it is longer than {longest} characters, more than the token endpoint takes"
        ))
    } else if secret.chars().any(char::is_control) {
        Some("it holds a control character (a trailing newline?)".into())
    } else if secret.trim() != secret {
        Some("it starts or ends with white space".into())
    } else {
        None
    }
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

    #[test]
    fn a_chosen_secret_is_refused_for_each_weakness_and_never_quoted() {
        let strong = "q83vEjRWeDvXbG5kpTt2H4nU8cYfLmZa";
        let cases = [
            ("empty", String::new(), Some("empty")),
            (
                "one short of the least",
                strong[..31].to_owned(),
                Some("shorter than 32"),
            ),
            (
                "longer than the endpoint takes",
                "x".repeat(256),
                Some("longer than 255"),
            ),
            (
                "a trailing newline",
                format!("{strong}\n"),
                Some("control character"),
            ),
            ("a NUL", format!("{strong}\0"), Some("control character")),
            ("a leading space", format!(" {strong}"), Some("white space")),
            ("exactly the least", strong.to_owned(), None),
            (
                "a generated one",
                generate_secret().unwrap().expose().clone(),
                None,
            ),
            ("the longest taken", "x".repeat(255), None),
        ];
        for (rule, secret, refused) in cases {
            let found = refuse_chosen(&secret, 255);
            match (refused, &found) {
                (Some(why), Some(problem)) => {
                    assert!(problem.contains(why), "{rule}: {problem}");
                    assert!(
                        secret.is_empty() || !problem.contains(secret.trim()),
                        "{rule}"
                    );
                }
                (None, None) => {}
                _ => panic!("{rule}: {found:?}"),
            }
        }
    }
}
