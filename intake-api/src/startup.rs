//! Building and running the service, so `main`, tests and the all-in-one launcher
//! start the same thing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use intake_shared::http::{self as ops, readiness, shutdown_signal};
use intake_shared::ratelimit::{Limit, RateLimiter};
use intake_shared::telemetry::RequestTelemetry;
use poem::listener::TcpAcceptor;
use poem::web::Data;
use poem::{EndpointExt, Response, handler};
use poem_openapi::OpenApiService;
use sea_orm::{DatabaseBackend, DatabaseConnection};
use uuid::Uuid;

use crate::auth::Verifier;
use crate::config::{BrandConfig, Config, parse_brands};
use crate::jwks::JwksCache;
use crate::kept::KeptConnections;
use crate::routes::extract::TOKEN_URL;
use crate::routes::intake::IntakeApi;
use crate::turns::Turns;
use crate::{migration, store};

/// What every request handler shares.
pub struct AppState {
    /// The settings.
    pub config: Config,
    /// The configured brands.
    pub brands: Vec<BrandConfig>,
    /// The database pool.
    pub db: DatabaseConnection,
    /// On PostgreSQL, the pool's connections kept for submissions and attach.
    pub kept: Option<KeptConnections>,
    /// Writes to one case (submissions, attaches), one at a time.
    pub turns: Turns,
    /// Bearer-token verification.
    pub verifier: Verifier,
    /// Per-partner request limits.
    pub limiter: RateLimiter,
}

impl AppState {
    /// The per-partner limit.
    pub fn partner_limit(&self) -> Limit {
        Limit::per(self.config.rate_limit, self.config.rate_window_secs)
    }

    /// The brand identifiers partners may send.
    pub fn brand_ids(&self) -> Vec<&str> {
        self.brands.iter().map(|b| b.id.as_str()).collect()
    }

    /// Makes the customer's redirect link for `case` and records the product and the
    /// link's token. Nothing is stored when the link cannot be made.
    pub async fn make_redirect(
        &self,
        case: &store::CaseRef,
        product: Uuid,
        client_id: &str,
    ) -> anyhow::Result<String> {
        let brand = self
            .brands
            .iter()
            .find(|b| b.id == case.brand)
            .ok_or_else(|| anyhow!("brand {} is no longer configured", case.brand))?;
        let mut url = brand
            .portal_url
            .clone()
            .ok_or_else(|| anyhow!("brand {} has no customer-portal URL", case.brand))?;
        let (token, hash) = store::new_redirect_token()?;
        url.query_pairs_mut().append_pair("token", &token);
        let record = store::RedirectRecord {
            product_uuid: product,
            token_hash: hash,
            ttl: Duration::from_secs(self.config.redirect_ttl_secs),
        };
        store::attach_product(
            &self.db,
            self.kept.as_ref(),
            &self.turns,
            case,
            record,
            client_id,
        )
        .await
        .context("storing the redirect token failed")?;
        Ok(url.to_string())
    }
}

/// Every path the service answers, for metric labels.
const ROUTES: &[&str] = &[
    "/partners/external/intake",
    "/partners/external/intake/attach",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/docs",
];

/// The OpenAPI service of the intake-api, also used to write `openapi/intake-api.yaml`.
pub fn api_service(state: Arc<AppState>) -> OpenApiService<IntakeApi, ()> {
    OpenApiService::new(
        IntakeApi { state },
        "Partner Intake API",
        env!("CARGO_PKG_VERSION"),
    )
    .description("Partners submit customer mortgage enquiries as cases and attach eligibility-engine products. Every call needs a bearer token with the `enquiry:case:intake:create` scope from the auth-server's token endpoint.")
}

#[handler]
async fn readyz(state: Data<&Arc<AppState>>) -> Response {
    let db_ok = matches!(
        tokio::time::timeout(Duration::from_secs(2), state.db.ping()).await,
        Ok(Ok(()))
    );
    readiness(&[
        ("database", db_ok),
        ("jwks", state.verifier.jwks().is_loaded()),
    ])
}

/// Activates due cases until aborted: a pass every poll period, and after a full pass the
/// next one at once, so a backlog drains at the database's pace.
async fn activation_worker(state: Arc<AppState>) {
    let period = Duration::from_millis(state.config.activation_poll_ms.max(10));
    let mut backlog = false;
    loop {
        if !backlog {
            tokio::time::sleep(period).await;
        }
        backlog = match store::activate_due(&state.db).await {
            Ok(activated) => {
                for a in &activated {
                    metrics::counter!("intake_cases_activated_total", "brand" => a.brand.clone())
                        .increment(1);
                    metrics::histogram!("intake_activation_lag_seconds")
                        .record(a.lag.as_secs_f64());
                }
                // One line per pass: each case's activation is in its history already, and a
                // backlog would otherwise write a line per case.
                if let Some(max_lag) = activated.iter().map(|a| a.lag).max() {
                    tracing::info!(
                        count = activated.len(),
                        max_lag_ms = max_lag.as_millis() as u64,
                        "cases activated"
                    );
                }
                activated.len() >= store::ACTIVATION_BATCH
            }
            Err(e) => {
                tracing::warn!(error = %e, "activation pass failed; retrying");
                false
            }
        };
    }
}

/// A built service, bound to its port, not yet serving.
pub struct Application {
    acceptor: TcpAcceptor,
    port: u16,
    state: Arc<AppState>,
}

impl Application {
    /// Connects to the database, migrates it and binds the listening socket. The JWKS is
    /// fetched once serving starts; until it is, `/readyz` says not ready.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        intake_shared::telemetry::metrics_handle();
        let brands = parse_brands(&config.brands)?;
        let issuer = config.issuer().to_owned();
        let _ = TOKEN_URL.set(Box::leak(format!("{issuer}/oauth/token").into_boxed_str()));
        let db = intake_shared::db::connect(&config.database_url, config.database_max_connections)
            .await?;
        migration::run(&db)
            .await
            .context("database migration failed")?;
        let kept = (db.get_database_backend() == DatabaseBackend::Postgres).then(|| {
            KeptConnections::new(
                db.get_postgres_connection_pool().clone(),
                config.database_max_connections,
                intake_shared::db::ACQUIRE_TIMEOUT,
            )
        });
        let jwks = Arc::new(JwksCache::new(config.jwks_url.clone())?);
        let verifier = Verifier::new(jwks, &issuer, &config.audience);
        let limiter = RateLimiter::new("intake-api", config.redis_url.as_ref())?;
        let (acceptor, port) = ops::bind(&config.bind).await?;
        Ok(Self {
            acceptor,
            port,
            state: Arc::new(AppState {
                config,
                brands,
                db,
                kept,
                turns: Turns::default(),
                verifier,
                limiter,
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
        let refresher = tokio::spawn(state.verifier.jwks().clone().run_refresher());
        let activator = tokio::spawn(activation_worker(state.clone()));
        let pool_gauges = tokio::spawn(intake_shared::db::report_pool_use(
            "intake-api",
            state.db.clone(),
        ));
        let app = ops::service_routes(api_service(state.clone()), readyz)
            .data(state.clone())
            .with(RequestTelemetry::new("intake-api", ROUTES));
        tracing::info!(port = self.port, "intake-api listening");
        let result = ops::serve(self.acceptor, app, shutdown).await;
        refresher.abort();
        activator.abort();
        pool_gauges.abort();
        if let Some(kept) = &state.kept {
            kept.release_all();
        }
        let _ = state.db.clone().close().await;
        tracing::info!("intake-api stopped");
        result.context("server failed")
    }
}
