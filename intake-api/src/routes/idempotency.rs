//! The `Idempotency-Key` header (IETF httpapi idempotency-key draft) on the POST operations:
//! a retried request with the same key and body gets the first answer again and changes
//! nothing.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::partner::Partner;
use crate::error::IntakeError;
use crate::state::AppState;
use crate::store::{Claim, KeyedRequest, Lease, StoredAnswer};

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
pub async fn begin(
    state: &AppState,
    partner: &Partner,
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
    let request = KeyedRequest {
        client_id: partner.client_id(),
        key,
        operation,
        request_hash: request_hash(body),
    };
    match state.cases.claim(&request).await? {
        Claim::Granted(lease) => Ok(Begun::Keyed(lease)),
        Claim::Replay(answer) => {
            metrics::counter!("intake_idempotent_replays_total", "operation" => operation)
                .increment(1);
            Ok(Begun::Replay(answer))
        }
        Claim::InFlight => Err(IntakeError::KeyInFlight),
        Claim::Mismatch => Err(IntakeError::KeyReused),
    }
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

/// A digest of the body as JSON: the same request sent again with other spacing is the
/// same request.
fn request_hash(body: &Value) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body.to_string().as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_json_hashes_the_same_and_other_json_differently() {
        let a: Value = serde_json::from_str(r#"{"email": "a@example.com", "n": 1}"#).unwrap();
        let spaced: Value =
            serde_json::from_str("{ \"email\" :\n \"a@example.com\", \"n\": 1 }").unwrap();
        let other: Value = serde_json::from_str(r#"{"email": "b@example.com", "n": 1}"#).unwrap();
        assert_eq!(request_hash(&a), request_hash(&spaced));
        assert_ne!(request_hash(&a), request_hash(&other));
    }
}
