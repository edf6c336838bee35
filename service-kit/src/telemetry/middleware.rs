//! The per-request middleware: a request id, the request's span, its closing log line with
//! the fields its handlers recorded, and the HTTP metrics.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use poem::http::{HeaderValue, Method};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response, Result};
use tracing::Instrument;

use super::logs::request_span;
use crate::source::TrustedProxies;

/// Name of the request-id header, accepted from the caller or generated.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Middleware: a request id on every request and response, one log line per request
/// (method, route, status, latency, client id, request id) and the HTTP metrics.
pub struct RequestTelemetry {
    service: &'static str,
    routes: Routes,
    proxies: TrustedProxies,
    close: CloseLine,
}

/// The paths a service serves, as its document writes them (`/cases/{reference}`): the
/// route labels of its requests' metrics. Anything else is counted as `other`, so a scan of
/// random paths cannot blow up the label space, and a reference in a path never becomes a
/// label.
#[derive(Debug, Clone)]
pub struct Routes(Arc<[String]>);

/// The label of a path no route serves.
pub const OTHER_ROUTE: &str = "other";

impl Routes {
    /// The routes `paths` names, each once.
    pub fn new<P: Into<String>>(paths: impl IntoIterator<Item = P>) -> Self {
        let mut routes: Vec<String> = Vec::new();
        for path in paths.into_iter().map(Into::into) {
            if !routes.contains(&path) {
                routes.push(path);
            }
        }
        // As in the router, a fixed segment wins over a parameter: fewer parameters first.
        routes.sort_by_key(|r| r.split('/').filter(|s| is_parameter(s)).count());
        Self(routes.into())
    }

    /// The routes, as given.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// The place of the route `path` is served by, if any. A path that is a route itself
    /// (the busy ones are) is found without splitting every route.
    fn of(&self, path: &str) -> Option<usize> {
        self.0
            .iter()
            .position(|r| r == path)
            .or_else(|| self.0.iter().position(|r| route_matches(r, path)))
    }

    /// The label of the route at `place` ([`Routes::of`]), `other` for none.
    fn label(&self, place: Option<usize>) -> &str {
        place
            .and_then(|i| self.0.get(i))
            .map_or(OTHER_ROUTE, String::as_str)
    }
}

impl RequestTelemetry {
    /// Telemetry for `service`, whose requests are labelled by `routes`. `close` writes each
    /// request's closing line, with the service's own fields.
    pub fn new(service: &'static str, routes: Routes, close: CloseLine) -> Self {
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
            routes: self.routes.clone(),
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
    routes: Routes,
    proxies: TrustedProxies,
    metrics: HttpMetricsCache,
    close: CloseLine,
}

/// The HTTP metrics of one route, method and status.
struct HttpMetrics {
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

/// Each label set's handles, registered once rather than on every request; the label sets
/// are bounded, so this stays small whatever clients send.
struct HttpMetricsCache {
    service: &'static str,
    handles: RwLock<HashMap<HttpLabels, HttpMetrics>>,
}

/// Route (its place in [`Routes`], none for `other`), method and status.
type HttpLabels = (Option<usize>, &'static str, u16);

impl HttpMetricsCache {
    fn new(service: &'static str) -> Self {
        Self {
            service,
            handles: RwLock::default(),
        }
    }

    /// Counts one request and its duration under its labels; `route` is the label of the
    /// route's place.
    fn record(&self, labels: HttpLabels, route: &str, elapsed: Duration) {
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
        let (_, method, status) = labels;
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
        fn close(line: &$crate::telemetry::middleware::Closing<'_>) {
            ::tracing::info!(
                status = line.status,
                latency_ms = line.latency_ms,
                { $crate::telemetry::middleware::OUTCOME } = line.fields.get($crate::telemetry::middleware::OUTCOME),
                { $crate::telemetry::middleware::REASON } = line.fields.get($crate::telemetry::middleware::REASON),
                $({ $name } = line.fields.get($name),)*
                "request finished"
            )
        }
        close as $crate::telemetry::middleware::CloseLine
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

/// Whether `path` is one of `route`'s paths: the same segments, where a `{name}` segment
/// stands for any one non-empty segment. The route, not the path, labels the metrics, so
/// references in paths do not each make a time series.
fn route_matches(route: &str, path: &str) -> bool {
    let mut path_segments = path.split('/');
    for expected in route.split('/') {
        match path_segments.next() {
            Some(seg) if is_parameter(expected) => {
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

/// Whether a route's segment is a parameter (`{reference}`).
fn is_parameter(segment: &str) -> bool {
    segment.starts_with('{') && segment.ends_with('}')
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
        let place = self.routes.of(req.uri().path());
        let route = self.routes.label(place);
        let source = self.proxies.source_of(&req);
        let span = request_span(self.service, &request_id, method, route, source);
        // Boxed, so that the layers below move a pointer rather than the request's future.
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
            self.metrics.record((place, method, status), route, elapsed);
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
    use poem::{EndpointExt, handler, test::TestClient};

    use super::*;
    use crate::telemetry::captured::Captured;
    use crate::telemetry::logs::record_client_id;

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
        let routes = Routes::new([
            "/cases/{reference}",
            "/cases/{reference}/{part}",
            "/cases/list",
            "/cases/{reference}/events",
            "/healthz",
            "/healthz",
        ]);
        let label = |path| routes.label(routes.of(path));
        assert_eq!(label("/cases/list"), "/cases/list");
        assert_eq!(label("/cases/418290357116"), "/cases/{reference}");
        assert_eq!(
            label("/cases/418290357116/events"),
            "/cases/{reference}/events"
        );
        assert_eq!(
            label("/cases/418290357116/notes"),
            "/cases/{reference}/{part}"
        );
        assert_eq!(label("/healthz"), "/healthz");
        assert_eq!(label("/admin"), "other");
        assert_eq!(routes.iter().filter(|r| *r == "/healthz").count(), 1);
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
            Routes::new(["/"]),
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
        let rehearsed = RequestTelemetry::new("svc", Routes::new(["/"]), crate::closing_line!())
            .transform(rehearse);
        let resp = rehearsed.call(Request::default()).await.expect("answered");
        assert_eq!(resp.status(), 500);
        assert_eq!(counted(&rehearsed), 0, "a rehearsal was counted");
        let last = captured.lines().pop().expect("the closing line");
        assert_eq!(last["outcome"], REHEARSED, "{last}");
        assert_eq!(last["status"], 500);
        // Any other answer is counted.
        let real = RequestTelemetry::new("svc", Routes::new(["/"]), crate::closing_line!())
            .transform(refuse);
        real.call(Request::default()).await.expect("answered");
        assert_eq!(counted(&real), 1);
    }
}
