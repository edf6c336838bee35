//! HTTP plumbing both services share: shutdown signals and the operational endpoints.

use std::time::Duration;

use poem::endpoint::make_sync;
use poem::http::StatusCode;
use poem::listener::{Acceptor, Listener, TcpAcceptor, TcpListener};
use poem::web::Html;
use poem::{Endpoint, IntoEndpoint, IntoResponse, Response, Route, Server, get, handler};
use poem_openapi::{OpenApi, OpenApiService};

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

/// `GET /healthz`: the process is up and answering.
#[handler]
pub fn healthz() -> Response {
    (
        StatusCode::OK,
        poem::web::Json(serde_json::json!({"status": "ok"})),
    )
        .into_response()
}

/// `GET /metrics`: every metric of this process, in the Prometheus text format.
#[handler]
pub fn metrics() -> Response {
    crate::telemetry::metrics_handle()
        .render()
        .with_content_type("text/plain; version=0.0.4")
        .into_response()
}

/// The body of `/readyz`: 200 when every check passed, 503 with the failing ones otherwise.
pub fn readiness(checks: &[(&'static str, bool)]) -> Response {
    let ready = checks.iter().all(|(_, ok)| *ok);
    let body = serde_json::json!({
        "status": if ready { "ready" } else { "not_ready" },
        "checks": checks.iter().map(|(k, ok)| (k.to_string(), serde_json::Value::from(if *ok {"ok"} else {"failing"}))).collect::<serde_json::Map<_, _>>(),
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, poem::web::Json(body)).into_response()
}

/// Binds the listening socket; returns it with the port actually bound (for port 0).
pub async fn bind(addr: &str) -> anyhow::Result<(TcpAcceptor, u16)> {
    use anyhow::Context;
    let acceptor = TcpListener::bind(addr.to_owned())
        .into_acceptor()
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let port = acceptor
        .local_addr()
        .first()
        .and_then(|a| a.as_socket_addr().map(|s| s.port()))
        .context("listener has no socket address")?;
    Ok((acceptor, port))
}

/// A service's OpenAPI document and its interactive docs page, made once at start-up.
pub struct ApiDocuments {
    /// The document, as JSON.
    pub json: String,
    /// The Swagger UI page with the document inside.
    pub html: String,
}

impl ApiDocuments {
    /// The documents of `api`.
    pub fn of<T: OpenApi>(api: &OpenApiService<T, ()>) -> Self {
        Self {
            json: api.spec(),
            html: api.swagger_ui_html(),
        }
    }

    /// Both documents with every `placeholder` replaced by `value`, which must not need
    /// escaping in JSON (a URL).
    pub fn replace(self, placeholder: &str, value: &str) -> Self {
        Self {
            json: self.json.replace(placeholder, value),
            html: self.html.replace(placeholder, value),
        }
    }
}

/// A service's routes: its API, `/openapi.json`, `/docs`, and the operational endpoints.
pub fn service_routes<A, R>(api: A, documents: ApiDocuments, readyz: R) -> Route
where
    A: IntoEndpoint,
    A::Endpoint: 'static,
    R: Endpoint + 'static,
{
    let ApiDocuments { json, html } = documents;
    let spec = make_sync(move |_| {
        Response::builder()
            .content_type("application/json")
            .body(json.clone())
    });
    let docs = make_sync(move |_| Html(html.clone()));
    Route::new()
        .nest("/", api)
        .at("/openapi.json", get(spec))
        .nest("/docs", Route::new().at("/", get(docs)))
        .at("/healthz", get(healthz))
        .at("/readyz", get(readyz))
        .at("/metrics", get(metrics))
}

/// Serves `app` until `shutdown` resolves, then lets in-flight requests finish (bounded).
pub async fn serve(
    acceptor: TcpAcceptor,
    app: impl Endpoint + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    Server::new_with_acceptor(acceptor)
        .run_with_graceful_shutdown(app, shutdown, Some(SHUTDOWN_GRACE))
        .await
}
