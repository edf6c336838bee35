//! What every request handler shares, built once from the configuration.

use std::sync::Arc;

use anyhow::anyhow;
use service_kit::ratelimit::{Limit, RateLimiter};
use service_kit::replay::ReplayStore;
use shared::claims::scopes;
use token_client::{AuthMethod, TokenSource};
use url::Url;

use crate::auth::Verifier;
use crate::config::{BrandConfig, Config, parse_brands};
use crate::history_cursor::CursorKey;
use crate::jwks::JwksCache;
use crate::migration;
use crate::revocations::RevokedClients;
use crate::store::{AnswerKeys, CaseStore, SecretSeal};

/// The intake-api's shared state.
pub struct AppState {
    /// The settings.
    pub config: Config,
    /// The configured brands.
    pub brands: Vec<BrandConfig>,
    /// The cases.
    pub cases: CaseStore,
    /// What stored answers are sealed and requests digested with.
    pub answer_keys: AnswerKeys,
    /// What webhook signing secrets are sealed with in the database.
    pub webhook_secrets: SecretSeal,
    /// Signs the delivery history's paging cursors.
    pub history_cursors: CursorKey,
    /// Bearer-token verification.
    pub verifier: Verifier,
    /// Per-partner request limits.
    pub limiter: RateLimiter,
    /// The DPoP proofs already used, shared by every replica.
    pub replay: ReplayStore,
    /// The DPoP server nonces handed out and required, when they are on.
    pub dpop_nonces: Option<Arc<service_kit::dpop_nonce::DpopNonces>>,
    /// Sandbox submissions whose first try failed on purpose.
    pub sandbox_tries: crate::sandbox::FirstTries,
    /// What webhook events are sent with: the worker's deliveries and partners' test events.
    pub webhook_http: reqwest::Client,
}

impl AppState {
    /// Connects to the database (migrating it when told); the JWKS is fetched later, by the
    /// refresher.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let brands = parse_brands(&config.brands)?;
        let kek = config.kek()?;
        let answer_keys = AnswerKeys::new(&kek)?;
        let webhook_secrets = SecretSeal::new(&kek)?;
        let history_cursors = CursorKey::new(&kek)?;
        let dpop_nonces = if config.dpop_nonces() {
            Some(Arc::new(service_kit::dpop_nonce::DpopNonces::from_kek(
                &kek,
            )?))
        } else {
            None
        };
        let credentials = config.revocations_credentials()?;
        let db = migration::SCHEMA
            .connect_serving(
                config.database.url(),
                config.database_max_connections,
                config.database.migrates(),
            )
            .await?;
        let cases = CaseStore::new(db, config.database_max_connections, config.timing());
        // Secrets in clear are still read, so a failure here stops nothing: the next start
        // seals them.
        match cases.seal_webhook_secrets(&webhook_secrets).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                endpoints = n,
                "webhook secrets stored in clear are now sealed"
            ),
            Err(e) => tracing::warn!(error = %e, "sealing webhook secrets stored in clear failed"),
        }
        let http = crate::jwks::http_client(config.auth_server.ca_file.as_deref())?;
        let jwks = Arc::new(JwksCache::with_client(
            config.auth_server.jwks_url.to_string(),
            http.clone(),
        )?);
        config.auth_server.check()?;
        let tokens = TokenSource::new(
            http.clone(),
            config.auth_server.token_url(),
            credentials,
            AuthMethod::Basic,
            scopes::REVOCATIONS_READ.to_owned(),
            token_client::DEFAULT_RENEW_BEFORE,
        );
        // Under FAPI 2.0 the auth-server issues DPoP-bound tokens only, and /revocations
        // takes them only beside a proof: a key of this process's own, never stored.
        let tokens = if config.profile().is_fapi2() {
            tokens.with_dpop(token_client::DpopKey::generate()?)
        } else {
            tokens
        };
        let revoked = Arc::new(RevokedClients::new(
            config.auth_server.revocations_url().to_string(),
            http,
            tokens,
            config.auth_server.revocations_max_age,
        )?);
        let verifier = Verifier::new(jwks, config.issuer(), &config.audience, config.profile())
            .with_revocations(revoked);
        let limiter = RateLimiter::new("intake-api", config.redis_url.as_ref())?;
        let replay = ReplayStore::new("intake-api", cases.db().clone(), config.redis_url.as_ref())?;
        replay.prime().await;
        let webhook_http = config.webhook_client()?;
        Ok(Self {
            config,
            brands,
            cases,
            answer_keys,
            webhook_secrets,
            history_cursors,
            verifier,
            limiter,
            replay,
            dpop_nonces,
            sandbox_tries: Default::default(),
            webhook_http,
        })
    }

    /// The per-partner limit.
    pub fn partner_limit(&self) -> Limit {
        Limit::per(self.config.rate_limit, self.config.rate_window_secs)
    }

    /// The brand identifiers partners may send.
    pub fn brand_ids(&self) -> Vec<&str> {
        self.brands.iter().map(|b| b.id.as_str()).collect()
    }

    /// Where `brand`'s customers continue; a link cannot be made for a brand without one.
    pub fn portal_url(&self, brand: &str) -> anyhow::Result<&Url> {
        let config = self
            .brands
            .iter()
            .find(|b| b.id == brand)
            .ok_or_else(|| anyhow!("brand {brand} is no longer configured"))?;
        config
            .portal_url
            .as_ref()
            .ok_or_else(|| anyhow!("brand {brand} has no customer-portal URL"))
    }
}
