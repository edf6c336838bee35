//! Logs and metrics, set up once per process.

use std::sync::OnceLock;
use std::time::Instant;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use poem::http::HeaderValue;
use poem::{Endpoint, IntoResponse, Middleware, Request, Response, Result};
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

/// Log output format: `pretty` for people, `json` for log pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    #[default]
    Pretty,
    /// One JSON object per event, with the request's span fields.
    Json,
}

/// Installs the global tracing subscriber; later calls (tests, the all-in-one launcher)
/// keep the first one.
pub fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr: stdout is for what the CLI commands print.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}

/// The process-wide Prometheus recorder, installed on first use.
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
        }
    }
}

/// Endpoint produced by [`RequestTelemetry`].
pub struct RequestTelemetryEndpoint<E> {
    inner: E,
    service: &'static str,
    routes: &'static [&'static str],
}

fn valid_request_id(value: &HeaderValue) -> Option<String> {
    let s = value.to_str().ok()?;
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    ok.then(|| s.to_owned())
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
        let method = req.method().to_string();
        let route: &'static str = self
            .routes
            .iter()
            .find(|r| **r == req.uri().path())
            .copied()
            .unwrap_or("other");
        // Handlers fill in the empty fields (`record`), so each request is one log line.
        let span = tracing::info_span!(
            "request",
            service = self.service,
            request_id = %request_id,
            method = %method,
            route,
            client_id = tracing::field::Empty,
            outcome = tracing::field::Empty,
            reason = tracing::field::Empty,
            kid = tracing::field::Empty,
            jti = tracing::field::Empty,
            scope = tracing::field::Empty,
            reference = tracing::field::Empty,
            brand = tracing::field::Empty,
        );
        async move {
            let mut resp = match self.inner.call(req).await {
                Ok(r) => r.into_response(),
                Err(e) => e.into_response(),
            };
            let status = resp.status().as_u16();
            let elapsed = start.elapsed();
            if let Ok(v) = HeaderValue::from_str(&request_id) {
                resp.headers_mut().insert(REQUEST_ID_HEADER, v);
            }
            let status_label = status.to_string();
            metrics::counter!("http_requests_total", "service" => self.service, "route" => route, "method" => method.clone(), "status" => status_label.clone()).increment(1);
            metrics::histogram!("http_request_duration_seconds", "service" => self.service, "route" => route, "method" => method, "status" => status_label).record(elapsed.as_secs_f64());
            tracing::info!(
                status,
                latency_ms = elapsed.as_secs_f64() * 1000.0,
                "request finished"
            );
            Ok(resp)
        }
        .instrument(span)
        .await
    }
}

/// Records the authenticated client on the current request's log line.
pub fn record_client_id(client_id: &str) {
    record("client_id", client_id);
}

/// Records a field on the current request's log line: `outcome`, `reason`, `kid`, `jti`,
/// `scope`, `reference` or `brand` (the fields [`RequestTelemetry`] declares; others are
/// ignored).
pub fn record(field: &'static str, value: &str) {
    tracing::Span::current().record(field, value);
}
