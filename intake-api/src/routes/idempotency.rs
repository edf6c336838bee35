//! The `Idempotency-Key` header (IETF httpapi idempotency-key draft) on the POST operations:
//! a retried request with the same key and body gets the first answer again and changes
//! nothing.

use poem_openapi::payload::Json;
use poem_openapi::types::{ParseFromJSON, ToJSON};
use serde_json::Value;
use service_kit::telemetry::{OUTCOME, record};

use super::partner::Caller;
use crate::error::IntakeError;
use crate::state::AppState;
use crate::store::{
    AnswerOf, Claim, Keyed, KeyedRequest, Lease, Replayed, SealedAnswer, StoreError, seal_answer,
};

/// The request header partners send their key in.
pub const HEADER: &str = "Idempotency-Key";

/// The response header marking a replayed answer.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";

/// Longest key accepted, in characters.
pub const MAX_KEY_CHARS: usize = 255;

/// A response of an operation that takes a key: its status and body are what the key
/// stores, and a replay answers with them again.
pub trait Replayable: Sized {
    /// The body it carries.
    type Body: ToJSON + ParseFromJSON;

    /// The response `status` stands for, with `body`; `replayed` marks a stored answer sent
    /// again.
    fn respond(status: u16, body: Json<Self::Body>, replayed: Option<bool>) -> Self;

    /// A first answer, as the operation's answer function makes it.
    fn fresh((status, body): (u16, Self::Body)) -> Self {
        Self::respond(status, Json(body), None)
    }
}

/// How a request goes on once its key, if any, is looked at.
pub enum Begun<'a, R> {
    /// The same request succeeded before: answer with this again.
    Replay(R),
    /// A first attempt, keyed or not: process it.
    Attempt(Attempt<'a>),
}

/// One attempt at an operation: with a key, its hold on the key, whose answer is stored
/// with the change, and which a failure gives back.
pub struct Attempt<'a> {
    state: &'a AppState,
    lease: Option<Lease>,
}

impl Attempt<'_> {
    /// For the store: the key's hold, the keys its answer is sealed with, and `answer`,
    /// how the operation answers what the write did; `None` without a key.
    pub fn keyed<'b>(&'b self, answer: &'b AnswerOf<'b>) -> Option<Keyed<'b>> {
        self.lease.as_ref().map(|lease| Keyed {
            lease,
            keys: &self.state.answer_keys,
            answer,
        })
    }

    /// An answer known before the change, sealed for a keyed attempt: the key's hold and
    /// the sealed answer, `None` without a key.
    pub fn sealed_now<B: serde::Serialize>(
        &self,
        answer: (u16, &B),
    ) -> Result<Option<(&Lease, SealedAnswer)>, StoreError> {
        self.lease
            .as_ref()
            .map(|lease| Ok((lease, seal_answer(&self.state.answer_keys, lease, answer)?)))
            .transpose()
    }

    /// What the operation did, passed on; a failure first gives the key back, so a retry is
    /// processed afresh.
    pub async fn settle<T, E: Into<IntakeError>>(
        &self,
        done: Result<T, E>,
    ) -> Result<T, IntakeError> {
        match done {
            Ok(done) => Ok(done),
            Err(error) => {
                if let Some(lease) = &self.lease {
                    // Boxed: a rare path, whose database future would otherwise be part of
                    // every request's.
                    Box::pin(self.state.cases.release(lease)).await;
                }
                Err(error.into())
            }
        }
    }
}

/// Looks at the request's key: claims it for this attempt, or finds its stored answer and
/// makes it the response again, or refuses the request (400 for a malformed key, 409 while
/// another attempt with it is in flight, 422 for a key used with a different request).
pub async fn begin<'a, S, R: Replayable>(
    state: &'a AppState,
    partner: &Caller<S>,
    operation: &'static str,
    key: Option<&str>,
    body: &Value,
) -> Result<Begun<'a, R>, IntakeError> {
    let Some(key) = key else {
        return Ok(Begun::Attempt(Attempt { state, lease: None }));
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
    let replayed = match state.cases.claim(&request).await? {
        Claim::Granted(lease) => {
            let lease = Some(lease);
            return Ok(Begun::Attempt(Attempt { state, lease }));
        }
        Claim::Replay(replayed) => replayed,
        Claim::Erased => return Err(IntakeError::AnswerErased),
        Claim::InFlight => return Err(IntakeError::KeyInFlight),
        Claim::Mismatch => return Err(IntakeError::KeyReused),
    };
    let answer = match replayed {
        Replayed::Sealed(sealed) => state
            .answer_keys
            .open(partner.client_id(), key, &sealed)
            .map_err(IntakeError::Internal)?,
        Replayed::Clear(answer) => answer,
    };
    let value = serde_json::from_str(&answer.body).ok();
    let body = R::Body::parse_from_json(value).map_err(|e| {
        IntakeError::Internal(anyhow::anyhow!(
            "a stored answer is unreadable: {}",
            e.into_message()
        ))
    })?;
    metrics::counter!("intake_idempotent_replays_total", "operation" => operation).increment(1);
    record(OUTCOME, "replayed");
    Ok(Begun::Replay(R::respond(
        answer.status,
        Json(body),
        Some(true),
    )))
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use service_kit::Secret;
    use service_kit::kek::KeyEncryptionKey;

    use crate::store::{AnswerKeys, StoredAnswer};

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
