//! The auth-server's signing keys, fetched and cached so tokens are verified locally.
//!
//! Polled every second or so with `If-None-Match`, so a revoked key leaves, and a new one
//! arrives, within about a second at the cost of a 304 when nothing changed. A token with an
//! unknown `kid` also triggers a fetch, at most one per cooldown, which every request that
//! needs it waits on. When the auth-server is down or answers garbage, the last good keys
//! stay in use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use serde::Deserialize;
use shared::claims::TokenAlgorithm;

/// Minimum time between two fetches triggered by unknown key ids. Legitimate keys never
/// need one (a standby key is published long before it signs, and the poll picks it up);
/// the bound keeps made-up `kid`s from turning into a fetch each.
pub const UNKNOWN_KID_COOLDOWN: Duration = Duration::from_secs(1);
/// Retry period while nothing could be fetched yet.
const RETRY_NOT_LOADED: Duration = Duration::from_millis(200);
/// Largest document accepted from the auth-server.
const MAX_BODY_BYTES: usize = 256 * 1024;

/// What a conditional fetch found.
pub(crate) enum Fetched {
    /// Unchanged since the entity tag sent.
    NotModified,
    /// Refused with 401: the token sent is not (or no longer) accepted, or none was sent.
    Unauthorized,
    /// Refused with 401 for want of a DPoP nonce, which the answer handed out.
    UseNonce,
    /// A new version: its body and entity tag.
    Changed {
        /// The body.
        body: Vec<u8>,
        /// Its `ETag`, to send next time.
        etag: Option<String>,
    },
}

/// A GET of `url` with `If-None-Match: etag` and, when given, an `Authorization` header
/// and a `DPoP` proof by a key, which keeps the nonce the answer hands out; bounded in size.
pub(crate) async fn conditional_get(
    http: &reqwest::Client,
    url: &str,
    etag: Option<String>,
    authorization: Option<reqwest::header::HeaderValue>,
    proof: Option<(reqwest::header::HeaderValue, &token_client::DpopKey)>,
) -> anyhow::Result<Fetched> {
    let mut request = http.get(url);
    if let Some(etag) = etag {
        request = request.header(reqwest::header::IF_NONE_MATCH, etag);
    }
    if let Some(value) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, value);
    }
    let key = proof.as_ref().map(|(_, key)| *key);
    if let Some((proof, _)) = proof {
        request = request.header("DPoP", proof);
    }
    let resp = request.send().await.context("request failed")?;
    let new_nonce = key.is_some_and(|key| key.remember_nonce(url, resp.headers()));
    match resp.status() {
        reqwest::StatusCode::NOT_MODIFIED => return Ok(Fetched::NotModified),
        reqwest::StatusCode::UNAUTHORIZED => {
            let asks_for_nonce = resp
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.contains(r#"error="use_dpop_nonce""#));
            return Ok(if asks_for_nonce && new_nonce {
                Fetched::UseNonce
            } else {
                Fetched::Unauthorized
            });
        }
        _ => {}
    }
    if !resp.status().is_success() {
        bail!("answered {}", resp.status());
    }
    if resp
        .content_length()
        .is_some_and(|l| l > MAX_BODY_BYTES as u64)
    {
        bail!("too large");
    }
    let etag = resp
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = resp.bytes().await.context("body unreadable")?;
    if body.len() > MAX_BODY_BYTES {
        bail!("too large");
    }
    Ok(Fetched::Changed {
        body: body.to_vec(),
        etag,
    })
}

/// The HTTP client for the auth-server: short timeouts, no redirects, and the
/// certificates in `ca_file` trusted besides the system's.
pub fn http_client(ca_file: Option<&std::path::Path>) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(path) = ca_file {
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read INTAKE_AUTH_CA_FILE {}", path.display()))?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("{} holds no PEM certificate", path.display()))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder.build()?)
}

/// A key set as served, each key kept as JSON until it is read on its own, so one key this
/// service cannot use (another type, a newer format) does not cost the others.
#[derive(Deserialize)]
struct RawJwkSet {
    keys: Vec<serde_json::Value>,
}

/// A published signing key, ready to verify the tokens it signed.
pub struct TokenKey {
    /// The key.
    pub key: DecodingKey,
    /// The one algorithm its tokens are verified with: the one its JWK names.
    pub alg: TokenAlgorithm,
}

impl shared::access_token::VerifyingKey for TokenKey {
    fn decoding_key(&self) -> &DecodingKey {
        &self.key
    }
    fn algorithm(&self) -> TokenAlgorithm {
        self.alg
    }
}

/// The keys of a key set, by kid.
pub type KeySet = HashMap<String, Arc<TokenKey>>;

/// The algorithm a JWK is for: the one its `alg` names when this service verifies it, else
/// its type's usual one (RS256 for RSA, as keys published before `alg` mattered; ES256 for
/// P-256). `None` when the key cannot sign access tokens.
fn token_algorithm(jwk: &Jwk) -> Option<TokenAlgorithm> {
    let named = match jwk.common.key_algorithm {
        None => None,
        Some(KeyAlgorithm::RS256) => Some(TokenAlgorithm::Rs256),
        Some(KeyAlgorithm::PS256) => Some(TokenAlgorithm::Ps256),
        Some(KeyAlgorithm::ES256) => Some(TokenAlgorithm::Es256),
        Some(_) => return None,
    };
    match (&jwk.algorithm, named) {
        (AlgorithmParameters::RSA(_), None) => Some(TokenAlgorithm::Rs256),
        (
            AlgorithmParameters::RSA(_),
            Some(alg @ (TokenAlgorithm::Rs256 | TokenAlgorithm::Ps256)),
        ) => Some(alg),
        (AlgorithmParameters::EllipticCurve(ec), None | Some(TokenAlgorithm::Es256))
            if ec.curve == EllipticCurve::P256 =>
        {
            Some(TokenAlgorithm::Es256)
        }
        _ => None,
    }
}

/// Parses a JWKS body into verification keys by kid, each with its algorithm. Keys of
/// other types, curves, algorithms or uses, or without a kid, are skipped; a set with no
/// usable key is refused.
pub fn parse_jwks(body: &[u8]) -> anyhow::Result<KeySet> {
    let set: RawJwkSet = serde_json::from_slice(body).context("JWKS is not valid JSON")?;
    let keys: KeySet = set
        .keys
        .into_iter()
        .filter_map(|raw| serde_json::from_value::<Jwk>(raw).ok())
        .filter(|jwk| {
            jwk.common
                .public_key_use
                .as_ref()
                .is_none_or(|u| *u == PublicKeyUse::Signature)
        })
        .filter_map(|jwk| {
            let alg = token_algorithm(&jwk)?;
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            Some((jwk.common.key_id?, Arc::new(TokenKey { key, alg })))
        })
        .collect();
    if keys.is_empty() {
        bail!("JWKS holds no usable RS256, PS256 or ES256 key");
    }
    Ok(keys)
}

/// The cached key set.
pub struct JwksCache {
    url: String,
    http: reqwest::Client,
    keys: RwLock<Arc<KeySet>>,
    loaded: AtomicBool,
    /// The entity tag of the set held.
    etag: Mutex<Option<String>>,
    /// Held during an unknown-kid fetch; holds the time of the last one.
    unknown_kid_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl JwksCache {
    /// An empty cache for the JWKS at `url`.
    pub fn new(url: impl Into<String>) -> anyhow::Result<Self> {
        Self::with_client(url, http_client(None)?)
    }

    /// An empty cache for the JWKS at `url`, fetched with `http`.
    pub fn with_client(url: impl Into<String>, http: reqwest::Client) -> anyhow::Result<Self> {
        Ok(Self {
            url: url.into(),
            http,
            keys: RwLock::new(Arc::new(HashMap::new())),
            loaded: AtomicBool::new(false),
            etag: Mutex::new(None),
            unknown_kid_fetch: tokio::sync::Mutex::new(None),
        })
    }

    /// Whether a key set has been loaded at least once.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// The key for `kid` in the current set, without fetching.
    pub fn lookup(&self, kid: &str) -> Option<Arc<TokenKey>> {
        self.keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(kid)
            .cloned()
    }

    /// The key for `kid`, fetching the JWKS once (per cooldown) when it is unknown.
    pub async fn key_for(&self, kid: &str) -> Option<Arc<TokenKey>> {
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

    /// Fetches the JWKS if it changed and swaps it in.
    pub async fn refresh(&self, trigger: &'static str) -> anyhow::Result<()> {
        let etag = self.etag.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let outcome = match conditional_get(&self.http, &self.url, etag, None, None).await {
            Ok(Fetched::NotModified) => Ok("not_modified"),
            Ok(Fetched::Unauthorized | Fetched::UseNonce) => {
                Err(anyhow::anyhow!("answered 401 Unauthorized"))
            }
            Ok(Fetched::Changed { body, etag }) => parse_jwks(&body).map(|keys| {
                tracing::debug!(keys = keys.len(), trigger, "JWKS refreshed");
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
                *self.etag.lock().unwrap_or_else(|e| e.into_inner()) = etag;
                self.loaded.store(true, Ordering::Release);
                "ok"
            }),
            Err(e) => Err(e),
        };
        let label = outcome.as_ref().map_or("error", |o| *o);
        metrics::counter!("intake_jwks_refreshes_total", "trigger" => trigger, "outcome" => label)
            .increment(1);
        outcome.map(|_| ()).map_err(|e| {
            tracing::warn!(error = %format!("{e:#}"), trigger, url = %self.url, "JWKS refresh failed; keeping the last good keys");
            e
        })
    }

    /// Keeps the cache current until the task is aborted: every `period`, and quickly
    /// until the first set is loaded.
    pub async fn run_refresher(self: Arc<Self>, period: Duration) {
        loop {
            let _ = self.refresh("schedule").await;
            let wait = if self.is_loaded() {
                period
            } else {
                RETRY_NOT_LOADED
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(ok["x"].alg, TokenAlgorithm::Rs256);
    }

    #[test]
    fn each_key_is_verified_with_the_algorithm_its_jwk_names() {
        // A P-256 point (the generator), enough for a key to parse.
        let x = "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY";
        let y = "T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU";
        let body = serde_json::json!({"keys": [
            {"kty": "RSA", "kid": "rs", "alg": "RS256", "n": "sXch", "e": "AQAB"},
            {"kty": "RSA", "kid": "ps", "alg": "PS256", "n": "sXch", "e": "AQAB"},
            {"kty": "EC", "kid": "es", "alg": "ES256", "crv": "P-256", "x": x, "y": y},
            {"kty": "EC", "kid": "es-bare", "crv": "P-256", "x": x, "y": y},
            // Named for what this service never verifies with, or not fitting the key.
            {"kty": "RSA", "kid": "rs512", "alg": "RS512", "n": "sXch", "e": "AQAB"},
            {"kty": "RSA", "kid": "rsa-es", "alg": "ES256", "n": "sXch", "e": "AQAB"},
            {"kty": "EC", "kid": "ec-ps", "alg": "PS256", "crv": "P-256", "x": x, "y": y},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": "sXch", "e": "AQAB"},
        ]});
        let keys = parse_jwks(body.to_string().as_bytes()).unwrap();
        let algs: HashMap<_, _> = keys.iter().map(|(k, v)| (k.as_str(), v.alg)).collect();
        assert_eq!(
            algs,
            HashMap::from([
                ("rs", TokenAlgorithm::Rs256),
                ("ps", TokenAlgorithm::Ps256),
                ("es", TokenAlgorithm::Es256),
                ("es-bare", TokenAlgorithm::Es256),
            ])
        );
    }
}
