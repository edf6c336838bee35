//! What every request handler shares: the settings, the clients and keys, the limits.

use std::sync::Arc;

use service_kit::ratelimit::{Decision, Limit, RateLimiter};

use crate::config::Config;
use crate::registry::Registry;

/// What every request handler shares.
pub struct AppState {
    /// The settings.
    pub config: Config,
    /// Clients and keys.
    pub registry: Arc<Registry>,
    /// Token-endpoint rate limits.
    pub limits: TokenLimits,
    /// What a token shown to `/revocations` must be.
    pub bearer: crate::bearer::BearerCheck,
    /// What a client assertion's `aud` may name: the issuer, or the token endpoint's URL.
    pub assertion_audiences: [String; 2],
    /// The keys of clients registered by JWKS URL, as this process fetched them.
    pub client_jwks: crate::client_jwks::ClientJwks,
    /// The DPoP proofs and client assertions already used, shared by every replica.
    pub replay: service_kit::replay::ReplayStore,
    /// The DPoP server nonces handed out and required, when they are on.
    pub dpop_nonces: Option<Arc<service_kit::dpop_nonce::DpopNonces>>,
    /// Whether signing works now, as the last signature showed.
    pub signing: Arc<crate::signing::SigningCheck>,
}

/// The token endpoint's limits: requests per source address; then requests, and (more
/// tightly) failed authentications, per client and source address.
pub struct TokenLimits {
    limiter: RateLimiter,
    per_source: Limit,
    requests: Limit,
    failures: Limit,
}

impl TokenLimits {
    /// The limits `config` sets, counted in Redis when it names one.
    pub fn new(config: &Config) -> anyhow::Result<Self> {
        Ok(Self {
            limiter: RateLimiter::new("auth-server", config.redis_url.as_ref())?,
            per_source: Limit::per(config.source_rate_limit, config.rate_window_secs),
            requests: Limit::per(config.token_rate_limit, config.rate_window_secs),
            failures: Limit::per(config.failed_auth_limit, config.rate_window_secs),
        })
    }

    /// Counts a token request from a source address.
    pub async fn hit_source(&self, key: &str) -> Decision {
        self.limiter.hit(key, self.per_source).await
    }

    /// Counts a token request of a client.
    pub async fn hit_request(&self, key: &str) -> Decision {
        self.limiter.hit(key, self.requests).await
    }

    /// Whether one more failed authentication would be over the limit.
    pub async fn peek_failures(&self, key: &str) -> Decision {
        self.limiter.peek(key, self.failures).await
    }

    /// Counts a failed authentication.
    pub async fn hit_failure(&self, key: &str) {
        self.limiter.hit(key, self.failures).await;
    }

    /// Turns a refusal into the endpoint's error.
    pub fn check(&self, decision: Decision) -> Result<(), crate::error::OAuthError> {
        match decision {
            Decision::Allowed => Ok(()),
            limited => {
                metrics::counter!("ratelimit_refused_total", "service" => "auth-server")
                    .increment(1);
                Err(crate::error::OAuthError::TooManyRequests {
                    retry_after_secs: limited.retry_after_secs(),
                })
            }
        }
    }
}
