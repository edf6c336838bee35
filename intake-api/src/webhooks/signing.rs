//! Signing, as the Standard Webhooks specification has it, and the body each event is sent as.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::store::DueDelivery;

/// The prefix of a signing secret.
const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret: 32 random bytes.
pub fn new_secret() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("no randomness available for a webhook secret"))?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
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

/// The event a `webhook-id` names ([`message_id`]); `None` when it names none.
pub fn parse_message_id(name: &str) -> Option<uuid::Uuid> {
    // Only the 32-digit form: `Uuid` would also take hyphenated and braced ones.
    let hex = name.strip_prefix("msg_")?;
    uuid::Uuid::try_parse(hex).ok().filter(|_| hex.len() == 32)
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

    /// What is sent is what the event catalogue documents, for every type and status.
    #[test]
    fn bodies_are_the_catalogues_events() {
        use shared::intake::webhooks::{EventType, WebhookEvent};
        for t in EventType::ALL {
            for status in ["referred", "pending_activation", "active"] {
                let product = (t == EventType::ProductAttached).then(uuid::Uuid::new_v4);
                let event = DueDelivery {
                    id: uuid::Uuid::new_v4(),
                    case_id: uuid::Uuid::new_v4(),
                    event_type: t.name().to_owned(),
                    created_at: chrono::Utc::now(),
                    attempts: 1,
                    reference: "418290357116".into(),
                    brand: "brand_a".into(),
                    status: status.into(),
                    product_uuid: product,
                    later_waiting: false,
                    fails_on_purpose: false,
                };
                let body = payload(&event);
                let read: WebhookEvent = serde_json::from_str(&body).expect(&body);
                assert_eq!(read.event_type, t);
                assert_eq!(read.data.product_uuid, product);
                assert_eq!(serde_json::to_value(read.data.status).unwrap(), status);
                assert_eq!(
                    read.timestamp.timestamp_millis(),
                    event.created_at.timestamp_millis()
                );
            }
        }
    }
}
