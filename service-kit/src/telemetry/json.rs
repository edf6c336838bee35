//! The JSON log format: one object per line, the event's fields at the top level and the
//! request span's fields under `span`.
//!
//! tracing-subscriber's JSON formatter keeps a span's fields as a JSON string: it parses and
//! writes that string again on every `record`, and parses it again for every line logged in
//! the span. Here the request span's fields are written once, into the span, as the bytes
//! each line copies.

use std::cell::RefCell;
use std::fmt;
use std::io::Write;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use super::{REQUEST_SPAN, REQUEST_SPAN_TARGET};

/// Writes each event as one JSON line to `make_writer`.
pub(crate) struct JsonLines<W> {
    make_writer: W,
}

impl<W> JsonLines<W> {
    /// A layer writing its lines to `make_writer`.
    pub(crate) fn new(make_writer: W) -> Self {
        Self { make_writer }
    }
}

/// Only the request span's fields go into the lines: other spans, ours or a library's,
/// would cost a rendering each and add nothing an operator looks for.
fn is_request_span(meta: &Metadata<'_>) -> bool {
    meta.name() == REQUEST_SPAN && meta.target() == REQUEST_SPAN_TARGET
}

thread_local! {
    // Reused so that a line costs no allocation of its own.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl<S, W> Layer<S> for JsonLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'a> MakeWriter<'a> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !is_request_span(attrs.metadata()) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut fields = SpanFields::with_room_for(attrs.metadata().fields().len());
        attrs.record(&mut fields);
        span.extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(fields) = span.extensions_mut().get_mut::<SpanFields>() {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let write = |buf: &mut Vec<u8>| {
            buf.clear();
            write_line(buf, event, &ctx);
            // The writer is stderr or a queue to it: there is nowhere to report its failure.
            let _ = self
                .make_writer
                .make_writer_for(event.metadata())
                .write_all(buf);
        };
        let reused = LINE.try_with(|line| line.try_borrow_mut().map(|mut buf| write(&mut buf)));
        // A field whose Debug logs comes back here while the buffer is in use, and a thread
        // that logs as it ends may have dropped it already.
        if !matches!(reused, Ok(Ok(()))) {
            write(&mut Vec::new());
        }
    }
}

/// Renders `event` as one line of JSON, newline included.
fn write_line<S>(out: &mut Vec<u8>, event: &Event<'_>, ctx: &Context<'_, S>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let meta = event.metadata();
    out.push(b'{');
    entry(out, "timestamp", |out| {
        serde_json::to_writer(out, &format_args!("{Now}"))
    });
    entry(out, "level", |out| {
        serde_json::to_writer(out, meta.level().as_str())
    });
    let mut fields = EventFields {
        out: &mut *out,
        from_log: meta.target() == LOG_TARGET,
        log_target: None,
    };
    event.record(&mut fields);
    let log_target = fields.log_target;
    let target = log_target.as_deref().unwrap_or(meta.target());
    entry(out, "target", |out| serde_json::to_writer(out, target));
    let request = ctx
        .event_scope(event)
        .and_then(|mut scope| scope.find(|span| is_request_span(span.metadata())));
    if let Some(span) = request
        && let Some(fields) = span.extensions().get::<SpanFields>()
    {
        entry(out, "span", |out| {
            out.push(b'{');
            entry(out, "name", |out| serde_json::to_writer(out, span.name()));
            out.extend_from_slice(&fields.json);
            out.push(b'}');
            Ok(())
        });
    }
    out.extend_from_slice(b"}\n");
}

/// Appends `"name":value` to the object `out` is writing, after a comma unless it is the
/// first entry. A value that fails to render is left out whole, so the line stays JSON.
fn entry(
    out: &mut Vec<u8>,
    name: &str,
    value: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) {
    let start = out.len();
    if out.last() != Some(&b'{') {
        out.push(b',');
    }
    let written = serde_json::to_writer(&mut *out, name).and_then(|()| {
        out.push(b':');
        value(out)
    });
    if written.is_err() {
        out.truncate(start);
    }
}

/// The time now, written as tracing-subscriber's other formats write it.
struct Now;

impl fmt::Display for Now {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        SystemTime.format_time(&mut Writer::new(f))
    }
}

/// Writes each field it visits as an entry of the object in `out`.
struct Entries<'a>(&'a mut Vec<u8>);

impl Visit for Entries<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        entry(self.0, field.name(), |out| {
            serde_json::to_writer(out, &format_args!("{value:?}"))
        });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        entry(self.0, field.name(), |out| {
            serde_json::to_writer(out, value)
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        entry(self.0, field.name(), |out| {
            serde_json::to_writer(out, &value)
        });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        entry(self.0, field.name(), |out| {
            serde_json::to_writer(out, &value)
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        entry(self.0, field.name(), |out| {
            serde_json::to_writer(out, &value)
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        entry(self.0, field.name(), |out| {
            serde_json::to_writer(out, &value)
        });
    }
}

/// The target of events that tracing-log makes from `log` records; their real target is in
/// their `log.target` field, which tracing-subscriber's formats show as the target.
const LOG_TARGET: &str = "log";

/// An event's fields, flattened into the line.
struct EventFields<'a> {
    out: &'a mut Vec<u8>,
    from_log: bool,
    log_target: Option<String>,
}

impl Visit for EventFields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        Entries(self.out).record_debug(field, value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if self.from_log && field.name() == "log.target" {
            self.log_target = Some(value.to_owned());
        }
        Entries(self.out).record_str(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        Entries(self.out).record_i64(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        Entries(self.out).record_u64(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        Entries(self.out).record_f64(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        Entries(self.out).record_bool(field, value);
    }
}

/// The request span's fields as the entries of its `span` object, each `,"name":value`,
/// kept in the span's extensions and copied into every line logged in it.
struct SpanFields {
    json: Vec<u8>,
    /// Each field's name and where its entry starts in `json`.
    starts: Vec<(&'static str, usize)>,
}

/// Bytes a request span's fields usually take, so that writing them seldom reallocates.
const SPAN_FIELDS_BYTES: usize = 256;

impl SpanFields {
    fn with_room_for(fields: usize) -> Self {
        Self {
            json: Vec::with_capacity(SPAN_FIELDS_BYTES),
            starts: Vec::with_capacity(fields),
        }
    }

    /// Where to write `field`, replacing what was recorded for it before: a key must appear
    /// once, some log stores refuse an object that repeats one.
    fn entries(&mut self, field: &Field) -> Entries<'_> {
        let name = field.name();
        if let Some(i) = self.starts.iter().position(|&(n, _)| n == name) {
            let start = self.starts[i].1;
            let end = self.starts.get(i + 1).map_or(self.json.len(), |&(_, s)| s);
            self.json.drain(start..end);
            self.starts.remove(i);
            for (_, s) in &mut self.starts[i..] {
                *s -= end - start;
            }
        }
        self.starts.push((name, self.json.len()));
        Entries(&mut self.json)
    }
}

impl Visit for SpanFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.entries(field).record_debug(field, value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.entries(field).record_str(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entries(field).record_i64(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entries(field).record_u64(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.entries(field).record_f64(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entries(field).record_bool(field, value);
    }
}
