//! Serving beside other releases' schemas: `serve` migrates only when told (by default on
//! SQLite, never by default on PostgreSQL), runs on a database a later release migrated,
//! and refuses one that lacks a migration it needs.

use std::process::Command;

use intake_api::config::Config;
use intake_api::entity::{case, redirect_token};
use intake_api::migration::Migrator;
use intake_api::startup::Application;
use sea_orm::ActiveValue::{NotSet, Set};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, Database, EntityTrait, QueryFilter, QuerySelect,
};
use sea_orm_migration::MigratorTrait;
use service_kit::http::Server;
use test_support::on_both_backends;

use crate::helpers::{Backend, TestDb};

/// What a later release's migration is called here: sorts after every real one.
const LATER: &str = "m29991231_000001_a_later_release";

fn config(db: &TestDb, migrate: Option<bool>) -> Config {
    let mut config = Config::with_database(&db.url);
    config.key_encryption_key = Some(
        test_support::TEST_INTAKE_KEY_ENCRYPTION_KEY
            .parse()
            .expect("infallible"),
    );
    config.listen.bind = "127.0.0.1:0".into();
    config.database.migrate = migrate;
    // Required by serve; no auth-server is asked here.
    config.auth_server.client_id = Some("schema-check".into());
    config.auth_server.client_secret = Some("schema-check".parse().expect("infallible"));
    config
}

async fn refusal(config: Config) -> String {
    match Application::build(config).await {
        Ok(_) => panic!("the server started"),
        Err(e) => format!("{e:#}"),
    }
}

async fn execute(db: &TestDb, sql: &str) {
    let conn = Database::connect(&db.url).await.expect("connects");
    conn.execute_unprepared(sql).await.expect(sql);
    conn.close().await.expect("closes");
}

async fn applied(db: &TestDb) -> Vec<String> {
    let conn = Database::connect(&db.url).await.expect("connects");
    let status = service_kit::db::schema_status::<Migrator>(&conn)
        .await
        .expect("schema read");
    conn.close().await.expect("closes");
    let known: Vec<String> = Migrator::migrations()
        .iter()
        .map(|m| m.name().to_owned())
        .filter(|m| !status.pending.contains(m))
        .collect();
    [known, status.newer].concat()
}

fn newest() -> String {
    Migrator::migrations()
        .last()
        .expect("a migration")
        .name()
        .to_owned()
}

/// `intake-api serve` as a process: its exit code and stderr, for a server that refuses
/// to start (one that starts would not exit).
fn serve_process(db: &TestDb, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_intake-api"))
        .arg("serve")
        .args(args)
        .env("INTAKE_DATABASE_URL", &db.url)
        .env("INTAKE_BIND", "127.0.0.1:0")
        .env(
            "INTAKE_KEY_ENCRYPTION_KEY",
            test_support::TEST_INTAKE_KEY_ENCRYPTION_KEY,
        )
        .env("INTAKE_REVOCATIONS_CLIENT_ID", "schema-check")
        .env("INTAKE_REVOCATIONS_CLIENT_SECRET", "schema-check")
        .env_remove("INTAKE_MIGRATE")
        .output()
        .expect("intake-api runs");
    (
        out.status.code(),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

async fn a_server_migrates_by_default_only_on_sqlite(backend: Backend) {
    let db = TestDb::new(backend, "intakeschema").await;
    match backend {
        Backend::Sqlite => {
            Application::build(config(&db, None))
                .await
                .expect("SQLite is migrated at start by default");
        }
        Backend::Postgres => {
            let error = refusal(config(&db, None)).await;
            assert!(error.contains("has no intake-api schema"), "{error}");
            assert!(error.contains("run `intake-api migrate`"), "{error}");
            let (code, stderr) = serve_process(&db, &[]);
            assert_eq!(code, Some(3), "{stderr}");
            assert!(stderr.contains("run `intake-api migrate`"), "{stderr}");
        }
    }
}

async fn a_server_told_not_to_migrate_refuses_an_empty_database(backend: Backend) {
    let db = TestDb::new(backend, "intakeschema").await;
    let error = refusal(config(&db, Some(false))).await;
    assert!(error.contains("run `intake-api migrate`"), "{error}");
    let (code, stderr) = serve_process(&db, &["--migrate=false"]);
    assert_eq!(code, Some(3), "{stderr}");
    Application::build(config(&db, Some(true)))
        .await
        .expect("--migrate migrates an empty database");
    Application::build(config(&db, Some(false)))
        .await
        .expect("a migrated database serves without migrating");
}

async fn a_server_runs_on_a_database_a_later_release_migrated(backend: Backend) {
    let db = TestDb::intake(backend).await;
    execute(
        &db,
        &format!("INSERT INTO seaql_migrations (version, applied_at) VALUES ('{LATER}', 0)"),
    )
    .await;
    for migrate in [None, Some(false), Some(true)] {
        Application::build(config(&db, migrate))
            .await
            .unwrap_or_else(|e| panic!("migrate {migrate:?}: {e:#}"));
    }
    let conn = Database::connect(&db.url).await.expect("connects");
    intake_api::migration::SCHEMA
        .migrate(&conn)
        .await
        .expect("`migrate` leaves a later release's migrations alone");
    conn.close().await.expect("closes");
    let out = Command::new(env!("CARGO_BIN_EXE_intake-api"))
        .args(["case", "list", "-o", "json"])
        .env("INTAKE_DATABASE_URL", &db.url)
        .output()
        .expect("intake-api runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(applied(&db).await.contains(&LATER.to_owned()));
}

async fn a_server_refuses_a_database_that_lacks_a_migration(backend: Backend) {
    let db = TestDb::intake(backend).await;
    let newest = newest();
    execute(
        &db,
        &format!("DELETE FROM seaql_migrations WHERE version = '{newest}'"),
    )
    .await;
    let error = refusal(config(&db, Some(false))).await;
    assert!(error.contains("is behind this version"), "{error}");
    assert!(error.contains(&newest), "{error}");
    let (code, stderr) = serve_process(&db, &["--migrate=false"]);
    assert_eq!(code, Some(3), "{stderr}");
}

async fn migrate_refuses_a_database_of_another_line_of_releases(backend: Backend) {
    let db = TestDb::intake(backend).await;
    let newest = newest();
    execute(
        &db,
        &format!(
            "DELETE FROM seaql_migrations WHERE version = '{newest}'; \
             INSERT INTO seaql_migrations (version, applied_at) VALUES ('{LATER}', 0)"
        ),
    )
    .await;
    let conn = Database::connect(&db.url).await.expect("connects");
    let error = intake_api::migration::SCHEMA
        .migrate(&conn)
        .await
        .expect_err("a database of another line is refused");
    conn.close().await.expect("closes");
    let error = error.to_string();
    assert!(error.contains("another line"), "{error}");
    assert!(error.contains(&newest) && error.contains(LATER), "{error}");
    let now = applied(&db).await;
    assert!(!now.contains(&newest), "nothing was changed: {now:?}");
}

/// A link as the links' table held it before referral links named their partner, written
/// without reading back the columns later migrations add.
#[derive(Clone)]
struct Link(redirect_token::ActiveModel);

impl Link {
    async fn insert(self, conn: &sea_orm::DatabaseConnection) -> Result<u64, sea_orm::DbErr> {
        redirect_token::Entity::insert(self.0)
            .exec_without_returning(conn)
            .await
    }
}

/// A link of the case's, with `product` or none.
fn link(case_id: uuid::Uuid, hash: &str, product: Option<uuid::Uuid>) -> Link {
    let now = chrono::Utc::now();
    Link(redirect_token::ActiveModel {
        id: Set(uuid::Uuid::now_v7()),
        case_id: Set(case_id),
        token_hash: Set(hash.into()),
        product_uuid: Set(product),
        created_at: Set(now),
        expires_at: Set(now),
        used_at: Set(None),
        // Columns of a later migration than the schemas this test makes.
        client_id: NotSet,
        reference: NotSet,
    })
}

async fn links_survive_the_referral_migration_and_its_rollback(backend: Backend) {
    let db = TestDb::new(backend, "intakeschema").await;
    let conn = Database::connect(&db.url).await.expect("connects");
    let before = Migrator::migrations()
        .iter()
        .position(|m| m.name() == "m20261206_000001_referrals")
        .expect("the referral migration");
    let before = u32::try_from(before).expect("few migrations");
    Migrator::up(&conn, Some(before))
        .await
        .expect("the schema before it");
    let now = chrono::Utc::now();
    let case_id = uuid::Uuid::now_v7();
    case::ActiveModel {
        id: Set(case_id),
        reference: Set("100000000001".into()),
        brand: Set("brand_a".into()),
        email: Set("kept@example.com".into()),
        status: Set(case::Status::PendingActivation),
        enquiry: Set(serde_json::json!({})),
        product_uuid: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        activates_at: Set(now),
        activated_at: Set(None),
        redirect_token_id: Set(None),
        sandbox: Set(false),
    }
    .insert(&conn)
    .await
    .expect("a case");
    let product = uuid::Uuid::new_v4();
    link(case_id, "kept", Some(product))
        .insert(&conn)
        .await
        .expect("a link with a product");
    let without = link(case_id, "referral", None);
    assert!(
        without.clone().insert(&conn).await.is_err(),
        "a link needed a product"
    );

    Migrator::up(&conn, Some(1))
        .await
        .expect("the referral migration");
    let kept: (uuid::Uuid, Option<uuid::Uuid>) = redirect_token::Entity::find()
        .select_only()
        .columns([
            redirect_token::Column::CaseId,
            redirect_token::Column::ProductUuid,
        ])
        .filter(redirect_token::Column::TokenHash.eq("kept"))
        .into_tuple()
        .one(&conn)
        .await
        .expect("read")
        .expect("the link survived the migration");
    assert_eq!(kept, (case_id, Some(product)));
    without
        .clone()
        .insert(&conn)
        .await
        .expect("a link without a product");
    // The table keeps its rules: a second link with the same hash is refused, and the
    // case's deletion takes its links.
    assert!(
        link(case_id, "kept", Some(product))
            .insert(&conn)
            .await
            .is_err()
    );

    Migrator::down(&conn, Some(1)).await.expect("rolled back");
    let hashes: Vec<String> = redirect_token::Entity::find()
        .select_only()
        .column(redirect_token::Column::TokenHash)
        .into_tuple()
        .all(&conn)
        .await
        .expect("read");
    assert_eq!(hashes, ["kept"], "only the referral's link goes");
    assert!(link(case_id, "again", None).insert(&conn).await.is_err());
    Migrator::up(&conn, None).await.expect("migrated again");
    case::Entity::delete_by_id(case_id)
        .exec(&conn)
        .await
        .expect("case deleted");
    let left = redirect_token::Entity::find()
        .all(&conn)
        .await
        .expect("read");
    assert!(left.is_empty(), "the case's links went with it: {left:?}");
    conn.close().await.expect("closes");
}

async fn referral_links_keep_their_partner_and_roll_back_to_plain_links(backend: Backend) {
    let db = TestDb::new(backend, "intakeschema").await;
    let conn = Database::connect(&db.url).await.expect("connects");
    Migrator::up(&conn, None).await.expect("migrated");
    let now = chrono::Utc::now();
    let case_id = uuid::Uuid::now_v7();
    case::ActiveModel {
        id: Set(case_id),
        reference: Set("100000000002".into()),
        brand: Set("brand_a".into()),
        email: Set("referred@example.com".into()),
        status: Set(case::Status::Referred),
        enquiry: Set(serde_json::json!({})),
        product_uuid: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        activates_at: Set(now),
        activated_at: Set(None),
        redirect_token_id: Set(None),
        sandbox: Set(false),
    }
    .insert(&conn)
    .await
    .expect("a case");
    let mut referral = link(case_id, "referral", None).0;
    referral.client_id = Set(Some("partner-b".into()));
    referral.reference = Set(Some("200000000002".into()));
    Link(referral).insert(&conn).await.expect("a referral link");
    let kept: (Option<String>, Option<String>) = redirect_token::Entity::find()
        .select_only()
        .columns([
            redirect_token::Column::ClientId,
            redirect_token::Column::Reference,
        ])
        .into_tuple()
        .one(&conn)
        .await
        .expect("read")
        .expect("the link");
    assert_eq!(
        kept,
        (Some("partner-b".into()), Some("200000000002".into()))
    );

    // Rolled back, the link stays, as a link of the case, and links are written as before.
    let since = Migrator::migrations().len()
        - Migrator::migrations()
            .iter()
            .position(|m| m.name() == "m20261207_000002_referral_links")
            .expect("the referral links' migration");
    Migrator::down(&conn, Some(u32::try_from(since).expect("few")))
        .await
        .expect("rolled back");
    let hashes: Vec<String> = redirect_token::Entity::find()
        .select_only()
        .column(redirect_token::Column::TokenHash)
        .into_tuple()
        .all(&conn)
        .await
        .expect("read");
    assert_eq!(hashes, ["referral"]);
    link(case_id, "plain", None)
        .insert(&conn)
        .await
        .expect("a link as 0.2.0 writes it");
    Migrator::up(&conn, None).await.expect("migrated again");
    conn.close().await.expect("closes");
}

/// A row as 0.2.0 writes it into `table`: its columns only, whatever later releases added.
async fn insert_as_0_2_0(
    conn: &sea_orm::DatabaseConnection,
    table: &str,
    values: Vec<(&str, sea_orm::Value)>,
) -> Result<(), sea_orm::DbErr> {
    use sea_orm::sea_query::{Alias, Query};
    let (columns, values): (Vec<_>, Vec<_>) = values.into_iter().unzip();
    let insert = Query::insert()
        .into_table(Alias::new(table))
        .columns(columns.into_iter().map(Alias::new))
        .values_panic(values.into_iter().map(Into::into))
        .to_owned();
    let backend = conn.get_database_backend();
    conn.execute_raw(backend.build(&insert)).await.map(|_| ())
}

/// 0.2.0's endpoint (one per partner, keyed by its client id) and its queued events roll
/// into several endpoints per partner: the endpoint gets an id, its events name it; what
/// 0.2.0 still writes meanwhile (an endpoint without an id, an event without an endpoint)
/// is taken; the rollback refuses while a partner has two endpoints, and works once not.
async fn webhook_endpoints_roll_from_one_per_partner_and_back(backend: Backend) {
    use intake_api::entity::{webhook_delivery, webhook_endpoint};
    let db = TestDb::new(backend, "intakeschema").await;
    let conn = Database::connect(&db.url).await.expect("connects");
    let before = Migrator::migrations()
        .iter()
        .position(|m| m.name() == "m20261208_000001_webhook_endpoints")
        .expect("the endpoints' migration");
    Migrator::up(&conn, Some(u32::try_from(before).expect("few")))
        .await
        .expect("the schema before it");
    let now = chrono::Utc::now();
    let endpoint = |client_id: &str| {
        vec![
            ("client_id", client_id.into()),
            ("url", "https://partner.example/hooks".into()),
            ("secret", "whsec_c2VjcmV0".into()),
            ("created_at", now.into()),
            ("updated_at", now.into()),
        ]
    };
    let delivery = |id: uuid::Uuid, client_id: &str| {
        vec![
            ("id", id.into()),
            ("client_id", client_id.into()),
            ("case_id", uuid::Uuid::now_v7().into()),
            ("event_type", "case.created".into()),
            ("created_at", now.into()),
            ("next_attempt_at", now.into()),
            ("attempts", 0i32.into()),
        ]
    };
    insert_as_0_2_0(&conn, "webhook_endpoints", endpoint("p"))
        .await
        .expect("0.2.0's endpoint");
    let queued = uuid::Uuid::now_v7();
    insert_as_0_2_0(&conn, "webhook_deliveries", delivery(queued, "p"))
        .await
        .expect("0.2.0's event");

    // This release's: several endpoints, since when one fails, the delivery history, the
    // rate limit.
    let since = Migrator::migrations().len() - before;
    Migrator::up(&conn, None).await.expect("the migrations");
    let ep = webhook_endpoint::Entity::find()
        .one(&conn)
        .await
        .expect("read")
        .expect("the endpoint");
    assert_ne!(ep.id, uuid::Uuid::nil());
    assert_eq!((ep.client_id.as_str(), ep.event_types), ("p", None));
    let event = webhook_delivery::Entity::find()
        .one(&conn)
        .await
        .expect("read")
        .expect("the event");
    assert_eq!((event.id, event.endpoint_id), (queued, ep.id));

    // 0.2.0 beside this release: its writes still go in.
    insert_as_0_2_0(&conn, "webhook_endpoints", endpoint("q"))
        .await
        .expect("an endpoint as 0.2.0 makes one");
    let later = uuid::Uuid::now_v7();
    insert_as_0_2_0(&conn, "webhook_deliveries", delivery(later, "p"))
        .await
        .expect("an event as 0.2.0 queues one");
    let q = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::ClientId.eq("q"))
        .one(&conn)
        .await
        .expect("read")
        .expect("q's endpoint");
    assert_ne!(q.id, ep.id);
    let unassigned = webhook_delivery::Entity::find()
        .filter(webhook_delivery::Column::Id.eq(later))
        .one(&conn)
        .await
        .expect("read")
        .expect("the event");
    assert_eq!(unassigned.endpoint_id, uuid::Uuid::nil());

    let mut second: webhook_endpoint::ActiveModel = ep.clone().into();
    second.id = Set(uuid::Uuid::now_v7());
    let second = second.insert(&conn).await.expect("a second endpoint");
    // The later migrations roll back first; the endpoints' own rollback refuses.
    let refused = Migrator::down(&conn, Some(u32::try_from(since).expect("few"))).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("one of several")),
        "{refused:?}"
    );
    webhook_endpoint::Entity::delete_by_id(second.id)
        .exec(&conn)
        .await
        .expect("deleted");
    Migrator::down(&conn, Some(1)).await.expect("rolled back");
    insert_as_0_2_0(
        &conn,
        "webhook_deliveries",
        delivery(uuid::Uuid::now_v7(), "q"),
    )
    .await
    .expect("0.2.0's writes after the rollback");
    let events: i64 = conn
        .query_one_raw(sea_orm::Statement::from_string(
            conn.get_database_backend(),
            r#"SELECT count(*) FROM "webhook_deliveries""#,
        ))
        .await
        .expect("counted")
        .expect("a row")
        .try_get_by_index(0)
        .expect("a count");
    assert_eq!(events, 3, "the events kept");
    Migrator::up(&conn, None).await.expect("migrated again");
    conn.close().await.expect("closes");
}

on_both_backends!(
    links_survive_the_referral_migration_and_its_rollback,
    webhook_endpoints_roll_from_one_per_partner_and_back,
    referral_links_keep_their_partner_and_roll_back_to_plain_links,
    a_server_migrates_by_default_only_on_sqlite,
    a_server_told_not_to_migrate_refuses_an_empty_database,
    a_server_runs_on_a_database_a_later_release_migrated,
    a_server_refuses_a_database_that_lacks_a_migration,
    migrate_refuses_a_database_of_another_line_of_releases,
);
