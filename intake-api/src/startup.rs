//! Building and running the service, so `main`, tests and the all-in-one launcher
//! start the same thing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use poem::web::Data;
use poem::{EndpointExt, Response, handler};
use service_kit::http::{self as ops, Background, Check, Listeners, Server, readiness};
use service_kit::telemetry::{LogFormat, MetricHelp, MetricKind, RequestTelemetry};

use crate::config::Config;
use crate::state::AppState;
use crate::{activation, housekeeping, routes, webhooks};

/// The intake-api's own metrics.
const INTAKE_METRICS: &[MetricHelp] = &[
    MetricHelp {
        name: "intake_cases_total",
        kind: MetricKind::Counter,
        help: "Enquiries accepted, by brand and outcome (`created` or `updated`).",
    },
    MetricHelp {
        name: "intake_sandbox_cases_total",
        kind: MetricKind::Counter,
        help: "Sandbox clients' enquiries accepted, by brand and outcome: kept out of intake_cases_total.",
    },
    MetricHelp {
        name: "intake_referrals_total",
        kind: MetricKind::Counter,
        help: "Referrals accepted, by brand and outcome (`created`: a new referred case; `added`: joined an existing case).",
    },
    MetricHelp {
        name: "intake_sandbox_referrals_total",
        kind: MetricKind::Counter,
        help: "Sandbox clients' referrals accepted, by brand and outcome: kept out of intake_referrals_total.",
    },
    MetricHelp {
        name: "intake_sandbox_cases_activated_total",
        kind: MetricKind::Counter,
        help: "Sandbox cases activated, by brand: kept out of intake_cases_activated_total.",
    },
    MetricHelp {
        name: "intake_sandbox_products_attached_total",
        kind: MetricKind::Counter,
        help: "Products attached to sandbox cases, by brand: kept out of intake_products_attached_total.",
    },
    MetricHelp {
        name: "intake_sandbox_rehearsals_total",
        kind: MetricKind::Counter,
        help: "Failures sandbox clients asked for by a trigger address, by trigger: their answers are left out of http_requests_total, whose 5xx the alerts read as faults.",
    },
    MetricHelp {
        name: "intake_sandbox_cases_deleted_total",
        kind: MetricKind::Counter,
        help: "Sandbox cases deleted, with all about them, after INTAKE_SANDBOX_RETENTION_DAYS.",
    },
    MetricHelp {
        name: "intake_products_attached_total",
        kind: MetricKind::Counter,
        help: "Products attached to cases, by brand.",
    },
    MetricHelp {
        name: "intake_redirects_redeemed_total",
        kind: MetricKind::Counter,
        help: "Redirect links presented by customer portals, by outcome (`redeemed`, `gone`, or `other_brand`: a link of a brand the portal is not bound to, answered as `gone`).",
    },
    MetricHelp {
        name: "intake_portal_unknown_brand_total",
        kind: MetricKind::Counter,
        help: "Redeem calls whose token names a brand INTAKE_BRANDS does not (a misspelt `client create --brands`); the log names client and brand.",
    },
    MetricHelp {
        name: "intake_submissions_purged_total",
        kind: MetricKind::Counter,
        help: "Submissions whose bodies as sent were emptied after INTAKE_SUBMISSION_RETENTION_DAYS.",
    },
    MetricHelp {
        name: "intake_idempotent_replays_total",
        kind: MetricKind::Counter,
        help: "Requests answered with the stored answer of an earlier request with the same Idempotency-Key, by operation.",
    },
    MetricHelp {
        name: "intake_cases_activated_total",
        kind: MetricKind::Counter,
        help: "Cases activated, by brand.",
    },
    MetricHelp {
        name: "intake_activation_lag_seconds",
        kind: MetricKind::Histogram,
        help: "How long after its activation time a case was activated.",
    },
    MetricHelp {
        name: "intake_activation_backlog",
        kind: MetricKind::Gauge,
        help: "Cases due for activation and not yet active, measured every 5 s apart from the activation worker.",
    },
    MetricHelp {
        name: "intake_activation_oldest_due_seconds",
        kind: MetricKind::Gauge,
        help: "How long ago the longest-due case not yet active fell due (0 when none is); grows without bound while activation is stalled.",
    },
    MetricHelp {
        name: "intake_webhook_deliveries_pending",
        kind: MetricKind::Gauge,
        help: "Webhook events not yet delivered nor given up on, for every partner.",
    },
    MetricHelp {
        name: "intake_webhook_attempts_total",
        kind: MetricKind::Counter,
        help: "Webhook sends, by outcome: `delivered`, `retry` (to be tried again), `failed` (retry window over) or `gone` (410: endpoint disabled).",
    },
    MetricHelp {
        name: "intake_webhook_endpoints_disabled_total",
        kind: MetricKind::Counter,
        help: "Webhook endpoints the worker disabled, by reason: `gone` (410), `not_public` (its address) or `failing` (every try failed for INTAKE_WEBHOOK_DISABLE_AFTER_SECS).",
    },
    MetricHelp {
        name: "intake_webhook_delivery_lag_seconds",
        kind: MetricKind::Histogram,
        help: "From a change to its webhook's delivery.",
    },
    MetricHelp {
        name: "intake_auth_failures_total",
        kind: MetricKind::Counter,
        help: "Requests refused for their bearer token, by reason.",
    },
    MetricHelp {
        name: "intake_jwks_refreshes_total",
        kind: MetricKind::Counter,
        help: "Fetches of the auth-server's JWKS, by trigger and outcome.",
    },
    MetricHelp {
        name: "intake_revocation_refreshes_total",
        kind: MetricKind::Counter,
        help: "Fetches of the auth-server's revocation list, by outcome.",
    },
    MetricHelp {
        name: "intake_revocation_list_age_seconds",
        kind: MetricKind::Gauge,
        help: "Seconds since the revocation list was last fetched or confirmed unchanged \
               (+Inf before the first); past INTAKE_REVOCATIONS_MAX_AGE_SECS tokens get 503.",
    },
];

#[handler]
async fn readyz(state: Data<&Arc<AppState>>) -> Response {
    let db_ok = matches!(
        tokio::time::timeout(Duration::from_secs(2), state.cases.db().ping()).await,
        Ok(Ok(()))
    );
    let profile = state.config.profile();
    readiness(
        &[
            Check::required("database", db_ok),
            Check::required("jwks", state.verifier.jwks().is_loaded()),
            Check::required(
                "revocations",
                state.verifier.revocations().is_none_or(|r| r.is_current()),
            ),
            // Only DPoP-bound tokens need it, unless every token is bound.
            Check {
                name: "replay_store",
                ok: state.replay.is_available(),
                required: profile.is_fapi2(),
            },
        ],
        profile.name(),
    )
}

/// A built service, bound to its port, not yet serving.
pub struct Application {
    listeners: Listeners,
    state: Arc<AppState>,
}

impl Server for Application {
    type Config = Config;

    fn log_format(config: &Config) -> LogFormat {
        config.logs.log_format
    }

    /// Connects to the database (migrating it when told) and binds the listening socket.
    /// The JWKS is fetched once serving starts; until it is, `/readyz` says not ready.
    async fn build(config: Config) -> anyhow::Result<Self> {
        service_kit::telemetry::describe_metrics(
            "intake-api",
            service_kit::build_info!(),
            INTAKE_METRICS,
        );
        ops::warn_if_plain_http("INTAKE_ISSUER", &config.issuer);
        let auth = &config.auth_server;
        ops::warn_if_plain_http("INTAKE_JWKS_URL", auth.jwks_url.as_str());
        ops::warn_if_plain_http("INTAKE_REVOCATIONS_URL", auth.revocations_url().as_str());
        let listeners =
            Listeners::bind(&config.listen.bind, config.listen.admin_bind.as_deref()).await?;
        let state = Arc::new(AppState::build(config).await?);
        Ok(Self { listeners, state })
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
        let poll = state.config.auth_server.keys_poll;
        let mut background = Background::default();
        background.spawn(state.verifier.jwks().clone().run_refresher(poll));
        if let Some(revocations) = state.verifier.revocations().cloned() {
            background.spawn(revocations.run_refresher(poll));
        }
        background.spawn(activation::run(state.clone()));
        background.spawn(housekeeping::run(state.clone()));
        background.spawn(activation::watch_backlog(state.clone()));
        background.spawn(webhooks::run(state.clone()));
        background.spawn({
            let state = state.clone();
            async move { state.replay.watch().await }
        });
        background.spawn(service_kit::db::report_pool_use(
            "intake-api",
            state.cases.db().clone(),
        ));
        let documents = routes::documents(&state);
        let labels = ops::served_routes(&documents);
        let app = ops::service_routes(
            routes::api(&state),
            documents,
            readyz,
            self.listeners.metrics_on_service(),
            state.config.profile().name(),
        )
        .data(state.clone())
        .with(service_kit::dpop_nonce::GiveNonces(
            state.dpop_nonces.clone(),
        ))
        .with(
            RequestTelemetry::new(
                "intake-api",
                labels,
                service_kit::closing_line!(routes::REFERENCE, routes::BRAND),
            )
            .trusting(state.config.trusted_proxies.clone()),
        );
        tracing::info!(
            port = self.listeners.port(),
            profile = state.config.profile().name(),
            dpop_nonces = state.dpop_nonces.is_some(),
            "intake-api listening"
        );
        if state.config.profile().is_fapi2() {
            tracing::info!(
                "FAPI 2.0 profile on (INTAKE_FAPI2): partners' tokens are taken only as DPoP \
                 with a proof signed PS256, ES256 or EdDSA, never as Bearer"
            );
        }
        let admin = ops::admin_routes(readyz, state.config.profile().name()).data(state.clone());
        let result = self.listeners.serve(app, admin, shutdown).await;
        drop(background);
        state.cases.close().await;
        tracing::info!("intake-api stopped");
        result.context("server failed")
    }
}

#[cfg(test)]
mod tests {
    use crate::sandbox;

    #[test]
    fn every_count_and_its_sandbox_twin_have_help() {
        let described: Vec<&str> = super::INTAKE_METRICS.iter().map(|m| m.name).collect();
        for counted in [
            sandbox::CASES,
            sandbox::REFERRALS,
            sandbox::PRODUCTS_ATTACHED,
            sandbox::CASES_ACTIVATED,
        ] {
            for name in counted.names() {
                assert!(described.contains(&name), "{name} has no help");
            }
        }
    }
}
