//! Building and running the server, so `main`, tests and the all-in-one launcher
//! start the same thing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use poem::middleware::Cors;
use poem::web::Data;
use poem::{EndpointExt, Response, handler};
use service_kit::http::{
    self as ops, Background, Check, Listeners, Server, readiness_with_warnings,
};
use service_kit::replay::ReplayStore;
use service_kit::telemetry::{LogFormat, MetricHelp, MetricKind, RequestTelemetry};

/// The auth-server's own metrics.
const AUTH_METRICS: &[MetricHelp] = &[
    MetricHelp {
        name: "auth_tokens_issued_total",
        kind: MetricKind::Counter,
        help: "Access tokens issued, by client_id.",
    },
    MetricHelp {
        name: "auth_token_requests_failed_total",
        kind: MetricKind::Counter,
        help: "Token requests refused, by reason, and by client_id when the id names a registered client. Answered invalid_client: unknown_client, wrong_secret, expired_secret, disabled_client, malformed_credentials, wrong_auth_method, multiple_auth_methods, and for client assertions assertion_malformed, assertion_algorithm, assertion_signature, assertion_issuer, assertion_audience, assertion_expired, assertion_lifetime, assertion_not_yet_valid, assertion_replayed, assertion_jti (a jti empty, over 255 bytes or with a control character), assertion_predates_replay_store (made before Redis last forgot the ids it kept), and jwks_unavailable when the keys of a client registered by JWKS URL were never fetched. Otherwise: invalid_request, body_too_large, unsupported_grant_type, invalid_scope, too_many_requests, server_error, temporarily_unavailable.",
    },
    MetricHelp {
        name: "auth_client_jwks_fetches_total",
        kind: MetricKind::Counter,
        help: "Fetches of the JWKS of clients registered by JWKS URL, by client_id, trigger (first, expired, unknown_kid) and outcome (ok, or error: the last good keys are kept).",
    },
    MetricHelp {
        name: "auth_audit_head_seq",
        kind: MetricKind::Gauge,
        help: "The place of the audit trail's last entry, as this server last read it: a fall means entries were removed from the end. The head's MAC is in the log line `audit trail head`.",
    },
    MetricHelp {
        name: "auth_revocations_refused_total",
        kind: MetricKind::Counter,
        help: "Requests for /revocations refused, by reason: missing, scope, client_disabled, or why the token did not verify.",
    },
    MetricHelp {
        name: "auth_signing_key_age_seconds",
        kind: MetricKind::Gauge,
        help: "How long the key signing tokens now has been signing.",
    },
    MetricHelp {
        name: "auth_key_rotation_interval_seconds",
        kind: MetricKind::Gauge,
        help: "The rotation schedule (AUTH_KEY_ROTATION_INTERVAL_SECS); 0 when the keys are rotated only by hand.",
    },
    MetricHelp {
        name: "auth_scheduled_rotations_total",
        kind: MetricKind::Counter,
        help: "Rotations this replica made on schedule, by outcome (ok, or error: retried at the next look).",
    },
    MetricHelp {
        name: "auth_fapi2_token_alg_nonconformant",
        kind: MetricKind::Gauge,
        help: "1 when AUTH_FAPI2 is on and the key signing access tokens uses an algorithm FAPI 2.0 does not allow (RS256, the default key's): the deployment is not FAPI 2.0 conformant until `key rotate --alg ES256` (or PS256). 0 otherwise.",
    },
    MetricHelp {
        name: "auth_signing_available",
        kind: MetricKind::Gauge,
        help: "1 while this server can sign tokens, 0 while signing fails (its key store, say a PKCS#11 token, does not answer): the last signature's outcome, a token's or the probe's made every few seconds while none is.",
    },
    MetricHelp {
        name: "auth_registry_reloads_total",
        kind: MetricKind::Counter,
        help: "Reloads of clients and keys from the database, by outcome (`ok` or `error`).",
    },
];

use crate::client_jwks::ClientJwks;
use crate::config::Config;
use crate::registry::Registry;
use crate::routes::{api_service, token};
use crate::state::{AppState, TokenLimits};
use crate::{audit, migration, store};

#[handler]
async fn readyz(state: Data<&Arc<AppState>>) -> Response {
    let db = state.registry.db();
    let db_ok = matches!(
        tokio::time::timeout(Duration::from_secs(2), db.ping()).await,
        Ok(Ok(()))
    );
    let snapshot = state.registry.snapshot();
    let now = chrono::Utc::now();
    // A key that signs now, and signs: the last signature's outcome, never one made here.
    let key_ok = state.signing.is_ok() && snapshot.signing_key(now).is_some();
    let profile = state.config.profile();
    let warnings: Vec<_> = snapshot
        .signing_alg_outside(profile, now)
        .map(|alg| (FAPI2_TOKEN_ALG, fapi2_token_alg_warning(alg)))
        .into_iter()
        .collect();
    readiness_with_warnings(
        &[
            Check::required("database", db_ok),
            Check::required("signing_key", key_ok),
            // Only DPoP proofs and client assertions need it, unless every request has them.
            Check {
                name: "replay_store",
                ok: state.replay.is_available(),
                required: profile.is_fapi2(),
            },
        ],
        &warnings,
        profile.name(),
    )
}

/// The name of `/readyz`'s warning that tokens are signed with an algorithm FAPI 2.0 does
/// not allow.
pub const FAPI2_TOKEN_ALG: &str = "fapi2_token_signing";

/// What an operator is told when, under `AUTH_FAPI2`, tokens are signed with `alg`.
pub fn fapi2_token_alg_warning(alg: &str) -> String {
    format!(
        "AUTH_FAPI2 is on but access tokens are signed {alg}, which FAPI 2.0 does not allow \
         (PS256, ES256, EdDSA), and the JWKS publishes {alg} keys: the deployment is not FAPI \
         2.0 conformant until `auth-server key rotate --alg ES256` (or PS256) has moved the \
         keys, once every intake-api verifies those"
    )
}

/// A built server, bound to its port, not yet serving.
pub struct Application {
    listeners: Listeners,
    state: Arc<AppState>,
}

impl Application {
    /// What the server's requests share: for tests and embedders that look inside.
    pub fn state(&self) -> Arc<AppState> {
        self.state.clone()
    }
}

impl Server for Application {
    type Config = Config;

    fn log_format(config: &Config) -> LogFormat {
        config.logs.log_format
    }

    /// Connects to the database (migrating it when told), makes sure a signing key exists,
    /// loads the clients and keys, and binds the listening socket.
    async fn build(config: Config) -> anyhow::Result<Self> {
        service_kit::telemetry::describe_metrics(
            "auth-server",
            service_kit::build_info!(),
            AUTH_METRICS,
        );
        ops::warn_if_plain_http("AUTH_ISSUER", &config.issuer);
        let db = migration::SCHEMA
            .connect_serving(config.database.url(), 10, config.database.migrates())
            .await?;
        let keys = config.keys()?;
        let kek = keys.sealer();
        let sealed = store::signing_keys::seal_keys_stored_in_clear(&db, kek).await?;
        if sealed > 0 {
            tracing::info!(
                count = sealed,
                "signing keys stored in clear are now encrypted"
            );
        }
        for kid in store::signing_keys::ensure_keys(&db, &keys).await? {
            tracing::info!(%kid, "created a signing key");
        }
        // Servers seal no entry they did not write: they only mark a trail that needs no
        // accepting, so a seal removed later can never be accepted.
        let server = audit::Author::server(audit::AuditKey::derive(kek)?);
        if let Some(seq) = store::audit_trail::mark_audit_trail(&db, &server).await? {
            tracing::info!(
                seq,
                "audit trail marked: every entry from here on is sealed"
            );
        }
        let replay = ReplayStore::new("auth-server", db.clone(), config.redis_url.as_ref())?;
        replay.prime().await;
        let dpop_nonces = if config.dpop_nonces() {
            let key = kek.derive_hmac_key(service_kit::dpop_nonce::PURPOSE)?;
            Some(Arc::new(service_kit::dpop_nonce::DpopNonces::new(key)))
        } else {
            None
        };
        let registry = Arc::new(Registry::load(db, keys.clone()).await?);
        if config.profile().is_fapi2() {
            let snapshot = registry.snapshot();
            let with_secret = snapshot
                .clients
                .values()
                .filter(|c| matches!(c.auth, crate::registry::ClientAuth::Secret))
                .count();
            tracing::info!(
                clients_with_a_secret = with_secret,
                "FAPI 2.0 profile on (AUTH_FAPI2): private_key_jwt only, every token \
                 DPoP-bound, assertions and proofs signed PS256, ES256 or EdDSA; clients \
                 with a secret are refused at the token endpoint"
            );
            // Named, so the operator can ask each partner for a PS256, ES256 or EdDSA key.
            let rs256_only: Vec<&str> = snapshot
                .clients
                .iter()
                .filter(|(_, c)| {
                    matches!(&c.auth, crate::registry::ClientAuth::PrivateKeyJwt(keys) if keys.only_rs256())
                })
                .map(|(id, _)| id.as_str())
                .collect();
            if let Some(alg) = snapshot.signing_alg_outside(config.profile(), chrono::Utc::now()) {
                tracing::warn!(alg, "{}", fapi2_token_alg_warning(alg));
            }
            if !rs256_only.is_empty() {
                tracing::warn!(
                    clients = ?rs256_only,
                    "under AUTH_FAPI2 these clients' keys are all pinned to RS256, which FAPI 2.0 \
                     does not take: they are refused until `client set-keys` gives them a \
                     PS256, ES256 or EdDSA key"
                );
            }
        }
        let limits = TokenLimits::new(&config)?;
        if config.client_jwks_allow_insecure {
            tracing::warn!(
                "AUTH_CLIENT_JWKS_ALLOW_INSECURE is on: clients' JWKS may be fetched over http \
                 and from addresses that are not public; for local use and tests only"
            );
        }
        let client_jwks = ClientJwks::new(config.client_jwks_fetch, config.client_jwks_reach())?;
        let listeners =
            Listeners::bind(&config.listen.bind, config.listen.admin_bind.as_deref()).await?;
        Ok(Self {
            listeners,
            state: Arc::new(AppState {
                bearer: crate::bearer::BearerCheck::new(
                    config.issuer(),
                    &config.audience,
                    config.profile(),
                ),
                assertion_audiences: [
                    config.issuer().to_owned(),
                    crate::token_binding::token_endpoint(&config.issuer),
                ],
                config,
                registry,
                limits,
                client_jwks,
                replay,
                dpop_nonces,
                signing: Arc::new(crate::signing::SigningCheck::new()),
            }),
        })
    }

    fn listeners(&self) -> &Listeners {
        &self.listeners
    }

    /// Serves until `shutdown` resolves, then finishes in-flight requests (bounded) and
    /// closes the database pool.
    async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let state = self.state;
        // What changed since build (the launcher's demo client, made in between) is served
        // from the first request on, not from the watcher's first poll.
        state.registry.catch_up().await?;
        let mut background = Background::default();
        background.spawn(state.registry.clone().watch());
        background.spawn(service_kit::db::report_pool_use(
            "auth-server",
            state.registry.db().clone(),
        ));
        background.spawn(prune_spent_ids(state.clone()));
        background.spawn(crate::scheduled_rotation::run(state.clone()));
        background.spawn(state.signing.clone().probe(state.registry.clone()));
        background.spawn({
            let state = state.clone();
            async move { state.replay.watch().await }
        });
        let documents = crate::routes::documents(state.clone());
        let routes = ops::served_routes(&documents);
        let app = ops::service_routes(
            api_service(state.clone()),
            documents,
            readyz,
            self.listeners.metrics_on_service(),
            state.config.profile().name(),
        )
        .data(state.clone())
        .with(service_kit::dpop_nonce::GiveNonces(
            state.dpop_nonces.clone(),
        ))
        // Browsers may call the token endpoint cross-origin (the intake-api's docs page
        // does): no cookies are involved, so any origin is safe.
        .with(
            Cors::new()
                .allow_credentials(false)
                .expose_header(service_kit::dpop_nonce::HEADER),
        )
        .with(
            RequestTelemetry::new(
                "auth-server",
                routes,
                service_kit::closing_line!(token::KID, token::JTI, token::SCOPE),
            )
            .trusting(state.config.trusted_proxies.clone()),
        );
        let port = self.listeners.port();
        tracing::info!(
            port,
            issuer = %state.config.issuer(),
            profile = state.config.profile().name(),
            dpop_nonces = state.dpop_nonces.is_some(),
            "auth-server listening"
        );
        let admin = ops::admin_routes(readyz, state.config.profile().name()).data(state.clone());
        let result = self.listeners.serve(app, admin, shutdown).await;
        drop(background);
        let _ = state.registry.db().clone().close().await;
        tracing::info!("auth-server stopped");
        result.context("server failed")
    }
}

/// How often spent client assertions and DPoP proofs past their expiry are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Forgets spent client assertions and DPoP proofs once they could no longer be accepted,
/// so the tables hold at most an hour of them; runs until the task is aborted. Every
/// replica prunes: a delete that finds nothing costs little, and no replica is special.
async fn prune_spent_ids(state: Arc<AppState>) {
    loop {
        tokio::time::sleep(PRUNE_EVERY).await;
        for ledger in [
            store::assertions::CLIENT_ASSERTIONS,
            service_kit::replay::DPOP_PROOFS,
        ] {
            let pruned = tokio::time::timeout(
                Duration::from_secs(5),
                state.replay.prune(&ledger, chrono::Utc::now()),
            )
            .await;
            match pruned {
                Ok(Ok(n)) if n > 0 => {
                    tracing::debug!(
                        pruned = n,
                        table = ledger.table,
                        "expired single-use ids forgotten"
                    )
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, table = ledger.table, "cannot prune single-use ids")
                }
                Err(_) => tracing::debug!(table = ledger.table, "pruning single-use ids timed out"),
            }
        }
    }
}
