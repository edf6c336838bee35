//! What logging costs a request in each format: the request span with the middleware's
//! fields, the client id recorded on it, one line mid-request and the closing line, written
//! to a sink so that only the formatting is measured.
//!
//! ```text
//! cargo run -j2 --release -p service-kit --example log_cost
//! ```
//!
//! runs each format in a process of its own, in turn, and prints the median. One format:
//! `log_cost FORMAT REQUESTS`, which callgrind counts repeatably on a busy machine:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/log_cost json 22000    # and 2000: the difference / 20000
//! ```
//!
//! `old-json` is tracing-subscriber's JSON format, for comparison; `warn` is `RUST_LOG=warn`.

use std::net::IpAddr;
use std::process::Command;
use std::time::Instant;

use service_kit::telemetry::logs::{json_subscriber, record_client_id, request_span};
use tracing_subscriber::EnvFilter;

/// The formats, as the command line names them.
const FORMATS: [&str; 4] = ["old-json", "json", "pretty", "warn"];

/// Runs of each format when comparing them; the median is reported.
const ROUNDS: usize = 5;

/// Requests per run when comparing.
const REQUESTS: u64 = 200_000;

/// Requests before the timing starts: the first lines register call sites and grow buffers.
const WARM_UP: u64 = 2_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => compare(),
        [format, requests] => {
            let requests = requests.parse().expect("REQUESTS is a number");
            println!("{:.1}", run(format, requests));
        }
        _ => {
            eprintln!("usage: log_cost [FORMAT REQUESTS], FORMAT one of {FORMATS:?}");
            std::process::exit(2);
        }
    }
}

/// Each format in processes of its own, taking turns so that a busy spell on the machine
/// falls on all of them.
fn compare() {
    let exe = std::env::current_exe().expect("this program's path");
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); FORMATS.len()];
    for _ in 0..ROUNDS {
        for (format, times) in FORMATS.iter().zip(&mut times) {
            let out = Command::new(&exe)
                .args([format, &REQUESTS.to_string().as_str()])
                .output()
                .expect("a run starts");
            assert!(out.status.success(), "{format}: {out:?}");
            let ns: f64 = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("a run prints its ns per request");
            times.push(ns);
        }
    }
    println!("format     ns/request (median of {ROUNDS} runs of {REQUESTS})");
    for (format, mut times) in FORMATS.iter().zip(times) {
        times.sort_by(f64::total_cmp);
        println!("{format:<10} {:>8.0}", times[ROUNDS / 2]);
    }
}

/// Serves `requests` requests' worth of logging in `format`; returns ns per request.
fn run(format: &str, requests: u64) -> f64 {
    let info = || EnvFilter::new("info");
    let fmt = || {
        tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .with_ansi(false)
    };
    let installed = match format {
        // What `LOG_FORMAT=json` installed before the service's own JSON layer.
        "old-json" => tracing::subscriber::set_global_default(
            fmt()
                .with_env_filter(info())
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        ),
        "json" => tracing::subscriber::set_global_default(json_subscriber(info(), std::io::sink)),
        "pretty" => tracing::subscriber::set_global_default(fmt().with_env_filter(info()).finish()),
        // `RUST_LOG=warn`: the span and both lines are filtered out.
        "warn" => tracing::subscriber::set_global_default(
            fmt().with_env_filter(EnvFilter::new("warn")).finish(),
        ),
        _ => panic!("unknown format {format}; one of {FORMATS:?}"),
    };
    installed.expect("the first subscriber of this process");
    for _ in 0..WARM_UP {
        request();
    }
    let started = Instant::now();
    for _ in 0..requests {
        request();
    }
    started.elapsed().as_nanos() as f64 / requests as f64
}

/// The logging of one request as the middleware and a handler do it.
fn request() {
    let source: IpAddr = [203, 0, 113, 9].into();
    let span = request_span(
        "intake-api",
        "0b6f3c1e9a7d4f2c8e5b1a0d9c7f6e3b",
        "POST",
        "/partners/external/cases",
        Some(source),
    );
    let started = Instant::now();
    span.in_scope(|| {
        record_client_id("partner-7f3a9c");
        tracing::info!(
            reference = "418290357116",
            brand = "northwind",
            "case created"
        );
    });
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    span.in_scope(|| {
        tracing::info!(
            status = 201u16,
            latency_ms,
            outcome = Some("created"),
            reason = None::<&str>,
            kid = None::<&str>,
            jti = None::<&str>,
            scope = None::<&str>,
            reference = Some("418290357116"),
            brand = Some("northwind"),
            "request finished"
        )
    });
}
