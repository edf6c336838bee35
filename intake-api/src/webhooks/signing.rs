//! Signing, as the Standard Webhooks specification has it, and the body each event is sent as.

use aws_lc_rs::aead::LessSafeKey;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use service_kit::Secret;
use service_kit::kek::KeyEncryptionKey;

use super::DueDelivery;

/// The prefix of a signing secret.
const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret: 32 random bytes.
pub fn new_secret() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("no randomness available for a webhook secret"))?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
}

/// The prefix of a secret as stored sealed; one in clear starts with [`SECRET_PREFIX`].
pub(super) const SEALED_PREFIX: &str = "sealed1:";

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
        Ok(format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(blob)))
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
        let Some(b64) = stored.strip_prefix(SEALED_PREFIX) else {
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
    stored.starts_with(SEALED_PREFIX)
}

/// An endpoint's secrets in use, decoded once for the many events a delivery round signs.
pub struct Signer {
    keys: Vec<aws_lc_rs::hmac::Key>,
}

impl Signer {
    /// Signs with each of `secrets` (`whsec_` and base64; a bare base64 one is taken too).
    pub fn new(secrets: &[&str]) -> anyhow::Result<Self> {
        let keys = secrets
            .iter()
            .map(|secret| {
                let raw = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
                let key_bytes = STANDARD
                    .decode(raw)
                    .map_err(|_| anyhow::anyhow!("a webhook secret is not base64"))?;
                Ok(aws_lc_rs::hmac::Key::new(
                    aws_lc_rs::hmac::HMAC_SHA256,
                    &key_bytes,
                ))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self { keys })
    }

    /// The `webhook-signature` header value for `body`, sent as message `id` at
    /// `timestamp`: one signature per secret, space-separated.
    pub fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        let signed = format!("{id}.{timestamp}.{body}");
        let signatures: Vec<String> = self
            .keys
            .iter()
            .map(|key| {
                let tag = aws_lc_rs::hmac::sign(key, signed.as_bytes());
                format!("v1,{}", STANDARD.encode(tag.as_ref()))
            })
            .collect();
        signatures.join(" ")
    }
}

/// The `webhook-id` of event `id`.
pub fn message_id(id: uuid::Uuid) -> String {
    format!("msg_{}", id.simple())
}

/// The body of an event: thin, `{"type","timestamp","data":{"reference","brand","status",...}}`.
pub fn payload(event: &DueDelivery) -> String {
    let mut data = serde_json::json!({
        "reference": event.reference,
        "brand": event.brand,
        "status": event.status,
    });
    if let Some(product) = event.product_uuid {
        data["product_uuid"] = serde_json::Value::String(product.to_string());
    }
    serde_json::json!({
        "type": event.event_type,
        "timestamp": event.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "data": data,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's own test vectors.
    #[test]
    fn signatures_match_the_specification() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            Signer::new(&[secret]).unwrap().sign(id, 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let two = Signer::new(&[secret, secret])
            .unwrap()
            .sign(id, 1614265330, body);
        assert_eq!(two.split(' ').count(), 2);
    }

    fn seal_with(byte: u8) -> SecretSeal {
        let encoded = Secret::new(STANDARD.encode([byte; 32]));
        SecretSeal::new(&KeyEncryptionKey::from_base64("TEST_KEK", &encoded).unwrap()).unwrap()
    }

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_on_its_partners_row() {
        let seal = seal_with(1);
        let secret = new_secret().unwrap();
        let stored = seal.seal("partner-a", &secret).unwrap();
        assert!(is_sealed(&stored), "{stored}");
        let raw = secret.strip_prefix(SECRET_PREFIX).unwrap();
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
        let secret = new_secret().unwrap();
        assert!(!is_sealed(&secret));
        assert_eq!(seal.open("partner-a", &secret).unwrap().expose(), &secret);
        let sealed = seal.sealed("partner-a", &secret).unwrap();
        assert!(is_sealed(&sealed));
        assert_eq!(seal.open("partner-a", &sealed).unwrap().expose(), &secret);
    }
}
