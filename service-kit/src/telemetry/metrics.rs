//! The metrics catalogue: the names and help texts both services record under, the
//! Prometheus recorder they are recorded in, and what `/metrics` renders.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::build_info::BuildInfo;
use super::process;

/// How often recorded histogram samples are folded into their buckets.
const METRICS_UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The process-wide Prometheus recorder, installed on first use, with a thread that keeps
/// its memory bounded between scrapes.
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Suffix("duration_seconds".into()),
                &[
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                ],
            )
            .and_then(|b| {
                // Lags (seconds behind schedule) as histograms too: unlike a summary's
                // quantiles they add up across replicas.
                b.set_buckets_for_metric(
                    Matcher::Suffix("lag_seconds".into()),
                    &[0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0],
                )
            })
            .expect("static bucket list is not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Histogram samples wait in memory until they are folded into buckets, which only a
        // scrape or an upkeep does: without this thread a service nobody scrapes would grow
        // by a few bytes per request for ever.
        let upkeep = handle.clone();
        let started = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(METRICS_UPKEEP_INTERVAL);
                    upkeep.run_upkeep();
                }
            });
        if let Err(e) = started {
            tracing::warn!(error = %e, "could not start the metrics upkeep thread");
        }
        // Another recorder may already be installed (e.g. by an embedding program); the
        // handle then renders only what this one records, which is still well-formed.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// Everything `/metrics` shows: what the services recorded, then the process's own
/// `process_*` metrics, read from the operating system now.
pub fn render_metrics() -> String {
    let mut text = metrics_handle().render();
    process::render(&mut text);
    text
}

/// What kind of metric a [`MetricHelp`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations in buckets.
    Histogram,
}

/// A metric a service records and what it means: its `# HELP` line on `/metrics`.
#[derive(Debug, Clone, Copy)]
pub struct MetricHelp {
    /// The metric's name.
    pub name: &'static str,
    /// Its kind.
    pub kind: MetricKind,
    /// What it measures, and its labels.
    pub help: &'static str,
}

/// The metrics both services record through this crate.
pub const COMMON_METRICS: &[MetricHelp] = &[
    MetricHelp {
        name: "http_requests_total",
        kind: MetricKind::Counter,
        help: "HTTP requests answered, by service, route (`other` for unknown paths), method and status.",
    },
    MetricHelp {
        name: "http_request_duration_seconds",
        kind: MetricKind::Histogram,
        help: "Time from a request's arrival to its response, by service, route, method and status.",
    },
    MetricHelp {
        name: "db_pool_connections",
        kind: MetricKind::Gauge,
        help: "Database pool connections, by service and state (`in_use` or `idle`).",
    },
    MetricHelp {
        name: "ratelimit_refused_total",
        kind: MetricKind::Counter,
        help: "Requests refused with 429 by a rate limit, by service.",
    },
    MetricHelp {
        name: "ratelimit_redis_errors_total",
        kind: MetricKind::Counter,
        help: "Redis failures of the rate limiter, which then counts in this process alone, by service and stage.",
    },
    MetricHelp {
        name: "replay_store_errors_total",
        kind: MetricKind::Counter,
        help: "Single-use checks of DPoP proofs and client assertions that the replay store could not answer, by service and store (`database` or `redis`): each such request was refused with 503.",
    },
    MetricHelp {
        name: "replay_store_memory_resets_total",
        kind: MetricKind::Counter,
        help: "Times this replica found that Redis, as the replay store, had forgotten since when it remembers used ids (a restart without persistence, a flush): DPoP proofs and client assertions made before were refused, and their clients made new ones.",
    },
    MetricHelp {
        name: "replay_store_available",
        kind: MetricKind::Gauge,
        help: "1 while the replay store answers, 0 while it cannot be reached (DPoP proofs and client assertions are then refused with 503), by service and store: its last use, or the question asked every 2 seconds.",
    },
    MetricHelp {
        name: "ratelimit_local_keys",
        kind: MetricKind::Gauge,
        help: "Keys the in-process rate limiter holds counts for (bounded), by service.",
    },
    MetricHelp {
        name: "build_info",
        kind: MetricKind::Gauge,
        help: "Always 1; labels name the service, its version and the git commit it was built from (`unknown` when that was not known).",
    },
];

/// Installs the recorder ([`metrics_handle`]), gives it each metric's help text and sets
/// `build_info` for `service`. Call once at start; a metric is listed on `/metrics` once
/// recorded.
pub fn describe_metrics(service: &'static str, build: BuildInfo, own: &[MetricHelp]) {
    metrics_handle();
    for m in COMMON_METRICS.iter().chain(own) {
        match m.kind {
            MetricKind::Counter => metrics::describe_counter!(m.name, m.help),
            MetricKind::Gauge => metrics::describe_gauge!(m.name, m.help),
            MetricKind::Histogram => metrics::describe_histogram!(m.name, m.help),
        }
    }
    metrics::gauge!(
        "build_info",
        "service" => service,
        "version" => build.version,
        "commit" => build.commit
    )
    .set(1.0);
}
