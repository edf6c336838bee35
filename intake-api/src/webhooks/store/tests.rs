//! The webhook store against real databases: every test runs on SQLite and PostgreSQL.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use service_kit::Secret;
use service_kit::kek::KeyEncryptionKey;
use test_support::{Backend, TestDb};
use uuid::Uuid;

use super::*;

const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];
const LEASE: Duration = Duration::from_secs(60);

async fn store(backend: Backend) -> (CaseStore, TestDb) {
    crate::store::test_store(backend, "intake-webhooks", Duration::from_secs(60)).await
}

fn seal() -> SecretSeal {
    let encoded = Secret::new(STANDARD.encode([7u8; 32]));
    SecretSeal::new(&KeyEncryptionKey::from_base64("TEST_KEK", &encoded).unwrap()).unwrap()
}

/// Partner `client_id` enquires for `email` on brand_a; the case's reference.
async fn enquire(store: &CaseStore, client_id: &str, email: &str) -> String {
    let today = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    let body = crate::examples::purchase_enquiry("brand_a", email);
    let enquiry = crate::domain::parse_enquiry(&body, &["brand_a"], today).unwrap();
    store
        .submit(&enquiry, "{}", client_id, crate::sandbox::World::Real, None)
        .await
        .unwrap()
        .reference
}

/// Gives `client_id` an endpoint with secret `secret`.
async fn endpoint(store: &CaseStore, client_id: &str, secret: &str) {
    let url = format!("https://{client_id}.example/hooks");
    store
        .set_webhook(client_id, &url, Some(secret), &seal())
        .await
        .unwrap()
        .expect("an endpoint made");
}

/// Every outbox row, oldest first.
async fn rows(store: &CaseStore) -> Vec<webhook_delivery::Model> {
    webhook_delivery::Entity::find()
        .order_by_asc(webhook_delivery::Column::CreatedAt)
        .order_by_asc(webhook_delivery::Column::Id)
        .all(store.db())
        .await
        .unwrap()
}

async fn row(store: &CaseStore, id: Uuid) -> webhook_delivery::Model {
    webhook_delivery::Entity::find()
        .filter(webhook_delivery::Column::Id.eq(id))
        .one(store.db())
        .await
        .unwrap()
        .expect("the row")
}

/// Moves every row's due time and lease into the past, as if their time had come.
async fn all_due(store: &CaseStore) {
    let past = Utc::now() - chrono::Duration::minutes(5);
    webhook_delivery::Entity::update_many()
        .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(past))
        .col_expr(webhook_delivery::Column::LockedUntil, Expr::value(past))
        .exec(store.db())
        .await
        .unwrap();
}

fn whole_second(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(at.timestamp(), 0).unwrap()
}

/// Setting, reading, replacing and removing an endpoint touch only that partner's.
#[tokio::test]
async fn endpoints_are_set_read_replaced_and_removed_per_partner() {
    for backend in BACKENDS {
        endpoints_are_set_read_replaced_and_removed_per_partner_on(backend).await;
    }
}

async fn endpoints_are_set_read_replaced_and_removed_per_partner_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    let seal = seal();
    assert!(store.webhooks().await.unwrap().is_empty());
    assert!(
        store
            .set_webhook("a", "https://a.example/1", None, &seal)
            .await
            .unwrap()
            .is_none(),
        "no endpoint is made without a secret"
    );
    assert!(store.webhook("a").await.unwrap().is_none());

    let (view, created) = store
        .set_webhook("a", "https://a.example/1", Some("whsec_a1"), &seal)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(created.as_deref(), Some("whsec_a1"));
    assert_eq!(
        (view.client_id.as_str(), view.url.as_str()),
        ("a", "https://a.example/1")
    );
    assert_eq!(view.disabled_at, None);
    store
        .set_webhook("b", "https://b.example/1", Some("whsec_b1"), &seal)
        .await
        .unwrap()
        .unwrap();

    let stored = store.webhook("a").await.unwrap().unwrap();
    assert_eq!(stored.url, "https://a.example/1");
    assert_eq!(seal.open("a", &stored.secret).unwrap().expose(), "whsec_a1");

    store.disable_webhook("a", "gone").await.unwrap();
    let (view, created) = store
        .set_webhook("a", "https://a.example/2", Some("whsec_ignored"), &seal)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(created, None, "a replaced endpoint keeps its secret");
    assert_eq!(view.url, "https://a.example/2");
    assert_eq!((view.disabled_at, view.disabled_reason), (None, None));
    let replaced = store.webhook("a").await.unwrap().unwrap();
    assert_eq!(replaced.url, "https://a.example/2");
    assert_eq!(
        seal.open("a", &replaced.secret).unwrap().expose(),
        "whsec_a1"
    );
    assert_eq!(replaced.created_at, stored.created_at);
    assert!(replaced.updated_at >= stored.updated_at);

    let listed: Vec<(String, String)> = store
        .webhooks()
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v.client_id, v.url))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".to_owned(), "https://a.example/2".to_owned()),
            ("b".to_owned(), "https://b.example/1".to_owned()),
        ]
    );

    assert!(store.remove_webhook("a").await.unwrap());
    assert!(!store.remove_webhook("a").await.unwrap());
    assert!(store.webhook("a").await.unwrap().is_none());
    let b = store.webhook("b").await.unwrap().unwrap();
    assert_eq!(b.url, "https://b.example/1");
    assert_eq!(seal.open("b", &b.secret).unwrap().expose(), "whsec_b1");
    let left: Vec<String> = store
        .webhooks()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.client_id)
        .collect();
    assert_eq!(left, ["b"]);
}

/// A rotation seals the new secret and keeps the old one signing until its grace ends; a
/// grace already over drops the old one.
#[tokio::test]
async fn a_rotation_keeps_the_old_secret_until_its_grace_ends() {
    for backend in BACKENDS {
        a_rotation_keeps_the_old_secret_until_its_grace_ends_on(backend).await;
    }
}

async fn a_rotation_keeps_the_old_secret_until_its_grace_ends_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    let seal = seal();
    let grace = whole_second(Utc::now() + chrono::Duration::hours(1));
    assert!(
        store
            .rotate_webhook_secret("nobody", "whsec_x", grace, &seal)
            .await
            .unwrap()
            .is_none()
    );
    endpoint(&store, "a", "whsec_old").await;
    endpoint(&store, "b", "whsec_b").await;

    let view = store
        .rotate_webhook_secret("a", "whsec_new", grace, &seal)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.previous_secret_until, Some(grace));
    let a = store.webhook("a").await.unwrap().unwrap();
    assert!(a.secret.starts_with(SEALED_SECRET_PREFIX), "{}", a.secret);
    assert!(!a.secret.contains("whsec_new"));
    assert_eq!(seal.open("a", &a.secret).unwrap().expose(), "whsec_new");
    let previous = a.previous_secret.expect("the old secret kept");
    assert!(previous.starts_with(SEALED_SECRET_PREFIX), "{previous}");
    assert!(!previous.contains("whsec_old"));
    assert_eq!(seal.open("a", &previous).unwrap().expose(), "whsec_old");
    assert_eq!(a.previous_secret_until, Some(grace));

    let b = store.webhook("b").await.unwrap().unwrap();
    assert_eq!(seal.open("b", &b.secret).unwrap().expose(), "whsec_b");
    assert_eq!((b.previous_secret, b.previous_secret_until), (None, None));

    let over = Utc::now() - chrono::Duration::seconds(1);
    let view = store
        .rotate_webhook_secret("a", "whsec_newer", over, &seal)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.previous_secret_until, None);
    let a = store.webhook("a").await.unwrap().unwrap();
    assert_eq!(seal.open("a", &a.secret).unwrap().expose(), "whsec_newer");
    assert_eq!((a.previous_secret, a.previous_secret_until), (None, None));
}

/// Secrets an older release left in clear are sealed, counted once, and still open to
/// what they were; sealed ones are left as they are.
#[tokio::test]
async fn secrets_left_in_clear_are_sealed_once() {
    for backend in BACKENDS {
        secrets_left_in_clear_are_sealed_once_on(backend).await;
    }
}

async fn secrets_left_in_clear_are_sealed_once_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    let seal = seal();
    let now = Utc::now();
    let clear =
        |client_id: &str, secret: &str, previous: Option<String>| webhook_endpoint::ActiveModel {
            client_id: Set(client_id.to_owned()),
            url: Set(format!("https://{client_id}.example/")),
            secret: Set(secret.to_owned()),
            previous_secret: Set(previous),
            previous_secret_until: Set(None),
            disabled_at: Set(None),
            disabled_reason: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        };
    let sealed_b = seal.seal("b", "whsec_b").unwrap();
    webhook_endpoint::Entity::insert_many([
        clear("a", "whsec_a", Some("whsec_a_old".to_owned())),
        clear("b", &sealed_b, Some("whsec_b_old".to_owned())),
        clear("c", "whsec_c", None),
    ])
    .exec(store.db())
    .await
    .unwrap();
    endpoint(&store, "d", "whsec_d").await;
    let d_before = store.webhook("d").await.unwrap().unwrap();

    assert_eq!(store.seal_webhook_secrets(&seal).await.unwrap(), 3);
    for (client_id, secret, previous) in [
        ("a", "whsec_a", Some("whsec_a_old")),
        ("b", "whsec_b", Some("whsec_b_old")),
        ("c", "whsec_c", None),
    ] {
        let m = store.webhook(client_id).await.unwrap().unwrap();
        assert!(m.secret.starts_with(SEALED_SECRET_PREFIX), "{client_id}");
        assert!(!m.secret.contains(secret), "{client_id}");
        assert_eq!(seal.open(client_id, &m.secret).unwrap().expose(), secret);
        let opened = m.previous_secret.as_deref().map(|p| {
            assert!(p.starts_with(SEALED_SECRET_PREFIX), "{client_id}: {p}");
            seal.open(client_id, p).unwrap().expose().clone()
        });
        assert_eq!(opened.as_deref(), previous, "{client_id}");
    }
    assert_eq!(
        store.webhook("b").await.unwrap().unwrap().secret,
        sealed_b,
        "a sealed secret is kept as it was"
    );
    assert_eq!(store.webhook("d").await.unwrap().unwrap(), d_before);
    assert_eq!(store.seal_webhook_secrets(&seal).await.unwrap(), 0);
}

/// An accepted enquiry queues its event for the submitting partner's endpoint only: not for
/// a partner without an enquiry on the case, nor for one without an endpoint.
#[tokio::test]
async fn an_enquiry_queues_its_event_for_partners_who_hear_of_it() {
    for backend in BACKENDS {
        an_enquiry_queues_its_event_for_partners_who_hear_of_it_on(backend).await;
    }
}

async fn an_enquiry_queues_its_event_for_partners_who_hear_of_it_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    endpoint(&store, "partner", "whsec_p").await;
    endpoint(&store, "bystander", "whsec_b").await;
    assert_eq!(store.pending_deliveries().await.unwrap(), 0);

    let before = Utc::now() - chrono::Duration::seconds(1);
    let reference = enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "silent", "b@example.com").await;

    let queued = rows(&store).await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let event = &queued[0];
    assert_eq!(event.client_id, "partner");
    assert_eq!(event.event_type, "case.created");
    assert_eq!(event.attempts, 0);
    assert_eq!((event.delivered_at, event.failed_at), (None, None));
    assert_eq!(event.locked_until, None);
    assert!(event.created_at >= before, "{event:?}");
    assert!(event.next_attempt_at <= Utc::now(), "due at once");
    assert_eq!(store.pending_deliveries().await.unwrap(), 1);

    let listed = store
        .webhook_deliveries("partner", false, 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, event.id);
    assert_eq!(listed[0].reference, reference);
    assert_eq!(listed[0].state, "pending");
    assert_eq!(listed[0].next_attempt_at, Some(event.next_attempt_at));
    assert!(
        store
            .webhook_deliveries("bystander", false, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .webhook_deliveries("silent", false, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Due events are claimed once while their lease holds, one case's in order, and taken
/// over once the lease has run out.
#[tokio::test]
async fn due_events_are_claimed_once_while_leased() {
    for backend in BACKENDS {
        due_events_are_claimed_once_while_leased_on(backend).await;
    }
}

async fn due_events_are_claimed_once_while_leased_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    endpoint(&store, "partner", "whsec_p").await;
    endpoint(&store, "idle", "whsec_i").await;
    let first = enquire(&store, "partner", "a@example.com").await;
    let again = enquire(&store, "partner", "a@example.com").await;
    assert_eq!(first, again, "the same customer's case");
    let second = enquire(&store, "partner", "b@example.com").await;
    let queued = rows(&store).await;
    let types: Vec<&str> = queued.iter().map(|r| r.event_type.as_str()).collect();
    assert_eq!(types, ["case.created", "case.updated", "case.created"]);

    let mut due = store.webhook_partners_due().await.unwrap();
    due.sort();
    assert_eq!(
        due,
        [("idle".to_owned(), false), ("partner".to_owned(), true)]
    );

    let plan = store.claim_plan("partner", 10).await.unwrap();
    match backend {
        Backend::Sqlite => assert_eq!(plan, None),
        Backend::Postgres => {
            let plan = plan.expect("a plan on PostgreSQL");
            assert!(plan[0].get("Plan").is_some(), "{plan}");
        }
    }
    assert_eq!(
        rows(&store).await,
        queued,
        "the plan's claim is rolled back"
    );

    let claimed = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    let ids: Vec<Uuid> = claimed.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        [queued[0].id, queued[2].id],
        "one event per case, oldest first"
    );
    let a = &claimed[0];
    assert_eq!(
        (a.reference.as_str(), a.brand.as_str()),
        (first.as_str(), "brand_a")
    );
    assert!(!a.status.is_empty());
    assert_eq!(a.event_type, "case.created");
    assert_eq!(a.attempts, 1);
    assert!(a.later_waiting, "the update waits for the creation");
    assert!(!a.fails_on_purpose);
    assert_eq!(claimed[1].reference, second);
    assert!(!claimed[1].later_waiting);
    let held = row(&store, a.id).await;
    let until = held.locked_until.expect("leased");
    assert!(
        until > Utc::now() + chrono::Duration::seconds(30),
        "{held:?}"
    );
    assert_eq!(held.next_attempt_at, until);

    assert!(
        store
            .claim_deliveries("partner", 10, LEASE)
            .await
            .unwrap()
            .is_empty(),
        "nothing more while leased"
    );
    assert!(
        store
            .claim_deliveries("idle", 10, LEASE)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.pending_deliveries().await.unwrap(), 3);

    all_due(&store).await;
    let limited = store.claim_deliveries("partner", 1, LEASE).await.unwrap();
    assert_eq!(limited.len(), 1);
    assert_eq!(
        limited[0].attempts, 2,
        "a taken-over event counts its new try"
    );
}

/// A delivery is done for good; a retry waits until its time, holding its case's later
/// events; a given-up event is failed, and lets them go.
#[tokio::test]
async fn outcomes_are_recorded_and_retries_wait_their_turn() {
    for backend in BACKENDS {
        outcomes_are_recorded_and_retries_wait_their_turn_on(backend).await;
    }
}

async fn outcomes_are_recorded_and_retries_wait_their_turn_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    endpoint(&store, "partner", "whsec_p").await;
    enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "partner", "b@example.com").await;
    let queued = rows(&store).await;

    let claimed = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let (on_a, on_b) = (claimed[0].clone(), claimed[1].clone());
    assert_eq!(on_a.id, queued[0].id);
    let later = Utc::now() + chrono::Duration::hours(1);
    store
        .finish_deliveries(
            "partner",
            &[
                (on_b.clone(), TryOutcome::Delivered),
                (
                    on_a.clone(),
                    TryOutcome::Retry {
                        at: later,
                        status: Some(503),
                        error: "busy".to_owned(),
                    },
                ),
            ],
        )
        .await
        .unwrap();

    let delivered = row(&store, on_b.id).await;
    assert!(delivered.delivered_at.is_some(), "{delivered:?}");
    assert_eq!((delivered.locked_until, delivered.last_error), (None, None));
    let retried = row(&store, on_a.id).await;
    assert_eq!((retried.delivered_at, retried.failed_at), (None, None));
    assert_eq!(retried.locked_until, None);
    assert_eq!(retried.last_status, Some(503));
    assert_eq!(retried.last_error.as_deref(), Some("busy"));
    assert!(retried.next_attempt_at > Utc::now() + chrono::Duration::minutes(59));
    let waiting = row(&store, queued[1].id).await;
    assert_eq!(
        waiting.next_attempt_at, retried.next_attempt_at,
        "held by the retry"
    );
    assert_eq!(store.pending_deliveries().await.unwrap(), 2);
    assert_eq!(
        store.webhook_partners_due().await.unwrap(),
        [("partner".to_owned(), false)]
    );
    assert!(
        store
            .claim_deliveries("partner", 10, LEASE)
            .await
            .unwrap()
            .is_empty()
    );

    // Its time comes: only the retried event goes, the update still behind it.
    webhook_delivery::Entity::update_many()
        .col_expr(
            webhook_delivery::Column::NextAttemptAt,
            Expr::value(Utc::now() - chrono::Duration::seconds(5)),
        )
        .filter(webhook_delivery::Column::Id.eq(on_a.id))
        .exec(store.db())
        .await
        .unwrap();
    let retry = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    assert_eq!(retry.len(), 1);
    assert_eq!((retry[0].id, retry[0].attempts), (on_a.id, 2));
    store
        .finish_deliveries(
            "partner",
            &[(
                retry[0].clone(),
                TryOutcome::Failed {
                    status: None,
                    error: "refused".to_owned(),
                },
            )],
        )
        .await
        .unwrap();
    let failed = row(&store, on_a.id).await;
    assert!(failed.failed_at.is_some());
    assert_eq!(failed.delivered_at, None);
    assert_eq!(failed.last_status, None);
    assert_eq!(failed.last_error.as_deref(), Some("refused"));
    assert_eq!(store.pending_deliveries().await.unwrap(), 1);

    let next = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    let ids: Vec<Uuid> = next.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        [queued[1].id],
        "the update is due once the creation gave up"
    );
    assert_eq!(next[0].event_type, "case.updated");
}

/// Events given back are due at once, their try not counted.
#[tokio::test]
async fn released_events_are_due_again_uncounted() {
    for backend in BACKENDS {
        released_events_are_due_again_uncounted_on(backend).await;
    }
}

async fn released_events_are_due_again_uncounted_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    endpoint(&store, "partner", "whsec_p").await;
    enquire(&store, "partner", "a@example.com").await;
    let claimed = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let id = claimed[0].id;

    store.release_deliveries("other", &[id]).await.unwrap();
    assert!(
        row(&store, id).await.locked_until.is_some(),
        "another partner cannot release it"
    );
    store.release_deliveries("partner", &[id]).await.unwrap();
    let released = row(&store, id).await;
    assert_eq!(released.locked_until, None);
    assert_eq!(released.attempts, 0);
    assert!(released.next_attempt_at <= Utc::now());
    assert_eq!(
        store.webhook_partners_due().await.unwrap(),
        [("partner".to_owned(), true)]
    );

    let again = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id, again[0].attempts), (id, 1));
    store
        .finish_deliveries("partner", &[(again[0].clone(), TryOutcome::Delivered)])
        .await
        .unwrap();
    store.release_deliveries("partner", &[id]).await.unwrap();
    let done = row(&store, id).await;
    assert!(
        done.delivered_at.is_some(),
        "a delivered event is not given back"
    );
    assert_eq!(done.attempts, 1);
}

/// Listing filters by partner and failure, newest first and up to the limit; resending
/// queues a delivered or failed event again at once.
#[tokio::test]
async fn deliveries_are_listed_and_sent_again() {
    for backend in BACKENDS {
        deliveries_are_listed_and_sent_again_on(backend).await;
    }
}

async fn deliveries_are_listed_and_sent_again_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    endpoint(&store, "partner", "whsec_p").await;
    endpoint(&store, "other", "whsec_o").await;
    let a = enquire(&store, "partner", "a@example.com").await;
    let b = enquire(&store, "partner", "b@example.com").await;
    enquire(&store, "other", "c@example.com").await;
    let claimed = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let (on_a, on_b) = (claimed[0].clone(), claimed[1].clone());
    store
        .finish_deliveries(
            "partner",
            &[
                (on_a.clone(), TryOutcome::Delivered),
                (
                    on_b.clone(),
                    TryOutcome::Failed {
                        status: Some(410),
                        error: "gone".to_owned(),
                    },
                ),
            ],
        )
        .await
        .unwrap();

    let all = store
        .webhook_deliveries("partner", false, 10)
        .await
        .unwrap();
    let listed: Vec<(&str, &str)> = all
        .iter()
        .map(|d| (d.reference.as_str(), d.state))
        .collect();
    assert_eq!(listed, [(b.as_str(), "failed"), (a.as_str(), "delivered")]);
    assert_eq!(all[0].last_status, Some(410));
    assert_eq!(all[0].last_error.as_deref(), Some("gone"));
    assert_eq!(all[0].next_attempt_at, None);
    assert!(all[1].delivered_at.is_some());
    assert_eq!(all[1].attempts, 1);

    let failed = store.webhook_deliveries("partner", true, 10).await.unwrap();
    let ids: Vec<Uuid> = failed.iter().map(|d| d.id).collect();
    assert_eq!(ids, [on_b.id]);
    let newest = store.webhook_deliveries("partner", false, 1).await.unwrap();
    assert_eq!(newest.len(), 1);
    assert_eq!(newest[0].id, on_b.id);
    let other = store.webhook_deliveries("other", false, 10).await.unwrap();
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].state, "pending");

    assert_eq!(store.redeliver(Uuid::new_v4()).await.unwrap(), 0);
    assert_eq!(store.redeliver(on_a.id).await.unwrap(), 1);
    assert_eq!(store.redeliver(on_b.id).await.unwrap(), 1);
    for id in [on_a.id, on_b.id] {
        let m = row(&store, id).await;
        assert_eq!(
            (m.delivered_at, m.failed_at, m.locked_until),
            (None, None, None)
        );
        assert!(m.next_attempt_at <= Utc::now());
    }
    assert_eq!(store.pending_deliveries().await.unwrap(), 3);
    let resent = store.claim_deliveries("partner", 10, LEASE).await.unwrap();
    let ids: Vec<Uuid> = resent.iter().map(|e| e.id).collect();
    assert_eq!(ids, [on_a.id, on_b.id]);
    assert!(resent.iter().all(|e| e.attempts == 2), "{resent:?}");
}

/// A disabled endpoint says why and is no longer listed for claims; nothing new is queued
/// for it, its events wait, and go once the endpoint is set again. Removing it drops its undelivered events.
#[tokio::test]
async fn a_disabled_endpoint_says_why_and_is_not_listed_as_due() {
    for backend in BACKENDS {
        a_disabled_endpoint_says_why_and_is_not_listed_as_due_on(backend).await;
    }
}

async fn a_disabled_endpoint_says_why_and_is_not_listed_as_due_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    endpoint(&store, "partner", "whsec_p").await;
    endpoint(&store, "other", "whsec_o").await;
    enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "other", "b@example.com").await;

    store
        .disable_webhook("partner", "410 Gone for a week")
        .await
        .unwrap();
    let disabled = store.webhook("partner").await.unwrap().unwrap();
    assert!(disabled.disabled_at.is_some());
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some("410 Gone for a week")
    );
    assert_eq!(
        store.webhook("other").await.unwrap().unwrap().disabled_at,
        None
    );
    assert_eq!(
        store.webhook_partners_due().await.unwrap(),
        [("other".to_owned(), true)]
    );
    // The worker claims only for partners listed as due whose endpoint it reads as active
    // (`delivery::claim`): the claim itself does not look at the endpoint.
    assert_eq!(store.pending_deliveries().await.unwrap(), 2);
    enquire(&store, "partner", "c@example.com").await;
    assert_eq!(
        store
            .webhook_deliveries("partner", false, 10)
            .await
            .unwrap()
            .len(),
        1,
        "nothing is queued for a disabled endpoint"
    );

    store
        .set_webhook("partner", "https://partner.example/new", None, &seal())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .claim_deliveries("partner", 10, LEASE)
            .await
            .unwrap()
            .len(),
        1
    );

    assert!(store.remove_webhook("partner").await.unwrap());
    assert!(
        store
            .webhook_deliveries("partner", false, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.pending_deliveries().await.unwrap(), 1);
    assert_eq!(
        store
            .webhook_deliveries("other", false, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Strings from operators reach the database as given: a NUL is refused by PostgreSQL with
/// an error, never a panic; whatever is accepted reads back exactly.
#[tokio::test]
async fn hostile_bytes_are_refused_or_stored_exactly() {
    for backend in BACKENDS {
        hostile_bytes_are_refused_or_stored_exactly_on(backend).await;
    }
}

async fn hostile_bytes_are_refused_or_stored_exactly_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    let seal = seal();
    let controls = "https://x.example/\u{1}\u{7}\t\r\n\u{1b}[31m\u{7f}\u{202e}é";
    let with_nul = "https://x.example/a\0b";

    let (view, _) = store
        .set_webhook("ctl", controls, Some("whsec_c"), &seal)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.url, controls);
    assert_eq!(store.webhook("ctl").await.unwrap().unwrap().url, controls);
    store.disable_webhook("ctl", controls).await.unwrap();
    assert_eq!(
        store
            .webhook("ctl")
            .await
            .unwrap()
            .unwrap()
            .disabled_reason
            .as_deref(),
        Some(controls)
    );

    let made = store
        .set_webhook("nul", with_nul, Some("whsec_n"), &seal)
        .await;
    match backend {
        Backend::Postgres => {
            assert!(made.is_err(), "{made:?}");
            assert!(store.webhook("nul").await.unwrap().is_none());
        }
        Backend::Sqlite => {
            assert!(made.is_ok(), "{made:?}");
            assert_eq!(store.webhook("nul").await.unwrap().unwrap().url, with_nul);
        }
    }
    let replaced = store.set_webhook("ctl", with_nul, None, &seal).await;
    let reason = store.disable_webhook("ctl", "reason\0after").await;
    let stored = store.webhook("ctl").await.unwrap().unwrap();
    match backend {
        Backend::Postgres => {
            assert!(replaced.is_err(), "{replaced:?}");
            assert!(reason.is_err(), "{reason:?}");
            assert_eq!(stored.url, controls, "a refused change changes nothing");
            assert_eq!(stored.disabled_reason.as_deref(), Some(controls));
        }
        Backend::Sqlite => {
            assert!(
                replaced.is_ok() && reason.is_ok(),
                "{replaced:?} {reason:?}"
            );
            assert_eq!(stored.url, with_nul);
            assert_eq!(stored.disabled_reason.as_deref(), Some("reason\0after"));
        }
    }
    assert!(
        store
            .rotate_webhook_secret("ctl", "whsec_\0", Utc::now(), &seal)
            .await
            .is_ok()
    );
    let ctl = store.webhook("ctl").await.unwrap().unwrap();
    assert_eq!(seal.open("ctl", &ctl.secret).unwrap().expose(), "whsec_\0");
}
