//! Logs and metrics, set up once per process.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use poem::http::{HeaderValue, Method};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response, Result};
use tracing_subscriber::EnvFilter;

use crate::log_batch::{BatchedWriter, FlushOnDrop};

/// Log output format: `pretty` for people, `json` for log pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    #[default]
    Pretty,
    /// One JSON object per event, with the request's span fields.
    Json,
}

/// At most this long between a log line and its write: lines are written in batches (see
/// [`crate::log_batch`]).
pub const LOG_FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Installs the global tracing subscriber; later calls (tests, the all-in-one launcher)
/// keep the first one. Hold the returned guard until the process ends: dropping it writes
/// out the lines still waiting.
pub fn init_tracing(format: LogFormat) -> FlushOnDrop {
    static WRITER: OnceLock<BatchedWriter<std::io::Stderr>> = OnceLock::new();
    let mut first = false;
    let writer = WRITER.get_or_init(|| {
        first = true;
        BatchedWriter::new(std::io::stderr(), LOG_FLUSH_INTERVAL)
    });
    if first {
        // The panic message is written straight to stderr: the lines that led to it first.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            writer.try_flush();
            previous(info);
        }));
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr: stdout is for what the CLI commands print.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer.clone())
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
    FlushOnDrop(writer)
}

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

/// Name of the request-id header, accepted from the caller or generated.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Middleware: a request id on every request and response, one log line per request
/// (method, route, status, latency, client id, request id) and the HTTP metrics.
pub struct RequestTelemetry {
    service: &'static str,
    routes: &'static [&'static str],
}

impl RequestTelemetry {
    /// `routes` are the service's paths; anything else is counted as `other` so a scan of
    /// random paths cannot blow up the metric label space.
    pub fn new(service: &'static str, routes: &'static [&'static str]) -> Self {
        Self { service, routes }
    }
}

impl<E: Endpoint> Middleware<E> for RequestTelemetry {
    type Output = RequestTelemetryEndpoint<E>;
    fn transform(&self, ep: E) -> Self::Output {
        RequestTelemetryEndpoint {
            inner: ep,
            service: self.service,
            routes: self.routes,
            metrics: HttpMetricsCache::new(self.service),
        }
    }
}

/// Endpoint produced by [`RequestTelemetry`].
pub struct RequestTelemetryEndpoint<E> {
    inner: E,
    service: &'static str,
    routes: &'static [&'static str],
    metrics: HttpMetricsCache,
}

/// The HTTP metrics of one route, method and status.
struct HttpMetrics {
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

/// Each label set's handles, registered on first use: registering builds the labels and
/// looks them up in the recorder, which on every request would cost several allocations.
/// Routes and methods are bounded label sets, and statuses are three digits, so this stays
/// small whatever clients send.
struct HttpMetricsCache {
    service: &'static str,
    handles: RwLock<HashMap<HttpLabels, HttpMetrics>>,
}

/// Route, method and status.
type HttpLabels = (&'static str, &'static str, u16);

impl HttpMetricsCache {
    fn new(service: &'static str) -> Self {
        Self {
            service,
            handles: RwLock::default(),
        }
    }

    /// Counts one request and its duration under its labels.
    fn record(&self, labels: HttpLabels, elapsed: Duration) {
        let count = |m: &HttpMetrics| {
            m.requests.increment(1);
            m.duration.record(elapsed.as_secs_f64());
        };
        if let Some(found) = self
            .handles
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&labels)
        {
            return count(found);
        }
        let (route, method, status) = labels;
        let named = [
            ("service", self.service.to_owned()),
            ("route", route.to_owned()),
            ("method", method.to_owned()),
            ("status", status.to_string()),
        ];
        let mut handles = self.handles.write().unwrap_or_else(|e| e.into_inner());
        count(handles.entry(labels).or_insert_with(|| HttpMetrics {
            requests: metrics::counter!("http_requests_total", &named),
            duration: metrics::histogram!("http_request_duration_seconds", &named),
        }));
    }
}

/// The method as a metric label: any method outside the standard ones is `other`, so
/// that made-up methods cannot grow the label space.
fn method_label(method: &Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "PATCH" => "PATCH",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

fn valid_request_id(value: &HeaderValue) -> Option<String> {
    let s = value.to_str().ok()?;
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    ok.then(|| s.to_owned())
}

/// A field a handler can put on its request's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The authenticated client.
    ClientId,
    /// What happened: `token_issued`, `refused`, `created`, ...
    Outcome,
    /// Why a request was refused.
    Reason,
    /// The key an issued token was signed with.
    Kid,
    /// An issued token's `jti`.
    Jti,
    /// An issued token's scopes.
    Scope,
    /// The case reference.
    Reference,
    /// The case's brand.
    Brand,
}

const FIELDS: usize = 8;

/// What handlers recorded for the request being served.
#[derive(Default)]
struct RequestFields {
    request_id: String,
    values: [Option<String>; FIELDS],
}

tokio::task_local! {
    static REQUEST: RefCell<RequestFields>;
}

/// Records a field on the current request's log line; outside a request, does nothing.
pub fn record(field: Field, value: &str) {
    let _ = REQUEST.try_with(|r| r.borrow_mut().values[field as usize] = Some(value.to_owned()));
}

/// Records the authenticated client on the current request's log line.
pub fn record_client_id(client_id: &str) {
    record(Field::ClientId, client_id);
}

/// The current request's id, for an error logged on its own line; empty outside a request.
pub fn request_id() -> String {
    REQUEST
        .try_with(|r| r.borrow().request_id.clone())
        .unwrap_or_default()
}

impl<E: Endpoint> Endpoint for RequestTelemetryEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> Result<Self::Output> {
        let start = Instant::now();
        let request_id = req
            .headers()
            .get(REQUEST_ID_HEADER)
            .and_then(valid_request_id)
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let method = method_label(req.method());
        let route: &'static str = self
            .routes
            .iter()
            .find(|r| **r == req.uri().path())
            .copied()
            .unwrap_or("other");
        // The fields live in a task-local rather than a tracing span: a span with fields
        // recorded later costs several times the one event written at the end.
        let fields = RefCell::new(RequestFields {
            request_id,
            values: Default::default(),
        });
        REQUEST
            .scope(fields, async move {
                let mut resp = match self.inner.call(req).await {
                    Ok(r) => r.into_response(),
                    Err(e) => e.into_response(),
                };
                let status = resp.status().as_u16();
                let elapsed = start.elapsed();
                let RequestFields { request_id, values } = REQUEST.with(|r| r.take());
                if let Ok(v) = HeaderValue::from_str(&request_id) {
                    resp.headers_mut().insert(REQUEST_ID_HEADER, v);
                }
                self.metrics.record((route, method, status), elapsed);
                let [
                    client_id,
                    outcome,
                    reason,
                    kid,
                    jti,
                    scope,
                    reference,
                    brand,
                ] = values.each_ref().map(Option::as_deref);
                tracing::info!(
                    service = self.service,
                    request_id,
                    method,
                    route,
                    status,
                    latency_ms = elapsed.as_secs_f64() * 1000.0,
                    client_id,
                    outcome,
                    reason,
                    kid,
                    jti,
                    scope,
                    reference,
                    brand,
                    "request finished"
                );
                Ok(resp)
            })
            .await
    }
}
