//! What both services do with a DPoP proof once its signature and claims checked: its
//! server nonce (RFC 9449 sections 8 and 9), when nonces are handed out, and its single use.
//!
//! A server nonce is a value the server hands out in every answer and asks to find in the
//! next proof, so that no proof can be made ahead of time.
//!
//! A nonce is the HMAC of a 30-second time step under a key every replica derives from the
//! same key-encryption key: any replica accepts what another gave, with no database and no
//! state shared but the key. The values are not secret (every answer carries one); the key
//! only makes them impossible to compute before they are given.

use std::sync::RwLock;

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use poem::http::HeaderValue;
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use shared::dpop::{ProofFault, VerifiedProof};
use shared::refusal::{Refusal, Unvetted};

use crate::kek::KeyEncryptionKey;
use crate::replay::{DPOP_PROOFS, ReplayStore, Use};

/// The response header that carries a nonce, and the request header's claim it names.
pub const HEADER: &str = "dpop-nonce";

/// The length of a time step: a nonce is given during one and accepted during it and the
/// next, so for at least this long and at most twice this long after it was given.
pub const STEP_SECS: i64 = 30;

/// The purpose the nonce key is derived for: a key of its own, used for nothing else.
pub const PURPOSE: &str = "dpop-nonce-v1";

/// Bytes of the HMAC kept: 128 bits cannot be guessed.
const NONCE_BYTES: usize = 16;

/// The nonces of one service.
pub struct DpopNonces {
    key: hmac::Key,
    /// The step of the last nonce made, and it: most answers within a step reuse it.
    current: RwLock<(i64, HeaderValue)>,
}

impl std::fmt::Debug for DpopNonces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DpopNonces([REDACTED])")
    }
}

impl DpopNonces {
    /// Nonces under a key derived from `kek`: replicas given the same key-encryption key
    /// accept each other's.
    pub fn from_kek(kek: &KeyEncryptionKey) -> anyhow::Result<Self> {
        let bytes = kek.derive(PURPOSE)?;
        Ok(Self::new(hmac::Key::new(hmac::HMAC_SHA256, bytes.expose())))
    }

    /// Nonces under `key`, an HMAC-SHA256 key derived for [`PURPOSE`].
    pub fn new(key: hmac::Key) -> Self {
        Self {
            key,
            current: RwLock::new((i64::MIN, HeaderValue::from_static(""))),
        }
    }

    /// The nonce to hand out at `now` (seconds since the epoch).
    pub fn current(&self, now: i64) -> HeaderValue {
        let step = now.div_euclid(STEP_SECS);
        {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            if current.0 == step {
                return current.1.clone();
            }
        }
        let value = self.for_step(step);
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        if current.0 < step {
            *current = (step, value.clone());
        }
        value
    }

    /// Whether `nonce` was given at most one step before `now`'s (or one step after it, for
    /// a replica whose clock runs a little ahead).
    pub fn accepts(&self, nonce: &str, now: i64) -> bool {
        let step = now.div_euclid(STEP_SECS);
        if self.current(now).as_bytes() == nonce.as_bytes() {
            return true;
        }
        [step - 1, step + 1]
            .into_iter()
            .any(|s| self.for_step(s).as_bytes() == nonce.as_bytes())
    }

    fn for_step(&self, step: i64) -> HeaderValue {
        let tag = hmac::sign(&self.key, &step.to_be_bytes());
        let text = URL_SAFE_NO_PAD.encode(&tag.as_ref()[..NONCE_BYTES]);
        // Base64url is within NQCHAR (RFC 9449 section 8.1), and always a valid header.
        HeaderValue::from_str(&text).expect("base64url is a valid header value")
    }
}

/// Middleware: a fresh nonce in every answer, so that a client always holds one to put in
/// its next proof; with `None` (nonces off), answers pass unchanged.
pub struct GiveNonces(pub Option<std::sync::Arc<DpopNonces>>);

impl<E: Endpoint> Middleware<E> for GiveNonces {
    type Output = GiveNoncesEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        GiveNoncesEndpoint {
            inner,
            nonces: self.0.clone(),
        }
    }
}

/// Endpoint produced by [`GiveNonces`].
pub struct GiveNoncesEndpoint<E> {
    inner: E,
    nonces: Option<std::sync::Arc<DpopNonces>>,
}

impl<E: Endpoint> Endpoint for GiveNoncesEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Self::Output> {
        let Some(nonces) = &self.nonces else {
            return self.inner.call(req).await.map(IntoResponse::into_response);
        };
        let mut response = match self.inner.call(req).await {
            Ok(output) => output.into_response(),
            Err(error) => error.into_response(),
        };
        let nonce = nonces.current(chrono::Utc::now().timestamp());
        response.headers_mut().insert(HEADER, nonce);
        Ok(response)
    }
}

/// Why a proof that checked out is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unspent {
    /// Nonces are handed out and the proof carries none, or one no longer accepted: the
    /// client is to make a new proof with the nonce of the answer.
    UseNonce,
    /// The proof was used before, at this replica or another.
    Replayed,
    /// The replay store cannot be reached: the request is refused for now, never let through.
    Unavailable,
    /// The proof was made before the replay store's memory begins (Redis restarted or was
    /// flushed since): it may have been used, so the client is to make a new one.
    Forgotten,
}

impl From<Unspent> for Refusal {
    fn from(why: Unspent) -> Self {
        match why {
            Unspent::UseNonce => Self::UseDpopNonce,
            Unspent::Replayed => Self::InvalidProof(ProofFault::Replayed),
            Unspent::Unavailable => Self::Unvetted(Unvetted::ReplayStore),
            Unspent::Forgotten => Self::InvalidProof(ProofFault::PredatesReplayStore),
        }
    }
}

/// Takes `proof` at `now`: with `nonces`, only if it carries a current one; and only once,
/// at every replica, remembered until it can no longer be accepted. The nonce is looked at
/// first, so a proof refused for its nonce is not spent.
pub async fn spend(
    replay: &ReplayStore,
    nonces: Option<&DpopNonces>,
    proof: &VerifiedProof,
    now: i64,
) -> Result<(), Unspent> {
    if let Some(nonces) = nonces
        && !proof
            .nonce
            .as_deref()
            .is_some_and(|n| nonces.accepts(n, now))
    {
        return Err(Unspent::UseNonce);
    }
    // A proof's `iat` is checked within minutes of now before it comes here.
    let keep_until =
        chrono::DateTime::from_timestamp(proof.keep_until(), 0).ok_or(Unspent::Replayed)?;
    let made_at = chrono::DateTime::from_timestamp(proof.iat, 0).ok_or(Unspent::Replayed)?;
    match replay
        .first_use(&DPOP_PROOFS, &proof.jkt, &proof.jti, made_at, keep_until)
        .await
    {
        Ok(Use::First) => Ok(()),
        Ok(Use::Again) => Err(Unspent::Replayed),
        Ok(Use::MadeBeforeMemory) => Err(Unspent::Forgotten),
        Err(_) => Err(Unspent::Unavailable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Secret;
    use base64::engine::general_purpose::STANDARD;

    fn nonces(byte: u8) -> DpopNonces {
        let kek =
            KeyEncryptionKey::from_base64("TEST_KEK", &Secret::new(STANDARD.encode([byte; 32])))
                .unwrap();
        DpopNonces::from_kek(&kek).unwrap()
    }

    const T: i64 = 1_800_000_010;

    #[test]
    fn a_nonce_is_accepted_for_one_step_more_at_every_replica_with_the_key() {
        let (one, other, stranger) = (nonces(1), nonces(1), nonces(2));
        let given = one.current(T);
        let given = given.to_str().unwrap();
        assert_eq!(given.len(), 22);
        assert!(
            given
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        // The same within the step, and at another replica.
        assert_eq!(one.current(T + 5).to_str().unwrap(), given);
        for replica in [&one, &other] {
            assert!(replica.accepts(given, T));
            assert!(replica.accepts(given, T + STEP_SECS));
            assert!(!replica.accepts(given, T + 2 * STEP_SECS));
            // Given by a replica whose clock runs ahead.
            assert!(replica.accepts(given, T - STEP_SECS));
            assert!(!replica.accepts(given, T - 2 * STEP_SECS));
        }
        assert_ne!(one.current(T + STEP_SECS).to_str().unwrap(), given);
        assert!(!stranger.accepts(given, T));
        assert!(!one.accepts("", T));
        assert!(!one.accepts(&given.to_ascii_uppercase(), T));
        assert!(!format!("{one:?}").contains(given));
    }

    #[test]
    fn an_older_step_never_replaces_the_newer_cached_one() {
        let n = nonces(3);
        let newer = n.current(T + STEP_SECS);
        let older = n.current(T);
        assert_ne!(newer, older);
        assert_eq!(n.current(T + STEP_SECS), newer);
    }
}
