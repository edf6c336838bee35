//! Whether this server can sign tokens now: what `/readyz` says as `signing_key` and the
//! gauge `auth_signing_available` shows.
//!
//! Every token's signature counts as it is made, at the cost of two stores. When none was
//! made for a while, or the last one failed, a probe signs a few bytes with the key that
//! signs now, so that a key store that stopped answering (an HSM, a PKCS#11 token) shows
//! while no partner asks, and its return shows while the load balancer sends no one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::registry::Registry;

/// How often the probe looks: a signature older than this (or a failed one) is tried again.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

/// The outcome of the last signature, and when it was made.
pub struct SigningCheck {
    started: Instant,
    /// Milliseconds from `started` to the last outcome.
    last_at_ms: AtomicU64,
    ok: AtomicBool,
}

impl Default for SigningCheck {
    fn default() -> Self {
        Self::new()
    }
}

impl SigningCheck {
    /// A check that starts as able to sign: a server starts only once its keys signed.
    pub fn new() -> Self {
        metrics::gauge!("auth_signing_available").set(1.0);
        Self {
            started: Instant::now(),
            last_at_ms: AtomicU64::new(0),
            ok: AtomicBool::new(true),
        }
    }

    /// Records a signature's outcome; a change is logged and shown on the gauge.
    pub fn record(&self, ok: bool) {
        let at = self.started.elapsed().as_millis() as u64;
        self.last_at_ms.store(at, Ordering::Relaxed);
        if self.ok.swap(ok, Ordering::Relaxed) != ok {
            metrics::gauge!("auth_signing_available").set(if ok { 1.0 } else { 0.0 });
            if ok {
                tracing::info!("signing works again: ready");
            } else {
                tracing::error!("signing fails: not ready until it works again");
            }
        }
    }

    /// Whether the last signature succeeded.
    pub fn is_ok(&self) -> bool {
        self.ok.load(Ordering::Relaxed)
    }

    /// How long since the last outcome was recorded.
    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_at_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }

    /// Signs a probe with the key that signs now when no signature was made for
    /// [`PROBE_EVERY`] or the last one failed; runs until the task is aborted.
    pub async fn probe(self: Arc<Self>, registry: Arc<Registry>) {
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            if self.is_ok() && self.idle_for() < PROBE_EVERY {
                continue;
            }
            let key = registry.snapshot().signing_key(chrono::Utc::now()).cloned();
            let Some(key) = key else {
                self.record(false);
                continue;
            };
            // Blocking: a token's signature is a call into its library.
            let signed = tokio::task::spawn_blocking(move || {
                key.sign_jwt(&serde_json::json!({"probe": "signing"}))
                    .map_err(|e| format!("{e:#}"))
            })
            .await;
            match signed {
                Ok(Ok(_)) => self.record(true),
                Ok(Err(error)) => {
                    tracing::warn!(%error, "the signing probe failed");
                    self.record(false);
                }
                Err(_) => self.record(false),
            }
        }
    }
}
