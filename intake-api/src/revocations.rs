//! The auth-server's list of disabled clients, polled like the JWKS: a disabled client's
//! tokens still verify, so without this list they would work until they expire. It is read
//! with a token of the intake-api's own client (scope `revocations:read`), cached and
//! renewed, so only resource servers can learn who is disabled.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;
use token_client::{AccessToken, TokenSource};

use crate::jwks::{Fetched, conditional_get};

#[derive(Deserialize)]
struct RevocationList {
    disabled_clients: Vec<String>,
}

/// The disabled clients, as last fetched, and whether that is recent enough to vet tokens by.
pub struct RevokedClients {
    url: String,
    http: reqwest::Client,
    tokens: TokenSource,
    disabled: RwLock<Arc<HashSet<String>>>,
    /// Milliseconds from `epoch` to the last fetch that succeeded, plus one; 0 until the
    /// first. An atomic, not a lock: every request reads it.
    fetched_at: AtomicU64,
    epoch: Instant,
    max_age: Duration,
    /// Whether the list was too old at the last look, so the change is logged once.
    stale: AtomicBool,
    etag: Mutex<Option<String>>,
}

impl RevokedClients {
    /// An empty list for the document at `url`, fetched with `http` and a token from
    /// `tokens`, trusted for `max_age` after each successful fetch.
    pub fn new(
        url: impl Into<String>,
        http: reqwest::Client,
        tokens: TokenSource,
        max_age: Duration,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            url: url.into(),
            http,
            tokens,
            disabled: RwLock::default(),
            fetched_at: AtomicU64::new(0),
            epoch: Instant::now(),
            max_age,
            stale: AtomicBool::new(false),
            etag: Mutex::new(None),
        })
    }

    /// Whether `client_id` was disabled when the list was last fetched.
    pub fn contains(&self, client_id: &str) -> bool {
        self.disabled
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(client_id)
    }

    /// Whether a list has been fetched at least once.
    pub fn is_loaded(&self) -> bool {
        self.fetched_at.load(Ordering::Acquire) != 0
    }

    /// How long ago the list was last fetched or confirmed unchanged; `None` before the first.
    pub fn age(&self) -> Option<Duration> {
        match self.fetched_at.load(Ordering::Acquire) {
            0 => None,
            at => Some(
                self.epoch
                    .elapsed()
                    .saturating_sub(Duration::from_millis(at - 1)),
            ),
        }
    }

    /// Whether the list is recent enough to vet tokens by: fetched, and no older than the
    /// bound. A replica that cannot say whether a client was disabled refuses its tokens.
    pub fn is_current(&self) -> bool {
        self.age().is_some_and(|age| age <= self.max_age)
    }

    fn mark_fetched(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.fetched_at.store(now + 1, Ordering::Release);
    }

    /// Publishes the list's age and logs when it becomes too old to vet tokens by, or
    /// usable again.
    fn report_age(&self) {
        let age = self.age();
        metrics::gauge!("intake_revocation_list_age_seconds")
            .set(age.map_or(f64::INFINITY, |a| a.as_secs_f64()));
        let stale = !self.is_current();
        if self.stale.swap(stale, Ordering::AcqRel) == stale {
            return;
        }
        if stale {
            tracing::error!(
                url = %self.url,
                max_age_secs = self.max_age.as_secs(),
                "the revocation list is older than INTAKE_REVOCATIONS_MAX_AGE_SECS: not ready, \
                 and every token is refused with 503 until the list can be fetched again"
            );
        } else {
            tracing::info!(url = %self.url, "revocation list loaded: tokens are vetted again");
        }
    }

    /// A conditional fetch with the cached token (sent again once with a new proof when the
    /// auth-server asks for a DPoP nonce); when that token is refused (the client's secret
    /// or the signing key changed), once more with a new one.
    async fn fetch(&self, etag: Option<String>) -> anyhow::Result<Fetched> {
        let token = self
            .tokens
            .current()
            .await
            .context("no token to read the revocation list with")?;
        let mut fetched = self.get(&token, etag.clone()).await?;
        if matches!(fetched, Fetched::UseNonce) {
            fetched = self.get(&token, etag.clone()).await?;
        }
        if !matches!(fetched, Fetched::Unauthorized | Fetched::UseNonce) {
            return Ok(fetched);
        }
        let token = self
            .tokens
            .replace(&token)
            .await
            .context("no token to read the revocation list with")?;
        self.get(&token, etag).await
    }

    /// One conditional GET with `token`, and a fresh proof for it when it is DPoP-bound.
    async fn get(&self, token: &AccessToken, etag: Option<String>) -> anyhow::Result<Fetched> {
        let proof = self
            .tokens
            .proof("GET", &self.url, token)
            .context("no DPoP proof could be made for the revocation list")?;
        let proof = proof.zip(self.tokens.dpop_key());
        conditional_get(&self.http, &self.url, etag, Some(token.header()), proof).await
    }

    /// Fetches the list if it changed and swaps it in.
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let etag = self.etag.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let outcome = match self.fetch(etag).await {
            Ok(Fetched::NotModified) => Ok("not_modified"),
            Ok(Fetched::Unauthorized | Fetched::UseNonce) => Err(anyhow::anyhow!(
                "answered 401: is INTAKE_REVOCATIONS_CLIENT_ID a client granted revocations:read?"
            )),
            Ok(Fetched::Changed { body, etag }) => serde_json::from_slice::<RevocationList>(&body)
                .context("not a revocation list")
                .map(|list| {
                    let disabled: HashSet<String> = list.disabled_clients.into_iter().collect();
                    tracing::debug!(disabled = disabled.len(), "revocation list refreshed");
                    *self.disabled.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(disabled);
                    *self.etag.lock().unwrap_or_else(|e| e.into_inner()) = etag;
                    "ok"
                }),
            Err(e) => Err(e),
        };
        if outcome.is_ok() {
            self.mark_fetched();
        }
        let label = outcome.as_ref().map_or("error", |o| *o);
        metrics::counter!("intake_revocation_refreshes_total", "outcome" => label).increment(1);
        outcome.map(|_| ()).map_err(|e| {
            tracing::warn!(error = %format!("{e:#}"), url = %self.url, "revocation list refresh failed; keeping the last one");
            e
        })
    }

    /// Keeps the list current until the task is aborted.
    pub async fn run_refresher(self: Arc<Self>, period: Duration) {
        loop {
            let _ = self.refresh().await;
            self.report_age();
            tokio::time::sleep(period).await;
        }
    }
}
