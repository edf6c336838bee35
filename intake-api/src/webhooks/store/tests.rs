//! The webhook store against real databases: every test runs on SQLite and PostgreSQL.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sea_orm::{ActiveValue::Set, EntityTrait};
use service_kit::Secret;
use service_kit::kek::KeyEncryptionKey;
use test_support::{Backend, TestDb};

use super::*;
use crate::store::Timing;

const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

/// A store on a new database of `backend`, migrated by this crate; the database lives as
/// long as the guard.
async fn store(backend: Backend) -> (CaseStore, TestDb) {
    let test_db = TestDb::new(backend, "intake-webhooks").await;
    let db = crate::migration::SCHEMA
        .connect(&test_db.url, 4)
        .await
        .unwrap();
    let timing = Timing {
        activation_delay: Duration::from_secs(60),
        redirect_ttl: Duration::from_secs(60),
        sandbox_activation_delay: Duration::from_secs(60),
    };
    (CaseStore::new(db, 4, timing), test_db)
}

fn seal() -> SecretSeal {
    let encoded = Secret::new(STANDARD.encode([7u8; 32]));
    SecretSeal::new(&KeyEncryptionKey::from_base64("TEST_KEK", &encoded).unwrap()).unwrap()
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
