//! The webhook store against real databases: every test runs on SQLite and PostgreSQL.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use service_kit::Secret;
use service_kit::kek::KeyEncryptionKey;
use test_support::{Backend, TestDb};
use uuid::Uuid;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use shared::intake::webhook_deliveries::DeliveryStatus;
use shared::intake::webhooks::EventType;

use super::*;
use crate::entity::{webhook_delivery, webhook_endpoint};
use crate::store::{CaseStore, SEALED_SECRET_PREFIX, SecretSeal};

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

/// Gives `client_id` an endpoint, receiving every event type, with secret `secret`; its id.
async fn endpoint(store: &CaseStore, client_id: &str, secret: &str) -> Uuid {
    subscribed(store, client_id, secret, Subscription::ALL).await
}

/// Gives `client_id` an endpoint receiving `event_types`, with secret `secret`; its id.
async fn subscribed(
    store: &CaseStore,
    client_id: &str,
    secret: &str,
    event_types: Subscription,
) -> Uuid {
    let url = format!("https://{client_id}.example/hooks");
    let new = NewEndpoint {
        client_id,
        url: &url,
        event_types,
        secret,
        limit: 10,
        rate_limit: None,
        by: &ChangedBy::partner(),
    };
    match store.create_endpoint(new, &seal()).await.unwrap() {
        Created::Made(view) => view.id,
        Created::AtLimit(n) => panic!("{client_id} has {n} endpoints"),
    }
}

/// `client_id`'s oldest endpoint with its secrets, if it has one.
async fn stored(store: &CaseStore, client_id: &str) -> Option<webhook_endpoint::Model> {
    webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::ClientId.eq(client_id))
        .order_by_asc(webhook_endpoint::Column::CreatedAt)
        .one(store.db())
        .await
        .unwrap()
}

/// Which endpoints are due, by partner, in the order of their partners.
async fn due_by_partner(store: &CaseStore) -> Vec<(String, bool)> {
    let mut due: Vec<(String, bool)> = store
        .webhook_endpoints_due()
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.client_id, e.due))
        .collect();
    due.sort();
    due
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
    assert!(store.endpoints(None).await.unwrap().is_empty());
    assert!(
        matches!(
            store
                .set_webhook(
                    "a",
                    "https://a.example/1",
                    None,
                    &seal,
                    &ChangedBy::operator()
                )
                .await
                .unwrap(),
            SetOutcome::NoSecret
        ),
        "no endpoint is made without a secret"
    );
    assert!(stored(&store, "a").await.is_none());

    let SetOutcome::Made(view) = store
        .set_webhook(
            "a",
            "https://a.example/1",
            Some("whsec_a1"),
            &seal,
            &ChangedBy::operator(),
        )
        .await
        .unwrap()
    else {
        panic!("a new endpoint");
    };
    let ep_a = view.id;
    assert_eq!(
        (view.client_id.as_str(), view.url.as_str()),
        ("a", "https://a.example/1")
    );
    assert_eq!(
        (view.disabled_at, view.event_types),
        (None, Subscription::ALL)
    );
    let ep_b = endpoint(&store, "b", "whsec_b1").await;

    let stored_a = stored(&store, "a").await.unwrap();
    assert_eq!(stored_a.url, "https://a.example/1");
    assert_eq!(
        seal.open("a", &stored_a.secret).unwrap().expose(),
        "whsec_a1"
    );

    store
        .disable_endpoint(ep_a, "gone", &ChangedBy::worker())
        .await
        .unwrap();
    let SetOutcome::Changed(view) = store
        .set_webhook(
            "a",
            "https://a.example/2",
            Some("whsec_ignored"),
            &seal,
            &ChangedBy::operator(),
        )
        .await
        .unwrap()
    else {
        panic!("the endpoint changed");
    };
    assert_eq!(view.id, ep_a, "the same endpoint");
    assert_eq!(view.url, "https://a.example/2");
    assert_eq!((view.disabled_at, view.disabled_reason), (None, None));
    let replaced = stored(&store, "a").await.unwrap();
    assert_eq!(replaced.url, "https://a.example/2");
    assert_eq!(
        seal.open("a", &replaced.secret).unwrap().expose(),
        "whsec_a1",
        "a replaced endpoint keeps its secret"
    );
    assert_eq!(replaced.created_at, stored_a.created_at);
    assert!(replaced.updated_at >= stored_a.updated_at);

    let listed: Vec<(String, String)> = store
        .endpoints(None)
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v.client_id, v.url))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".to_owned(), "https://a.example/2".to_owned()),
            ("b".to_owned(), "https://b.example/hooks".to_owned()),
        ]
    );

    assert!(!store.delete_endpoint("b", ep_a).await.unwrap(), "not b's");
    assert!(
        store.endpoint("b", ep_a).await.unwrap().is_none(),
        "not b's"
    );
    assert!(store.endpoint("a", ep_a).await.unwrap().is_some());
    assert!(store.delete_endpoint("a", ep_a).await.unwrap());
    assert!(!store.delete_endpoint("a", ep_a).await.unwrap());
    assert!(stored(&store, "a").await.is_none());
    let b = stored(&store, "b").await.unwrap();
    assert_eq!(b.id, ep_b);
    assert_eq!(seal.open("b", &b.secret).unwrap().expose(), "whsec_b1");
    let left: Vec<String> = store
        .endpoints(None)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.client_id)
        .collect();
    assert_eq!(left, ["b"]);
}

/// A partner has as many endpoints as its limit allows, each changed, rotated and removed
/// alone; another partner can neither see nor change them, whatever id it names.
#[tokio::test]
async fn a_partner_has_several_endpoints_up_to_its_limit_and_only_its_own() {
    for backend in BACKENDS {
        a_partner_has_several_endpoints_up_to_its_limit_and_only_its_own_on(backend).await;
    }
}

async fn a_partner_has_several_endpoints_up_to_its_limit_and_only_its_own_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    let seal = seal();
    let partner = ChangedBy::partner();
    let new = |url: &'static str, limit: u64| NewEndpoint {
        client_id: "a",
        url,
        event_types: Subscription::ALL,
        secret: "whsec_a",
        limit,
        rate_limit: None,
        by: &partner,
    };
    let mut made = Vec::new();
    for url in ["https://a.example/1", "https://a.example/2"] {
        match store.create_endpoint(new(url, 2), &seal).await.unwrap() {
            Created::Made(view) => made.push(view.id),
            Created::AtLimit(_) => panic!("under the limit"),
        }
    }
    assert!(matches!(
        store
            .create_endpoint(new("https://a.example/3", 2), &seal)
            .await
            .unwrap(),
        Created::AtLimit(2)
    ));
    let ep_b = endpoint(&store, "b", "whsec_b").await;
    assert_eq!(store.endpoints(Some("a")).await.unwrap().len(), 2);
    assert!(
        matches!(
            store
                .set_webhook(
                    "a",
                    "https://a.example/x",
                    None,
                    &seal,
                    &ChangedBy::operator()
                )
                .await
                .unwrap(),
            SetOutcome::Several(2)
        ),
        "the CLI's `set` cannot tell which"
    );

    let change = EndpointChange {
        url: Some("https://a.example/changed".to_owned()),
        event_types: Some(Subscription::only(&[EventType::CaseActivated])),
        disabled: Some(Some("paused".to_owned())),
        rate_limit: Some(Some(5)),
        by: ChangedBy::partner(),
    };
    assert!(
        store
            .change_endpoint("b", made[0], change.clone())
            .await
            .unwrap()
            .is_none(),
        "b cannot change a's"
    );
    assert!(
        store
            .rotate_endpoint_secret(
                "b",
                made[0],
                "whsec_x",
                Utc::now(),
                &seal,
                &ChangedBy::partner()
            )
            .await
            .unwrap()
            .is_none(),
        "b cannot rotate a's"
    );
    let changed = store
        .change_endpoint("a", made[0], change)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.url, "https://a.example/changed");
    assert_eq!(
        changed.event_types.types(),
        Some(vec![EventType::CaseActivated])
    );
    assert_eq!(changed.disabled_reason.as_deref(), Some("paused"));
    assert_eq!(changed.rate_limit, Some(5));
    assert_eq!(changed.changed_by.as_deref(), Some("partner"));
    let other = store.endpoint("a", made[1]).await.unwrap().unwrap();
    assert_eq!(
        (other.url.as_str(), other.disabled_at),
        ("https://a.example/2", None),
        "the other endpoint is as it was"
    );
    let b = store.endpoint("b", ep_b).await.unwrap().unwrap();
    assert_eq!(b.url, "https://b.example/hooks");

    let enabled = store
        .change_endpoint(
            "a",
            made[0],
            EndpointChange {
                url: None,
                disabled: Some(None),
                event_types: Some(Subscription::ALL),
                rate_limit: Some(None),
                by: ChangedBy::operator(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (enabled.disabled_at, enabled.event_types),
        (None, Subscription::ALL)
    );
    assert_eq!(enabled.rate_limit, None, "the limit lifted");
    assert!(
        enabled
            .changed_by
            .as_deref()
            .unwrap()
            .starts_with("operator"),
        "{enabled:?}"
    );
    assert!(store.delete_endpoint("a", made[1]).await.unwrap());
    assert!(matches!(
        store
            .create_endpoint(new("https://a.example/3", 2), &seal)
            .await
            .unwrap(),
        Created::Made(_)
    ));
}

/// Partners racing to make endpoints never pass their limit.
#[tokio::test]
async fn racing_creations_stay_within_the_limit() {
    for backend in BACKENDS {
        let (store, _db) = store(backend).await;
        let mut tries = tokio::task::JoinSet::new();
        for i in 0..8 {
            let store = store.clone();
            tries.spawn(async move {
                let url = format!("https://a.example/{i}");
                let new = NewEndpoint {
                    client_id: "a",
                    url: &url,
                    event_types: Subscription::ALL,
                    secret: "whsec_a",
                    limit: 3,
                    rate_limit: None,
                    by: &ChangedBy::partner(),
                };
                store.create_endpoint(new, &seal()).await.unwrap()
            });
        }
        let made = tries
            .join_all()
            .await
            .into_iter()
            .filter(|c| matches!(c, Created::Made(_)))
            .count();
        assert_eq!(made, 3, "{backend:?}");
        assert_eq!(store.endpoints(Some("a")).await.unwrap().len(), 3);
    }
}

/// Each endpoint gets the events of the types it is subscribed to, and only those; one
/// partner's endpoints each get their own copy.
#[tokio::test]
async fn events_go_to_each_endpoint_subscribed_to_their_type() {
    for backend in BACKENDS {
        events_go_to_each_endpoint_subscribed_to_their_type_on(backend).await;
    }
}

async fn events_go_to_each_endpoint_subscribed_to_their_type_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    let every = endpoint(&store, "partner", "whsec_1").await;
    let created_only = subscribed(
        &store,
        "partner",
        "whsec_2",
        Subscription::only(&[EventType::CaseCreated]),
    )
    .await;
    let activated_only = subscribed(
        &store,
        "partner",
        "whsec_3",
        Subscription::only(&[EventType::CaseActivated]),
    )
    .await;
    enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "partner", "a@example.com").await;
    let got = |endpoint: Uuid, rows: &[webhook_delivery::Model]| -> Vec<String> {
        rows.iter()
            .filter(|r| r.endpoint_id == endpoint)
            .map(|r| r.event_type.clone())
            .collect()
    };
    let queued = rows(&store).await;
    assert_eq!(got(every, &queued), ["case.created", "case.updated"]);
    assert_eq!(got(created_only, &queued), ["case.created"]);
    assert!(got(activated_only, &queued).is_empty());
    assert_eq!(queued.len(), 3);

    let claimed = store
        .claim_deliveries(created_only, 10, LEASE)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].event_type, "case.created");
    let claimed = store.claim_deliveries(every, 10, LEASE).await.unwrap();
    assert_eq!(
        claimed.len(),
        1,
        "the update waits for this endpoint's creation"
    );
    assert!(
        store
            .claim_deliveries(activated_only, 10, LEASE)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Events a server that knew one endpoint per partner queued (the nil endpoint) go to the
/// partner's endpoint once the worker looks; a partner without one keeps them queued.
#[tokio::test]
async fn events_queued_without_an_endpoint_are_adopted() {
    for backend in BACKENDS {
        let (store, _db) = store(backend).await;
        let ep = endpoint(&store, "partner", "whsec_p").await;
        enquire(&store, "partner", "a@example.com").await;
        enquire(&store, "nobody", "b@example.com").await;
        let queued = rows(&store).await;
        assert_eq!(queued.len(), 1);
        webhook_delivery::Entity::update_many()
            .col_expr(
                webhook_delivery::Column::EndpointId,
                Expr::value(Uuid::nil()),
            )
            .exec(store.db())
            .await
            .unwrap();
        let mut orphan = queued[0].clone();
        orphan.client_id = "nobody".to_owned();
        orphan.endpoint_id = Uuid::nil();
        webhook_delivery::Entity::insert(webhook_delivery::ActiveModel::from(orphan))
            .exec(store.db())
            .await
            .unwrap();
        assert!(
            store
                .claim_deliveries(ep, 10, LEASE)
                .await
                .unwrap()
                .is_empty()
        );

        assert_eq!(due_by_partner(&store).await, [("partner".to_owned(), true)]);
        let claimed = store.claim_deliveries(ep, 10, LEASE).await.unwrap();
        assert_eq!(claimed.len(), 1, "{backend:?}");
        assert_eq!(claimed[0].id, queued[0].id);
        let left: Vec<(String, Uuid)> = rows(&store)
            .await
            .into_iter()
            .map(|r| (r.client_id, r.endpoint_id))
            .collect();
        assert!(
            left.contains(&("nobody".to_owned(), Uuid::nil())),
            "{left:?}"
        );
    }
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
            .rotate_endpoint_secret(
                "nobody",
                Uuid::new_v4(),
                "whsec_x",
                grace,
                &seal,
                &ChangedBy::partner()
            )
            .await
            .unwrap()
            .is_none()
    );
    let ep_a = endpoint(&store, "a", "whsec_old").await;
    endpoint(&store, "b", "whsec_b").await;

    let view = store
        .rotate_endpoint_secret("a", ep_a, "whsec_new", grace, &seal, &ChangedBy::partner())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.previous_secret_until, Some(grace));
    let a = stored(&store, "a").await.unwrap();
    assert!(a.secret.starts_with(SEALED_SECRET_PREFIX), "{}", a.secret);
    assert!(!a.secret.contains("whsec_new"));
    assert_eq!(seal.open("a", &a.secret).unwrap().expose(), "whsec_new");
    let previous = a.previous_secret.expect("the old secret kept");
    assert!(previous.starts_with(SEALED_SECRET_PREFIX), "{previous}");
    assert!(!previous.contains("whsec_old"));
    assert_eq!(seal.open("a", &previous).unwrap().expose(), "whsec_old");
    assert_eq!(a.previous_secret_until, Some(grace));

    let b = stored(&store, "b").await.unwrap();
    assert_eq!(seal.open("b", &b.secret).unwrap().expose(), "whsec_b");
    assert_eq!((b.previous_secret, b.previous_secret_until), (None, None));

    let over = Utc::now() - chrono::Duration::seconds(1);
    let view = store
        .rotate_endpoint_secret("a", ep_a, "whsec_newer", over, &seal, &ChangedBy::partner())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.previous_secret_until, None);
    let a = stored(&store, "a").await.unwrap();
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
            id: Set(Uuid::new_v4()),
            event_types: Set(None),
            failing_since: Set(None),
            client_id: Set(client_id.to_owned()),
            url: Set(format!("https://{client_id}.example/")),
            secret: Set(secret.to_owned()),
            previous_secret: Set(previous),
            previous_secret_until: Set(None),
            disabled_at: Set(None),
            disabled_reason: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            rate_limit: Set(None),
            changed_by: Set(None),
            resend_requests: Set(None),
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
    let d_before = stored(&store, "d").await.unwrap();

    assert_eq!(store.seal_webhook_secrets(&seal).await.unwrap(), 3);
    for (client_id, secret, previous) in [
        ("a", "whsec_a", Some("whsec_a_old")),
        ("b", "whsec_b", Some("whsec_b_old")),
        ("c", "whsec_c", None),
    ] {
        let m = stored(&store, client_id).await.unwrap();
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
        stored(&store, "b").await.unwrap().secret,
        sealed_b,
        "a sealed secret is kept as it was"
    );
    assert_eq!(stored(&store, "d").await.unwrap(), d_before);
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
    let ep_partner = endpoint(&store, "partner", "whsec_p").await;
    endpoint(&store, "bystander", "whsec_b").await;
    assert_eq!(store.pending_deliveries().await.unwrap(), 0);

    let before = Utc::now() - chrono::Duration::seconds(1);
    let reference = enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "silent", "b@example.com").await;

    let queued = rows(&store).await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let event = &queued[0];
    assert_eq!(
        (event.client_id.as_str(), event.endpoint_id),
        ("partner", ep_partner)
    );
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
    assert_eq!(listed[0].state, DeliveryStatus::Pending);
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
    let ep_partner = endpoint(&store, "partner", "whsec_p").await;
    let ep_idle = endpoint(&store, "idle", "whsec_i").await;
    let first = enquire(&store, "partner", "a@example.com").await;
    let again = enquire(&store, "partner", "a@example.com").await;
    assert_eq!(first, again, "the same customer's case");
    let second = enquire(&store, "partner", "b@example.com").await;
    let queued = rows(&store).await;
    let types: Vec<&str> = queued.iter().map(|r| r.event_type.as_str()).collect();
    assert_eq!(types, ["case.created", "case.updated", "case.created"]);

    assert_eq!(
        due_by_partner(&store).await,
        [("idle".to_owned(), false), ("partner".to_owned(), true)]
    );

    let plan = store.claim_plan(ep_partner, 10).await.unwrap();
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

    let claimed = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
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
            .claim_deliveries(ep_partner, 10, LEASE)
            .await
            .unwrap()
            .is_empty(),
        "nothing more while leased"
    );
    assert!(
        store
            .claim_deliveries(ep_idle, 10, LEASE)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.pending_deliveries().await.unwrap(), 3);

    all_due(&store).await;
    let limited = store.claim_deliveries(ep_partner, 1, LEASE).await.unwrap();
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
    let ep_partner = endpoint(&store, "partner", "whsec_p").await;
    enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "partner", "b@example.com").await;
    let queued = rows(&store).await;

    let claimed = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let (on_a, on_b) = (claimed[0].clone(), claimed[1].clone());
    assert_eq!(on_a.id, queued[0].id);
    let later = Utc::now() + chrono::Duration::hours(1);
    store
        .finish_deliveries(
            ep_partner,
            &[
                (on_b.clone(), TryOutcome::Delivered { status: 200 }, tried()),
                (
                    on_a.clone(),
                    TryOutcome::Retry {
                        at: later,
                        status: Some(503),
                        error: "busy".to_owned(),
                    },
                    tried(),
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
        due_by_partner(&store).await,
        [("partner".to_owned(), false)]
    );
    assert!(
        store
            .claim_deliveries(ep_partner, 10, LEASE)
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
    let retry = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
    assert_eq!(retry.len(), 1);
    assert_eq!((retry[0].id, retry[0].attempts), (on_a.id, 2));
    store
        .finish_deliveries(
            ep_partner,
            &[(
                retry[0].clone(),
                TryOutcome::Failed {
                    status: None,
                    error: "refused".to_owned(),
                },
                tried(),
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

    let next = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
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
    let ep_partner = endpoint(&store, "partner", "whsec_p").await;
    enquire(&store, "partner", "a@example.com").await;
    let claimed = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let id = claimed[0].id;

    store
        .release_deliveries(Uuid::new_v4(), &[id])
        .await
        .unwrap();
    assert!(
        row(&store, id).await.locked_until.is_some(),
        "another partner cannot release it"
    );
    store.release_deliveries(ep_partner, &[id]).await.unwrap();
    let released = row(&store, id).await;
    assert_eq!(released.locked_until, None);
    assert_eq!(released.attempts, 0);
    assert!(released.next_attempt_at <= Utc::now());
    assert_eq!(due_by_partner(&store).await, [("partner".to_owned(), true)]);

    let again = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id, again[0].attempts), (id, 1));
    store
        .finish_deliveries(
            ep_partner,
            &[(
                again[0].clone(),
                TryOutcome::Delivered { status: 200 },
                tried(),
            )],
        )
        .await
        .unwrap();
    store.release_deliveries(ep_partner, &[id]).await.unwrap();
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
    let ep_partner = endpoint(&store, "partner", "whsec_p").await;
    endpoint(&store, "other", "whsec_o").await;
    let a = enquire(&store, "partner", "a@example.com").await;
    let b = enquire(&store, "partner", "b@example.com").await;
    enquire(&store, "other", "c@example.com").await;
    let claimed = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let (on_a, on_b) = (claimed[0].clone(), claimed[1].clone());
    store
        .finish_deliveries(
            ep_partner,
            &[
                (on_a.clone(), TryOutcome::Delivered { status: 200 }, tried()),
                (
                    on_b.clone(),
                    TryOutcome::Failed {
                        status: Some(410),
                        error: "gone".to_owned(),
                    },
                    tried(),
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
        .map(|d| (d.reference.as_str(), d.state.name()))
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
    assert_eq!(other[0].state, DeliveryStatus::Pending);

    assert_eq!(store.redeliver(None, Uuid::new_v4()).await.unwrap(), 0);
    assert_eq!(store.redeliver(None, on_a.id).await.unwrap(), 1);
    assert_eq!(store.redeliver(None, on_b.id).await.unwrap(), 1);
    for id in [on_a.id, on_b.id] {
        let m = row(&store, id).await;
        assert_eq!(
            (m.delivered_at, m.failed_at, m.locked_until),
            (None, None, None)
        );
        assert!(m.next_attempt_at <= Utc::now());
    }
    assert_eq!(store.pending_deliveries().await.unwrap(), 3);
    let resent = store.claim_deliveries(ep_partner, 10, LEASE).await.unwrap();
    let ids: Vec<Uuid> = resent.iter().map(|e| e.id).collect();
    assert_eq!(ids, [on_a.id, on_b.id]);
    assert!(resent.iter().all(|e| e.attempts == 2), "{resent:?}");
}

/// A try as the worker reports it, 12 ms long.
fn tried() -> Tried {
    Tried {
        at: Utc::now(),
        duration: Duration::from_millis(12),
    }
}

/// Each try of `id` for `endpoint` in the history, as (attempt, status, error).
async fn tries(
    store: &CaseStore,
    endpoint: Uuid,
    id: Uuid,
) -> Vec<(i32, Option<i16>, Option<String>)> {
    crate::entity::webhook_attempt::Entity::find()
        .filter(crate::entity::webhook_attempt::Column::EndpointId.eq(endpoint))
        .filter(crate::entity::webhook_attempt::Column::DeliveryId.eq(id))
        .order_by_asc(crate::entity::webhook_attempt::Column::Attempt)
        .all(store.db())
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.attempt, a.status, a.error))
        .collect()
}

#[tokio::test]
async fn the_history_keeps_each_try_pages_resends_and_prunes() {
    for backend in BACKENDS {
        the_history_keeps_each_try_pages_resends_and_prunes_on(backend).await;
    }
}

async fn the_history_keeps_each_try_pages_resends_and_prunes_on(backend: Backend) {
    let (store, _db) = store(backend).await;
    let ep = endpoint(&store, "partner", "whsec_p").await;
    let ep_other = endpoint(&store, "other", "whsec_o").await;
    for email in ["a@example.com", "b@example.com", "c@example.com"] {
        enquire(&store, "partner", email).await;
    }
    enquire(&store, "other", "d@example.com").await;
    let claimed = store.claim_deliveries(ep, 10, LEASE).await.unwrap();
    let [a, b, c] = [0, 1, 2].map(|i| claimed[i].clone());
    let later = Utc::now() + chrono::Duration::hours(1);
    let outcomes = [
        (a.clone(), TryOutcome::Delivered { status: 204 }, tried()),
        (
            b.clone(),
            TryOutcome::Retry {
                at: later,
                status: Some(503),
                error: "busy".to_owned(),
            },
            tried(),
        ),
        (
            c.clone(),
            TryOutcome::Failed {
                status: Some(410),
                error: "gone".to_owned(),
            },
            tried(),
        ),
    ];
    store.finish_deliveries(ep, &outcomes).await.unwrap();
    // Recorded twice (a lease ran out meanwhile): the history keeps one of each try.
    store.finish_deliveries(ep, &outcomes).await.unwrap();

    let (view, attempts) = store.delivery("partner", ep, a.id).await.unwrap().unwrap();
    assert_eq!(
        (view.state, view.last_status),
        (DeliveryStatus::Delivered, Some(204))
    );
    assert_eq!(attempts.len(), 1);
    assert_eq!((attempts[0].attempt, attempts[0].status), (1, Some(204)));
    assert_eq!(
        (attempts[0].duration_ms, attempts[0].error.as_deref()),
        (12, None)
    );
    let (view, attempts) = store.delivery("partner", ep, b.id).await.unwrap().unwrap();
    assert_eq!(view.state, DeliveryStatus::Failing);
    assert_eq!(
        view.next_attempt_at.map(whole_second),
        Some(whole_second(later))
    );
    assert_eq!(
        attempts[0].next_attempt_at.map(whole_second),
        Some(whole_second(later))
    );
    assert_eq!(attempts[0].error.as_deref(), Some("busy"));
    let (view, _) = store.delivery("partner", ep, c.id).await.unwrap().unwrap();
    assert_eq!(
        (view.state, view.next_attempt_at),
        (DeliveryStatus::Failed, None)
    );
    // Another partner, or another endpoint, finds nothing by the same ids.
    assert!(store.delivery("other", ep, a.id).await.unwrap().is_none());
    assert!(
        store
            .delivery("partner", ep_other, a.id)
            .await
            .unwrap()
            .is_none()
    );

    // Pages, newest first, each event once.
    let page = |after, status, endpoint| HistoryQuery {
        client_id: "partner",
        endpoint,
        status,
        after,
        limit: 2,
        ..HistoryQuery::default()
    };
    let (first, next) = store.history(page(None, None, None)).await.unwrap();
    assert_eq!(first.iter().map(|v| v.id).collect::<Vec<_>>(), [c.id, b.id]);
    let (second, last) = store.history(page(next, None, None)).await.unwrap();
    assert_eq!(second.iter().map(|v| v.id).collect::<Vec<_>>(), [a.id]);
    assert_eq!(last, None);
    for (status, id) in [
        (DeliveryStatus::Failing, b.id),
        (DeliveryStatus::Failed, c.id),
        (DeliveryStatus::Delivered, a.id),
    ] {
        let (found, _) = store.history(page(None, Some(status), None)).await.unwrap();
        assert_eq!(
            found.iter().map(|v| v.id).collect::<Vec<_>>(),
            [id],
            "{status:?}"
        );
    }
    let (pending, _) = store
        .history(page(None, Some(DeliveryStatus::Pending), None))
        .await
        .unwrap();
    assert!(pending.is_empty());
    // Naming another partner's endpoint finds none of its events.
    let (theirs, _) = store
        .history(page(None, None, Some(ep_other)))
        .await
        .unwrap();
    assert!(theirs.is_empty());
    let window = |since: DateTime<Utc>, until: DateTime<Utc>| HistoryQuery {
        client_id: "partner",
        since: Some(since),
        until: Some(until),
        limit: 10,
        ..HistoryQuery::default()
    };
    let now = Utc::now();
    let hour = chrono::Duration::hours(1);
    assert_eq!(
        store
            .history(window(now - hour, now + hour))
            .await
            .unwrap()
            .0
            .len(),
        3
    );
    assert!(
        store
            .history(window(now + hour, now + hour * 2))
            .await
            .unwrap()
            .0
            .is_empty()
    );
    assert!(
        store
            .history(window(now - hour * 2, now - hour))
            .await
            .unwrap()
            .0
            .is_empty()
    );

    // Sent again: only by its partner, for its endpoint; not while it is being sent.
    assert_eq!(store.redeliver(Some(("other", ep)), c.id).await.unwrap(), 0);
    assert_eq!(
        store
            .redeliver(Some(("partner", ep_other)), c.id)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store.redeliver(Some(("partner", ep)), c.id).await.unwrap(),
        1
    );
    let (view, attempts) = store.delivery("partner", ep, c.id).await.unwrap().unwrap();
    assert_eq!(
        (view.state, view.last_error),
        (DeliveryStatus::Pending, None)
    );
    assert_eq!(attempts.len(), 1, "the failed try stays in the history");
    let again = store.claim_deliveries(ep, 10, LEASE).await.unwrap();
    assert_eq!(again.iter().map(|e| e.id).collect::<Vec<_>>(), [c.id]);
    assert_eq!(
        store.redeliver(Some(("partner", ep)), c.id).await.unwrap(),
        0
    );
    let failed_again = TryOutcome::Failed {
        status: None,
        error: "could not connect".to_owned(),
    };
    store
        .finish_deliveries(ep, &[(again[0].clone(), failed_again, tried())])
        .await
        .unwrap();
    assert_eq!(
        tries(&store, ep, c.id).await,
        [
            (1, Some(410), Some("gone".to_owned())),
            (2, None, Some("could not connect".to_owned()))
        ]
    );

    // Recovered: the window's events not delivered (c given up on, b waiting for its
    // retry), for this partner's endpoint only, each once.
    assert_eq!(
        store
            .recover("other", ep, now - hour, now + hour)
            .await
            .unwrap(),
        (0, false)
    );
    assert_eq!(
        store
            .recover("partner", ep, now + hour, now + hour * 2)
            .await
            .unwrap(),
        (0, false)
    );
    assert_eq!(
        store
            .recover("partner", ep, now - hour, now + hour)
            .await
            .unwrap(),
        (2, false)
    );
    assert_eq!(row(&store, c.id).await.failed_at, None);
    assert!(
        row(&store, b.id).await.next_attempt_at <= Utc::now(),
        "b is due now"
    );
    assert_eq!(
        store
            .recover("partner", ep, now - hour, now + hour)
            .await
            .unwrap(),
        (0, false),
        "each event once"
    );

    // Pruned: what is settled goes with its tries; what waits stays.
    let d = store.claim_deliveries(ep_other, 10, LEASE).await.unwrap();
    store
        .finish_deliveries(
            ep_other,
            &[(d[0].clone(), TryOutcome::Delivered { status: 200 }, tried())],
        )
        .await
        .unwrap();
    assert_eq!(store.prune_history(now - hour).await.unwrap(), 0);
    assert_eq!(store.prune_history(now + hour).await.unwrap(), 2);
    assert_eq!(store.prune_history(now + hour).await.unwrap(), 0);
    assert!(store.delivery("partner", ep, a.id).await.unwrap().is_none());
    assert!(tries(&store, ep, a.id).await.is_empty());
    assert!(tries(&store, ep_other, d[0].id).await.is_empty());
    assert_eq!(tries(&store, ep, b.id).await.len(), 1, "b is queued again");
    assert_eq!(tries(&store, ep, c.id).await.len(), 2, "c is queued again");

    // Removing the endpoint drops its waiting events and their tries; what it settled is
    // kept, and no longer sent again (nothing would send it).
    enquire(&store, "partner", "e@example.com").await;
    let e = store.claim_deliveries(ep, 10, LEASE).await.unwrap();
    assert_eq!(e.len(), 3, "b, c and e's event: {e:?}");
    let done: Vec<_> = e
        .iter()
        .map(|d| {
            let outcome = if d.id == b.id || d.id == c.id {
                TryOutcome::Delivered { status: 200 }
            } else {
                TryOutcome::Retry {
                    at: later,
                    status: Some(500),
                    error: "the endpoint answered 500".to_owned(),
                }
            };
            (d.clone(), outcome, tried())
        })
        .collect();
    store.finish_deliveries(ep, &done).await.unwrap();
    let waiting = e.iter().find(|d| d.id != b.id && d.id != c.id).unwrap();
    assert_eq!(tries(&store, ep, waiting.id).await.len(), 1);
    assert!(store.delete_endpoint("partner", ep).await.unwrap());
    assert!(
        tries(&store, ep, waiting.id).await.is_empty(),
        "pending: gone"
    );
    assert_eq!(tries(&store, ep, b.id).await.len(), 2, "b was settled");
    assert_eq!(tries(&store, ep, c.id).await.len(), 3, "c was settled");
    assert_eq!(
        store.redeliver(Some(("partner", ep)), c.id).await.unwrap(),
        0
    );
    assert_eq!(store.redeliver(None, c.id).await.unwrap(), 0);
    assert_eq!(
        store
            .recover("partner", ep, now - hour, now + hour)
            .await
            .unwrap(),
        (0, false)
    );
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
    let ep_partner = endpoint(&store, "partner", "whsec_p").await;
    endpoint(&store, "other", "whsec_o").await;
    enquire(&store, "partner", "a@example.com").await;
    enquire(&store, "other", "b@example.com").await;

    store
        .disable_endpoint(ep_partner, "410 Gone for a week", &ChangedBy::worker())
        .await
        .unwrap();
    let disabled = stored(&store, "partner").await.unwrap();
    assert!(disabled.disabled_at.is_some());
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some("410 Gone for a week")
    );
    assert_eq!(disabled.changed_by.as_deref(), Some("delivery worker"));
    assert_eq!(stored(&store, "other").await.unwrap().disabled_at, None);
    assert_eq!(due_by_partner(&store).await, [("other".to_owned(), true)]);
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

    assert!(matches!(
        store
            .set_webhook(
                "partner",
                "https://partner.example/new",
                None,
                &seal(),
                &ChangedBy::operator()
            )
            .await
            .unwrap(),
        SetOutcome::Changed(_)
    ));
    assert_eq!(
        store
            .claim_deliveries(ep_partner, 10, LEASE)
            .await
            .unwrap()
            .len(),
        1
    );

    assert!(store.delete_endpoint("partner", ep_partner).await.unwrap());
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

    let SetOutcome::Made(view) = store
        .set_webhook(
            "ctl",
            controls,
            Some("whsec_c"),
            &seal,
            &ChangedBy::operator(),
        )
        .await
        .unwrap()
    else {
        panic!("an endpoint made");
    };
    let ep_ctl = view.id;
    assert_eq!(view.url, controls);
    assert_eq!(stored(&store, "ctl").await.unwrap().url, controls);
    store
        .disable_endpoint(ep_ctl, controls, &ChangedBy::worker())
        .await
        .unwrap();
    assert_eq!(
        stored(&store, "ctl")
            .await
            .unwrap()
            .disabled_reason
            .as_deref(),
        Some(controls)
    );

    let made = store
        .set_webhook(
            "nul",
            with_nul,
            Some("whsec_n"),
            &seal,
            &ChangedBy::operator(),
        )
        .await;
    match backend {
        Backend::Postgres => {
            assert!(made.is_err(), "{made:?}");
            assert!(stored(&store, "nul").await.is_none());
        }
        Backend::Sqlite => {
            assert!(made.is_ok(), "{made:?}");
            assert_eq!(stored(&store, "nul").await.unwrap().url, with_nul);
        }
    }
    let replaced = store
        .set_webhook("ctl", with_nul, None, &seal, &ChangedBy::operator())
        .await;
    let reason = store
        .disable_endpoint(ep_ctl, "reason\0after", &ChangedBy::worker())
        .await;
    let kept = stored(&store, "ctl").await.unwrap();
    match backend {
        Backend::Postgres => {
            assert!(replaced.is_err(), "{replaced:?}");
            assert!(reason.is_err(), "{reason:?}");
            assert_eq!(kept.url, controls, "a refused change changes nothing");
            assert_eq!(kept.disabled_reason.as_deref(), Some(controls));
        }
        Backend::Sqlite => {
            assert!(
                replaced.is_ok() && reason.is_ok(),
                "{replaced:?} {reason:?}"
            );
            assert_eq!(kept.url, with_nul);
            assert_eq!(kept.disabled_reason.as_deref(), Some("reason\0after"));
        }
    }
    assert!(
        store
            .rotate_endpoint_secret(
                "ctl",
                ep_ctl,
                "whsec_\0",
                Utc::now(),
                &seal,
                &ChangedBy::partner()
            )
            .await
            .is_ok()
    );
    let ctl = stored(&store, "ctl").await.unwrap();
    assert_eq!(seal.open("ctl", &ctl.secret).unwrap().expose(), "whsec_\0");
}

/// A failing endpoint keeps the time of its first failure until a delivery clears it;
/// another endpoint's is its own.
#[tokio::test]
async fn failing_since_is_the_first_failure_until_a_delivery() {
    for backend in BACKENDS {
        let (store, _db) = store(backend).await;
        let (a, b) = (
            endpoint(&store, "a", "whsec_a").await,
            endpoint(&store, "b", "whsec_b").await,
        );
        let first = whole_second(Utc::now() - chrono::Duration::minutes(5));
        assert_eq!(store.endpoint_failing(a, first).await.unwrap(), Some(first));
        let later = whole_second(Utc::now());
        assert_eq!(
            store.endpoint_failing(a, later).await.unwrap(),
            Some(first),
            "{backend:?}"
        );
        let view = store.endpoint("a", a).await.unwrap().unwrap();
        assert_eq!(view.failing_since, Some(first));
        assert_eq!(
            store.endpoint("b", b).await.unwrap().unwrap().failing_since,
            None
        );
        store.endpoint_recovered(a).await.unwrap();
        assert_eq!(
            store.endpoint("a", a).await.unwrap().unwrap().failing_since,
            None
        );
        assert_eq!(store.endpoint_failing(a, later).await.unwrap(), Some(later));
    }
}

/// A partner's history lists every event in every state, also while the worker settles
/// them: its two reads (settled events, pending ones) see one moment, so an event settled
/// between them is not left out of both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_lists_every_event_while_the_worker_settles_them() {
    for backend in BACKENDS {
        the_history_lists_every_event_while_the_worker_settles_them_on(backend).await;
    }
}

async fn the_history_lists_every_event_while_the_worker_settles_them_on(backend: Backend) {
    const EVENTS: usize = 40;
    let (store, _db) = store(backend).await;
    let id = endpoint(&store, "p", "whsec_cDE=").await;
    for n in 0..EVENTS {
        enquire(&store, "p", &format!("settling{n}@example.com")).await;
    }
    all_due(&store).await;
    let claimed = store
        .claim_deliveries(id, EVENTS as u64, LEASE)
        .await
        .unwrap();
    assert_eq!(claimed.len(), EVENTS);
    let settler = {
        let store = store.clone();
        tokio::spawn(async move {
            for event in claimed {
                let outcome = TryOutcome::Delivered { status: 200 };
                store
                    .finish_deliveries(id, &[(event, outcome, tried())])
                    .await
                    .unwrap();
            }
        })
    };
    let mut listings = 0;
    while !settler.is_finished() || listings == 0 {
        let query = HistoryQuery {
            client_id: "p",
            limit: 100,
            ..HistoryQuery::default()
        };
        let (listed, next) = store.history(query).await.unwrap();
        assert_eq!(
            listed.len(),
            EVENTS,
            "{backend:?}: listing {listings} left out events: {:?}",
            listed.iter().map(|v| v.state).collect::<Vec<_>>()
        );
        assert_eq!(next, None);
        listings += 1;
    }
    settler.await.unwrap();
}
