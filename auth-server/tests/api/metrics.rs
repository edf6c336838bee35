//! `/metrics` as Prometheus scrapes it: the process's own metrics beside the service's, and
//! the build that is running.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::helpers::{Backend, INTAKE, TestApp, metrics_text, series};
use test_support::document::Served;

/// The value of the unlabelled sample `name`, and the type its `# TYPE` line gives.
fn unlabelled(text: &str, name: &str) -> (f64, String) {
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} sample in {text}"))
        .parse()
        .expect("a number");
    let kind = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("# TYPE {name} ")))
        .unwrap_or_else(|| panic!("no type for {name}"));
    assert!(
        text.contains(&format!("# HELP {name} ")),
        "no help for {name}"
    );
    (value, kind.to_owned())
}

#[tokio::test]
async fn a_scrape_shows_the_process_and_the_build_it_runs() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    app.auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    let text = metrics_text(&app.auth.base_url()).await;

    let builds = series(&text, "build_info");
    assert!(
        builds.iter().any(|(labels, value)| {
            *value == 1.0
                && labels.get("service").map(String::as_str) == Some("auth-server")
                && labels.get("version").map(String::as_str) == Some(env!("CARGO_PKG_VERSION"))
                && labels.get("commit").map(String::as_str) == Some(env!("BUILD_COMMIT"))
        }),
        "{builds:?}"
    );
    assert!(!env!("BUILD_COMMIT").is_empty());

    for (name, kind) in [
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_threads", "gauge"),
    ] {
        let (value, found) = unlabelled(&text, name);
        assert_eq!(found, kind, "{name}");
        assert!(value > 0.0, "{name} {value}");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let (started, _) = unlabelled(&text, "process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 3600.0,
        "started {started}, now {now}"
    );
}

/// Every path of the served document and every operational path, requested for real, is
/// counted under its own route label, never as `other`.
#[tokio::test]
async fn every_served_path_is_counted_under_its_own_route() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let base = app.auth.base_url();
    let served = Served::fetch(&app.http, &base).await;
    served.request_every_route(&app.http, &base, None).await;
    served.assert_every_route_labelled(&metrics_text(&base).await, "auth-server");
}
