//! The clients store against real databases: what each write leaves, read back through the
//! views and the audit trail, on SQLite and on PostgreSQL (`TEST_POSTGRES_URL`, required).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sea_orm::DatabaseConnection;
use service_kit::Secret;
use shared::claims::scopes::{CASE_INTAKE_CREATE, REFERRAL_CREATE};
use test_support::{Backend, TestDb, on_both_backends};

use super::input::{DeclaredClient, DeclaredCredentials, NewCredentials};
use super::views::{ClientInfo, fingerprint, list_clients, show_client};
use super::*;
use crate::keys::SigningKeySealer;
use crate::store::current_revision;

/// A migrated database of `backend`; it lives as long as the guard.
async fn database(backend: Backend) -> (DatabaseConnection, TestDb) {
    let test_db = TestDb::new(backend, "auth-clients").await;
    let db = crate::migration::SCHEMA
        .connect(&test_db.url, 4)
        .await
        .expect("migrated test database");
    (db, test_db)
}

fn author() -> audit::Author {
    let encoded = Secret::new(STANDARD.encode([7u8; 32]));
    let sealer = SigningKeySealer::from_base64(&encoded).unwrap();
    audit::Author::new("tester", audit::AuditKey::derive(&sealer).unwrap())
}

fn secret(fill: char) -> Secret<String> {
    Secret::new(fill.to_string().repeat(40))
}

fn declared(id: &str, name: &str, secret: Secret<String>) -> DeclaredClient {
    DeclaredClient {
        client_id: id.to_owned(),
        name: name.to_owned(),
        scopes: CASE_INTAKE_CREATE.to_owned(),
        brands: None,
        credentials: DeclaredCredentials::Secret(secret),
    }
}

async fn create(db: &DatabaseConnection, name: &str) -> anyhow::Result<NewClient> {
    create_client(
        db,
        name,
        CASE_INTAKE_CREATE,
        None,
        NewCredentials::Secret,
        false,
        &author(),
    )
    .await
}

/// The audit trail's entries, as `(action, subject)`.
async fn entries(db: &DatabaseConnection) -> Vec<(String, String)> {
    audit::list(db, None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.action, e.subject))
        .collect()
}

fn fingerprint_of(secret: &Secret<String>) -> String {
    fingerprint(&secrets::encode_hash(&secrets::hash_secret(
        secret.expose(),
    )))
}

fn states(info: &ClientInfo) -> Vec<&str> {
    info.secrets.iter().map(|s| s.state).collect()
}

async fn a_created_client_reads_back_as_written(backend: Backend) {
    let (db, _guard) = database(backend).await;
    let created = create(&db, "  Acme Mortgages ").await.unwrap();
    let first = created.client_secret.clone().expect("a secret client");
    assert_eq!(created.scopes, [CASE_INTAKE_CREATE]);

    let listed = list_clients(&db).await.unwrap();
    assert_eq!(listed.len(), 1);
    let c = &listed[0];
    assert_eq!(c.client_id, created.client_id);
    assert_eq!(c.name, "Acme Mortgages", "trimmed");
    assert_eq!(c.scopes, [CASE_INTAKE_CREATE]);
    assert_eq!(c.auth_method, AuthMethod::ClientSecret);
    assert!(!c.disabled && !c.sandbox && !c.dpop_required);
    assert_eq!(states(c), ["current"]);
    assert_eq!(c.secrets[0].fingerprint, fingerprint_of(&first));
    assert_eq!(
        entries(&db).await,
        [("client.create".to_owned(), created.client_id.clone())]
    );

    let rotated = rotate_secret(&db, &created.client_id, Duration::hours(1), &author())
        .await
        .unwrap();
    let shown = show_client(&db, &created.client_id).await.unwrap();
    assert_eq!(states(&shown), ["grace", "current"]);
    assert_eq!(shown.secrets[0].fingerprint, fingerprint_of(&first));
    assert_eq!(
        shown.secrets[1].fingerprint,
        fingerprint_of(&rotated.client_secret)
    );
    // PostgreSQL keeps microseconds.
    assert_eq!(
        shown.secrets[0].valid_until.map(|t| t.timestamp_micros()),
        Some(rotated.previous_secret_valid_until.timestamp_micros())
    );
    assert!(show_client(&db, "nobody").await.is_err());
}

async fn a_name_taken_in_another_case_is_refused_and_nothing_written(backend: Backend) {
    let (db, _guard) = database(backend).await;
    create(&db, "Ärzte Partner").await.unwrap();
    let revision = current_revision(&db).await.unwrap();
    // Not only ASCII: SQLite's lower() folds ASCII letters alone.
    for taken in ["ÄRZTE PARTNER", "ärzte partner"] {
        let refused = create(&db, taken).await.unwrap_err().to_string();
        assert!(refused.contains("differ in more than case"), "{refused}");
    }
    let refused = ensure_client(
        &db,
        declared("portal-1", "ärzte PARTNER", secret('a')),
        &author(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("differ in more than case"), "{refused}");
    assert_eq!(list_clients(&db).await.unwrap().len(), 1);
    assert_eq!(entries(&db).await.len(), 1);
    assert_eq!(current_revision(&db).await.unwrap(), revision);
}

async fn ensuring_the_same_id_again_writes_only_what_differs(backend: Backend) {
    let (db, _guard) = database(backend).await;
    let first = ensure_client(
        &db,
        declared("intake-api", "intake-api", secret('a')),
        &author(),
    )
    .await
    .unwrap();
    assert_eq!(first.outcome, Ensured::Created);
    let revision = current_revision(&db).await.unwrap();

    let again = ensure_client(
        &db,
        declared("intake-api", "intake-api", secret('a')),
        &author(),
    )
    .await
    .unwrap();
    assert_eq!((again.outcome, again.changed), (Ensured::Unchanged, false));
    assert_eq!(
        current_revision(&db).await.unwrap(),
        revision,
        "not even the revision"
    );
    assert_eq!(entries(&db).await.len(), 1);

    let mut renamed = declared("intake-api", "Intake API", secret('b'));
    renamed.scopes = format!("{REFERRAL_CREATE} {CASE_INTAKE_CREATE}");
    let updated = ensure_client(&db, renamed, &author()).await.unwrap();
    assert_eq!(updated.outcome, Ensured::Updated);
    assert_eq!(
        updated.changes,
        [Difference::Name, Difference::Scopes, Difference::Secret]
    );
    let shown = show_client(&db, "intake-api").await.unwrap();
    assert_eq!(shown.name, "Intake API");
    assert_eq!(shown.scopes, [REFERRAL_CREATE, CASE_INTAKE_CREATE]);
    // The declared secret replaced the old one at once: no grace.
    assert_eq!(states(&shown), ["expired", "current"]);
    assert_eq!(shown.secrets[1].fingerprint, fingerprint_of(&secret('b')));
    let actions: Vec<String> = entries(&db).await.into_iter().map(|e| e.0).collect();
    assert_eq!(
        actions,
        [
            "client.create",
            "client.rename",
            "client.set_scopes",
            "client.rotate_secret"
        ]
    );
    assert_eq!(
        list_clients(&db).await.unwrap().len(),
        1,
        "one client per id"
    );
}

async fn hostile_bytes_are_stored_exactly_or_refused_whole(backend: Backend) {
    let (db, _guard) = database(backend).await;
    let unusual = "Acme \u{202e}Inc\u{200b} Ünïcode";
    let created = create(&db, unusual).await.unwrap();
    let shown = show_client(&db, &created.client_id).await.unwrap();
    assert_eq!(shown.name, unusual, "read back byte for byte");

    // A NUL (which PostgreSQL's text cannot hold) or any control character is refused on
    // both databases alike, before anything is written.
    let before = (list_clients(&db).await.unwrap().len(), entries(&db).await);
    for name in [
        "Nul\0Partner",
        "Acme\u{7}\u{1b}[31m",
        "Acme\r\nInc",
        "Tab\tbed",
    ] {
        let refused = create(&db, name).await;
        let message = format!("{:#}", refused.expect_err(name));
        assert!(
            message.contains("control characters"),
            "{name:?}: {message}"
        );
    }
    let after = (list_clients(&db).await.unwrap().len(), entries(&db).await);
    assert_eq!(after, before, "nothing written");

    for id in ["intake\0api", "intake-api\n", "intake:api", ""] {
        let refused = ensure_client(&db, declared(id, "hostile", secret('a')), &author()).await;
        assert!(refused.is_err(), "{id:?}");
        assert!(show_client(&db, id).await.is_err(), "{id:?} not stored");
    }
    let names: Vec<String> = list_clients(&db)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert!(!names.contains(&"hostile".to_owned()), "{names:?}");
}

async fn a_disabled_client_stays_disabled_until_enabled(backend: Backend) {
    let (db, _guard) = database(backend).await;
    ensure_client(
        &db,
        declared("partner-1", "Partner One", secret('a')),
        &author(),
    )
    .await
    .unwrap();
    let (disabled, changed) = set_client_disabled(&db, "partner-1", true, &author())
        .await
        .unwrap();
    assert!(changed);
    let since = disabled.disabled_at.expect("a date");

    let (again, changed) = set_client_disabled(&db, "partner-1", true, &author())
        .await
        .unwrap();
    assert!(!changed);
    assert_eq!(again.disabled_at, Some(since), "the first date kept");
    let listed = list_clients(&db).await.unwrap();
    assert!(listed[0].disabled);
    assert_eq!(listed[0].disabled_at, Some(since));

    let refused = ensure_client(
        &db,
        declared("partner-1", "Partner One", secret('a')),
        &author(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("is disabled"), "{refused}");
    assert!(show_client(&db, "partner-1").await.unwrap().disabled);

    let (enabled, changed) = set_client_disabled(&db, "partner-1", false, &author())
        .await
        .unwrap();
    assert!(changed && enabled.disabled_at.is_none());
    let actions: Vec<String> = entries(&db).await.into_iter().map(|e| e.0).collect();
    assert_eq!(
        actions,
        ["client.create", "client.disable", "client.enable"]
    );
}

async fn brands_and_dpop_are_set_on_the_client_named(backend: Backend) {
    let (db, _guard) = database(backend).await;
    let partner = create(&db, "Partner").await.unwrap();
    let refused = set_client_brands(&db, &partner.client_id, "brand_a", &author()).await;
    assert!(refused.is_err(), "only a portal client is bound to brands");
    let set = set_client_dpop(&db, &partner.client_id, true, &author())
        .await
        .unwrap();
    assert!(set.dpop_required && !set.previously_required);
    assert!(
        show_client(&db, &partner.client_id)
            .await
            .unwrap()
            .dpop_required
    );
    assert!(
        set_client_dpop(&db, "nobody", true, &author())
            .await
            .is_err()
    );
}

on_both_backends!(
    a_created_client_reads_back_as_written,
    a_name_taken_in_another_case_is_refused_and_nothing_written,
    ensuring_the_same_id_again_writes_only_what_differs,
    hostile_bytes_are_stored_exactly_or_refused_whole,
    a_disabled_client_stays_disabled_until_enabled,
    brands_and_dpop_are_set_on_the_client_named,
);
