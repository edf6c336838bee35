//! Logs and metrics, set up once per process.

mod json;
mod process;

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use poem::http::{HeaderValue, Method};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response, Result};
use tracing::{Instrument, Subscriber};
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::source::TrustedProxies;

/// Log output format: `pretty` for people, `json` for log pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    #[default]
    Pretty,
    /// One JSON object per event, with the request's span fields under `span`.
    Json,
}

/// Lines a request thread may hand to the log writer before it waits for the writer: a
/// bound on memory, never a reason to drop a line.
const LOG_QUEUE_LINES: usize = 128_000;

/// How long the log writer rests after writing out what was queued. Without the rest it
/// sleeps whenever the queue is empty, and under load the next line wakes it at once: a
/// thread switch per line on cores the requests need. With it, it wakes at most a few
/// hundred times a second and writes all that came meanwhile; a line waits at most this long.
const LOG_WRITE_REST: Duration = Duration::from_millis(5);

/// The log writer thread's output: tracing-appender flushes it once the queue is empty, so
/// the rest goes there.
struct PacedWriter<W: Write>(BufWriter<W>);

impl<W: Write> Write for PacedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()?;
        std::thread::sleep(LOG_WRITE_REST);
        Ok(())
    }
}

/// Keeps the log writer going; dropping it writes out every line still queued.
pub struct LogGuard {
    _writer: Option<WorkerGuard>,
}

/// Installs the global tracing subscriber; later calls (tests, the all-in-one launcher)
/// keep the first one. Lines are formatted on the thread that logs them and written to
/// stderr by a thread of their own, many lines to a write. Hold the returned guard until the
/// process ends.
pub fn init_tracing(format: LogFormat) -> LogGuard {
    // Logs go to stderr: stdout is for what the CLI commands print.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(false)
        .thread_name("log-writer")
        .finish(PacedWriter(BufWriter::with_capacity(
            64 * 1024,
            std::io::stderr(),
        )));
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let installed = match format {
        LogFormat::Json => json_subscriber(filter, writer).try_init().is_ok(),
        LogFormat::Pretty => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer)
            .with_ansi(ansi)
            .try_init()
            .is_ok(),
    };
    LogGuard {
        _writer: installed.then_some(guard),
    }
}

/// The subscriber [`LogFormat::Json`] stands for: each line a JSON object with `timestamp`,
/// `level`, the event's fields, `target`, and, inside a request, the request span's fields
/// under `span`.
pub fn json_subscriber<W>(filter: EnvFilter, make_writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::registry()
        .with(filter)
        .with(json::JsonLines::new(make_writer))
}

/// The name of the span each request is served in; the JSON lines show its fields.
const REQUEST_SPAN: &str = "request";

/// The target of [`request_span`], which tells it from other crates' spans of that name.
const REQUEST_SPAN_TARGET: &str = module_path!();

/// The span a request is served in: every line logged while serving it carries these
/// fields, and the client's id once [`record_client_id`] names it.
pub fn request_span(
    service: &str,
    request_id: &str,
    method: &str,
    route: &str,
    source: Option<IpAddr>,
) -> tracing::Span {
    tracing::info_span!(
        target: REQUEST_SPAN_TARGET,
        REQUEST_SPAN,
        service,
        request_id,
        method,
        route,
        source = source.map(tracing::field::display),
        client_id = tracing::field::Empty,
    )
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

/// What a service binary was built from, for the `build_info` metric.
#[derive(Debug, Clone, Copy)]
pub struct BuildInfo {
    /// The crate version.
    pub version: &'static str,
    /// The short git commit, or `unknown`.
    pub commit: &'static str,
}

/// The [`BuildInfo`] of the crate it is written in: its version, and the commit its build
/// script found (`BUILD_COMMIT`).
#[macro_export]
macro_rules! build_info {
    () => {
        $crate::telemetry::BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("BUILD_COMMIT"),
        }
    };
}

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

/// Name of the request-id header, accepted from the caller or generated.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Middleware: a request id on every request and response, one log line per request
/// (method, route, status, latency, client id, request id) and the HTTP metrics.
pub struct RequestTelemetry {
    service: &'static str,
    routes: &'static [&'static str],
    proxies: TrustedProxies,
    close: CloseLine,
}

impl RequestTelemetry {
    /// `routes` are the service's paths; anything else is counted as `other` so a scan of
    /// random paths cannot blow up the metric label space. `close` writes each request's
    /// closing line, with the service's own fields.
    pub fn new(service: &'static str, routes: &'static [&'static str], close: CloseLine) -> Self {
        Self {
            service,
            routes,
            proxies: TrustedProxies::default(),
            close,
        }
    }

    /// Names the request's source from `X-Forwarded-For` when it comes through `proxies`.
    pub fn trusting(mut self, proxies: TrustedProxies) -> Self {
        self.proxies = proxies;
        self
    }
}

impl<E: Endpoint> Middleware<E> for RequestTelemetry {
    type Output = RequestTelemetryEndpoint<E>;
    fn transform(&self, ep: E) -> Self::Output {
        RequestTelemetryEndpoint {
            inner: ep,
            service: self.service,
            routes: self.routes,
            proxies: self.proxies.clone(),
            metrics: HttpMetricsCache::new(self.service),
            close: self.close,
        }
    }
}

/// Endpoint produced by [`RequestTelemetry`].
pub struct RequestTelemetryEndpoint<E> {
    inner: E,
    service: &'static str,
    routes: &'static [&'static str],
    proxies: TrustedProxies,
    metrics: HttpMetricsCache,
    close: CloseLine,
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

/// The closing line's field saying what happened: `token_issued`, `refused`, `created`...
pub const OUTCOME: &str = "outcome";

/// The closing line's field saying why a request was refused.
pub const REASON: &str = "reason";

/// The most fields a request's closing line carries, `outcome` and `reason` among them.
const FIELDS: usize = 8;

/// What a request's handlers said happened, for its closing line: values under the names
/// the service gives its fields.
#[derive(Debug, Default)]
pub struct Recorded([Option<(&'static str, String)>; FIELDS]);

impl Recorded {
    /// The value recorded under `name`, if any.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .flatten()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `value` under `name`, replacing an earlier one; past the last free place, a new
    /// name is dropped (a service names fewer fields than there are places).
    fn set(&mut self, name: &'static str, value: &str) {
        let place = self
            .0
            .iter_mut()
            .find(|slot| slot.as_ref().is_none_or(|(n, _)| *n == name));
        if let Some(place) = place {
            *place = Some((name, value.to_owned()));
        }
    }
}

/// A request's closing line, for the service's [`CloseLine`] to write.
#[derive(Debug)]
pub struct Closing<'a> {
    /// The answer's status.
    pub status: u16,
    /// How long the answer took, in milliseconds.
    pub latency_ms: f64,
    /// What the handlers recorded.
    pub fields: &'a Recorded,
}

/// How a service writes its requests' closing lines, inside the request's span: made by
/// [`closing_line!`](crate::closing_line) with the names of the service's own fields.
pub type CloseLine = fn(&Closing<'_>);

/// A [`CloseLine`] writing `status`, `latency_ms`, `outcome`, `reason` and the fields named
/// (constant `&str` expressions, the same the service records under), where recorded.
#[macro_export]
macro_rules! closing_line {
    ($($name:expr),* $(,)?) => {{
        fn close(line: &$crate::telemetry::Closing<'_>) {
            ::tracing::info!(
                status = line.status,
                latency_ms = line.latency_ms,
                { $crate::telemetry::OUTCOME } = line.fields.get($crate::telemetry::OUTCOME),
                { $crate::telemetry::REASON } = line.fields.get($crate::telemetry::REASON),
                $({ $name } = line.fields.get($name),)*
                "request finished"
            )
        }
        close as $crate::telemetry::CloseLine
    }};
}

tokio::task_local! {
    // The closing line's fields wait here rather than on the span: a span's fields are
    // copied into every line of the request, and these belong on the last one only.
    static RECORDED: RefCell<Recorded>;
}

/// The outcome of an answer a client asked for on purpose (a sandbox's rehearsed failure):
/// logged as any other, and left out of the HTTP metrics, whose 5xx the alerts read as
/// faults.
pub const REHEARSED: &str = "rehearsed";

/// Puts a field on the current request's closing log line, under the name the service
/// gives it (and names to its [`closing_line!`](crate::closing_line)); outside a request,
/// does nothing.
pub fn record(name: &'static str, value: &str) {
    let _ = RECORDED.try_with(|f| f.borrow_mut().set(name, value));
}

/// Names the authenticated client on the current request's span, so every line the request
/// logs from then on carries it.
pub fn record_client_id(client_id: &str) {
    tracing::Span::current().record("client_id", client_id);
}

/// The route `path` is served by, `other` when none. A path that is a route itself (the busy
/// ones are) is found without splitting every route; as in the router, a fixed route wins
/// over one with a parameter.
fn route_of(routes: &[&'static str], path: &str) -> &'static str {
    routes
        .iter()
        .find(|r| **r == path)
        .or_else(|| routes.iter().find(|r| route_matches(r, path)))
        .copied()
        .unwrap_or("other")
}

/// Whether `path` is one of `route`'s paths: the same segments, where a `{name}` segment
/// stands for any one non-empty segment. The route, not the path, labels the metrics, so
/// references in paths do not each make a time series.
fn route_matches(route: &str, path: &str) -> bool {
    let mut path_segments = path.split('/');
    for expected in route.split('/') {
        match path_segments.next() {
            Some(seg) if expected.starts_with('{') && expected.ends_with('}') => {
                if seg.is_empty() {
                    return false;
                }
            }
            Some(seg) if seg == expected => {}
            _ => return false,
        }
    }
    path_segments.next().is_none()
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
        let route = route_of(self.routes, req.uri().path());
        let source = self.proxies.source_of(&req);
        let span = request_span(self.service, &request_id, method, route, source);
        // The layers below, boxed: the span, the task-local and this future itself each move
        // what they wrap, and copying a request's whole future that many times showed as
        // CPU time under load.
        let served = async {
            match Box::pin(self.inner.call(req)).await {
                Ok(r) => r.into_response(),
                Err(e) => e.into_response(),
            }
        };
        let (mut resp, fields) = RECORDED
            .scope(RefCell::default(), async {
                let resp = served.instrument(span.clone()).await;
                (resp, RECORDED.with(|f| f.take()))
            })
            .await;
        let status = resp.status().as_u16();
        let elapsed = start.elapsed();
        if let Ok(v) = HeaderValue::from_str(&request_id) {
            resp.headers_mut().insert(REQUEST_ID_HEADER, v);
        }
        if fields.get(OUTCOME) != Some(REHEARSED) {
            self.metrics.record((route, method, status), elapsed);
        }
        let closing = Closing {
            status,
            latency_ms: elapsed.as_secs_f64() * 1000.0,
            fields: &fields,
        };
        span.in_scope(|| (self.close)(&closing));
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use poem::{EndpointExt, handler, test::TestClient};

    use super::*;

    #[test]
    fn a_route_with_a_parameter_matches_one_segment_in_its_place() {
        let route = "/partners/external/cases/{reference}";
        assert!(route_matches(
            route,
            "/partners/external/cases/418290357116"
        ));
        for path in [
            "/partners/external/cases/",
            "/partners/external/cases",
            "/partners/external/cases/1/events",
            "/partners/external/other/1",
        ] {
            assert!(!route_matches(route, path), "{path}");
        }
        assert!(route_matches("/healthz", "/healthz"));
        assert!(!route_matches("/healthz", "/healthz/"));
    }

    #[test]
    fn a_path_is_labelled_with_its_route_a_fixed_one_first() {
        let routes = ["/cases/{reference}", "/cases/list", "/healthz"];
        assert_eq!(route_of(&routes, "/cases/list"), "/cases/list");
        assert_eq!(
            route_of(&routes, "/cases/418290357116"),
            "/cases/{reference}"
        );
        assert_eq!(route_of(&routes, "/healthz"), "/healthz");
        assert_eq!(route_of(&routes, "/admin"), "other");
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        /// Logs this thread's lines here, through the subscriber `LOG_FORMAT=json` installs,
        /// until the guard drops.
        fn json(&self) -> tracing::subscriber::DefaultGuard {
            let writer = self.clone();
            tracing::subscriber::set_default(json_subscriber(EnvFilter::new("info"), move || {
                writer.clone()
            }))
        }

        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }

        /// Each line parsed, which fails the test unless every line is one JSON object.
        fn lines(&self) -> Vec<serde_json::Value> {
            self.text()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .collect()
        }
    }

    fn a_request_span() -> tracing::Span {
        request_span("svc", "req-1", "POST", "/cases", "10.1.2.3".parse().ok())
    }

    /// A field of the service's own, as a service names one.
    const NOTE: &str = "note";

    #[handler]
    fn refuse() -> &'static str {
        record_client_id("client-7");
        tracing::warn!("something the operator should see");
        record(OUTCOME, "refused");
        record(NOTE, "first");
        record(NOTE, "noted");
        "done"
    }

    #[tokio::test]
    async fn every_line_of_a_request_carries_its_span_and_the_last_its_outcome() {
        let captured = Captured::default();
        let _default = captured.json();
        let app = refuse.with(RequestTelemetry::new(
            "svc",
            &["/"],
            crate::closing_line!(NOTE),
        ));
        let resp = TestClient::new(app)
            .get("/")
            .header(REQUEST_ID_HEADER, "req-1")
            .send()
            .await;
        resp.assert_status_is_ok();
        resp.assert_header(REQUEST_ID_HEADER, "req-1");
        let lines = captured.lines();
        assert_eq!(lines.len(), 2, "{}", captured.text());
        for line in &lines {
            assert_eq!(line["span"]["name"], "request", "{line}");
            assert_eq!(line["span"]["request_id"], "req-1", "{line}");
            assert_eq!(line["span"]["service"], "svc");
            assert_eq!(line["span"]["route"], "/");
            assert_eq!(line["span"]["client_id"], "client-7");
        }
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[1]["message"], "request finished");
        assert_eq!(lines[1]["outcome"], "refused");
        assert_eq!(lines[1]["note"], "noted");
        assert_eq!(lines[1]["status"], 200);
        assert!(lines[1].get("reason").is_none(), "{}", lines[1]);
    }

    #[test]
    fn a_field_recorded_again_replaces_its_value_and_one_too_many_is_dropped() {
        const NAMES: [&str; FIELDS + 1] = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        let mut recorded = Recorded::default();
        for name in NAMES {
            recorded.set(name, name);
        }
        recorded.set("a", "again");
        assert_eq!(recorded.get("a"), Some("again"));
        assert_eq!(recorded.get("h"), Some("h"));
        assert_eq!(recorded.get("i"), None);
    }

    #[handler]
    fn rehearse() -> poem::http::StatusCode {
        record(OUTCOME, REHEARSED);
        poem::http::StatusCode::INTERNAL_SERVER_ERROR
    }

    /// Label sets the endpoint has counted requests under.
    fn counted<E>(ep: &RequestTelemetryEndpoint<E>) -> usize {
        ep.metrics
            .handles
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    #[tokio::test]
    async fn a_rehearsed_answer_is_logged_but_left_out_of_the_http_metrics() {
        let captured = Captured::default();
        let _default = captured.json();
        let rehearsed =
            RequestTelemetry::new("svc", &["/"], crate::closing_line!()).transform(rehearse);
        let resp = rehearsed.call(Request::default()).await.expect("answered");
        assert_eq!(resp.status(), 500);
        assert_eq!(counted(&rehearsed), 0, "a rehearsal was counted");
        let last = captured.lines().pop().expect("the closing line");
        assert_eq!(last["outcome"], REHEARSED, "{last}");
        assert_eq!(last["status"], 500);
        // Any other answer is counted.
        let real = RequestTelemetry::new("svc", &["/"], crate::closing_line!()).transform(refuse);
        real.call(Request::default()).await.expect("answered");
        assert_eq!(counted(&real), 1);
    }

    #[test]
    fn odd_values_come_out_of_the_json_lines_as_they_went_in() {
        let captured = Captured::default();
        let _default = captured.json();
        let service = "svc \"quoted\" \\ back";
        let request_id = "line\nbreak\r\ttab";
        let route = "/ünï/日本/🦀/\u{0}\u{1f}\u{7f}\u{2028}";
        let client_id = "client \"7\"\n{\"json\": true}";
        let note = "</script> \u{1b}[31m \u{feff}";
        let message = "said \"hi\"\nthen left: ✓";
        let span = request_span(service, request_id, "GET", route, None);
        span.in_scope(|| {
            record_client_id(client_id);
            tracing::info!(
                note,
                debugged = ?"a\"b",
                "odd \"key\"" = 1,
                negative = -2,
                ratio = 0.25,
                flag = true,
                "{message}"
            );
        });
        let lines = captured.lines();
        assert_eq!(lines.len(), 1, "{}", captured.text());
        let line = &lines[0];
        assert_eq!(line["message"], message);
        assert_eq!(line["note"], note);
        assert_eq!(line["debugged"], "\"a\\\"b\"");
        assert_eq!(line["odd \"key\""], 1);
        assert_eq!(line["negative"], -2);
        assert_eq!(line["ratio"], 0.25);
        assert_eq!(line["flag"], true);
        assert_eq!(line["span"]["service"], service);
        assert_eq!(line["span"]["request_id"], request_id);
        assert_eq!(line["span"]["route"], route);
        assert_eq!(line["span"]["client_id"], client_id);
        assert!(line["span"].get("source").is_none(), "{line}");
    }

    #[test]
    fn a_line_outside_any_request_has_no_span() {
        let captured = Captured::default();
        let _default = captured.json();
        tracing::info!(answer = 42, "outside");
        tracing::info_span!("background", job = "sweep").in_scope(|| {
            tracing::warn!("in a span that is not a request");
        });
        let lines = captured.lines();
        assert_eq!(lines.len(), 2, "{}", captured.text());
        let keys: Vec<&str> = lines[0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            ["timestamp", "level", "message", "answer", "target"],
            "{}",
            lines[0]
        );
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["target"], module_path!());
        assert_eq!(lines[0]["message"], "outside");
        assert!(lines[0]["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(lines[1].get("span").is_none(), "{}", lines[1]);
    }

    #[test]
    fn a_record_from_the_log_crate_keeps_its_own_target() {
        let captured = Captured::default();
        let _default = captured.json();
        // What tracing-log makes of a `log` record, which this crate's tests cannot emit.
        tracing::info!(target: "log", { log.target = "sqlx::query" }, "slow statement");
        let lines = captured.lines();
        assert_eq!(lines[0]["target"], "sqlx::query", "{}", lines[0]);
    }

    #[test]
    fn the_client_id_is_on_every_line_after_it_is_recorded_and_only_once() {
        let captured = Captured::default();
        let _default = captured.json();
        a_request_span().in_scope(|| {
            tracing::info!("before");
            record_client_id("client-1");
            tracing::info!("after");
            record_client_id("client-2");
            tracing::info!("recorded again");
        });
        let lines = captured.lines();
        assert_eq!(lines.len(), 3, "{}", captured.text());
        assert!(lines[0]["span"].get("client_id").is_none(), "{}", lines[0]);
        assert_eq!(lines[1]["span"]["client_id"], "client-1");
        assert_eq!(lines[2]["span"]["client_id"], "client-2");
        for line in &lines {
            assert_eq!(line["span"]["request_id"], "req-1", "{line}");
            assert_eq!(line["span"]["source"], "10.1.2.3");
        }
        let last = captured.text().lines().last().unwrap().to_owned();
        assert_eq!(last.matches("\"client_id\"").count(), 1, "{last}");
    }

    #[test]
    fn a_span_inside_the_request_keeps_the_request_fields_on_its_lines() {
        let captured = Captured::default();
        let _default = captured.json();
        a_request_span().in_scope(|| {
            record_client_id("client-1");
            tracing::info_span!("query", table = "cases").in_scope(|| {
                // A library's span of the same name is not the request's.
                tracing::info_span!("request", url = "http://jwks").in_scope(|| {
                    tracing::info!("inside");
                });
            });
        });
        let lines = captured.lines();
        assert_eq!(lines.len(), 1, "{}", captured.text());
        assert_eq!(
            lines[0]["span"],
            serde_json::json!({
                "name": "request",
                "service": "svc",
                "request_id": "req-1",
                "method": "POST",
                "route": "/cases",
                "source": "10.1.2.3",
                "client_id": "client-1",
            })
        );
    }

    #[test]
    fn the_json_lines_hold_what_tracing_subscribers_json_format_wrote_but_the_time() {
        fn log() {
            tracing::info!("before any request");
            a_request_span().in_scope(|| {
                record_client_id("client-1");
                tracing::warn!(count = 3u64, ratio = 0.5, flag = false, shown = %"x", "mid");
                tracing::info!(
                    status = 201,
                    outcome = Some("created"),
                    reason = None::<&str>,
                    "request finished"
                );
            });
        }
        let ours = Captured::default();
        {
            let _default = ours.json();
            log();
        }
        let theirs = Captured::default();
        {
            let writer = theirs.clone();
            let subscriber = tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .with_writer(move || writer.clone())
                .finish();
            let _default = tracing::subscriber::set_default(subscriber);
            log();
        }
        let without_time = |mut line: serde_json::Value| {
            line.as_object_mut().unwrap().remove("timestamp").unwrap();
            line
        };
        let ours: Vec<_> = ours.lines().into_iter().map(without_time).collect();
        let theirs: Vec<_> = theirs.lines().into_iter().map(without_time).collect();
        assert_eq!(ours.len(), 3);
        assert_eq!(ours, theirs);
    }
}
