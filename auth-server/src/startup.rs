//! Building and running the server, so `main`, tests and the all-in-one launcher
//! start the same thing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use intake_shared::http::{self as ops, readiness, shutdown_signal};
use intake_shared::ratelimit::{Decision, Limit, RateLimiter};
use intake_shared::telemetry::RequestTelemetry;
use poem::listener::TcpAcceptor;
use poem::middleware::Cors;
use poem::web::Data;
use poem::{EndpointExt, Response, handler};
use poem_openapi::OpenApiService;

use crate::config::Config;
use crate::routes::discovery::DiscoveryApi;
use crate::routes::token::TokenApi;
use crate::state::Registry;
use crate::{migration, store};

/// What every request handler shares.
pub struct AppState {
    /// The settings.
    pub config: Config,
    /// Clients and keys.
    pub registry: Arc<Registry>,
    /// Token-endpoint rate limits.
    pub limits: TokenLimits,
}

/// The token endpoint's limits: requests, and (more tightly) failed authentications, per
/// client id and source address.
pub struct TokenLimits {
    limiter: RateLimiter,
    requests: Limit,
    failures: Limit,
}

impl TokenLimits {
    fn new(config: &Config) -> anyhow::Result<Self> {
        Ok(Self {
            limiter: RateLimiter::new("auth-server", config.redis_url.as_ref())?,
            requests: Limit::per(config.token_rate_limit, config.rate_window_secs),
            failures: Limit::per(config.failed_auth_limit, config.rate_window_secs),
        })
    }

    /// Counts a token request.
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

/// Every path the server answers, for metric labels.
const ROUTES: &[&str] = &[
    "/oauth/token",
    "/.well-known/jwks.json",
    "/.well-known/oauth-authorization-server",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/docs",
];

/// The OpenAPI service of the auth-server, also used to write `openapi/auth-server.yaml`.
pub fn api_service(state: Arc<AppState>) -> OpenApiService<(TokenApi, DiscoveryApi), ()> {
    let issuer = state.config.issuer().to_owned();
    OpenApiService::new(
        (
            TokenApi {
                state: state.clone(),
            },
            DiscoveryApi { state },
        ),
        "Partner Intake auth-server",
        env!("CARGO_PKG_VERSION"),
    )
    .description("OAuth 2.0 client-credentials authorization server: RS256 JWT access tokens and the keys to verify them.")
    .server(issuer)
}

#[handler]
async fn readyz(state: Data<&Arc<AppState>>) -> Response {
    let db = state.registry.db();
    let db_ok = matches!(
        tokio::time::timeout(Duration::from_secs(2), db.ping()).await,
        Ok(Ok(()))
    );
    let key_ok = state
        .registry
        .snapshot()
        .signing_key(chrono::Utc::now())
        .is_some();
    readiness(&[("database", db_ok), ("signing_key", key_ok)])
}

/// A built server, bound to its port, not yet serving.
pub struct Application {
    acceptor: TcpAcceptor,
    port: u16,
    state: Arc<AppState>,
}

impl Application {
    /// Connects to the database, migrates it, makes sure a signing key exists, loads the
    /// clients and keys, and binds the listening socket.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        intake_shared::telemetry::metrics_handle();
        let db = migration::connect(&config.database_url, 10).await?;
        let kek = config.kek()?;
        if let Some(kid) = store::ensure_signing_key(&db, kek.as_ref()).await? {
            tracing::info!(%kid, "created the first signing key");
        }
        let registry = Arc::new(Registry::load(db, kek).await?);
        let limits = TokenLimits::new(&config)?;
        let (acceptor, port) = ops::bind(&config.bind).await?;
        Ok(Self {
            acceptor,
            port,
            state: Arc::new(AppState {
                config,
                registry,
                limits,
            }),
        })
    }

    /// The port actually bound (useful with port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until Ctrl-C or SIGTERM.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        self.run_until(shutdown_signal()).await
    }

    /// Serves until `shutdown` resolves, then finishes in-flight requests (bounded) and
    /// closes the database pool.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let state = self.state;
        let watcher = tokio::spawn(state.registry.clone().watch());
        let pool_gauges = tokio::spawn(intake_shared::db::report_pool_use(
            "auth-server",
            state.registry.db().clone(),
        ));
        let api = api_service(state.clone());
        let documents = ops::ApiDocuments::of(&api);
        let app = ops::service_routes(api, documents, readyz)
            .data(state.clone())
            // Browsers may call the token endpoint cross-origin (the intake-api's docs page
            // does): no cookies are involved, so any origin is safe.
            .with(Cors::new().allow_credentials(false))
            .with(RequestTelemetry::new("auth-server", ROUTES));
        tracing::info!(port = self.port, issuer = %state.config.issuer(), "auth-server listening");
        let result = ops::serve(self.acceptor, app, shutdown).await;
        watcher.abort();
        pool_gauges.abort();
        let _ = state.registry.db().clone().close().await;
        tracing::info!("auth-server stopped");
        result.context("server failed")
    }
}
