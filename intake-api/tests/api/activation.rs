//! Delayed activation: a case becomes active once its delay has passed, exactly once, even with
//! several intake-api instances on one database, and also when none was running at the time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use intake_api::entity::case;
use sea_orm::{ActiveValue::Set, EntityTrait, TransactionTrait};
use serde_json::Value;

use crate::helpers::{
    Backend, IntakeServer, TestApp, case_show, event_kinds, eventually, fresh_email,
    purchase_enquiry, remortgage_enquiry,
};
use test_support::on_both_backends;

fn time(case: &Value, field: &str) -> DateTime<Utc> {
    case[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not set: {case}"))
        .parse()
        .expect("RFC 3339 time")
}

fn activated_events(case: &Value) -> usize {
    event_kinds(case)
        .iter()
        .filter(|k| *k == "activated")
        .count()
}

/// Waits until the case is active; returns what `case show` says then.
async fn wait_active(config: &intake_api::config::Config, reference: &str) -> Value {
    eventually(Duration::from_secs(10), || async {
        let case = case_show(config, reference).await;
        (case["status"] == "active").then_some(case)
    })
    .await
    .unwrap_or_else(|| panic!("case {reference} never became active"))
}

async fn a_case_becomes_active_after_the_delay_with_one_activated_event(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.activation_delay_secs = 2;
        c.activation_poll_ms = 100;
    })
    .await;
    let email = fresh_email();
    let reference = app.submit(&purchase_enquiry("brand_a", &email)).await;
    let case = app.case_show(&reference).await;
    assert_eq!(case["status"], "pending_activation");
    assert_eq!(case["activated_at"], Value::Null);
    let activates_at = time(&case, "activates_at");
    assert_eq!(
        activates_at - time(&case, "created_at"),
        chrono::Duration::seconds(2)
    );

    // An update does not reset the delay.
    assert_eq!(
        app.submit(&remortgage_enquiry("brand_a", &email)).await,
        reference
    );
    let case = app.case_show(&reference).await;
    assert_eq!(case["status"], "pending_activation");
    assert_eq!(time(&case, "activates_at"), activates_at);

    let case = wait_active(&app.intake.config, &reference).await;
    assert!(time(&case, "activated_at") >= activates_at, "{case}");
    // Nothing more may happen to it: five more worker passes (every 100 ms) must leave it
    // as it is.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let case = app.case_show(&reference).await;
    assert_eq!(case["status"], "active");
    assert_eq!(event_kinds(&case), ["created", "updated", "activated"]);
}

async fn two_instances_on_one_database_activate_each_case_exactly_once(backend: Backend) {
    let fast = |c: &mut intake_api::config::Config| {
        c.activation_delay_secs = 1;
        c.activation_poll_ms = 20;
    };
    let app = TestApp::spawn_with(backend, fast).await;
    let other = app.second_intake(fast).await;
    let mut references = Vec::new();
    for i in 0..10 {
        let body = purchase_enquiry(["brand_a", "brand_b"][i % 2], &fresh_email());
        let target = if i % 2 == 0 { &app.intake } else { &other };
        let reply = app.enquiry_on(target, &body).await;
        assert_eq!(reply.status, 201, "{:?}", reply.body);
        let reference = reply.body["reference"].as_str().expect("reference");
        references.push(reference.to_owned());
    }
    for reference in &references {
        wait_active(&app.intake.config, reference).await;
    }
    // A second activation must not follow: both workers get many more passes (every 20 ms)
    // to make one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for reference in &references {
        let case = app.case_show(reference).await;
        assert_eq!(activated_events(&case), 1, "{case}");
    }
    let all = app
        .intake_column(
            "SELECT kind FROM case_events WHERE kind = 'activated'",
            "kind",
        )
        .await;
    assert_eq!(all.len(), references.len());
}

async fn a_case_that_fell_due_while_no_instance_ran_is_activated_at_the_next_start(
    backend: Backend,
) {
    let slow = |c: &mut intake_api::config::Config| {
        c.activation_delay_secs = 1;
        c.activation_poll_ms = 100;
    };
    let app = TestApp::spawn_with(backend, slow).await;
    let reference = app
        .submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    let config = app.intake.config.clone();
    app.intake.server.stop().await;
    // The case falls due (after 1 s) while no instance runs, and stays pending for several
    // poll periods (100 ms) in which a worker left running would have activated it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let case = case_show(&config, &reference).await;
    assert_eq!(case["status"], "pending_activation", "activated while down");
    let restarted = IntakeServer::start(&app.intake_db.url, &app.auth, slow)
        .await
        .expect("intake-api restarts");
    let case = wait_active(&restarted.config, &reference).await;
    assert_eq!(event_kinds(&case), ["created", "activated"]);
}

/// A backlog bigger than one statement can carry (each activated case's event takes its own
/// bind parameters, at most 65,535 per statement on PostgreSQL and 32,766 on SQLite), as
/// after an outage, drains: every case activated once, with one event.
async fn a_backlog_of_due_cases_is_activated_in_passes_each_once(backend: Backend) {
    const BACKLOG: usize = 20_000;
    let app = TestApp::spawn_with(backend, |c| c.activation_poll_ms = 100).await;
    let db = sea_orm::Database::connect(app.intake_db.url.as_str())
        .await
        .expect("database");
    let due = Utc::now() - chrono::Duration::minutes(5);
    let cases: Vec<case::ActiveModel> = (0..BACKLOG)
        .map(|i| case::ActiveModel {
            id: Set(uuid::Uuid::now_v7()),
            reference: Set(format!("{:012}", 900_000_000_000 + i)),
            brand: Set("brand_a".into()),
            email: Set(format!("backlog{i}@example.com")),
            status: Set(case::Status::PendingActivation),
            enquiry: Set(serde_json::json!({})),
            product_uuid: Set(None),
            created_at: Set(due),
            updated_at: Set(due),
            activates_at: Set(due),
            activated_at: Set(None),
            redirect_token_id: Set(None),
            sandbox: Set(false),
        })
        .collect();
    // One transaction: the worker sees the whole backlog at once.
    let txn = db.begin().await.expect("transaction");
    for chunk in cases.chunks(1000) {
        case::Entity::insert_many(chunk.to_vec())
            .exec_without_returning(&txn)
            .await
            .expect("backlog inserted");
    }
    txn.commit().await.expect("backlog committed");

    let count = |sql: &'static str| {
        let app = &app;
        async move { app.intake_column(sql, "n").await[0].clone() }
    };
    let drained = eventually(Duration::from_secs(120), || async {
        let pending = count(
            "SELECT CAST(count(*) AS TEXT) AS n FROM cases WHERE status = 'pending_activation'",
        )
        .await;
        (pending == "0").then_some(())
    })
    .await;
    assert!(drained.is_some(), "the backlog was not activated");
    assert_eq!(
        count("SELECT CAST(count(*) AS TEXT) AS n FROM case_events WHERE kind = 'activated'").await,
        BACKLOG.to_string()
    );
    assert_eq!(
        count("SELECT CAST(count(DISTINCT case_id) AS TEXT) AS n FROM case_events WHERE kind = 'activated'")
            .await,
        BACKLOG.to_string()
    );
}

on_both_backends!(
    a_backlog_of_due_cases_is_activated_in_passes_each_once,
    a_case_becomes_active_after_the_delay_with_one_activated_event,
    two_instances_on_one_database_activate_each_case_exactly_once,
    a_case_that_fell_due_while_no_instance_ran_is_activated_at_the_next_start,
);
