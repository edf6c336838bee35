//! Connections kept for submissions, on a real PostgreSQL: kept only after work that
//! completed, never so many that the rest of the service waits, and all given back at
//! shutdown.

use std::time::Duration;

use intake_api::kept::{KeptConnections, LEFT_FOR_OTHERS};
use sea_orm::sqlx::postgres::PgPoolOptions;
use sea_orm::sqlx::{self, PgPool};
use test_support::{Backend, TestDb};

async fn pool(db: &TestDb, size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(2))
        .test_before_acquire(false)
        .connect(&db.url)
        .await
        .expect("PostgreSQL at TEST_POSTGRES_URL is required by this test")
}

async fn backend_pid(conn: &mut sqlx::PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_connection_is_kept_after_completed_work_and_handed_out_again() {
    let db = TestDb::new(Backend::Postgres, "kept").await;
    let kept = KeptConnections::new(pool(&db, 6).await, 6, Duration::from_secs(2));
    let mut first = kept.get().await.unwrap();
    let pid = backend_pid(first.conn()).await;
    first.completed();
    assert_eq!(kept.idle_count(), 1);
    let mut again = kept.get().await.unwrap();
    assert_eq!(
        backend_pid(again.conn()).await,
        pid,
        "the kept connection is reused"
    );
    assert_eq!(kept.idle_count(), 0);
    again.completed();
}

#[tokio::test]
async fn a_connection_whose_work_did_not_complete_goes_back_to_the_pool() {
    let db = TestDb::new(Backend::Postgres, "kept").await;
    let kept = KeptConnections::new(pool(&db, 6).await, 6, Duration::from_secs(2));
    {
        let mut conn = kept.get().await.unwrap();
        // A query abandoned half-way, as when a request's future is dropped.
        let slow = sqlx::query("SELECT pg_sleep(5)").execute(conn.conn());
        assert!(
            tokio::time::timeout(Duration::from_millis(100), slow)
                .await
                .is_err()
        );
    }
    assert_eq!(
        kept.idle_count(),
        0,
        "an interrupted connection is not kept"
    );
    // What comes next works, and at once: not the connection still busy with pg_sleep.
    let mut next = kept.get().await.unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(2),
        sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(next.conn()),
    )
    .await
    .expect("a usable connection")
    .unwrap();
    assert_eq!(answer, 1);
    next.completed();
}

#[tokio::test]
async fn submissions_never_take_the_connections_left_for_others() {
    let db = TestDb::new(Backend::Postgres, "kept").await;
    let size = 4;
    let pool = pool(&db, size).await;
    let kept = KeptConnections::new(pool.clone(), size, Duration::from_millis(300));
    let taken = (size - LEFT_FOR_OTHERS) as usize;
    let mut held = Vec::new();
    for _ in 0..taken {
        held.push(kept.get().await.unwrap());
    }
    assert!(
        matches!(kept.get().await, Err(sqlx::Error::PoolTimedOut)),
        "submissions wait for one of their own connections"
    );
    for conn in held {
        conn.completed();
    }
    assert_eq!(kept.idle_count(), taken);
    // Every kept connection is idle and still checked out: the rest of the pool serves
    // everything else.
    let mut others = Vec::new();
    for _ in 0..LEFT_FOR_OTHERS {
        others.push(pool.acquire().await.expect("a connection left for others"));
    }
}

#[tokio::test]
async fn a_pool_of_one_is_never_kept_from_the_rest_of_the_service() {
    let db = TestDb::new(Backend::Postgres, "kept").await;
    let pool = pool(&db, 1).await;
    let kept = KeptConnections::new(pool.clone(), 1, Duration::from_secs(2));
    let mut conn = kept.get().await.unwrap();
    backend_pid(conn.conn()).await;
    conn.completed();
    assert_eq!(kept.idle_count(), 0);
    pool.acquire()
        .await
        .expect("the one connection is back in the pool");
}

#[tokio::test]
async fn releasing_all_lets_the_pool_close() {
    let db = TestDb::new(Backend::Postgres, "kept").await;
    let pool = pool(&db, 6).await;
    let kept = KeptConnections::new(pool.clone(), 6, Duration::from_secs(2));
    let (a, b) = (kept.get().await.unwrap(), kept.get().await.unwrap());
    a.completed();
    b.completed();
    assert_eq!(kept.idle_count(), 2);
    kept.release_all();
    assert_eq!(kept.idle_count(), 0);
    tokio::time::timeout(Duration::from_secs(5), pool.close())
        .await
        .expect("the pool closes once the kept connections are back");
}

#[tokio::test]
async fn run_keeps_the_connection_only_when_its_work_succeeded() {
    let db = TestDb::new(Backend::Postgres, "kept").await;
    let kept = KeptConnections::new(pool(&db, 6).await, 6, Duration::from_secs(2));
    let one: i32 = kept
        .run(async |conn| sqlx::query_scalar("SELECT 1").fetch_one(conn).await)
        .await
        .unwrap();
    assert_eq!(one, 1);
    assert_eq!(kept.idle_count(), 1);
    let failed = kept
        .run(async |conn| sqlx::query("SELECT no_such_column").execute(conn).await)
        .await;
    assert!(failed.is_err());
    assert_eq!(
        kept.idle_count(),
        0,
        "a connection whose work failed is not kept"
    );
}
