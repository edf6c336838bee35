//! Logs and metrics, set up once per process: log lines and their writer ([`logs`]), the
//! metrics catalogue and its recorder ([`metrics`]), the per-request middleware that does
//! both for every request ([`middleware`]), and what a binary was built from
//! ([`build_info`]).

pub mod build_info;
#[cfg(test)]
mod captured;
mod json;
pub mod logs;
pub mod metrics;
pub mod middleware;
mod process;

pub use self::logs::{LogFormat, init_tracing, record_client_id};
pub use self::metrics::{MetricHelp, MetricKind, describe_metrics, render_metrics};
pub use self::middleware::{OUTCOME, REASON, REHEARSED, RequestTelemetry, Routes, record};

/// The name of the span each request is served in; the JSON lines show its fields.
const REQUEST_SPAN: &str = "request";

/// The target of the request span, which tells it from other crates' spans of that name.
const REQUEST_SPAN_TARGET: &str = module_path!();
