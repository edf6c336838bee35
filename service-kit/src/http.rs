//! HTTP plumbing both services share: shutdown signals and the operational endpoints.

use std::time::Duration;

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use poem::endpoint::{DynEndpoint, ToDynEndpoint, make_sync};
use poem::http::StatusCode;
use poem::http::uri::Scheme;
use poem::web::{Html, LocalAddr, RemoteAddr};
use poem::{Endpoint, EndpointExt, IntoEndpoint, IntoResponse, Response, Route, get, handler};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::openapi::ApiDocuments;
use crate::telemetry::{LogFormat, Routes};

/// How long in-flight requests may take to finish after a shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received: finishing in-flight requests");
}

/// `GET /healthz`: the process is up and answering, and the deployment profile it runs
/// (`standard` or `fapi2`), so a load balancer's or an operator's look tells them apart.
pub fn healthz(profile: &'static str) -> impl Endpoint<Output = Response> + 'static {
    make_sync(move |_| {
        (
            StatusCode::OK,
            poem::web::Json(serde_json::json!({"status": "ok", "profile": profile})),
        )
            .into_response()
    })
}

/// `GET /metrics`: every metric of this process, in the Prometheus text format.
#[handler]
pub fn metrics() -> Response {
    crate::telemetry::render_metrics()
        .with_content_type("text/plain; version=0.0.4")
        .into_response()
}

/// One line of `/readyz`: a dependency, and whether it answers now.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// Its name in the body's `checks`.
    pub name: &'static str,
    /// Whether it answers.
    pub ok: bool,
    /// Whether nothing can be served without it: then its failure makes the service not
    /// ready (503); otherwise the service serves what does not need it, and says it is
    /// `degraded` (200).
    pub required: bool,
}

impl Check {
    /// A dependency nothing can be served without.
    pub fn required(name: &'static str, ok: bool) -> Self {
        Self {
            name,
            ok,
            required: true,
        }
    }

    /// A dependency only some requests need.
    pub fn partial(name: &'static str, ok: bool) -> Self {
        Self {
            name,
            ok,
            required: false,
        }
    }
}

/// The body of `/readyz`: 200 when every check passed (`ready`), or when only checks that
/// some requests need failed (`degraded`); 503 (`not_ready`) when a required one failed.
/// Every check is listed, `ok` or `failing`, with the deployment profile, as `/healthz` has it.
pub fn readiness(checks: &[Check], profile: &'static str) -> Response {
    readiness_with_warnings(checks, &[], profile)
}

/// [`readiness`] with `warnings`: what an operator must hear about though the service can
/// serve (so they change neither the status nor the answer), each by a name and a sentence,
/// under `warnings`.
pub fn readiness_with_warnings(
    checks: &[Check],
    warnings: &[(&'static str, String)],
    profile: &'static str,
) -> Response {
    let ready = checks.iter().all(|c| c.ok || !c.required);
    let status = match (ready, checks.iter().all(|c| c.ok)) {
        (true, true) => "ready",
        (true, false) => "degraded",
        (false, _) => "not_ready",
    };
    let mut body = serde_json::json!({
        "status": status,
        "profile": profile,
        "checks": checks.iter().map(|c| (c.name.to_string(), serde_json::Value::from(if c.ok {"ok"} else {"failing"}))).collect::<serde_json::Map<_, _>>(),
    });
    if !warnings.is_empty() {
        body["warnings"] = warnings
            .iter()
            .map(|(k, text)| (k.to_string(), serde_json::Value::from(text.as_str())))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, poem::web::Json(body)).into_response()
}

/// A service's server: built from its settings with its sockets bound, then served. What
/// `serve` runs, and what tests and the launcher start on port 0.
pub trait Server: Sized + Send + 'static {
    /// The settings it is built from.
    type Config: Send + 'static;

    /// The log format its settings ask for.
    fn log_format(config: &Self::Config) -> LogFormat;

    /// Binds its sockets and readies what its requests share.
    fn build(config: Self::Config) -> impl Future<Output = anyhow::Result<Self>> + Send;

    /// Its sockets, as bound.
    fn listeners(&self) -> &Listeners;

    /// Serves until `shutdown` resolves, then finishes in-flight requests (bounded) and
    /// closes the database pool.
    fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// The port actually bound (useful with port 0).
    fn port(&self) -> u16 {
        self.listeners().port()
    }

    /// The admin listener's port, when one is configured.
    fn admin_port(&self) -> Option<u16> {
        self.listeners().admin_port()
    }

    /// Serves until Ctrl-C or SIGTERM.
    fn run_until_stopped(self) -> impl Future<Output = anyhow::Result<()>> + Send {
        self.run_until(shutdown_signal())
    }

    /// What `serve` runs: logs as configured (kept until the server stops), the server
    /// built, and served until Ctrl-C or SIGTERM.
    fn serve(config: Self::Config) -> impl Future<Output = anyhow::Result<()>> + Send {
        async move {
            let _logs = crate::telemetry::init_tracing(Self::log_format(&config));
            Self::build(config).await?.run_until_stopped().await
        }
    }
}

/// A service's listening sockets, bound before it serves (so a port in use fails the start,
/// and port 0 is known): its own, and the admin one for `/metrics` when configured.
pub struct Listeners {
    service: (TcpListener, u16),
    admin: Option<(TcpListener, u16)>,
}

impl Listeners {
    /// Binds `bind` and, when given, `admin_bind`.
    pub async fn bind(bind: &str, admin_bind: Option<&str>) -> anyhow::Result<Self> {
        let service = bind_one(bind).await?;
        let admin = match admin_bind {
            Some(addr) => Some(bind_one(addr).await?),
            None => None,
        };
        Ok(Self { service, admin })
    }

    /// The service's port, as bound.
    pub fn port(&self) -> u16 {
        self.service.1
    }

    /// The admin listener's port, when one is configured.
    pub fn admin_port(&self) -> Option<u16> {
        self.admin.as_ref().map(|(_, port)| *port)
    }

    /// Whether the service's own routes serve `/metrics`: they do unless an admin listener
    /// does ([`service_routes`]' `with_metrics`).
    pub fn metrics_on_service(&self) -> bool {
        self.admin.is_none()
    }

    /// Serves `app` until `shutdown` resolves, and `admin` (made by [`admin_routes`]) on the
    /// admin listener meanwhile; the admin listener has nothing to finish and stops with it.
    pub async fn serve(
        self,
        app: impl Endpoint + 'static,
        admin: impl Endpoint + 'static,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let mut admin_task = Background::default();
        if let Some((listener, port)) = self.admin {
            tracing::info!(port, "admin listener (metrics) up");
            admin_task.spawn(serve(listener, admin, std::future::pending()));
        }
        serve(self.service.0, app, shutdown).await
    }
}

async fn bind_one(addr: &str) -> anyhow::Result<(TcpListener, u16)> {
    use anyhow::Context;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let port = listener.local_addr()?.port();
    Ok((listener, port))
}

/// The tasks a server runs beside its requests (refreshers, workers, gauges): they stop,
/// aborted, when this is dropped, so none outlives the server however it ends.
#[derive(Default)]
pub struct Background(Vec<tokio::task::AbortHandle>);

impl Background {
    /// Runs `task` until this is dropped (or it ends by itself).
    pub fn spawn<F>(&mut self, task: F)
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.push(tokio::spawn(task).abort_handle());
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The service's OpenAPI document.
pub const OPENAPI_PATH: &str = "/openapi.json";
/// The service's docs page.
pub const DOCS_PATH: &str = "/docs";
/// Whether the process is up ([`healthz`]).
pub const HEALTHZ_PATH: &str = "/healthz";
/// Whether the service can serve now (each service's readiness handler).
pub const READYZ_PATH: &str = "/readyz";
/// The metrics ([`metrics`]).
pub const METRICS_PATH: &str = "/metrics";

/// The paths [`service_routes`] serves beside the API, every one with `GET` only; the
/// admin listener's ([`admin_routes`]) are among them.
pub const OPERATIONAL_PATHS: &[&str] = &[
    OPENAPI_PATH,
    DOCS_PATH,
    HEALTHZ_PATH,
    READYZ_PATH,
    METRICS_PATH,
];

/// Every path a service serves through [`service_routes`]: its document's and the
/// operational ones. The metrics' route labels are these, so they follow the document
/// rather than a list kept beside it.
pub fn served_routes(documents: &ApiDocuments) -> Routes {
    let doc: serde_json::Value = serde_json::from_str(&documents.json).unwrap_or_default();
    let documented = doc
        .get("paths")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flat_map(|paths| paths.keys().cloned());
    Routes::new(documented.chain(OPERATIONAL_PATHS.iter().map(|p| (*p).to_owned())))
}

/// A service's routes: its API, `/openapi.json`, `/docs`, `/healthz`, `/readyz`, and
/// `/metrics` unless it is served on an admin listener of its own ([`admin_routes`]); a 405
/// names the methods the path has in `Allow`.
pub fn service_routes<A, R>(
    api: A,
    documents: ApiDocuments,
    readyz: R,
    with_metrics: bool,
    profile: &'static str,
) -> impl Endpoint + 'static
where
    A: IntoEndpoint,
    A::Endpoint: 'static,
    R: Endpoint + 'static,
{
    let ApiDocuments { json, html } = documents;
    let allow = crate::openapi::AllowHeader::new(
        &serde_json::from_str(&json).unwrap_or_default(),
        OPERATIONAL_PATHS,
    );
    let spec = make_sync(move |_| {
        Response::builder()
            .content_type("application/json")
            .body(json.clone())
    });
    let docs = make_sync(move |_| Html(html.clone()));
    let routes = Route::new()
        .nest("/", api)
        .at(OPENAPI_PATH, get(spec))
        .nest(DOCS_PATH, Route::new().at("/", get(docs)))
        .at(HEALTHZ_PATH, get(healthz(profile)))
        .at(READYZ_PATH, get(readyz));
    let routes = if with_metrics {
        routes.at(METRICS_PATH, get(metrics))
    } else {
        routes
    };
    routes.with(allow)
}

/// The admin listener's routes: `/metrics`, `/healthz` and `/readyz`, for the monitoring
/// network only.
pub fn admin_routes<R: Endpoint + 'static>(readyz: R, profile: &'static str) -> Route {
    Route::new()
        .at(METRICS_PATH, get(metrics))
        .at(HEALTHZ_PATH, get(healthz(profile)))
        .at(READYZ_PATH, get(readyz))
}

/// Warns when `url` (the setting `name`) is plain HTTP to a host other than this one:
/// tokens and keys would then cross a network unencrypted.
pub fn warn_if_plain_http(name: &str, url: &str) {
    let Ok(parsed) = url::Url::parse(url) else {
        return;
    };
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => true,
    };
    if parsed.scheme() == "http" && !loopback {
        tracing::warn!(
            setting = name,
            url,
            "plain http to another host: use https, so tokens and keys are not sent in clear"
        );
    }
}

/// How long a client has to send a request's head (the request line and headers). It
/// bounds a keep-alive connection's idle time too: hyper starts the same timer while it
/// waits for the next request. Slow or idle connections cannot pile up and use up the
/// process's file descriptors.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Most client connections open at once; past it, new ones wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 8192;

/// Serves `app` until `shutdown` resolves, then lets in-flight requests finish (bounded).
///
/// HTTP/1.1 through hyper, with [`HEADER_READ_TIMEOUT`] and at most
/// [`MAX_CONNECTIONS`] connections. The file-descriptor limit is raised to the hard limit
/// first, so a burst of connections meets the connection bound, not `EMFILE`.
pub async fn serve(
    listener: TcpListener,
    app: impl Endpoint + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    raise_file_limit();
    let app: Arc<dyn DynEndpoint<Output = Response>> =
        Arc::new(ToDynEndpoint(app.map_to_response()));
    let local = listener.local_addr()?;
    // HTTP/1.1 only: telling HTTP/2's preface from HTTP/1 waits for bytes with no time
    // limit, which a client sending `P` and nothing more would hold open for ever.
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or a connection reset before it was accepted: the
                    // listener itself is fine, so wait a moment and go on.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = service_fn(move |req: hyper::Request<Incoming>| {
            let app = app.clone();
            async move {
                let req = poem::Request::from((
                    req,
                    LocalAddr(local.into()),
                    RemoteAddr(peer.into()),
                    Scheme::HTTP,
                ));
                Ok::<_, Infallible>(hyper::Response::from(app.get_response(req).await))
            }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {},
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("shutdown grace over: closing the connections still open");
        },
    }
    Ok(())
}

/// Raises the soft limit on open files to the hard limit; a failure is only logged.
fn raise_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
}

#[cfg(test)]
mod tests {
    use poem::test::TestClient;

    use super::*;

    #[handler]
    fn thing() -> &'static str {
        "thing"
    }

    /// The labels are the paths served: each one answers, none is left out.
    #[tokio::test]
    async fn every_route_labelled_is_served_and_every_operational_path_is_labelled() {
        let documents = ApiDocuments {
            json: serde_json::json!({"paths": {"/things/{id}": {"get": {}}}}).to_string(),
            html: "<html></html>".into(),
        };
        let labelled: Vec<String> = served_routes(&documents)
            .iter()
            .map(str::to_owned)
            .collect();
        for path in OPERATIONAL_PATHS {
            assert!(labelled.iter().any(|l| l == path), "{path} has no label");
        }
        let api = Route::new().at("/things/:id", get(thing));
        let ready = make_sync(|_| "ready");
        let app = TestClient::new(service_routes(api, documents, ready, true, "standard"));
        for route in &labelled {
            let path = route.replace("{id}", "7");
            let answer = app.get(&path).send().await;
            assert_ne!(
                answer.0.status(),
                StatusCode::NOT_FOUND,
                "{route} is not served"
            );
        }
        let admin = TestClient::new(admin_routes(make_sync(|_| "ready"), "standard"));
        for path in [METRICS_PATH, HEALTHZ_PATH, READYZ_PATH] {
            assert!(labelled.iter().any(|l| l == path), "{path} has no label");
            admin.get(path).send().await.assert_status_is_ok();
        }
    }
}
