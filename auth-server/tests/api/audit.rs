//! The audit trail: every operator change leaves one entry saying who did what to which
//! client or key, never a secret; `audit verify` passes on an untouched trail and names the
//! first entry altered, removed or moved.

use std::process::Command;
use std::time::Duration;

use auth_server::cli;
use auth_server::commands::{AuditCommand, ClientCommand, KeyCommand};
use auth_server::config::Settings;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement, TransactionTrait};
use serde::Serialize;
use serde_json::Value;
use test_support::{on_both_backends, on_sqlite};

use crate::helpers::{Backend, TestApp, TestDb, eventually};

async fn sql(app: &TestApp, statement: &str) {
    let db = Database::connect(app.db.url.as_str())
        .await
        .expect("database");
    db.execute_raw(Statement::from_string(db.get_database_backend(), statement))
        .await
        .expect("statement");
    let _ = db.close().await;
}

/// `auth-server audit verify` as an operator runs it: its exit code and stderr.
fn verify_with_the_binary(app: &TestApp) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .args(["audit", "verify"])
        .env("AUTH_DATABASE_URL", &app.db.url)
        .env("AUTH_KEY_ENCRYPTION_KEY", KEY)
        .output()
        .expect("auth-server runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn every_operator_change_is_one_entry_with_its_actor_and_the_chain_shows_tampering(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let alice = Settings {
        actor: Some("alice".into()),
        ..Settings::from(&app.auth.config)
    };
    let rotated = cli::client(
        alice.clone(),
        ClientCommand::RotateSecret {
            client_id: app.client_id.clone(),
            grace_secs: 60,
        },
    )
    .await
    .unwrap();
    for command in [
        ClientCommand::Disable {
            client_id: app.client_id.clone(),
        },
        ClientCommand::Enable {
            client_id: app.client_id.clone(),
        },
    ] {
        cli::client(alice.clone(), command).await.unwrap();
    }
    let key = cli::key(
        alice.clone(),
        KeyCommand::Rotate {
            alg: None,
            publish_ahead_secs: Some(0),
            move_key_store: false,
        },
    )
    .await
    .unwrap();
    cli::key(
        alice,
        KeyCommand::Revoke {
            kid: key["kid"].as_str().unwrap().to_owned(),
        },
    )
    .await
    .unwrap();

    let entries = app
        .auth
        .audit_cmd(AuditCommand::List { since: None })
        .await
        .unwrap();
    let entries = entries.as_array().unwrap();
    let summary: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let by_alice = |action: &str| ("alice".to_owned(), action.to_owned());
    let by_server = |action: &str| ("auth-server".to_owned(), action.to_owned());
    assert_eq!(
        summary[..3],
        [
            by_server("key.create"),
            by_server("key.create"),
            by_server("audit.upgrade")
        ]
    );
    assert_eq!(summary[3].1, "client.create", "{summary:?}");
    assert_eq!(
        summary[4..],
        [
            by_alice("client.rotate_secret"),
            by_alice("client.disable"),
            by_alice("client.enable"),
            by_alice("key.rotate"),
            by_alice("key.revoke"),
        ]
    );
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e["seq"], i as i64 + 1);
        assert!(e["at"].is_string());
    }
    assert_eq!(
        entries[2]["detail"],
        serde_json::json!({"unsealed_through": 0})
    );
    assert_eq!(entries[4]["subject"], app.client_id.as_str());
    assert_eq!(entries[7]["subject"], key["kid"]);
    let everything = Value::Array(entries.clone()).to_string();
    for secret in [
        app.client_secret.as_str(),
        rotated["client_secret"].as_str().unwrap(),
    ] {
        assert!(
            !everything.contains(secret),
            "a secret is in the audit trail"
        );
    }
    let verified = app
        .auth
        .audit_cmd(AuditCommand::Verify { head: None })
        .await
        .unwrap();
    assert_eq!(verified["entries"], entries.len());
    assert_eq!(verify_with_the_binary(&app).0, Some(0));

    // Altered: a detail rewritten.
    sql(&app, "UPDATE audit_log SET actor = 'mallory' WHERE seq = 5").await;
    let (code, stderr) = verify_with_the_binary(&app);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("audit entry 5 was altered"), "{stderr}");
    sql(&app, "UPDATE audit_log SET actor = 'alice' WHERE seq = 5").await;
    assert_eq!(verify_with_the_binary(&app).0, Some(0));

    // Reordered: two entries swap places.
    sql(&app, "UPDATE audit_log SET seq = 100 WHERE seq = 4").await;
    sql(&app, "UPDATE audit_log SET seq = 4 WHERE seq = 5").await;
    sql(&app, "UPDATE audit_log SET seq = 5 WHERE seq = 100").await;
    let (code, stderr) = verify_with_the_binary(&app);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("audit entry 4 does not follow entry 3"),
        "{stderr}"
    );
    sql(&app, "UPDATE audit_log SET seq = 100 WHERE seq = 4").await;
    sql(&app, "UPDATE audit_log SET seq = 4 WHERE seq = 5").await;
    sql(&app, "UPDATE audit_log SET seq = 5 WHERE seq = 100").await;
    assert_eq!(verify_with_the_binary(&app).0, Some(0));

    // Removed, from the middle and from the end.
    sql(&app, "DELETE FROM audit_log WHERE seq = 6").await;
    let (code, stderr) = verify_with_the_binary(&app);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("audit entry 6 is missing"), "{stderr}");
    sql(&app, "DELETE FROM audit_log WHERE seq >= 6").await;
    let (code, stderr) = verify_with_the_binary(&app);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the audit trail ends at entry 5"),
        "{stderr}"
    );
}

on_both_backends!(every_operator_change_is_one_entry_with_its_actor_and_the_chain_shows_tampering,);

/// The key the test servers run with, and another one.
const KEY: &str = test_support::TEST_KEY_ENCRYPTION_KEY;
const OTHER_KEY: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

/// What one run of the binary did: exit code, stdout as JSON (null unless it succeeded),
/// stderr.
struct Run {
    code: Option<i32>,
    json: Value,
    stderr: String,
}

/// Runs `auth-server ARGS` on `app`'s database with `key` as AUTH_KEY_ENCRYPTION_KEY.
fn auth_server(url: &str, key: Option<&str>, args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_auth-server"));
    command.args(args);
    if args.first() != Some(&"migrate") {
        command.args(["-o", "json"]);
    }
    command
        .env("AUTH_DATABASE_URL", url)
        .env_remove("AUTH_KEY_ENCRYPTION_KEY")
        .env_remove("RUST_LOG");
    if let Some(key) = key {
        command.env("AUTH_KEY_ENCRYPTION_KEY", key);
    }
    let out = command.output().expect("auth-server runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Run {
        code: out.status.code(),
        json: if out.status.success() {
            serde_json::from_str(&stdout).unwrap_or(Value::Null)
        } else {
            Value::Null
        },
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An entry's fields as the database holds them, before authentication was added.
#[derive(Clone, Debug)]
struct Row {
    seq: i64,
    at: DateTime<Utc>,
    actor: String,
    action: String,
    subject: String,
    detail: String,
    revision: i64,
    prev_hash: String,
    hash: String,
}

/// What the plain chain hashed, in its order and encoding.
#[derive(Serialize)]
struct PlainHashed<'a> {
    seq: i64,
    at: String,
    actor: &'a str,
    action: &'a str,
    subject: &'a str,
    detail: &'a str,
    revision: i64,
    prev_hash: &'a str,
}

/// The plain SHA-256 of an entry, as anyone can compute it.
fn plain_hash(row: &Row) -> String {
    let hashed = PlainHashed {
        seq: row.seq,
        at: row.at.to_rfc3339_opts(SecondsFormat::Micros, true),
        actor: &row.actor,
        action: &row.action,
        subject: &row.subject,
        detail: &row.detail,
        revision: row.revision,
        prev_hash: &row.prev_hash,
    };
    let encoded = serde_json::to_vec(&hashed).unwrap();
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &encoded);
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// Renumbers the entries 1, 2, 3... and chains their plain hashes again.
fn rechain(rows: &mut [Row]) {
    let mut prev = String::new();
    for (i, row) in rows.iter_mut().enumerate() {
        row.seq = i as i64 + 1;
        row.prev_hash = prev;
        row.hash = plain_hash(row);
        prev = row.hash.clone();
    }
}

async fn connect(url: &str) -> DatabaseConnection {
    Database::connect(url).await.expect("database")
}

/// The trail as stored, oldest first, without the columns added for authentication.
async fn read_rows(db: &DatabaseConnection) -> Vec<Row> {
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            r#"SELECT "seq", "at", "actor", "action", "subject", "detail", "revision", "prev_hash", "hash" FROM "audit_log" ORDER BY "seq""#,
        ))
        .await
        .expect("audit rows");
    rows.iter()
        .map(|r| Row {
            seq: r.try_get("", "seq").unwrap(),
            at: r.try_get("", "at").unwrap(),
            actor: r.try_get("", "actor").unwrap(),
            action: r.try_get("", "action").unwrap(),
            subject: r.try_get("", "subject").unwrap(),
            detail: r.try_get("", "detail").unwrap(),
            revision: r.try_get("", "revision").unwrap(),
            prev_hash: r.try_get("", "prev_hash").unwrap(),
            hash: r.try_get("", "hash").unwrap(),
        })
        .collect()
}

fn audit_log() -> Alias {
    Alias::new("audit_log")
}

/// Inserts `row` as a release without seals writes an entry: the plain columns only.
fn insert_plain(row: &Row) -> sea_orm::sea_query::InsertStatement {
    Query::insert()
        .into_table(audit_log())
        .columns(
            [
                "seq",
                "at",
                "actor",
                "action",
                "subject",
                "detail",
                "revision",
                "prev_hash",
                "hash",
            ]
            .map(Alias::new),
        )
        .values_panic([
            row.seq.into(),
            row.at.into(),
            row.actor.clone().into(),
            row.action.clone().into(),
            row.subject.clone().into(),
            row.detail.clone().into(),
            row.revision.into(),
            row.prev_hash.clone().into(),
            row.hash.clone().into(),
        ])
        .to_owned()
}

/// Writes `rows` over the stored trail as an insider with write access to the database
/// would: every plain column of every row, the rows past the last removed, and the revision
/// row set back to the last entry's, so nothing the database holds disagrees.
async fn rewrite(db: &DatabaseConnection, rows: &[Row]) {
    let last = rows.last().map_or(0, |r| r.seq);
    db.execute(
        &Query::delete()
            .from_table(audit_log())
            .and_where(Expr::col(Alias::new("seq")).gt(last))
            .to_owned(),
    )
    .await
    .expect("delete");
    for row in rows {
        db.execute(
            &Query::update()
                .table(audit_log())
                .values([
                    (Alias::new("at"), row.at.into()),
                    (Alias::new("actor"), row.actor.clone().into()),
                    (Alias::new("action"), row.action.clone().into()),
                    (Alias::new("subject"), row.subject.clone().into()),
                    (Alias::new("detail"), row.detail.clone().into()),
                    (Alias::new("revision"), row.revision.into()),
                    (Alias::new("prev_hash"), row.prev_hash.clone().into()),
                    (Alias::new("hash"), row.hash.clone().into()),
                ])
                .and_where(Expr::col(Alias::new("seq")).eq(row.seq))
                .to_owned(),
        )
        .await
        .expect("update");
    }
    let revision = rows.last().map_or(0, |r| r.revision);
    db.execute_unprepared(&format!(
        r#"UPDATE "revision" SET "value" = {revision} WHERE "id" = 1"#
    ))
    .await
    .expect("revision");
}

/// A server with a trail of nine entries (its first keys, its marker, two clients and
/// alice's changes) whose last is alice disabling the client, and the head `audit verify`
/// printed for it.
async fn a_trail_ending_in_a_disable(backend: Backend) -> (TestApp, String) {
    let app = TestApp::spawn(backend).await;
    let alice = Settings {
        actor: Some("alice".into()),
        ..Settings::from(&app.auth.config)
    };
    let (other, _) = app.auth.create_client(crate::helpers::INTAKE).await;
    for command in [
        ClientCommand::RotateSecret {
            client_id: app.client_id.clone(),
            grace_secs: 60,
        },
        ClientCommand::Disable {
            client_id: other.clone(),
        },
        ClientCommand::Enable { client_id: other },
        ClientCommand::Disable {
            client_id: app.client_id.clone(),
        },
    ] {
        cli::client(alice.clone(), command).await.unwrap();
    }
    let verified = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(verified.code, Some(0), "{}", verified.stderr);
    assert_eq!(verified.json["entries"], 9);
    let head = verified.json["head"].as_str().expect("a head").to_owned();
    assert!(head.starts_with("9:"), "{head}");
    (app, head)
}

/// The review's rewrite: the last entry (a `client.disable`) removed, an older entry's
/// actor changed, every plain hash and the revision row recomputed to agree.
async fn the_reviews_rewrite_of_the_trail_fails_verification(backend: Backend) {
    let (app, head) = a_trail_ending_in_a_disable(backend).await;
    let db = connect(&app.db.url).await;
    let mut rows = read_rows(&db).await;
    let untouched = rows.clone();
    rechain(&mut rows);
    for (stored, recomputed) in untouched.iter().zip(&rows) {
        assert_eq!(
            stored.hash, recomputed.hash,
            "the plain hash is recomputed as stored"
        );
    }
    assert_eq!(rows.last().unwrap().action, "client.disable");
    rows.pop();
    assert_eq!(rows[5].actor, "alice");
    rows[5].actor = "mallory".into();
    rechain(&mut rows);
    rewrite(&db, &rows).await;

    let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("audit entry 6"), "{}", run.stderr);
    let run = auth_server(
        &app.db.url,
        Some(KEY),
        &["audit", "verify", "--head", &head],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
}

/// Entries moved, edited in each of their fields, or stripped of their seals, with every
/// plain hash recomputed: `audit verify` names the entry.
async fn reordered_or_edited_entries_fail_verification_whatever_hashes_are_recomputed(
    backend: Backend,
) {
    type Tamper = fn(&mut Vec<Row>);
    let cases: &[(&str, Tamper, &str)] = &[
        ("reordered", |rows| rows.swap(4, 5), "audit entry 5"),
        (
            "actor",
            |rows| rows[6].actor = "mallory".into(),
            "audit entry 7",
        ),
        (
            "action",
            |rows| rows[6].action = "key.revoke".into(),
            "audit entry 7",
        ),
        (
            "time",
            |rows| rows[6].at -= chrono::Duration::hours(1),
            "audit entry 7",
        ),
        (
            "details",
            |rows| rows[4].detail = "{}".into(),
            "audit entry 5",
        ),
        (
            "subject",
            |rows| rows[7].subject = "someone-else".into(),
            "audit entry 8",
        ),
    ];
    for (what, tamper, named) in cases {
        let (app, _) = a_trail_ending_in_a_disable(backend).await;
        let db = connect(&app.db.url).await;
        let mut rows = read_rows(&db).await;
        tamper(&mut rows);
        rechain(&mut rows);
        rewrite(&db, &rows).await;
        let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
        assert_eq!(run.code, Some(1), "{what}: {}", run.stderr);
        assert!(run.stderr.contains(named), "{what}: {}", run.stderr);
        let _ = db.close().await;
    }
}

/// Entries removed from the end leave a sound chain; the head kept from an earlier
/// `audit verify` shows they are gone.
async fn a_trail_cut_short_fails_verification_against_the_head_kept(backend: Backend) {
    let (app, head) = a_trail_ending_in_a_disable(backend).await;
    let db = connect(&app.db.url).await;
    let mut rows = read_rows(&db).await;
    rows.truncate(6);
    rewrite(&db, &rows).await;

    let run = auth_server(
        &app.db.url,
        Some(KEY),
        &["audit", "verify", "--head", &head],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("ends at entry 6") && run.stderr.contains("head you kept"),
        "{}",
        run.stderr
    );
    // A head at the right place but not the one printed: not this trail.
    let (seq, mac) = head.split_once(':').unwrap();
    let forged = format!("6:{mac}");
    let run = auth_server(
        &app.db.url,
        Some(KEY),
        &["audit", "verify", "--head", &forged],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("head you kept"), "{}", run.stderr);
    assert_eq!(seq, "9");
    let run = auth_server(
        &app.db.url,
        Some(KEY),
        &["audit", "verify", "--head", "eight"],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("SEQ:MAC"), "{}", run.stderr);
}

/// `audit verify` checks the seals, so it needs the key they were made with: without it,
/// or with another, it says so and fails.
async fn verification_needs_the_servers_key(backend: Backend) {
    let (app, head) = a_trail_ending_in_a_disable(backend).await;
    let run = auth_server(&app.db.url, None, &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("AUTH_KEY_ENCRYPTION_KEY"),
        "{}",
        run.stderr
    );
    let run = auth_server(&app.db.url, Some(OTHER_KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("audit entry 1") && run.stderr.contains("AUTH_KEY_ENCRYPTION_KEY"),
        "{}",
        run.stderr
    );
    let run = auth_server(
        &app.db.url,
        Some(KEY),
        &["audit", "verify", "--head", &head],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.json["head"], head.as_str());
}

/// Runs `statement` on the database at `url`.
async fn sql_at(url: &str, statement: &str) {
    let db = connect(url).await;
    db.execute_unprepared(statement).await.expect("statement");
    let _ = db.close().await;
}

/// Starts one more server on `url`'s database, as a routine restart or deploy does.
async fn restart(url: &str) -> test_support::AuthServer {
    test_support::AuthServer::start(url, |_| {})
        .await
        .expect("auth-server starts")
}

/// The entries' actions, oldest first, as `audit list` prints them.
fn actions(url: &str) -> Vec<String> {
    let listed = auth_server(url, None, &["audit", "list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    listed
        .json
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect()
}

/// The review's attack: entry 2 edited, the seals of entries 2 to the last removed, the
/// plain chain recomputed; a server restarted, and an ordinary change made since. Nothing
/// seals the forgery again, and `audit verify` names entry 2.
async fn the_reviews_rewrite_with_its_seals_removed_stays_unsealed_across_a_restart(
    backend: Backend,
) {
    let (app, _) = a_trail_ending_in_a_disable(backend).await;
    let db = connect(&app.db.url).await;
    let mut rows = read_rows(&db).await;
    assert_eq!(rows[1].action, "key.create");
    rows[1].actor = "mallory".into();
    rows[1].detail = r#"{"role":"signing","alg":"RS256","scopes":"everything"}"#.into();
    rechain(&mut rows);
    rewrite(&db, &rows).await;
    db.execute_unprepared(r#"UPDATE "audit_log" SET "mac" = NULL WHERE "seq" >= 2"#)
        .await
        .unwrap();
    let _ = db.close().await;

    let restarted = restart(&app.db.url).await;
    let changed = auth_server(
        &app.db.url,
        Some(KEY),
        &["client", "enable", &app.client_id, "--actor", "alice"],
    );
    assert_eq!(changed.code, Some(0), "{}", changed.stderr);
    let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("audit entry 2 (and every entry after it to 9) is not sealed"),
        "{}",
        run.stderr
    );
    // Nor does `audit seal` accept it: sealed entries come before the stripped ones.
    let sealed = auth_server(&app.db.url, Some(KEY), &["audit", "seal"]);
    assert_eq!(sealed.code, Some(1), "{}", sealed.stderr);
    assert!(
        sealed.stderr.contains("nothing is sealed"),
        "{}",
        sealed.stderr
    );
    let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("audit entry 2"), "{}", run.stderr);
    drop(restarted);
}

/// A seal removed from one entry, nothing else touched: `audit verify` names that entry,
/// and neither a running server nor a restart seals it again.
async fn a_seal_removed_alone_fails_verification_naming_the_entry(backend: Backend) {
    let (app, _) = a_trail_ending_in_a_disable(backend).await;
    sql_at(
        &app.db.url,
        r#"UPDATE "audit_log" SET "mac" = NULL WHERE "seq" = 5"#,
    )
    .await;
    let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("audit entry 5 is not sealed"),
        "{}",
        run.stderr
    );
    let _restarted = restart(&app.db.url).await;
    let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("audit entry 5 is not sealed"),
        "{}",
        run.stderr
    );
}

/// A database as the migrations that upgrade one from before sealing leave it: three
/// entries with the plain SHA-256 only, the revision row at the last's.
async fn a_trail_from_before_sealing(backend: Backend) -> TestDb {
    use sea_orm_migration::MigratorTrait;

    let test_db = TestDb::new(backend, "authseal").await;
    let db = connect(&test_db.url).await;
    let before = auth_server::migration::Migrator::migrations()
        .iter()
        .position(|m| m.name().contains("seal_audit_log"))
        .unwrap_or(usize::MAX);
    auth_server::migration::Migrator::up(&db, u32::try_from(before).ok())
        .await
        .unwrap();
    let at = Utc::now().trunc_subsecs(6);
    let mut rows: Vec<Row> = ["client.rename", "client.rename", "client.rename"]
        .iter()
        .enumerate()
        .map(|(i, action)| Row {
            seq: 0,
            at,
            actor: "auth-server".into(),
            action: (*action).into(),
            subject: format!("c{i}"),
            detail: "{}".into(),
            revision: i as i64 + 2,
            prev_hash: String::new(),
            hash: String::new(),
        })
        .collect();
    rechain(&mut rows);
    for row in &rows {
        db.execute(&insert_plain(row)).await.unwrap();
    }
    db.execute_unprepared(r#"UPDATE "revision" SET "value" = 4 WHERE "id" = 1"#)
        .await
        .unwrap();
    let _ = db.close().await;
    let migrated = auth_server(&test_db.url, None, &["migrate"]);
    assert_eq!(migrated.code, Some(0), "{}", migrated.stderr);
    test_db
}

/// The entries written without the key before sealing (what upgrading a database from
/// before it leaves) fail verification, are not sealed by a server's start, and verify
/// once `audit seal` has accepted them with its sealed marker; it does that once, and the
/// marker's seal covers them, so an edit to them after it fails.
async fn a_trail_from_before_sealing_verifies_once_audit_seal_has_accepted_it(backend: Backend) {
    let test_db = a_trail_from_before_sealing(backend).await;
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("audit entry 1 (and every entry after it to 3) is not sealed")
            && run.stderr.contains("auth-server audit seal"),
        "{}",
        run.stderr
    );
    // A server's start seals nothing of it, and writes no marker: its own keys only.
    let server = restart(&test_db.url).await;
    assert_eq!(
        actions(&test_db.url),
        [
            "client.rename",
            "client.rename",
            "client.rename",
            "key.create",
            "key.create"
        ]
    );
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);

    let sealed = auth_server(
        &test_db.url,
        Some(KEY),
        &["audit", "seal", "--actor", "bob"],
    );
    assert_eq!(sealed.code, Some(0), "{}", sealed.stderr);
    assert_eq!(sealed.json["sealed"], 3);
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.json["entries"], 6);
    let listed = auth_server(&test_db.url, None, &["audit", "list"]);
    assert_eq!(listed.json[5]["action"], "audit.upgrade");
    assert_eq!(listed.json[5]["actor"], "bob");
    assert_eq!(
        listed.json[5]["detail"],
        serde_json::json!({"unsealed_through": 3})
    );
    // Once: a second run, or a later start, changes nothing; ordinary changes verify.
    let again = auth_server(&test_db.url, Some(KEY), &["audit", "seal"]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.json["sealed"], 0);
    drop(server);
    let server = restart(&test_db.url).await;
    let created = auth_server(
        &test_db.url,
        Some(KEY),
        &[
            "client",
            "create",
            "--name",
            "Acme",
            "--scopes",
            crate::helpers::INTAKE,
        ],
    );
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.json["entries"], 7);
    drop(server);

    // Accepted, the entries from before are covered by the marker's seal.
    let db = connect(&test_db.url).await;
    let mut rows = read_rows(&db).await;
    rows[1].subject = "c9".into();
    rechain(&mut rows);
    rewrite(&db, &rows).await;
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("audit entry 4 does not match its seal"),
        "{}",
        run.stderr
    );
}

/// A marker written without the key, unsealed or with a made-up seal, accepts nothing.
async fn a_marker_forged_without_the_key_fails_verification(backend: Backend) {
    let test_db = a_trail_from_before_sealing(backend).await;
    let db = connect(&test_db.url).await;
    let mut rows = read_rows(&db).await;
    let mut marker = rows.last().unwrap().clone();
    marker.action = "audit.upgrade".into();
    marker.subject = "audit_log".into();
    marker.detail = r#"{"unsealed_through":3}"#.into();
    rows.push(marker);
    rechain(&mut rows);
    db.execute(&insert_plain(rows.last().unwrap()))
        .await
        .unwrap();
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("audit entry 1 (and every entry after it to 4) is not sealed"),
        "{}",
        run.stderr
    );
    db.execute_unprepared(r#"UPDATE "audit_log" SET "mac" = 'q83vEjRWeJA' WHERE "seq" = 4"#)
        .await
        .unwrap();
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("audit entry 4") && run.stderr.contains("does not match its seal"),
        "{}",
        run.stderr
    );
    let _ = db.close().await;
}

/// A trail sealed entry by entry with no marker (as release 0.2.0 leaves it) verifies as it
/// is; the first start marks it, accepting nothing, and from then on `audit seal` accepts
/// no seal removed.
async fn a_trail_sealed_as_written_verifies_and_the_first_start_marks_it(backend: Backend) {
    let test_db = TestDb::auth(backend).await;
    test_support::create_client_offline(&test_db.url, crate::helpers::INTAKE).await;
    assert_eq!(actions(&test_db.url), ["client.create"]);
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let _server = restart(&test_db.url).await;
    assert_eq!(
        actions(&test_db.url),
        ["client.create", "key.create", "key.create", "audit.upgrade"]
    );
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let sealed = auth_server(&test_db.url, Some(KEY), &["audit", "seal"]);
    assert_eq!(sealed.code, Some(0), "{}", sealed.stderr);
    assert_eq!(sealed.json["sealed"], 0);

    sql_at(
        &test_db.url,
        r#"UPDATE "audit_log" SET "mac" = NULL WHERE "seq" = 1"#,
    )
    .await;
    let sealed = auth_server(&test_db.url, Some(KEY), &["audit", "seal"]);
    assert_eq!(sealed.code, Some(1), "{}", sealed.stderr);
    let run = auth_server(&test_db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("audit entry 1 is not sealed")
            && run.stderr.contains("seal was removed"),
        "{}",
        run.stderr
    );
}

/// An entry appended without a seal (release 0.2.0 run without the key, or a seal
/// removed) stays so: the running server picks it up and seals nothing, and nor does a
/// restart; `audit verify` names it.
async fn an_entry_appended_without_a_seal_is_sealed_by_no_server(backend: Backend) {
    let (app, _) = a_trail_ending_in_a_disable(backend).await;
    let db = connect(&app.db.url).await;
    let mut rows = read_rows(&db).await;
    let mut next = rows.last().unwrap().clone();
    next.action = "client.enable".into();
    next.revision += 1;
    rows.push(next.clone());
    rechain(&mut rows);
    let next = rows.last().unwrap();
    // As release 0.2.0 appends without the key: the entry, and the revision bump the
    // servers notice.
    let txn = db.begin().await.unwrap();
    txn.execute(&insert_plain(next)).await.unwrap();
    txn.execute_unprepared(r#"UPDATE "revision" SET "value" = "value" + 1 WHERE "id" = 1"#)
        .await
        .unwrap();
    txn.commit().await.unwrap();
    let _ = db.close().await;
    // Read from the server itself: the gauge on /metrics is the process's, which other
    // tests' servers set too.
    let picked_up = eventually(Duration::from_secs(5), || async {
        (app.auth.state.registry.snapshot().audit_seq == 10).then_some(())
    })
    .await;
    assert!(picked_up.is_some(), "the running server never saw entry 10");
    let _restarted = restart(&app.db.url).await;
    let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("audit entry 10 is not sealed"),
        "{}",
        run.stderr
    );
    assert_eq!(actions(&app.db.url).len(), 10, "nothing was appended");
}

/// A change asked for without the key is refused before anything is written: it could
/// leave only an entry without a seal, which nothing tells from one whose seal was removed.
async fn a_client_change_without_the_key_is_refused_and_writes_no_entry(backend: Backend) {
    let (app, _) = a_trail_ending_in_a_disable(backend).await;
    let before = actions(&app.db.url);
    for args in [
        &["client", "enable", app.client_id.as_str()][..],
        &[
            "client",
            "create",
            "--name",
            "Keyless",
            "--scopes",
            crate::helpers::INTAKE,
        ],
        &["client", "rotate-secret", app.client_id.as_str()],
        &["audit", "seal"],
    ] {
        let run = auth_server(&app.db.url, None, args);
        assert_eq!(run.code, Some(1), "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("AUTH_KEY_ENCRYPTION_KEY"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(actions(&app.db.url), before);
    let shown = auth_server(&app.db.url, None, &["client", "show", &app.client_id]);
    assert_eq!(shown.code, Some(0), "reads need no key: {}", shown.stderr);
    assert!(shown.json["disabled_at"].is_string(), "{}", shown.json);
    let run = auth_server(&app.db.url, Some(KEY), &["audit", "verify"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

/// The head of the trail is published where the database cannot reach: a gauge on
/// `/metrics` with the last entry's place.
async fn the_head_is_a_gauge_on_metrics(backend: Backend) {
    let (app, head) = a_trail_ending_in_a_disable(backend).await;
    let text = crate::helpers::metrics_text(&app.auth.base_url()).await;
    assert!(text.contains("# TYPE auth_audit_head_seq gauge"), "{text}");
    assert!(text.contains("# HELP auth_audit_head_seq "), "{text}");
    let value: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("auth_audit_head_seq "))
        .expect("a sample")
        .parse()
        .unwrap();
    assert!(value >= 1.0, "{value} ({head})");
}

on_both_backends!(
    the_reviews_rewrite_of_the_trail_fails_verification,
    reordered_or_edited_entries_fail_verification_whatever_hashes_are_recomputed,
    a_trail_cut_short_fails_verification_against_the_head_kept,
    verification_needs_the_servers_key,
    the_reviews_rewrite_with_its_seals_removed_stays_unsealed_across_a_restart,
    a_seal_removed_alone_fails_verification_naming_the_entry,
    a_trail_from_before_sealing_verifies_once_audit_seal_has_accepted_it,
    a_marker_forged_without_the_key_fails_verification,
    a_trail_sealed_as_written_verifies_and_the_first_start_marks_it,
    an_entry_appended_without_a_seal_is_sealed_by_no_server,
    a_client_change_without_the_key_is_refused_and_writes_no_entry,
);
on_sqlite!(the_head_is_a_gauge_on_metrics);

/// Every change's head reaches the server's log stream, which an insider with the
/// database alone cannot rewrite: `audit verify --head` can be checked against it later.
#[tokio::test]
async fn the_server_logs_the_head_after_every_change() {
    let db = TestDb::auth(Backend::Sqlite).await;
    let log = tempfile_path("serve.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .arg("serve")
        .env("AUTH_DATABASE_URL", &db.url)
        .env("AUTH_KEY_ENCRYPTION_KEY", KEY)
        .env("AUTH_BIND", "127.0.0.1:0")
        .env("LOG_FORMAT", "json")
        .env_remove("RUST_LOG")
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("auth-server serve starts");
    let logged = |head: String| {
        let log = log.clone();
        async move {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.lines()
                .any(|l| l.contains("audit trail head") && l.contains(&head))
                .then_some(())
        }
    };
    // The server first: a command opening the SQLite file while the server switches it to
    // WAL at start can make the server's connection find it locked.
    let up = eventually(Duration::from_secs(20), || logged(String::new())).await;
    assert!(up.is_some(), "the server logged no head at start");
    let started = eventually(Duration::from_secs(20), || async {
        let run = auth_server(&db.url, Some(KEY), &["audit", "verify"]);
        let head = run.json["head"].as_str()?.to_owned();
        logged(head).await
    })
    .await;
    let created = auth_server(
        &db.url,
        Some(KEY),
        &[
            "client",
            "create",
            "--name",
            "Acme",
            "--scopes",
            crate::helpers::INTAKE,
        ],
    );
    let verified = auth_server(&db.url, Some(KEY), &["audit", "verify"]);
    let head = verified.json["head"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let after_change = eventually(Duration::from_secs(5), || logged(head.clone())).await;
    server.kill().expect("the server stops");
    let _ = server.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    assert!(started.is_some(), "no head logged at start:\n{text}");
    assert!(head.starts_with("4:"), "{head}");
    assert!(after_change.is_some(), "head {head} not logged:\n{text}");
}

/// A fresh file name in the temporary directory.
fn tempfile_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{}-{name}", uuid::Uuid::new_v4().simple()))
}
