//! The operator command line, driven as a separate process the way operators use it.

use std::process::Command;

use serde_json::Value;
use test_support::on_both_backends;

use crate::helpers::{Backend, TestDb};

fn auth_server(db: &TestDb, args: &[&str]) -> (bool, Value, String) {
    let (code, json, stderr) = auth_server_at(&db.url, args);
    (code == Some(0), json, stderr)
}

/// Runs the binary on the database at `url`: exit code, stdout as JSON (null when empty or
/// on failure), stderr.
fn auth_server_at(url: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .args(args)
        .env("AUTH_DATABASE_URL", url)
        .env(
            "AUTH_KEY_ENCRYPTION_KEY",
            test_support::TEST_KEY_ENCRYPTION_KEY,
        )
        .env("RUST_LOG", "info")
        .output()
        .expect("auth-server runs");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let stderr = String::from_utf8(out.stderr).expect("utf-8 stderr");
    let json = if out.status.success() && !stdout.trim().is_empty() {
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {stdout}"))
    } else {
        Value::Null
    };
    (out.status.code(), json, stderr)
}

async fn the_commands_print_json_and_keep_secrets_off_stderr(backend: Backend) {
    // Empty: an operator's first command runs before any server has migrated the database.
    let db = TestDb::new(backend, "authcli").await;
    let (ok, _, stderr) = auth_server(&db, &["migrate"]);
    assert!(ok, "{stderr}");
    let (ok, created, stderr) = auth_server(
        &db,
        &[
            "client",
            "create",
            "--name",
            "Acme",
            "--scopes",
            "enquiry:case:intake:create enquiry:referral:create",
        ],
    );
    assert!(ok, "{stderr}");
    let id = created["client_id"].as_str().unwrap().to_owned();
    let secret = created["client_secret"].as_str().unwrap().to_owned();
    assert!(secret.len() >= 43);
    assert_eq!(
        created["scopes"],
        serde_json::json!(["enquiry:case:intake:create", "enquiry:referral:create"])
    );
    assert!(!stderr.contains(&secret), "secret on stderr");

    let (ok, listed, _) = auth_server(&db, &["client", "list"]);
    assert!(ok);
    assert_eq!(listed[0]["client_id"], id.as_str());
    assert!(!listed.to_string().contains(&secret));

    let (ok, rotated, stderr) =
        auth_server(&db, &["client", "rotate-secret", &id, "--grace-secs", "60"]);
    assert!(ok);
    let new_secret = rotated["client_secret"].as_str().unwrap();
    assert!(!stderr.contains(new_secret));
    assert!(rotated["previous_secret_valid_until"].is_string());

    let (ok, keys, _) = auth_server(&db, &["key", "list"]);
    assert!(ok);
    assert_eq!(keys, serde_json::json!([]), "only serve makes keys");

    let (ok, rotated, _) = auth_server(&db, &["key", "rotate", "--publish-ahead-secs", "120"]);
    assert!(ok);
    assert_eq!(rotated["state"], "pending");
    let (ok, keys, _) = auth_server(&db, &["key", "list"]);
    assert!(ok);
    let states: Vec<_> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["state"].clone())
        .collect();
    assert_eq!(states, ["pending", "standby"]);
    for field in ["kid", "created_at", "activates_at"] {
        assert!(keys[0][field].is_string(), "{field}");
    }
    assert_eq!(keys[1]["kid"], rotated["standby_kid"]);

    let (ok, disabled, _) = auth_server(&db, &["client", "disable", &id]);
    assert!(ok);
    assert_eq!(disabled["disabled"], true);

    let (ok, _, stderr) = auth_server(&db, &["client", "disable", "no-such-client"]);
    assert!(!ok);
    assert!(stderr.contains("no client with id"), "{stderr}");
    let (ok, _, stderr) = auth_server(
        &db,
        &["client", "create", "--name", "x", "--scopes", "admin"],
    );
    assert!(!ok);
    assert!(stderr.contains("unknown scope"), "{stderr}");
}

/// A command pointed at a database that is not there, or not migrated, fails with exit code
/// 3 and says what to do, and creates nothing; a thing that does not exist is exit code 1,
/// a usage error 2.
async fn commands_act_only_on_an_existing_migrated_database(backend: Backend) {
    let missing_dir =
        std::env::temp_dir().join(format!("no-such-{}", uuid::Uuid::new_v4().simple()));
    let missing = format!("sqlite://{}/auth.db?mode=rwc", missing_dir.display());
    let (code, _, stderr) = auth_server_at(&missing, &["client", "list"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "there is no database at {}/auth.db",
            missing_dir.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("`auth-server serve` or `auth-server migrate`"),
        "{stderr}"
    );
    assert!(
        !missing_dir.exists(),
        "the command created {}",
        missing_dir.display()
    );

    let empty = TestDb::new(backend, "authcliempty").await;
    if backend == Backend::Sqlite {
        // An empty file where the database should be.
        let path = empty
            .url
            .trim_start_matches("sqlite://")
            .split('?')
            .next()
            .unwrap()
            .to_owned();
        std::fs::write(&path, b"").unwrap();
    }
    let (code, _, stderr) = auth_server_at(
        &empty.url,
        &[
            "client",
            "create",
            "--name",
            "x",
            "--scopes",
            "enquiry:case:intake:create",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("has no auth-server schema"), "{stderr}");
    let (code, _, stderr) = auth_server_at(&empty.url, &["key", "list"]);
    assert_eq!(code, Some(3), "{stderr}");

    let (code, _, _) = auth_server_at(&empty.url, &["migrate"]);
    assert_eq!(code, Some(0));
    let (code, _, stderr) = auth_server_at(&empty.url, &["client", "disable", "no-such-client"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("no client with id no-such-client"),
        "{stderr}"
    );
    let (code, _, stderr) = auth_server_at(&empty.url, &["client", "frobnicate"]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, listed, _) = auth_server_at(&empty.url, &["client", "list"]);
    assert_eq!((code, listed), (Some(0), serde_json::json!([])));
}

on_both_backends!(
    the_commands_print_json_and_keep_secrets_off_stderr,
    commands_act_only_on_an_existing_migrated_database,
);
