//! Fixed-window rate limits, shared between replicas through Redis when it is configured,
//! kept in process otherwise, and in process too while Redis is failing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;

use crate::Secret;

/// How many requests a key may make per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Requests allowed per window.
    pub max: u32,
    /// The window.
    pub window: Duration,
}

impl Limit {
    /// `max` requests per `window_secs` seconds.
    pub fn per(max: u32, window_secs: u64) -> Self {
        Self {
            max,
            window: Duration::from_secs(window_secs.max(1)),
        }
    }
}

/// The answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Allowed,
    /// Over the limit: try again after this long.
    Limited {
        /// Time until the window resets.
        retry_after: Duration,
    },
}

impl Decision {
    /// Seconds to put in `Retry-After` (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Self::Allowed => 0,
            Self::Limited { retry_after } => retry_after.as_secs_f64().ceil().max(1.0) as u64,
        }
    }
}

// INCR and set the expiry in one atomic step, so every replica counts into one window.
const SCRIPT: &str = r#"
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) and count > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    ttl = tonumber(ARGV[1])
end
return {count, ttl}
"#;

/// How long a Redis call may take before the local counters answer instead.
const REDIS_TIMEOUT: Duration = Duration::from_millis(250);
/// How long to stay on local counters after Redis failed, before trying it again.
const REDIS_RETRY: Duration = Duration::from_secs(5);
/// Most keys counted in process. Keys beyond it share one counter: a flood of new keys
/// (sources, say) then runs into the limit together instead of growing memory.
const LOCAL_MAX_KEYS: usize = 50_000;
/// The shortest time between two generations of local counters.
const LOCAL_MIN_GENERATION: Duration = Duration::from_secs(60);

/// Fixed-window counters kept in process, bounded in number. Counters live in two
/// generations: a key used again moves to the current one, and the older generation is
/// dropped whole once per window, so stale keys go without any per-request scan.
struct LocalCounters {
    current: HashMap<String, (u32, Instant)>,
    previous: HashMap<String, (u32, Instant)>,
    started: Instant,
    overflow: (u32, Instant),
}

impl LocalCounters {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            current: HashMap::new(),
            previous: HashMap::new(),
            started: now,
            overflow: (0, now),
        }
    }

    /// Adds `n` to `key`'s count in its current window: the count and the time left.
    fn add(&mut self, key: &str, limit: Limit, n: u32, now: Instant) -> (u64, Duration) {
        if now.duration_since(self.started) >= limit.window.max(LOCAL_MIN_GENERATION) {
            self.previous = std::mem::take(&mut self.current);
            self.started = now;
        }
        let entry = if self.current.contains_key(key) {
            self.current.get_mut(key)
        } else if let Some(moved) = self.previous.remove(key) {
            Some(self.current.entry(key.to_owned()).or_insert(moved))
        } else if self.current.len() < LOCAL_MAX_KEYS {
            Some(self.current.entry(key.to_owned()).or_insert((0, now)))
        } else {
            None
        };
        let entry = entry.unwrap_or(&mut self.overflow);
        if now.duration_since(entry.1) >= limit.window {
            *entry = (0, now);
        }
        entry.0 = entry.0.saturating_add(n);
        let remaining = limit.window.saturating_sub(now.duration_since(entry.1));
        (u64::from(entry.0), remaining)
    }

    fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }
}

/// A connection to Redis whose every connect and command gives up after `timeout`; `None`
/// when it cannot be made within twice that.
pub(crate) async fn connect(
    client: &redis::Client,
    timeout: Duration,
) -> Option<ConnectionManager> {
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1);
    tokio::time::timeout(
        timeout * 2,
        ConnectionManager::new_with_config(client.clone(), config),
    )
    .await
    .ok()?
    .ok()
}

struct RedisState {
    conn: Option<ConnectionManager>,
    down_since: Option<Instant>,
}

/// A rate limiter for one service.
pub struct RateLimiter {
    service: &'static str,
    redis_client: Option<redis::Client>,
    redis: tokio::sync::Mutex<RedisState>,
    script: redis::Script,
    local: Mutex<LocalCounters>,
    /// How many keys the in-process counters hold.
    local_keys: metrics::Gauge,
}

impl RateLimiter {
    /// A limiter using Redis at `redis_url` when given; an invalid URL is an error.
    pub fn new(service: &'static str, redis_url: Option<&Secret<String>>) -> anyhow::Result<Self> {
        let redis_client = redis_url
            .map(|u| redis::Client::open(u.expose().as_str()))
            .transpose()
            .map_err(|e| anyhow::anyhow!("REDIS_URL is not a valid Redis URL ({:?})", e.kind()))?;
        Ok(Self {
            service,
            redis_client,
            redis: tokio::sync::Mutex::new(RedisState {
                conn: None,
                down_since: None,
            }),
            script: redis::Script::new(SCRIPT),
            local: Mutex::new(LocalCounters::new()),
            local_keys: metrics::gauge!("ratelimit_local_keys", "service" => service),
        })
    }

    /// Counts one request for `key` and says whether it may go ahead.
    pub async fn hit(&self, key: &str, limit: Limit) -> Decision {
        self.add(key, limit, 1).await
    }

    /// Says whether one more request for `key` would be over `limit`, without counting one.
    pub async fn peek(&self, key: &str, limit: Limit) -> Decision {
        self.add(key, limit, 0).await
    }

    async fn add(&self, key: &str, limit: Limit, n: u32) -> Decision {
        // Boxed: the round trip to Redis is a large future, which would otherwise be part
        // of every request's, Redis or not.
        let shared = match self.redis_client {
            Some(_) => Box::pin(self.redis_add(key, limit, n)).await,
            None => None,
        };
        let (count, ttl) = match shared {
            Some(r) => r,
            None => self.local_add(key, limit, n),
        };
        // A peek asks about the next request: it is refused once the count is at the limit.
        let next = if n == 0 { count + 1 } else { count };
        if next > u64::from(limit.max) {
            Decision::Limited { retry_after: ttl }
        } else {
            Decision::Allowed
        }
    }

    async fn redis_add(&self, key: &str, limit: Limit, n: u32) -> Option<(u64, Duration)> {
        let client = self.redis_client.as_ref()?;
        let mut state = self.redis.lock().await;
        if state.down_since.is_some_and(|t| t.elapsed() < REDIS_RETRY) {
            return None;
        }
        if state.conn.is_none() {
            match connect(client, REDIS_TIMEOUT).await {
                Some(c) => state.conn = Some(c),
                None => {
                    self.redis_failed(&mut state, "connect");
                    return None;
                }
            }
        }
        let mut conn = state.conn.clone()?;
        // The lock only guards the connection's state; the call itself runs unlocked.
        drop(state);
        let window_ms = limit.window.as_millis() as u64;
        let full_key = format!("ratelimit:{}:{key}", self.service);
        let mut invocation = self.script.key(full_key);
        invocation.arg(window_ms).arg(n);
        let call = invocation.invoke_async::<(u64, i64)>(&mut conn);
        match tokio::time::timeout(REDIS_TIMEOUT, call).await {
            Ok(Ok((count, ttl_ms))) => {
                let mut state = self.redis.lock().await;
                if state.down_since.take().is_some() {
                    tracing::info!(
                        service = self.service,
                        "Redis is back: rate limits shared again"
                    );
                }
                Some((count, Duration::from_millis(ttl_ms.max(0) as u64)))
            }
            _ => {
                let mut state = self.redis.lock().await;
                self.redis_failed(&mut state, "command");
                None
            }
        }
    }

    fn redis_failed(&self, state: &mut RedisState, what: &'static str) {
        metrics::counter!("ratelimit_redis_errors_total", "service" => self.service, "stage" => what).increment(1);
        if state.down_since.is_none() {
            tracing::warn!(
                service = self.service,
                stage = what,
                "Redis unavailable: rate limits are per replica until it returns"
            );
        }
        state.down_since = Some(Instant::now());
        // Start over with a fresh connection next time rather than trust a broken one.
        state.conn = None;
    }

    fn local_add(&self, key: &str, limit: Limit, n: u32) -> (u64, Duration) {
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        let counted = local.add(key, limit, n, Instant::now());
        self.local_keys.set(local.len() as f64);
        counted
    }

    /// Keys counted in process now (both generations).
    pub fn local_keys(&self) -> usize {
        self.local.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_limits_allow_the_maximum_then_refuse_until_the_window_ends() {
        let limiter = RateLimiter::new("test", None).unwrap();
        let limit = Limit {
            max: 3,
            window: Duration::from_millis(200),
        };
        for _ in 0..3 {
            assert_eq!(limiter.hit("k", limit).await, Decision::Allowed);
        }
        let refused = limiter.hit("k", limit).await;
        assert!(matches!(refused, Decision::Limited { .. }));
        assert_eq!(refused.retry_after_secs(), 1);
        assert_eq!(limiter.hit("other", limit).await, Decision::Allowed);
        tokio::time::sleep(Duration::from_millis(220)).await;
        assert_eq!(limiter.hit("k", limit).await, Decision::Allowed);
    }

    #[test]
    fn local_counters_stay_bounded_and_stale_keys_go_a_generation_later() {
        let limit = Limit::per(2, 60);
        let mut counters = LocalCounters::new();
        let start = counters.started;
        for i in 0..LOCAL_MAX_KEYS + 10 {
            counters.add(&format!("k{i}"), limit, 1, start);
        }
        assert_eq!(
            counters.len(),
            LOCAL_MAX_KEYS,
            "keys past the bound are not kept"
        );
        // The keys past the bound share one counter, so they are limited together.
        assert_eq!(counters.add("new-a", limit, 0, start).0, 10);
        // A key used in the next generation survives it; the others are gone after two.
        let next = start + Duration::from_secs(61);
        counters.add("k1", limit, 1, next);
        assert_eq!(counters.len(), LOCAL_MAX_KEYS);
        counters.add("k1", limit, 1, next + Duration::from_secs(61));
        assert_eq!(counters.len(), 1);
        // A window that ended starts again at zero.
        assert_eq!(
            counters
                .add("k1", limit, 1, next + Duration::from_secs(61))
                .0,
            2
        );
    }

    /// Every request awaits a hit inside its own future, which is moved as a whole more than
    /// once per request: the Redis round trip, boxed, adds nothing to it.
    #[test]
    fn a_hit_is_a_small_future() {
        let limiter = RateLimiter::new("test", None).unwrap();
        let hit = limiter.hit("k", Limit::per(1, 60));
        assert!(
            std::mem::size_of_val(&hit) <= 256,
            "{}",
            std::mem::size_of_val(&hit)
        );
    }

    #[tokio::test]
    async fn peeking_does_not_count() {
        let limiter = RateLimiter::new("test", None).unwrap();
        let limit = Limit::per(1, 60);
        for _ in 0..5 {
            assert_eq!(limiter.peek("k", limit).await, Decision::Allowed);
        }
        assert_eq!(limiter.hit("k", limit).await, Decision::Allowed);
        assert!(matches!(
            limiter.peek("k", limit).await,
            Decision::Limited { .. }
        ));
    }
}
