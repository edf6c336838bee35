//! The keys of `private_key_jwt` clients registered by JWKS URL: fetched over https from
//! public addresses only, checked as registered keys are, cached by the partner's
//! `Cache-Control` within bounds, fetched again early on an unknown `kid` (at most once a
//! short while per client), and kept when the partner's server fails.
//!
//! Each replica keeps its own cache: a replica that has not fetched a client's keys yet
//! fetches them at the client's first assertion.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use service_kit::outbound::{self, Reach, TargetError};
use tokio::sync::watch;
use url::Url;

use crate::client_keys::{ClientKeys, KeysRefused, MAX_JWKS_BYTES};
use crate::error::ClientFailure;

/// The environment variable that lets JWKS URLs be http or name addresses that are not
/// public.
pub const ALLOW_INSECURE_VARIABLE: &str = "AUTH_CLIENT_JWKS_ALLOW_INSECURE";

/// How partners' JWKS are fetched and cached; the defaults serve production, tests shorten
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Shortest a fetched JWKS is used before it is fetched again, whatever the partner's
    /// `max-age`: a partner cannot make every token request a fetch.
    pub min_cache: Duration,
    /// Longest a fetched JWKS is used before it is fetched again: a key the partner
    /// withdrew stops working within this, however long its `max-age`.
    pub max_cache: Duration,
    /// How long a JWKS served without a `max-age` is used.
    pub default_cache: Duration,
    /// The least time between two fetches for an unknown `kid`, and between two tries of a
    /// server that failed: a stream of made-up kids costs the partner one request per
    /// interval.
    pub retry_interval: Duration,
    /// How long a partner's server has to answer, body included.
    pub timeout: Duration,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self {
            min_cache: Duration::from_secs(60),
            max_cache: Duration::from_secs(24 * 60 * 60),
            default_cache: Duration::from_secs(5 * 60),
            retry_interval: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
        }
    }
}

impl FetchPolicy {
    /// How long a JWKS served with `cache_control` is used: its `max-age` within
    /// [`FetchPolicy::min_cache`] and [`FetchPolicy::max_cache`]; `no-store` or
    /// `no-cache` as the shortest; the default without a readable `max-age`.
    pub fn cache_for(&self, cache_control: Option<&str>) -> Duration {
        let mut max_age = None;
        for directive in cache_control.unwrap_or_default().split(',') {
            let (name, value) = match directive.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value.trim().trim_matches('"'))),
                None => (directive.trim(), None),
            };
            if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
                return self.min_cache;
            }
            if name.eq_ignore_ascii_case("max-age") && max_age.is_none() {
                // Digits only (RFC 9111 section 1.2.2); one too large to hold is "for ever".
                max_age = value
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .map(|v| v.parse::<u64>().unwrap_or(u64::MAX));
            }
        }
        max_age
            .map(Duration::from_secs)
            .unwrap_or(self.default_cache)
            .clamp(self.min_cache, self.max_cache.max(self.min_cache))
    }
}

/// Why a partner's JWKS could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL may not be called.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The URL carries a user name or password, which would reach logs and the audit trail.
    #[error("the URL must not carry a user name or password")]
    Credentials,
    /// No answer, or not a whole one, in time.
    #[error("no answer: {0}")]
    Unreachable(String),
    /// An answer other than 200.
    #[error("answered HTTP {0}, not 200")]
    Status(u16),
    /// A body larger than a JWKS may be.
    #[error("the JWKS is larger than {MAX_JWKS_BYTES} bytes")]
    TooLarge,
    /// A body that is not a usable JWKS.
    #[error(transparent)]
    Refused(#[from] KeysRefused),
}

/// The URL a JWKS is fetched from, checked for what can be known without calling it.
pub fn parse_url(url: &str, reach: Reach) -> Result<Url, FetchError> {
    let parsed = Url::parse(url).map_err(TargetError::from)?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(FetchError::Credentials);
    }
    outbound::check_unresolved(&parsed, reach)?;
    Ok(parsed)
}

/// The HTTP client partners' JWKS are fetched with (see [`outbound::client`]).
pub fn http_client(policy: &FetchPolicy, reach: Reach) -> anyhow::Result<reqwest::Client> {
    outbound::client(
        concat!("partner-intake-auth/", env!("CARGO_PKG_VERSION")),
        policy.timeout,
        reach.allow_insecure,
    )
}

/// A JWKS fetched and checked, with its `Cache-Control`.
#[derive(Debug)]
pub struct Fetched {
    /// The keys.
    pub keys: ClientKeys,
    /// The response's `Cache-Control`, if any.
    pub cache_control: Option<String>,
}

/// Fetches the JWKS at `url` and checks it as a registered one is: at most
/// [`MAX_JWKS_BYTES`], public signing keys only.
pub async fn fetch(http: &reqwest::Client, url: &Url, reach: Reach) -> Result<Fetched, FetchError> {
    // Checked before every call: a literal is connected to without the resolver's check.
    let url = parse_url(url.as_str(), reach)?;
    let unreachable = |e: reqwest::Error| FetchError::Unreachable(describe(e));
    let mut response = http
        .get(url)
        .header(
            reqwest::header::ACCEPT,
            "application/jwk-set+json, application/json",
        )
        .send()
        .await
        .map_err(unreachable)?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(FetchError::Status(status));
    }
    if response
        .content_length()
        .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
    {
        return Err(FetchError::TooLarge);
    }
    let cache_control = response
        .headers()
        .get(reqwest::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(FetchError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    let text =
        String::from_utf8(body).map_err(|_| KeysRefused(vec!["it is not UTF-8 text".into()]))?;
    Ok(Fetched {
        keys: ClientKeys::parse(&text)?,
        cache_control,
    })
}

/// Fetches and checks the JWKS at `url` as an operator registers it, so a URL that cannot
/// serve keys is refused at once rather than at the partner's first token request: the URL
/// as [`parse_url`] wants it, every address its host resolves to public, and a usable JWKS
/// there.
pub async fn fetch_for_registration(
    url: &str,
    reach: Reach,
) -> Result<(Url, ClientKeys), FetchError> {
    let url = parse_url(url, reach)?;
    outbound::check_target(url.as_str(), reach).await?;
    let policy = FetchPolicy::default();
    let http =
        http_client(&policy, reach).map_err(|e| FetchError::Unreachable(format!("{e:#}")))?;
    let fetched = fetch(&http, &url, reach).await?;
    Ok((url, fetched.keys))
}

/// A reqwest error with its causes, which say what actually failed (the resolver's refusal
/// of a private address, a TLS failure, the timeout).
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// What one client's cache holds.
struct Entry {
    /// The URL the keys came from: when the client's URL changes, the cache starts over.
    url: Url,
    /// The last good keys, if any fetch succeeded.
    keys: Option<Arc<ClientKeys>>,
    /// When to fetch again.
    next_fetch: Instant,
    /// When a fetch was last made for an unknown `kid`.
    kid_fetch: Option<Instant>,
    /// The fetch under way, if any: it says `true` when done (or is dropped).
    fetching: Option<watch::Receiver<bool>>,
}

/// One client's entry: locked only to read or update it, never across a fetch.
type Slot = Arc<Mutex<Entry>>;

/// What a fetch needs, cloned into the task that makes it.
#[derive(Clone)]
struct Fetcher {
    http: reqwest::Client,
    reach: Reach,
    policy: FetchPolicy,
}

/// Every `jwks_uri` client's keys as this process last fetched them.
pub struct ClientJwks {
    fetcher: Fetcher,
    entries: Mutex<HashMap<String, Slot>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClientJwks {
    /// An empty cache fetching as `policy` says, where `reach` allows.
    pub fn new(policy: FetchPolicy, reach: Reach) -> anyhow::Result<Self> {
        Ok(Self {
            fetcher: Fetcher {
                http: http_client(&policy, reach)?,
                reach,
                policy,
            },
            entries: Mutex::new(HashMap::new()),
        })
    }

    /// The keys to check an assertion of `client_id` with, whose JWKS is at `url` and whose
    /// header names `kid`: the cached ones while fresh, fetched when stale or missing, or
    /// early when `kid` is unknown (once per [`FetchPolicy::retry_interval`]). The last good
    /// keys stay in use while the partner's server fails; without any, the client's
    /// assertions are refused (`jwks_unavailable`).
    ///
    /// A fetch runs on its own, one at a time per client, and only the requests the cache
    /// cannot answer (no keys yet, or a `kid` they do not have) wait for it: an assertion by
    /// a cached key is answered at once, whatever the partner's server is doing. Stale keys
    /// serve meanwhile, so a withdrawn key stops working within
    /// [`FetchPolicy::max_cache`] and one fetch's [`FetchPolicy::timeout`].
    pub async fn keys_for(
        &self,
        client_id: &str,
        url: &Url,
        kid: Option<&str>,
    ) -> Result<Arc<ClientKeys>, ClientFailure> {
        let slot = lock(&self.entries)
            .entry(client_id.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(Entry::empty(url))))
            .clone();
        let wait = {
            let mut entry = lock(&slot);
            if entry.url != *url {
                *entry = Entry::empty(url);
            }
            if entry.fetching.is_none()
                && let Some(trigger) = self.trigger(&mut entry, kid)
            {
                entry.fetching = Some(self.start_fetch(client_id, &slot, &entry.url, trigger));
            }
            match &entry.keys {
                Some(keys) if kid.is_none_or(|kid| keys.has_kid(kid)) => {
                    return Ok(keys.clone());
                }
                _ => entry.fetching.clone(),
            }
        };
        if let Some(mut done) = wait {
            // Err only when the fetch's task is gone: then its keys are whatever it left.
            let _ = done.wait_for(|done| *done).await;
        }
        let entry = lock(&slot);
        match &entry.keys {
            Some(keys) if entry.url == *url => Ok(keys.clone()),
            _ => Err(ClientFailure::JwksUnavailable),
        }
    }

    /// Why `entry` should be fetched now, if it should.
    fn trigger(&self, entry: &mut Entry, kid: Option<&str>) -> Option<&'static str> {
        let now = Instant::now();
        if now >= entry.next_fetch {
            return Some(if entry.keys.is_some() {
                "expired"
            } else {
                "first"
            });
        }
        let unknown_kid = match (kid, &entry.keys) {
            (Some(kid), Some(keys)) => !keys.has_kid(kid),
            _ => false,
        };
        let kid_fetch_allowed = entry
            .kid_fetch
            .is_none_or(|at| now.duration_since(at) >= self.fetcher.policy.retry_interval);
        (unknown_kid && kid_fetch_allowed).then(|| {
            entry.kid_fetch = Some(now);
            "unknown_kid"
        })
    }

    /// Starts fetching `url` for `slot` in a task of its own, which finishes even when the
    /// request that started it goes away; returns what says when it is done.
    fn start_fetch(
        &self,
        client_id: &str,
        slot: &Slot,
        url: &Url,
        trigger: &'static str,
    ) -> watch::Receiver<bool> {
        let (done, fetching) = watch::channel(false);
        let (fetcher, slot, url) = (self.fetcher.clone(), slot.clone(), url.clone());
        let (client_id, mine) = (client_id.to_owned(), fetching.clone());
        tokio::spawn(async move {
            let outcome = fetch(&fetcher.http, &url, fetcher.reach).await;
            let now = Instant::now();
            let mut entry = lock(&slot);
            // The client's URL may have changed meanwhile: then this is not its fetch.
            let current = entry
                .fetching
                .as_ref()
                .is_some_and(|f| f.same_channel(&mine));
            let kept = entry.keys.is_some();
            let label = match outcome {
                Ok(fetched) => {
                    if current {
                        let fresh = fetcher.policy.cache_for(fetched.cache_control.as_deref());
                        entry.next_fetch = now + fresh;
                        entry.keys = Some(Arc::new(fetched.keys));
                    }
                    "ok"
                }
                Err(e) => {
                    if current {
                        entry.next_fetch = now + fetcher.policy.retry_interval;
                    }
                    tracing::warn!(
                        client_id,
                        jwks_uri = %url,
                        trigger,
                        error = %e,
                        keeping_last_good_keys = kept,
                        "a client's JWKS could not be fetched"
                    );
                    "error"
                }
            };
            if current {
                entry.fetching = None;
            }
            drop(entry);
            metrics::counter!(
                "auth_client_jwks_fetches_total",
                "client_id" => client_id,
                "trigger" => trigger,
                "outcome" => label
            )
            .increment(1);
            let _ = done.send(true);
        });
        fetching
    }
}

impl Entry {
    fn empty(url: &Url) -> Self {
        Self {
            url: url.clone(),
            keys: None,
            next_fetch: Instant::now(),
            kid_fetch: None,
            fetching: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REACH: Reach = Reach {
        allow_insecure: false,
        switch: ALLOW_INSECURE_VARIABLE,
    };

    #[test]
    fn a_jwks_is_cached_for_its_max_age_within_the_bounds() {
        let policy = FetchPolicy::default();
        let secs = |s: u64| Duration::from_secs(s);
        let cases: &[(&str, Option<&str>, Duration)] = &[
            ("no header: the default", None, secs(300)),
            ("no max-age: the default", Some("public"), secs(300)),
            ("max-age within the bounds", Some("max-age=600"), secs(600)),
            (
                "among other directives",
                Some("public, max-age=3600, must-revalidate"),
                secs(3600),
            ),
            ("the name in any case", Some("Max-Age=120"), secs(120)),
            ("a quoted value", Some("max-age=\"900\""), secs(900)),
            ("spaces around", Some(" max-age = 700 "), secs(700)),
            ("below the least: the least", Some("max-age=5"), secs(60)),
            ("zero: the least", Some("max-age=0"), secs(60)),
            (
                "above the most: the most",
                Some("max-age=31536000"),
                secs(86_400),
            ),
            (
                "too large to hold: the most",
                Some("max-age=99999999999999999999999"),
                secs(86_400),
            ),
            ("not a number: the default", Some("max-age=soon"), secs(300)),
            ("negative: the default", Some("max-age=-1"), secs(300)),
            ("empty: the default", Some("max-age="), secs(300)),
            (
                "the first max-age counts",
                Some("max-age=120, max-age=900"),
                secs(120),
            ),
            (
                "no-store: the least",
                Some("no-store, max-age=900"),
                secs(60),
            ),
            (
                "no-cache: the least",
                Some("max-age=900, no-cache"),
                secs(60),
            ),
            (
                "s-maxage is for shared caches, not us",
                Some("s-maxage=900"),
                secs(300),
            ),
        ];
        for (rule, header, expected) in cases {
            assert_eq!(policy.cache_for(*header), *expected, "{rule}");
        }
    }

    #[test]
    fn bounds_set_for_tests_apply_too() {
        let policy = FetchPolicy {
            min_cache: Duration::from_secs(1),
            max_cache: Duration::from_secs(2),
            ..FetchPolicy::default()
        };
        assert_eq!(policy.cache_for(Some("max-age=0")), Duration::from_secs(1));
        assert_eq!(policy.cache_for(None), Duration::from_secs(2));
        // A maximum below the minimum never panics: the minimum wins.
        let crossed = FetchPolicy {
            min_cache: Duration::from_secs(5),
            max_cache: Duration::from_secs(1),
            ..FetchPolicy::default()
        };
        assert_eq!(crossed.cache_for(None), Duration::from_secs(5));
    }

    #[test]
    fn a_url_is_refused_for_what_it_says_before_any_call() {
        let refused = |url: &str| parse_url(url, REACH).unwrap_err().to_string();
        assert!(refused("http://partner.example/jwks.json").contains("must be https"));
        assert!(
            refused("http://partner.example/jwks.json").contains(ALLOW_INSECURE_VARIABLE),
            "the refusal names the switch"
        );
        assert!(refused("https://127.0.0.1/jwks.json").contains("not a public address"));
        assert!(refused("https://[::1]/jwks.json").contains("not a public address"));
        assert!(refused("https://10.1.2.3/jwks.json").contains("not a public address"));
        assert!(refused("https://user:pw@partner.example/jwks.json").contains("user name"));
        assert!(refused("not a url").contains("not a URL"));
        assert!(parse_url("https://partner.example/jwks.json", REACH).is_ok());
        let insecure = Reach {
            allow_insecure: true,
            ..REACH
        };
        assert!(parse_url("http://127.0.0.1:9/jwks.json", insecure).is_ok());
    }
}
