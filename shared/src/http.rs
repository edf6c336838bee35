//! HTTP plumbing both services share: shutdown signals and the operational endpoints.

use std::time::Duration;

use poem::http::StatusCode;
use poem::{IntoResponse, Response, handler};

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
