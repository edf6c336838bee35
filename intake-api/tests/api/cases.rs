//! Creating and updating cases: one case per brand and e-mail address, whatever the letter case,
//! the surrounding spaces or the concurrency.

use serde_json::{Value, json};

use crate::helpers::{
    Backend, CaseRowLock, ENQUIRY, PRODUCT, TestApp, event_kinds, purchase_enquiry,
    remortgage_enquiry, statuses,
};
use test_support::on_both_backends;

/// The reference of a `Case created` / `Case updated` body, checked to be a string of digits.
fn reference_of(body: &Value) -> String {
    let reference = body["reference"].as_str().expect("reference is a string");
    assert!(
        !reference.is_empty() && reference.bytes().all(|b| b.is_ascii_digit()),
        "reference {reference:?} is not a string of digits"
    );
    reference.to_owned()
}

async fn the_same_brand_and_email_update_one_case_and_another_brand_makes_a_new_one(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let first = purchase_enquiry("brand_a", "Jane.Doe@Example.com");
    let created = app.enquiry(&first).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let reference = reference_of(&created.body);
    assert_eq!(
        created.body,
        json!({"message": "Case created", "reference": reference})
    );

    let second = remortgage_enquiry("brand_a", "  JANE.DOE@example.COM ");
    let updated = app.enquiry(&second).await;
    assert_eq!(updated.status, 200, "{:?}", updated.body);
    assert_eq!(
        updated.body,
        json!({"message": "Case updated", "reference": reference})
    );

    let other_brand = purchase_enquiry("brand_b", "jane.doe@example.com");
    let other = app.enquiry(&other_brand).await;
    assert_eq!(other.status, 201, "{:?}", other.body);
    let other_reference = reference_of(&other.body);
    assert_ne!(other_reference, reference);
    assert_eq!(
        other.body,
        json!({"message": "Case created", "reference": other_reference})
    );

    // The update applied the second enquiry to the case.
    let stored = app
        .intake_column(
            &format!(
                "SELECT CAST(enquiry AS TEXT) AS e FROM cases WHERE reference = '{reference}'"
            ),
            "e",
        )
        .await;
    let stored: Value = serde_json::from_str(&stored[0]).expect("stored enquiry is JSON");
    assert_eq!(stored["first_name"], "John");
    assert_eq!(stored["stage"], "researching");

    let case = app.case_show(&reference).await;
    assert_eq!(case["reference"], reference.as_str());
    assert_eq!(case["brand"], "brand_a");
    assert_eq!(case["status"], "pending_activation");
    assert_eq!(case["submissions"], 2);
    assert_eq!(event_kinds(&case), ["created", "updated"]);
    for event in case["events"].as_array().expect("events") {
        assert_eq!(event["client_id"], app.client_id.as_str());
    }
    let case = app.case_show(&other_reference).await;
    assert_eq!(case["brand"], "brand_b");
    assert_eq!(case["status"], "pending_activation");
    assert_eq!(case["submissions"], 1);
    assert_eq!(event_kinds(&case), ["created"]);

    // Every submission is kept exactly as sent.
    let mut payloads = app
        .intake_column("SELECT payload FROM submissions", "payload")
        .await;
    payloads.sort();
    let mut sent = [first, second, other_brand].map(|b| b.to_string()).to_vec();
    sent.sort();
    assert_eq!(payloads, sent);
}

async fn twenty_concurrent_first_submissions_make_exactly_one_case(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = purchase_enquiry("brand_a", "race@example.com").to_string();
    let replies = app.all_at_once(ENQUIRY, &body, 20).join_all().await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        19,
        "{statuses:?}"
    );
    let reference = reference_of(&replies[0].body);
    for reply in &replies {
        let message = if reply.status == 201 {
            "Case created"
        } else {
            "Case updated"
        };
        assert_eq!(
            reply.body,
            json!({"message": message, "reference": reference})
        );
    }
    let case = app.case_show(&reference).await;
    assert_eq!(case["submissions"], 20);
    let kinds = event_kinds(&case);
    assert_eq!(kinds.iter().filter(|k| *k == "created").count(), 1);
    assert_eq!(kinds.iter().filter(|k| *k == "updated").count(), 19);
    let cases = app
        .intake_column("SELECT reference FROM cases", "reference")
        .await;
    assert_eq!(cases, [reference]);
}

/// Submissions for one case take turns inside the service, so a burst of them for a case
/// whose row is locked holds one pool connection, not all: another case's submission still
/// goes through. (Waiting on PostgreSQL's row lock, each would hold a connection.)
#[tokio::test]
async fn a_burst_for_one_locked_case_leaves_connections_to_other_cases() {
    let app = TestApp::spawn_with(Backend::Postgres, |c| c.database_max_connections = 8).await;
    let busy = purchase_enquiry("brand_a", "burst@example.com");
    let reference = reference_of(&app.enquiry(&busy).await.body);
    let lock = CaseRowLock::take(&app, &reference).await;

    let burst = app.all_at_once(ENQUIRY, &busy.to_string(), 20);
    assert_eq!(
        lock.first_waiters().await,
        1,
        "the burst's submissions waiting on the row lock"
    );
    let other = app
        .enquiry(&purchase_enquiry("brand_a", "someone.else@example.com"))
        .await;
    assert_eq!(other.status, 201, "{:?}", other.body);
    assert_eq!(
        lock.waiters().await,
        1,
        "the burst's submissions waiting on the row lock"
    );

    lock.release().await;
    assert_eq!(statuses(burst).await, [200; 20]);
    assert_eq!(app.case_show(&reference).await["submissions"], 21);
}

/// Rows get time-ordered keys (UUIDv7), so inserts go to the end of each key's index.
#[tokio::test]
async fn new_rows_get_time_ordered_ids() {
    let app = TestApp::spawn(Backend::Postgres).await;
    for i in 0..3 {
        app.submit(&purchase_enquiry(
            "brand_a",
            &format!("ordered{i}@example.com"),
        ))
        .await;
    }
    assert_eq!(
        app.attach("ordered2@example.com", PRODUCT).await.status,
        200
    );
    for table in ["cases", "submissions", "case_events", "redirect_tokens"] {
        let ids = app
            .intake_column(&format!("SELECT id::text AS id FROM {table}"), "id")
            .await;
        assert!(!ids.is_empty(), "{table}");
        for id in &ids {
            let id = uuid::Uuid::parse_str(id).expect("a UUID");
            assert_eq!(id.get_version_num(), 7, "{table}: {id}");
        }
    }
    let by_creation = app
        .intake_column("SELECT id::text AS id FROM cases ORDER BY created_at", "id")
        .await;
    let mut by_id = by_creation.clone();
    by_id.sort();
    assert_eq!(by_creation, by_id, "case ids follow creation order");
}

on_both_backends!(
    the_same_brand_and_email_update_one_case_and_another_brand_makes_a_new_one,
    twenty_concurrent_first_submissions_make_exactly_one_case,
);
