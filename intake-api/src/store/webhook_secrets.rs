//! Webhook signing secrets at rest: HMAC keys must be kept to sign with, so they are sealed,
//! not hashed.

use aws_lc_rs::aead::LessSafeKey;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use service_kit::Secret;
use service_kit::kek::KeyEncryptionKey;

/// The prefix of a secret as stored sealed; one in clear starts with `whsec_`.
pub(crate) const SEALED_SECRET_PREFIX: &str = "sealed1:";

/// Seals endpoints' signing secrets for the database with a key derived from
/// `INTAKE_KEY_ENCRYPTION_KEY`: HMAC keys must be kept to sign with, so they cannot be
/// hashed, and a copy of the database alone must not let anyone forge our webhooks.
pub struct SecretSeal {
    key: LessSafeKey,
}

impl std::fmt::Debug for SecretSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretSeal([REDACTED])")
    }
}

impl SecretSeal {
    /// Derives the sealing key from the intake's key-encryption key.
    pub fn new(kek: &KeyEncryptionKey) -> anyhow::Result<Self> {
        Ok(Self {
            key: kek.derive_aes_256_gcm("intake-api webhook secret seal v1")?,
        })
    }

    /// `secret` as stored for `client_id`'s endpoint: it opens only on that partner's row.
    pub fn seal(&self, client_id: &str, secret: &str) -> anyhow::Result<String> {
        let blob = service_kit::kek::seal(&self.key, client_id.as_bytes(), secret.as_bytes())
            .map_err(|_| anyhow::anyhow!("cannot seal a webhook secret"))?;
        Ok(format!(
            "{SEALED_SECRET_PREFIX}{}",
            URL_SAFE_NO_PAD.encode(blob)
        ))
    }

    /// `stored` sealed for `client_id`, as it is or sealed now when it is in clear.
    pub fn sealed(&self, client_id: &str, stored: &str) -> anyhow::Result<String> {
        if is_sealed(stored) {
            Ok(stored.to_owned())
        } else {
            self.seal(client_id, stored)
        }
    }

    /// The secret `stored` holds for `client_id`'s endpoint; one stored in clear (before
    /// secrets were sealed) is read as it is, until the start of a server seals it.
    pub fn open(&self, client_id: &str, stored: &str) -> anyhow::Result<Secret<String>> {
        let Some(b64) = stored.strip_prefix(SEALED_SECRET_PREFIX) else {
            return Ok(Secret::new(stored.to_owned()));
        };
        URL_SAFE_NO_PAD
            .decode(b64)
            .ok()
            .and_then(|blob| service_kit::kek::open(&self.key, client_id.as_bytes(), &blob))
            .and_then(|plain| String::from_utf8(plain).ok())
            .map(Secret::new)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "a webhook secret does not open: INTAKE_KEY_ENCRYPTION_KEY is not the key it \
                     was sealed with (or the row was altered)"
                )
            })
    }
}

/// Whether a stored secret is sealed.
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(SEALED_SECRET_PREFIX)
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    fn seal_with(byte: u8) -> SecretSeal {
        let encoded = Secret::new(STANDARD.encode([byte; 32]));
        SecretSeal::new(&KeyEncryptionKey::from_base64("TEST_KEK", &encoded).unwrap()).unwrap()
    }

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_on_its_partners_row() {
        let seal = seal_with(1);
        let secret = crate::webhooks::signing::new_secret().unwrap();
        let stored = seal.seal("partner-a", &secret).unwrap();
        assert!(is_sealed(&stored), "{stored}");
        let raw = secret.strip_prefix("whsec_").unwrap();
        assert!(!stored.contains(raw) && !stored.contains(&secret));
        assert_eq!(seal.open("partner-a", &stored).unwrap().expose(), &secret);
        assert_eq!(seal.sealed("partner-a", &stored).unwrap(), stored);
        for (case, opened) in [
            ("another partner's row", seal.open("partner-b", &stored)),
            ("another key", seal_with(2).open("partner-a", &stored)),
            ("cut short", seal.open("partner-a", &stored[..20])),
        ] {
            let err = opened.expect_err(case).to_string();
            assert!(err.contains("INTAKE_KEY_ENCRYPTION_KEY"), "{case}: {err}");
            assert!(!err.contains(raw), "{case}");
        }
    }

    #[test]
    fn a_secret_in_clear_is_read_as_it_is_and_sealed_when_asked() {
        let seal = seal_with(1);
        let secret = crate::webhooks::signing::new_secret().unwrap();
        assert!(!is_sealed(&secret));
        assert_eq!(seal.open("partner-a", &secret).unwrap().expose(), &secret);
        let sealed = seal.sealed("partner-a", &secret).unwrap();
        assert!(is_sealed(&sealed));
        assert_eq!(seal.open("partner-a", &sealed).unwrap().expose(), &secret);
    }
}
