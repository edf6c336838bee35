//! `/metrics` after real traffic: every metric has its help text and a type Prometheus can
//! aggregate across replicas, and paths with references are labelled by their route.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::helpers::{
    Backend, TestApp, eventually, fresh_email, metric, metrics_text, purchase_enquiry,
};
use test_support::document::Served;

/// The `# HELP` and `# TYPE` lines of a scrape, by metric name.
fn families(text: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut help = BTreeSet::new();
    let mut kinds = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("#"), Some("HELP"), Some(name), Some(_)) => {
                help.insert(name.to_owned());
            }
            (Some("#"), Some("TYPE"), Some(name), Some(kind)) => {
                kinds.insert(name.to_owned(), kind.to_owned());
            }
            _ => {}
        }
    }
    (help, kinds)
}

#[tokio::test]
async fn every_metric_has_help_and_lags_are_histograms() {
    let app = TestApp::spawn_with(Backend::Sqlite, |c| {
        c.activation_delay_secs = 0;
        c.activation_poll_ms = 100;
    })
    .await;
    let base = app.intake.base_url();
    let email = fresh_email();
    let reference = app.submit(&purchase_enquiry("brand_a", &email)).await;
    assert_eq!(
        app.case_status(&reference, Some(&app.bearer()))
            .await
            .status,
        200
    );
    assert_eq!(app.case_status(&reference, None).await.status, 401);
    eventually(Duration::from_secs(10), || async {
        (metric(&app.http, &base, "intake_cases_activated_total", "brand_a").await > 0.0)
            .then_some(())
    })
    .await
    .expect("the case was activated");

    let text = metrics_text(&app.http, &base).await;
    let (help, kinds) = families(&text);
    let undescribed: Vec<&String> = kinds.keys().filter(|k| !help.contains(*k)).collect();
    assert!(undescribed.is_empty(), "no help text: {undescribed:?}");
    for (name, kind) in [
        ("intake_activation_lag_seconds", "histogram"),
        ("intake_activation_backlog", "gauge"),
        ("intake_activation_oldest_due_seconds", "gauge"),
        ("http_request_duration_seconds", "histogram"),
        ("intake_cases_total", "counter"),
        ("build_info", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ] {
        assert_eq!(kinds.get(name).map(String::as_str), Some(kind), "{name}");
    }
    assert!(
        text.lines().any(|l| l.starts_with("build_info{")
            && l.contains(r#"service="intake-api""#)
            && l.contains(&format!(r#"version="{}""#, env!("CARGO_PKG_VERSION")))
            && l.contains(&format!(r#"commit="{}""#, env!("BUILD_COMMIT")))),
        "{text}"
    );
    assert!(
        metric(
            &app.http,
            &base,
            "http_requests_total",
            "/partners/external/cases/{reference}"
        )
        .await
            >= 2.0
    );
    assert!(
        !text.contains(&reference),
        "a case reference became a label"
    );
}

/// Every path of the served document (routes added since the first release among them) and
/// every operational path, requested for real, is counted under its own route label, the
/// template and never the id in it.
#[tokio::test]
async fn every_served_path_is_counted_under_its_own_route() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let base = app.intake.base_url();
    let served = Served::fetch(&app.http, &base).await;
    for late in [
        "/partners/external/referrals",
        "/partners/external/webhooks/endpoints/{endpoint_id}",
    ] {
        assert!(
            served.templates().any(|t| t == late),
            "{late} is not documented"
        );
    }
    served
        .request_every_route(&app.http, &base, Some(&app.bearer()))
        .await;
    served.assert_every_route_labelled(&metrics_text(&app.http, &base).await, "intake-api");
}
