//! The `Idempotency-Key` header (IETF httpapi idempotency-key draft) on the POST operations:
//! a retried request with the same key and body gets the first answer again and changes
//! nothing.

use serde_json::Value;

use super::partner::Caller;
use crate::error::IntakeError;
use crate::state::AppState;
use crate::store::{Claim, KeyedRequest, Lease, Replayed, SealedAnswer, StoreError, StoredAnswer};

/// The request header partners send their key in.
pub const HEADER: &str = "Idempotency-Key";

/// The response header marking a replayed answer.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";

/// Longest key accepted, in characters.
pub const MAX_KEY_CHARS: usize = 255;

/// How a request goes on once its key, if any, is looked at.
pub enum Begun {
    /// No key was sent: process it as usual.
    Unkeyed,
    /// The key is this attempt's: process it, storing the answer with the change.
    Keyed(Lease),
    /// The same request succeeded before: answer with this.
    Replay(StoredAnswer),
}

/// Looks at the request's key: claims it for this attempt, or finds its stored answer, or
/// refuses the request (400 for a malformed key, 409 while another attempt with it is in
/// flight, 422 for a key used with a different request).
pub async fn begin<S>(
    state: &AppState,
    partner: &Caller<S>,
    operation: &'static str,
    key: Option<&str>,
    body: &Value,
) -> Result<Begun, IntakeError> {
    let Some(key) = key else {
        return Ok(Begun::Unkeyed);
    };
    if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
        return Err(IntakeError::BadIdempotencyKey);
    }
    // The body as JSON: the same request sent again with other spacing is the same request.
    let canonical = body.to_string();
    let request = KeyedRequest {
        client_id: partner.client_id(),
        key,
        operation,
        request_hash: state.answer_keys.request_hash(canonical.as_bytes()),
        body: &canonical,
    };
    match state.cases.claim(&request).await? {
        Claim::Granted(lease) => Ok(Begun::Keyed(lease)),
        Claim::Replay(replayed) => {
            let answer = match replayed {
                Replayed::Sealed(sealed) => state
                    .answer_keys
                    .open(partner.client_id(), key, &sealed)
                    .map_err(IntakeError::Internal)?,
                Replayed::Clear(answer) => answer,
            };
            metrics::counter!("intake_idempotent_replays_total", "operation" => operation)
                .increment(1);
            Ok(Begun::Replay(answer))
        }
        Claim::Erased => Err(IntakeError::AnswerErased),
        Claim::InFlight => Err(IntakeError::KeyInFlight),
        Claim::Mismatch => Err(IntakeError::KeyReused),
    }
}

/// `answer` sealed for storage under the key `lease` holds.
pub fn seal(
    state: &AppState,
    lease: &Lease,
    answer: &StoredAnswer,
) -> Result<SealedAnswer, StoreError> {
    state
        .answer_keys
        .seal(lease.client_id(), lease.key(), answer)
        .map_err(StoreError::Sealing)
}

/// Ends a keyed attempt that failed: its key is given back, so a retry is processed afresh.
pub async fn fail<T>(
    state: &AppState,
    begun: &Begun,
    error: IntakeError,
) -> Result<T, IntakeError> {
    if let Begun::Keyed(lease) = begun {
        // Boxed: a rare path, whose database future would otherwise be part of every
        // request's.
        Box::pin(state.cases.release(lease)).await;
    }
    Err(error)
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use service_kit::Secret;
    use service_kit::kek::KeyEncryptionKey;

    use crate::store::AnswerKeys;

    use super::*;

    fn keys(byte: u8) -> AnswerKeys {
        let encoded = Secret::new(STANDARD.encode([byte; 32]));
        AnswerKeys::new(&KeyEncryptionKey::from_base64("TEST", &encoded).unwrap()).unwrap()
    }

    fn hash(keys: &AnswerKeys, json: &str) -> String {
        let value: Value = serde_json::from_str(json).unwrap();
        keys.request_hash(value.to_string().as_bytes())
    }

    #[test]
    fn the_same_json_hashes_the_same_and_other_json_or_keys_differently() {
        let a = r#"{"email": "a@example.com", "n": 1}"#;
        let spaced = "{ \"email\" :\n \"a@example.com\", \"n\": 1 }";
        let other = r#"{"email": "b@example.com", "n": 1}"#;
        assert_eq!(hash(&keys(1), a), hash(&keys(1), spaced));
        assert_ne!(hash(&keys(1), a), hash(&keys(1), other));
        assert_ne!(hash(&keys(1), a), hash(&keys(2), a));
    }

    #[test]
    fn a_sealed_answer_opens_only_for_its_partner_key_and_status() {
        let answer = StoredAnswer {
            status: 201,
            body: r#"{"redirect":"https://portal.example/continue?token=secret"}"#.into(),
        };
        let sealed = keys(1).seal("partner", "k", &answer).unwrap();
        assert!(!sealed.sealed.contains("secret"));
        assert_eq!(keys(1).open("partner", "k", &sealed).unwrap(), answer);
        assert!(keys(2).open("partner", "k", &sealed).is_err());
        assert!(keys(1).open("other", "k", &sealed).is_err());
        assert!(keys(1).open("partner", "k2", &sealed).is_err());
        let moved = SealedAnswer {
            status: 200,
            ..sealed.clone()
        };
        assert!(keys(1).open("partner", "k", &moved).is_err());
        let garbled = SealedAnswer {
            sealed: "v1:AAAA".into(),
            ..sealed
        };
        assert!(keys(1).open("partner", "k", &garbled).is_err());
    }
}
