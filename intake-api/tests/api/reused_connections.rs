//! On PostgreSQL the case store hands a connection whose statement finished to the next
//! request, and gives one whose statement did not finish back to the pool, never reusing it.

use std::time::Duration;

use chrono::Utc;
use intake_api::domain::parse_enquiry;
use intake_api::examples::purchase_enquiry;
use intake_api::store::{CaseStore, Outcome, Timing};
use sea_orm::{ConnectionTrait, Database, TransactionTrait};

use crate::helpers::{Backend, TestDb};

const BRANDS: [&str; 2] = ["brand_a", "brand_b"];

async fn store(db: &TestDb) -> CaseStore {
    let pool = service_kit::db::connect(&db.url, 4).await.unwrap();
    let timing = Timing {
        activation_delay: Duration::from_secs(60),
        redirect_ttl: Duration::from_secs(60),
        sandbox_activation_delay: Duration::from_secs(60),
    };
    CaseStore::new(pool, 4, timing)
}

async fn submit(store: &CaseStore, email: &str) -> Result<Outcome, intake_api::store::StoreError> {
    let body = purchase_enquiry("brand_a", email);
    let enquiry = parse_enquiry(&body, &BRANDS, Utc::now().date_naive()).unwrap();
    store
        .submit(
            &enquiry,
            &body.to_string(),
            "client",
            intake_api::sandbox::World::Real,
            None,
        )
        .await
        .map(|s| s.outcome)
}

#[tokio::test]
async fn a_finished_statement_leaves_its_connection_to_the_next_request() {
    let db = TestDb::intake(Backend::Postgres).await;
    let store = store(&db).await;
    assert_eq!(store.idle_reused_connections(), 0);
    for email in ["a@example.com", "b@example.com", "a@example.com"] {
        submit(&store, email).await.unwrap();
        assert_eq!(store.idle_reused_connections(), 1, "after {email}");
    }
    assert_eq!(store.db().get_postgres_connection_pool().size(), 1);
    store.close().await;
}

#[tokio::test]
async fn a_statement_cut_short_gives_its_connection_back_instead() {
    let db = TestDb::intake(Backend::Postgres).await;
    let store = store(&db).await;
    submit(&store, "first@example.com").await.unwrap();
    assert_eq!(store.idle_reused_connections(), 1);

    // Another session holds the table, so the next submission waits inside PostgreSQL until
    // the request is given up.
    let other = Database::connect(db.url.as_str()).await.unwrap();
    let lock = other.begin().await.unwrap();
    lock.execute_unprepared(r#"LOCK TABLE "cases" IN EXCLUSIVE MODE"#)
        .await
        .unwrap();
    let given_up = tokio::time::timeout(
        Duration::from_millis(300),
        submit(&store, "second@example.com"),
    )
    .await;
    assert!(
        given_up.is_err(),
        "the submission finished despite the lock"
    );
    assert_eq!(
        store.idle_reused_connections(),
        0,
        "a connection left mid-statement was kept for reuse"
    );
    lock.rollback().await.unwrap();

    assert_eq!(
        submit(&store, "third@example.com").await.unwrap(),
        Outcome::Created
    );
    assert_eq!(store.idle_reused_connections(), 1);
    store.close().await;
}

#[tokio::test]
async fn sqlite_keeps_no_connections_of_its_own() {
    let db = TestDb::intake(Backend::Sqlite).await;
    let store = store(&db).await;
    submit(&store, "a@example.com").await.unwrap();
    assert_eq!(store.idle_reused_connections(), 0);
    store.close().await;
}
