//! The auth-server's signing keys, fetched and cached so tokens are verified locally.
//!
//! Refreshed in the background as the JWKS's `Cache-Control: max-age` says; a token with
//! an unknown `kid` triggers at most one fetch per cooldown, and every request that needs
//! it waits on that one fetch. When the auth-server is down or answers garbage, the last
//! good keys stay in use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use serde::Deserialize;

/// Minimum time between two fetches triggered by unknown key ids.
pub const UNKNOWN_KID_COOLDOWN: Duration = Duration::from_secs(10);
/// Bounds on the background refresh period, whatever the JWKS's max-age says.
const MIN_REFRESH: Duration = Duration::from_secs(10);
const MAX_REFRESH: Duration = Duration::from_secs(3600);
/// Retry period while the JWKS cannot be fetched.
const RETRY_LOADED: Duration = Duration::from_secs(10);
const RETRY_NOT_LOADED: Duration = Duration::from_millis(500);
/// Largest JWKS accepted.
const MAX_JWKS_BYTES: usize = 256 * 1024;

/// A key set as served, each key kept as JSON until it is read on its own, so one key this
/// service cannot use (another type, a newer format) does not cost the others.
#[derive(Deserialize)]
struct RawJwkSet {
    keys: Vec<serde_json::Value>,
}

/// Parses a JWKS body into RS256 verification keys by kid. Keys of other types or uses,
/// or without a kid, are skipped; a set with no usable key is refused.
pub fn parse_jwks(body: &[u8]) -> anyhow::Result<HashMap<String, Arc<DecodingKey>>> {
    let set: RawJwkSet = serde_json::from_slice(body).context("JWKS is not valid JSON")?;
    let keys: HashMap<_, _> = set
        .keys
        .into_iter()
        .filter_map(|raw| serde_json::from_value::<Jwk>(raw).ok())
        .filter(|jwk| {
            matches!(jwk.algorithm, AlgorithmParameters::RSA(_))
                && jwk
                    .common
                    .public_key_use
                    .as_ref()
                    .is_none_or(|u| *u == PublicKeyUse::Signature)
                && jwk
                    .common
                    .key_algorithm
                    .is_none_or(|a| a == KeyAlgorithm::RS256)
        })
        .filter_map(|jwk| {
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            Some((jwk.common.key_id?, Arc::new(key)))
        })
        .collect();
    if keys.is_empty() {
        bail!("JWKS holds no usable RS256 key");
    }
    Ok(keys)
}

/// Reads `max-age` from a `Cache-Control` value.
fn max_age(cache_control: Option<&str>) -> Option<Duration> {
    cache_control?.split(',').find_map(|d| {
        let (k, v) = d.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("max-age")
            .then(|| v.trim().parse().ok().map(Duration::from_secs))?
    })
}

/// The cached key set.
pub struct JwksCache {
    url: String,
    http: reqwest::Client,
    keys: RwLock<Arc<HashMap<String, Arc<DecodingKey>>>>,
    loaded: AtomicBool,
    /// Held during an unknown-kid fetch; holds the time of the last one.
    unknown_kid_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl JwksCache {
    /// An empty cache for the JWKS at `url`.
    pub fn new(url: impl Into<String>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            url: url.into(),
            http,
            keys: RwLock::new(Arc::new(HashMap::new())),
            loaded: AtomicBool::new(false),
            unknown_kid_fetch: tokio::sync::Mutex::new(None),
        })
    }

    /// Whether a key set has been loaded at least once.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// The key for `kid` in the current set, without fetching.
    pub fn lookup(&self, kid: &str) -> Option<Arc<DecodingKey>> {
        self.keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(kid)
            .cloned()
    }

    /// The key for `kid`, fetching the JWKS once (per cooldown) when it is unknown.
    pub async fn key_for(&self, kid: &str) -> Option<Arc<DecodingKey>> {
        if let Some(k) = self.lookup(kid) {
            return Some(k);
        }
        let mut last = self.unknown_kid_fetch.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(k) = self.lookup(kid) {
            return Some(k);
        }
        if last.is_some_and(|t| t.elapsed() < UNKNOWN_KID_COOLDOWN) {
            return None;
        }
        *last = Some(Instant::now());
        let _ = self.refresh("unknown_kid").await;
        self.lookup(kid)
    }

    /// Fetches the JWKS and swaps it in; returns the max-age it was served with.
    pub async fn refresh(&self, trigger: &'static str) -> anyhow::Result<Option<Duration>> {
        let outcome = self.fetch().await;
        let label = if outcome.is_ok() { "ok" } else { "error" };
        metrics::counter!("intake_jwks_refreshes_total", "trigger" => trigger, "outcome" => label)
            .increment(1);
        match outcome {
            Ok((keys, max_age)) => {
                tracing::debug!(keys = keys.len(), trigger, "JWKS refreshed");
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
                self.loaded.store(true, Ordering::Release);
                Ok(max_age)
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), trigger, "JWKS refresh failed; keeping the last good keys");
                Err(e)
            }
        }
    }

    async fn fetch(&self) -> anyhow::Result<(HashMap<String, Arc<DecodingKey>>, Option<Duration>)> {
        let resp = self
            .http
            .get(&self.url)
            .send()
            .await
            .context("JWKS request failed")?;
        if !resp.status().is_success() {
            bail!("JWKS answered {}", resp.status());
        }
        if resp
            .content_length()
            .is_some_and(|l| l > MAX_JWKS_BYTES as u64)
        {
            bail!("JWKS too large");
        }
        let max_age = max_age(
            resp.headers()
                .get(reqwest::header::CACHE_CONTROL)
                .and_then(|v| v.to_str().ok()),
        );
        let body = resp.bytes().await.context("JWKS body unreadable")?;
        if body.len() > MAX_JWKS_BYTES {
            bail!("JWKS too large");
        }
        Ok((parse_jwks(&body)?, max_age))
    }

    /// Keeps the cache fresh until the task is aborted: quickly retried until first loaded,
    /// then on the served max-age (bounded), and with a back-off while fetches fail.
    pub async fn run_refresher(self: Arc<Self>) {
        loop {
            let wait = match self.refresh("schedule").await {
                Ok(age) => age
                    .unwrap_or(Duration::from_secs(300))
                    .clamp(MIN_REFRESH, MAX_REFRESH),
                Err(_) if self.is_loaded() => RETRY_LOADED,
                Err(_) => RETRY_NOT_LOADED,
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        assert_eq!(
            max_age(Some("public, max-age=300")),
            Some(Duration::from_secs(300))
        );
        assert_eq!(max_age(Some("no-cache")), None);
        assert_eq!(max_age(None), None);
    }

    #[test]
    fn garbage_and_unusable_key_sets_are_refused() {
        assert!(parse_jwks(b"not json").is_err());
        assert!(parse_jwks(br#"{"keys":[]}"#).is_err());
        assert!(parse_jwks(br#"{"keys":[{"kty":"oct","k":"abc","kid":"x"}]}"#).is_err());
        assert!(
            parse_jwks(
                br#"{"keys":[{"kty":"RSA","kid":"x","alg":"RS512","n":"AQAB","e":"AQAB"}]}"#
            )
            .is_err()
        );
        let ok =
            parse_jwks(br#"{"keys":[{"kty":"RSA","kid":"x","n":"sXch","e":"AQAB"},{"kty":"EC"}]}"#)
                .unwrap();
        assert!(ok.contains_key("x"));
    }
}
