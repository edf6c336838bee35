//! Log lines: their format, the writer thread that puts them on stderr, and the request span
//! every line logged while serving a request carries.

use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::time::Duration;

use tracing::Subscriber;
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::{REQUEST_SPAN, REQUEST_SPAN_TARGET, json};

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

/// The log writer's rest after each write-out, so that it writes many lines per wake-up.
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

/// Names the authenticated client on the current request's span, so every line the request
/// logs from then on carries it.
pub fn record_client_id(client_id: &str) {
    tracing::Span::current().record("client_id", client_id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::captured::Captured;

    fn a_request_span() -> tracing::Span {
        request_span("svc", "req-1", "POST", "/cases", "10.1.2.3".parse().ok())
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
