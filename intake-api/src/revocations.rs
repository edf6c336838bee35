//! The auth-server's list of disabled clients, polled like the JWKS: a disabled client's
//! tokens still verify, so without this list they would work until they expire.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use crate::jwks::{Fetched, conditional_get};

#[derive(Deserialize)]
struct RevocationList {
    disabled_clients: Vec<String>,
}

/// The disabled clients, as last fetched.
pub struct RevokedClients {
    url: String,
    http: reqwest::Client,
    disabled: RwLock<Arc<HashSet<String>>>,
    loaded: AtomicBool,
    etag: Mutex<Option<String>>,
}

impl RevokedClients {
    /// An empty list for the document at `url`, fetched with `http`.
    pub fn new(url: impl Into<String>, http: reqwest::Client) -> anyhow::Result<Self> {
        Ok(Self {
            url: url.into(),
            http,
            disabled: RwLock::default(),
            loaded: AtomicBool::new(false),
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
        self.loaded.load(Ordering::Acquire)
    }

    /// Fetches the list if it changed and swaps it in.
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let etag = self.etag.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let outcome = match conditional_get(&self.http, &self.url, etag).await {
            Ok(Fetched::NotModified) => Ok("not_modified"),
            Ok(Fetched::Changed { body, etag }) => serde_json::from_slice::<RevocationList>(&body)
                .context("not a revocation list")
                .map(|list| {
                    let disabled: HashSet<String> = list.disabled_clients.into_iter().collect();
                    tracing::debug!(disabled = disabled.len(), "revocation list refreshed");
                    *self.disabled.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(disabled);
                    *self.etag.lock().unwrap_or_else(|e| e.into_inner()) = etag;
                    self.loaded.store(true, Ordering::Release);
                    "ok"
                }),
            Err(e) => Err(e),
        };
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
            tokio::time::sleep(period).await;
        }
    }
}
