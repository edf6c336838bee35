//! The operator command line, driven as a separate process the way operators use it.

use std::process::Command;

use serde_json::Value;
use test_support::on_both_backends;

use crate::helpers::{AuthServer, Backend, INTAKE, Run, TestDb, run};

fn auth_server(db: &TestDb, args: &[&str]) -> (bool, Value, String) {
    let (code, json, stderr) = auth_server_at(&db.url, args);
    (code == Some(0), json, stderr)
}

/// Runs the binary on the database at `url`, logging at `info`: exit code, stdout as JSON
/// (null when empty or on failure), stderr.
fn auth_server_at(url: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let run = run(url, args, &[("RUST_LOG", "info")]);
    (run.code, run.json(), run.stderr)
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
        stderr.contains("run `auth-server migrate` with it first"),
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

/// A migrated, empty auth database, and a client made on it with the binary.
async fn with_a_client(backend: Backend, name: &str) -> (TestDb, String, String) {
    let db = TestDb::auth(backend).await;
    let created = run(
        &db.url,
        &[
            "client",
            "create",
            "--name",
            name,
            "--scopes",
            "enquiry:case:intake:create",
        ],
        &[],
    );
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    assert_eq!(created.stderr, "", "through a pipe, nothing but the JSON");
    let json = created.json();
    let id = json["client_id"].as_str().unwrap().to_owned();
    let secret = json["client_secret"].as_str().unwrap().to_owned();
    (db, id, secret)
}

/// The fingerprint a partner computes from the secret it holds: SHA-256 over the secret's
/// SHA-256, the first 8 bytes in hex.
fn fingerprint_of(secret: &str) -> String {
    use aws_lc_rs::digest::{SHA256, digest};
    let twice = digest(&SHA256, digest(&SHA256, secret.as_bytes()).as_ref());
    twice.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every RFC 3339 time in `value`, wherever it is.
fn times_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if chrono::DateTime::parse_from_rfc3339(s).is_ok() => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| times_in(v, out)),
        Value::Object(fields) => fields.values().for_each(|v| times_in(v, out)),
        _ => {}
    }
}

fn assert_whole_seconds(value: &Value) {
    let mut times = Vec::new();
    times_in(value, &mut times);
    assert!(!times.is_empty(), "no times in {value}");
    for time in times {
        assert!(
            time.len() == 20 && time.ends_with('Z'),
            "{time} is not to the second, in UTC"
        );
    }
}

async fn client_show_gives_each_secrets_fingerprint_and_expiry_and_never_a_secret(
    backend: Backend,
) {
    let (db, id, first) = with_a_client(backend, "Acme").await;
    let rotated = run(&db.url, &["client", "rotate-secret", &id], &[]);
    assert_eq!(rotated.code, Some(0), "{}", rotated.stderr);
    let second = rotated.json()["client_secret"].as_str().unwrap().to_owned();

    let shown = run(&db.url, &["client", "show", &id], &[]);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert_eq!(shown.stderr, "", "a read logs nothing below warn");
    let client = shown.json();
    assert_eq!(client["client_id"], id.as_str());
    assert_eq!(client["name"], "Acme");
    assert_eq!(client["disabled"], false);
    let secrets = client["secrets"].as_array().unwrap();
    assert_eq!(secrets.len(), 2);
    assert_eq!(secrets[0]["fingerprint"], fingerprint_of(&first).as_str());
    assert_eq!(secrets[0]["state"], "grace");
    assert!(secrets[0]["valid_until"].is_string());
    assert_eq!(secrets[1]["fingerprint"], fingerprint_of(&second).as_str());
    assert_eq!(secrets[1]["state"], "current");
    assert_eq!(secrets[1]["valid_until"], Value::Null);
    assert_whole_seconds(&client);
    for secret in [&first, &second] {
        assert!(!shown.stdout.contains(secret.as_str()));
    }
    let listed = run(&db.url, &["client", "list"], &[]).json();
    assert_eq!(
        listed[0]["secrets"], client["secrets"],
        "list shows the same"
    );

    let table = run(&db.url, &["client", "show", &id, "-o", "table"], &[]);
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    assert!(
        table.stdout.starts_with(&format!("client_id:      {id}\n")),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("\nsecrets:\n  FINGERPRINT "),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains(&fingerprint_of(&second)),
        "{}",
        table.stdout
    );

    let missing = run(&db.url, &["client", "show", "no-such-client"], &[]);
    assert_eq!(missing.code, Some(1));
    assert_eq!(missing.stdout, "");
    assert!(
        missing.stderr.contains("no client with id no-such-client"),
        "{}",
        missing.stderr
    );
}

async fn disabling_twice_keeps_the_first_date_and_says_so(backend: Backend) {
    let (db, id, _) = with_a_client(backend, "Acme").await;
    let first = run(&db.url, &["client", "disable", &id], &[]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(first.json()["changed"], true);
    let since = first.json()["disabled_at"].as_str().unwrap().to_owned();
    assert_eq!(first.stderr, "");

    let again = run(&db.url, &["client", "disable", &id], &[]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.json()["changed"], false);
    assert_eq!(again.json()["disabled_at"], since.as_str());
    assert_eq!(
        again.stderr,
        format!("client {id} is already disabled, since {since}: nothing changed\n")
    );
    let shown = run(&db.url, &["client", "show", &id], &[]).json();
    assert_eq!(shown["disabled_at"], since.as_str());

    let enabled = run(&db.url, &["client", "enable", &id], &[]);
    assert_eq!(
        (enabled.code, enabled.json()["changed"].clone()),
        (Some(0), Value::Bool(true))
    );
    let again = run(&db.url, &["client", "enable", &id], &[]);
    assert_eq!(
        (again.code, again.json()["changed"].clone()),
        (Some(0), Value::Bool(false))
    );
    assert!(
        again.stderr.contains("is already enabled"),
        "{}",
        again.stderr
    );
    let audit = run(&db.url, &["audit", "list"], &[]).json();
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["client.create", "client.disable", "client.enable"]
    );
}

async fn client_names_are_unique_whatever_their_case(backend: Backend) {
    let (db, id, _) = with_a_client(backend, "Acme Mortgages").await;
    let taken = run(
        &db.url,
        &[
            "client",
            "create",
            "--name",
            " ACME mortgages ",
            "--scopes",
            "enquiry:case:intake:create",
        ],
        &[],
    );
    assert_eq!(taken.code, Some(1));
    assert_eq!(taken.stdout, "");
    assert_eq!(
        taken.stderr,
        format!(
            "error: client {id} is already named \"Acme Mortgages\": client names must differ \
             in more than case\n"
        )
    );
    let listed = run(&db.url, &["client", "list"], &[]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
}

/// Names told apart only by case, made before names were unique, do not stop the migration
/// that makes them so: the oldest keeps its name, the others are renamed, in the audit trail.
async fn the_unique_names_migration_renames_older_duplicates(backend: Backend) {
    use sea_orm::{ConnectionTrait, Database};
    use sea_orm_migration::MigratorTrait;

    let db = TestDb::new(backend, "authnames").await;
    let conn = Database::connect(db.url.as_str()).await.unwrap();
    let before = auth_server::migration::Migrator::migrations()
        .iter()
        .position(|m| m.name() == "m20261130_000001_unique_client_names")
        .unwrap();
    auth_server::migration::Migrator::up(&conn, Some(before as u32))
        .await
        .unwrap();
    for (id, name, created) in [
        ("c1", "Acme", "2026-11-01 10:00:00+00:00"),
        ("c2", "ACME", "2026-11-02 10:00:00+00:00"),
        ("c3", "Other", "2026-11-03 10:00:00+00:00"),
    ] {
        conn.execute_unprepared(&format!(
            "INSERT INTO clients (client_id, name, scopes, created_at, updated_at) \
             VALUES ('{id}', '{name}', 'enquiry:case:intake:create', '{created}', '{created}')"
        ))
        .await
        .unwrap();
    }
    let _ = conn.close().await;

    let migrated = run(&db.url, &["migrate"], &[]);
    assert_eq!(migrated.code, Some(0), "{}", migrated.stderr);
    assert!(
        migrated.stderr.contains("client renamed"),
        "{}",
        migrated.stderr
    );
    let listed = run(&db.url, &["client", "list"], &[]).json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Acme", "ACME (c2)", "Other"]);
    let audit = run(&db.url, &["audit", "list"], &[]).json();
    assert_eq!(audit[0]["action"], "client.rename");
    assert_eq!(audit[0]["subject"], "c2");
    assert_eq!(audit[0]["detail"]["previous_name"], "ACME");
    // Written by a migration, which has no key: sealed by the next process that has it.
    let unsealed = run(&db.url, &["audit", "verify"], &[]);
    assert_eq!(unsealed.code, Some(1), "{}", unsealed.stderr);
    assert!(
        unsealed.stderr.contains("not sealed"),
        "{}",
        unsealed.stderr
    );
    let sealed = run(&db.url, &["audit", "seal"], &[]);
    assert_eq!(sealed.code, Some(0), "{}", sealed.stderr);
    let verified = run(&db.url, &["audit", "verify"], &[]);
    assert_eq!(verified.code, Some(0), "{}", verified.stderr);
    let refused = run(
        &db.url,
        &[
            "client",
            "create",
            "--name",
            "other",
            "--scopes",
            "enquiry:case:intake:create",
        ],
        &[],
    );
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
}

/// On a terminal people get tables; through a pipe scripts get JSON unless they ask;
/// either way times are to the second, and logs below warn stay off stderr.
async fn output_is_a_table_or_json_as_asked_with_times_to_the_second(backend: Backend) {
    let (db, id, _) = with_a_client(backend, "Acme").await;
    let json = run(&db.url, &["client", "list"], &[]);
    assert_eq!(json.stderr, "");
    assert_whole_seconds(&json.json());
    assert_eq!(
        run(&db.url, &["client", "list", "-o", "json"], &[]).json(),
        json.json()
    );

    let table = run(&db.url, &["client", "list", "-o", "table"], &[]);
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", table.stdout);
    let heading: Vec<&str> = lines[0]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        heading,
        [
            "CLIENT ID",
            "NAME",
            "SCOPES",
            "BRANDS",
            "SANDBOX",
            "DISABLED AT",
            "CREATED AT",
            "AUTH METHOD",
            "SECRETS"
        ]
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    let created = json.json()[0]["created_at"].as_str().unwrap().to_owned();
    assert_eq!(
        row,
        [
            id.as_str(),
            "Acme",
            "enquiry:case:intake:create",
            "-",
            "false",
            "-",
            &created,
            "client_secret",
            "1"
        ]
    );
    // Each column starts where its heading does.
    assert_eq!(lines[1].find(&created), lines[0].find("CREATED AT"));

    let keys = run(&db.url, &["key", "list", "-o", "table"], &[]);
    assert_eq!(keys.code, Some(0));
    assert_eq!(keys.stdout, "");
    assert!(keys.stderr.contains("No keys"), "{}", keys.stderr);

    let bad = run(&db.url, &["client", "list", "-o", "yaml"], &[]);
    assert_eq!(bad.code, Some(2));
    assert!(
        bad.stderr.contains("[possible values: table, json]"),
        "{}",
        bad.stderr
    );
}

async fn a_portal_client_is_created_and_rebound_to_brands_with_an_audit_entry(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let (ok, created, stderr) = auth_server(
        &db,
        &[
            "client",
            "create",
            "--name",
            "Brand A portal",
            "--scopes",
            "portal:redirect:redeem",
            "--brands",
            "brand_a",
        ],
    );
    assert!(ok, "{stderr}");
    assert_eq!(created["brands"], serde_json::json!(["brand_a"]));
    let id = created["client_id"].as_str().unwrap();

    let (ok, bound, stderr) = auth_server(
        &db,
        &["client", "set-brands", id, "--brands", "brand_a,brand_b"],
    );
    assert!(ok, "{stderr}");
    assert_eq!(
        bound,
        serde_json::json!({"client_id": id, "brands": ["brand_a", "brand_b"], "previous_brands": ["brand_a"]})
    );
    let (ok, listed, _) = auth_server(&db, &["client", "list"]);
    assert!(ok);
    assert_eq!(
        listed[0]["brands"],
        serde_json::json!(["brand_a", "brand_b"])
    );
    let (ok, audit, _) = auth_server(&db, &["audit", "list"]);
    assert!(ok);
    let last = audit.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["action"], "client.set_brands");
    assert_eq!(last["subject"], id);

    let (ok, _, stderr) = auth_server(
        &db,
        &[
            "client",
            "create",
            "--name",
            "Unbound portal",
            "--scopes",
            "portal:redirect:redeem",
        ],
    );
    assert!(!ok);
    assert!(stderr.contains("--brands"), "{stderr}");
}

async fn a_sandbox_client_says_so_in_show_and_list_and_is_never_a_portal(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let (ok, created, stderr) = auth_server(
        &db,
        &[
            "client",
            "create",
            "--name",
            "Acme sandbox",
            "--scopes",
            "enquiry:case:intake:create",
            "--sandbox",
        ],
    );
    assert!(ok, "{stderr}");
    assert_eq!(created["sandbox"], true, "{created}");
    let id = created["client_id"].as_str().unwrap();

    let shown = run(&db.url, &["client", "show", id, "-o", "table"], &[]);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    let line = shown.stdout.lines().find(|l| l.starts_with("sandbox:"));
    assert_eq!(
        line.map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["sandbox:", "true"]),
        "{}",
        shown.stdout
    );
    let (ok, shown, _) = auth_server(&db, &["client", "show", id]);
    assert!(ok);
    assert_eq!(shown["sandbox"], true);
    let listed = run(&db.url, &["client", "list", "-o", "table"], &[]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    let column = lines[0].find("SANDBOX").expect("a SANDBOX column");
    assert_eq!(lines[1].find("true"), Some(column), "{}", listed.stdout);
    let (ok, audit, _) = auth_server(&db, &["audit", "list"]);
    assert!(ok);
    let entry = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "client.create" && e["subject"] == id)
        .expect("the client.create entry");
    assert_eq!(entry["detail"]["sandbox"], true, "{entry}");

    let (code, _, stderr) = auth_server_at(
        &db.url,
        &[
            "client",
            "create",
            "--name",
            "Brand A sandbox portal",
            "--scopes",
            "portal:redirect:redeem",
            "--brands",
            "brand_a",
            "--sandbox",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("a sandbox client is a partner practising"),
        "{stderr}"
    );
    let (ok, listed, _) = auth_server(&db, &["client", "list"]);
    assert!(ok);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}

/// A JWKS file of one EC P-256 key (RFC 7515 appendix A.3), with `extra` members on the
/// key; removed when the returned guard is dropped.
struct JwksFile(std::path::PathBuf);

impl JwksFile {
    fn ec(kid: &str, extra: &[(&str, &str)]) -> Self {
        let mut key = serde_json::json!({
            "kty": "EC", "crv": "P-256", "kid": kid,
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
        });
        for (member, value) in extra {
            key[*member] = serde_json::json!(value);
        }
        let path = std::env::temp_dir().join(format!("jwks-{}.json", uuid::Uuid::new_v4()));
        std::fs::write(&path, serde_json::json!({"keys": [key]}).to_string()).unwrap();
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for JwksFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn a_keyed_client_is_registered_from_a_jwks_file_without_a_secret(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let create = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "client",
            "create",
            "--name",
            name,
            "--scopes",
            "enquiry:case:intake:create",
        ];
        args.extend_from_slice(extra);
        run(&db.url, &args, &[])
    };
    let keys = JwksFile::ec("acme-2026", &[]);
    let created = create(
        "Acme",
        &[
            "--auth-method",
            "private_key_jwt",
            "--jwks-file",
            keys.path(),
        ],
    );
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let printed = created.json();
    assert_eq!(
        printed,
        serde_json::json!({
            "client_id": printed["client_id"],
            "scopes": ["enquiry:case:intake:create"],
            "auth_method": "private_key_jwt",
            "keys": [{"kid": "acme-2026", "kind": "EC P-256", "alg": null}],
        })
    );
    for out in [&created.stdout, &created.stderr] {
        assert!(
            !out.contains("client_secret") && !out.contains("secret"),
            "{out}"
        );
    }
    let id = printed["client_id"].as_str().unwrap().to_owned();

    // A private key is refused, named, and not echoed.
    let private = JwksFile::ec(
        "leaked",
        &[("d", "jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI")],
    );
    let refused = create(
        "Leaky",
        &[
            "--auth-method",
            "private_key_jwt",
            "--jwks-file",
            private.path(),
        ],
    );
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.contains("key 0 (kid \"leaked\")")
            && refused.stderr.contains("private key material (`d`)"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("jpsQnnGQ"), "{}", refused.stderr);
    // One method per client, and keys for the keyed one.
    let without_keys = create("No keys", &["--auth-method", "private_key_jwt"]);
    assert!(
        without_keys.stderr.contains("--jwks-file"),
        "{}",
        without_keys.stderr
    );
    let keys_for_secret = create("Both", &["--jwks-file", keys.path()]);
    assert!(
        keys_for_secret.stderr.contains("one method"),
        "{}",
        keys_for_secret.stderr
    );
    let (ok, listed, _) = auth_server(&db, &["client", "list"]);
    assert!(ok);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");

    let next = JwksFile::ec("acme-2027", &[("alg", "ES256")]);
    let (ok, set, stderr) = auth_server(
        &db,
        &["client", "set-keys", &id, "--jwks-file", next.path()],
    );
    assert!(ok, "{stderr}");
    assert_eq!(
        set,
        serde_json::json!({
            "client_id": id,
            "keys": [{"kid": "acme-2027", "kind": "EC P-256", "alg": "ES256"}],
            "previous_keys": [{"kid": "acme-2026", "kind": "EC P-256", "alg": null}],
        })
    );
    let (ok, _, stderr) = auth_server(&db, &["client", "rotate-secret", &id]);
    assert!(!ok);
    assert!(stderr.contains("no secret to rotate"), "{stderr}");
    let (ok, audit, _) = auth_server(&db, &["audit", "list"]);
    assert!(ok);
    let entries = audit.as_array().unwrap();
    let actions: Vec<_> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["client.create", "client.set_keys"]);
    assert_eq!(entries[0]["detail"]["auth_method"], "private_key_jwt");
    assert_eq!(entries[1]["detail"]["keys"][0]["kid"], "acme-2027");
}

/// The environment variable the ensure tests hand the secret in.
const SECRET_VAR: &str = "ENSURE_TEST_CLIENT_SECRET";

/// A secret as an operator generates one (`openssl rand -base64 32`), and another.
const SECRET: &str = "m3Qy7Vb0Zk2Xc9Rt5Lp8Wn4Hd6Fs1Ga0Ej3Ku7Oi2Ty=";
const NEW_SECRET: &str = "Pq4Wr8Ty2Ui6Op0As5Df9Gh3Jk7Lz1Xc4Vb8Nm2Qw6E=";

/// `client ensure` with `declaration`, `env` set.
fn ensure(db: &TestDb, declaration: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec!["client", "ensure"];
    args.extend_from_slice(declaration);
    run(&db.url, &args, env)
}

/// `client ensure` of the intake-api's own client, `revocations:read`, with `secret`.
fn ensure_reader(db: &TestDb, secret: &str) -> Run {
    ensure(
        db,
        &[
            "--id",
            "intake-api",
            "--name",
            "intake-api",
            "--scopes",
            "revocations:read",
            "--secret-env",
            SECRET_VAR,
        ],
        &[(SECRET_VAR, secret)],
    )
}

/// The actions of the audit trail's entries, oldest first.
fn audit_actions(db: &TestDb) -> Vec<String> {
    let audit = run(&db.url, &["audit", "list"], &[]).json();
    audit
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect()
}

/// The database's revision, which every change moves.
async fn revision(db: &TestDb) -> i64 {
    let conn = sea_orm::Database::connect(db.url.as_str()).await.unwrap();
    let revision = auth_server::store::current_revision(&conn).await.unwrap();
    let _ = conn.close().await;
    revision
}

/// The status of a token request over HTTP with these credentials.
async fn token_status(auth: &AuthServer, id: &str, secret: &str, scope: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}/oauth/token", auth.base_url()))
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials"), ("scope", scope)])
        .send()
        .await
        .expect("token request")
        .status()
        .as_u16()
}

fn assert_secrets_not_in(run: &Run) {
    for secret in [SECRET, NEW_SECRET] {
        assert!(
            !run.stdout.contains(secret),
            "secret on stdout: {}",
            run.stdout
        );
        assert!(
            !run.stderr.contains(secret),
            "secret on stderr: {}",
            run.stderr
        );
    }
}

async fn ensure_creates_the_client_once_then_writes_nothing_and_it_gets_a_token(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let created = ensure_reader(&db, SECRET);
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    assert_secrets_not_in(&created);
    assert_eq!(
        created.json(),
        serde_json::json!({
            "client_id": "intake-api",
            "outcome": "created",
            "changed": true,
            "name": "intake-api",
            "scopes": ["revocations:read"],
            "auth_method": "client_secret",
        })
    );
    assert_eq!(audit_actions(&db), ["client.create"]);
    let before = revision(&db).await;

    let again = ensure(
        &db,
        &[
            "--id",
            "intake-api",
            "--name",
            "intake-api",
            "--scopes",
            "revocations:read",
            "--secret-env",
            SECRET_VAR,
            "-o",
            "json",
        ],
        &[(SECRET_VAR, SECRET)],
    );
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_secrets_not_in(&again);
    let printed = again.json();
    assert_eq!(
        (
            &printed["client_id"],
            &printed["outcome"],
            &printed["changed"]
        ),
        (
            &Value::from("intake-api"),
            &Value::from("unchanged"),
            &Value::from(false)
        ),
        "{printed}"
    );
    assert_eq!(
        again.stderr,
        "client intake-api is as declared: nothing changed\n"
    );
    assert_eq!(
        audit_actions(&db),
        ["client.create"],
        "no entry for no change"
    );
    assert_eq!(revision(&db).await, before, "nothing written");

    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let reader = shared::claims::scopes::REVOCATIONS_READ;
    assert_eq!(token_status(&auth, "intake-api", SECRET, reader).await, 200);
    assert_eq!(
        token_status(&auth, "intake-api", NEW_SECRET, reader).await,
        401
    );
}

async fn ensure_brings_a_changed_secret_name_and_scopes_to_the_declaration(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let created = ensure_reader(&db, SECRET);
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let reader = shared::claims::scopes::REVOCATIONS_READ;
    assert_eq!(token_status(&auth, "intake-api", SECRET, reader).await, 200);

    let rotated = ensure_reader(&db, NEW_SECRET);
    assert_eq!(rotated.code, Some(0), "{}", rotated.stderr);
    assert_secrets_not_in(&rotated);
    assert_eq!(rotated.json()["outcome"], "updated");
    assert_eq!(rotated.json()["changes"], serde_json::json!(["secret"]));
    // No grace: the declaration names the one secret.
    assert_eq!(token_status(&auth, "intake-api", SECRET, reader).await, 401);
    assert_eq!(
        token_status(&auth, "intake-api", NEW_SECRET, reader).await,
        200
    );

    let widened = ensure(
        &db,
        &[
            "--id",
            "intake-api",
            "--name",
            "Intake API",
            "--scopes",
            "revocations:read enquiry:case:intake:create",
            "--secret-env",
            SECRET_VAR,
        ],
        &[(SECRET_VAR, NEW_SECRET)],
    );
    assert_eq!(widened.code, Some(0), "{}", widened.stderr);
    assert_eq!(
        widened.json(),
        serde_json::json!({
            "client_id": "intake-api",
            "outcome": "updated",
            "changed": true,
            "changes": ["name", "scopes"],
            "name": "Intake API",
            "scopes": ["revocations:read", "enquiry:case:intake:create"],
            "auth_method": "client_secret",
        })
    );
    assert_eq!(
        token_status(&auth, "intake-api", NEW_SECRET, INTAKE).await,
        200
    );
    let reordered = ensure(
        &db,
        &[
            "--id",
            "intake-api",
            "--name",
            "Intake API",
            "--scopes",
            "enquiry:case:intake:create revocations:read",
            "--secret-env",
            SECRET_VAR,
        ],
        &[(SECRET_VAR, NEW_SECRET)],
    );
    assert_eq!(
        reordered.json()["outcome"],
        "unchanged",
        "{}",
        reordered.stderr
    );

    let narrowed = ensure_reader(&db, NEW_SECRET);
    assert_eq!(
        narrowed.json()["changes"],
        serde_json::json!(["name", "scopes"])
    );
    assert_eq!(
        token_status(&auth, "intake-api", NEW_SECRET, INTAKE).await,
        400
    );

    let audit = run(&db.url, &["audit", "list"], &[]).json();
    let entries: Vec<(&str, &Value)> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), &e["detail"]))
        // The server's own entries (its first keys) aside.
        .filter(|(action, _)| action.starts_with("client."))
        .collect();
    let actions: Vec<&str> = entries.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        actions,
        [
            "client.create",
            "client.rotate_secret",
            "client.rename",
            "client.set_scopes",
            "client.rename",
            "client.set_scopes",
        ]
    );
    assert_eq!(
        entries[2].1,
        &serde_json::json!({"name": "Intake API", "previous_name": "intake-api"})
    );
    assert_eq!(
        entries[3].1,
        &serde_json::json!({
            "scopes": ["revocations:read", "enquiry:case:intake:create"],
            "previous_scopes": ["revocations:read"],
        })
    );
    assert!(!audit.to_string().contains(NEW_SECRET));
    let verified = run(&db.url, &["audit", "verify"], &[]);
    assert_eq!(verified.code, Some(0), "{}", verified.stderr);
}

async fn ensure_refuses_a_disabled_client_another_method_and_a_taken_name(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let created = ensure_reader(&db, SECRET);
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let disabled = run(&db.url, &["client", "disable", "intake-api"], &[]);
    assert_eq!(disabled.code, Some(0), "{}", disabled.stderr);

    let refused = ensure_reader(&db, SECRET);
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert_eq!(refused.stdout, "");
    assert!(
        refused
            .stderr
            .contains("client intake-api is disabled, since ")
            && refused
                .stderr
                .contains("`auth-server client enable intake-api`"),
        "{}",
        refused.stderr
    );
    let shown = run(&db.url, &["client", "show", "intake-api"], &[]).json();
    assert_eq!(shown["disabled"], true, "not brought back");

    let keys = JwksFile::ec("intake-2026", &[]);
    let enabled = run(&db.url, &["client", "enable", "intake-api"], &[]);
    assert_eq!(enabled.code, Some(0), "{}", enabled.stderr);
    let other_method = ensure(
        &db,
        &[
            "--id",
            "intake-api",
            "--name",
            "intake-api",
            "--scopes",
            "revocations:read",
            "--auth-method",
            "private_key_jwt",
            "--jwks-file",
            keys.path(),
        ],
        &[],
    );
    assert_eq!(other_method.code, Some(1), "{}", other_method.stderr);
    assert!(
        other_method
            .stderr
            .contains("authenticates with client_secret, not private_key_jwt"),
        "{}",
        other_method.stderr
    );

    let taken = ensure(
        &db,
        &[
            "--id",
            "other-reader",
            "--name",
            "INTAKE-API",
            "--scopes",
            "revocations:read",
            "--secret-env",
            SECRET_VAR,
        ],
        &[(SECRET_VAR, NEW_SECRET)],
    );
    assert_eq!(taken.code, Some(1), "{}", taken.stderr);
    assert_eq!(
        taken.stderr,
        "error: client intake-api is already named \"intake-api\": client names must differ \
         in more than case\n"
    );
    let listed = run(&db.url, &["client", "list"], &[]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        audit_actions(&db),
        ["client.create", "client.disable", "client.enable"]
    );
}

async fn ensure_refuses_a_missing_empty_or_weak_secret_naming_the_variable_never_the_secret(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let weak = "tooShortToBeASecret1234567890ab";
    let newline = format!("{SECRET}\n");
    let cases = [
        (
            "unset",
            None,
            "--secret-env names ENSURE_TEST_CLIENT_SECRET, which is not set",
        ),
        (
            "empty",
            Some(""),
            "the secret in ENSURE_TEST_CLIENT_SECRET is refused: it is empty",
        ),
        (
            "31 characters",
            Some(weak),
            "the secret in ENSURE_TEST_CLIENT_SECRET is refused: it is shorter than 32",
        ),
        (
            "a trailing newline",
            Some(newline.as_str()),
            "the secret in ENSURE_TEST_CLIENT_SECRET is refused: it holds a control character",
        ),
    ];
    for (rule, secret, expected) in cases {
        let env: Vec<(&str, &str)> = secret.map(|s| (SECRET_VAR, s)).into_iter().collect();
        let refused = ensure_reader_with(&db, &env);
        assert_eq!(refused.code, Some(1), "{rule}: {}", refused.stderr);
        assert_eq!(refused.stdout, "", "{rule}");
        assert!(
            refused.stderr.contains(expected),
            "{rule}: {}",
            refused.stderr
        );
        assert!(!refused.stderr.contains(weak), "{rule}: {}", refused.stderr);
        assert_secrets_not_in(&refused);
    }
    let without = ensure(
        &db,
        &[
            "--id",
            "intake-api",
            "--name",
            "intake-api",
            "--scopes",
            "revocations:read",
        ],
        &[],
    );
    assert_eq!(without.code, Some(1), "{}", without.stderr);
    assert!(
        without.stderr.contains("needs --secret-env VAR"),
        "{}",
        without.stderr
    );
    let listed = run(&db.url, &["client", "list"], &[]).json();
    assert_eq!(listed, serde_json::json!([]));
    assert!(audit_actions(&db).is_empty());
}

/// [`ensure_reader`] with `env` as the whole of what it is given.
fn ensure_reader_with(db: &TestDb, env: &[(&str, &str)]) -> Run {
    ensure(
        db,
        &[
            "--id",
            "intake-api",
            "--name",
            "intake-api",
            "--scopes",
            "revocations:read",
            "--secret-env",
            SECRET_VAR,
        ],
        env,
    )
}

async fn ensure_refuses_an_id_with_control_characters_or_too_long(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let too_long = "a".repeat(65);
    let cases = [
        (
            "a control character",
            "intake\u{1}api",
            "must not hold control characters",
        ),
        (
            "a newline",
            "intake-api\n",
            "must not hold control characters",
        ),
        ("65 characters", too_long.as_str(), "1 to 64 ASCII letters"),
        ("a colon", "intake:api", "1 to 64 ASCII letters"),
        ("empty", "", "1 to 64 ASCII letters"),
    ];
    for (rule, id, expected) in cases {
        let refused = ensure(
            &db,
            &[
                "--id",
                id,
                "--name",
                "intake-api",
                "--scopes",
                "revocations:read",
                "--secret-env",
                SECRET_VAR,
            ],
            &[(SECRET_VAR, SECRET)],
        );
        assert_eq!(refused.code, Some(1), "{rule}: {}", refused.stderr);
        assert!(
            refused.stderr.contains(expected),
            "{rule}: {}",
            refused.stderr
        );
        assert!(!refused.stderr.contains('\u{1}'), "{rule}: escaped");
        assert_secrets_not_in(&refused);
    }
    // A command line cannot carry a NUL; a caller of the library can.
    let keys = JwksFile::ec("intake-2026", &[]);
    let mut config = auth_server::config::Config::with_database(db.url.as_str());
    config.key_encryption_key = Some(
        test_support::TEST_KEY_ENCRYPTION_KEY
            .parse()
            .expect("infallible"),
    );
    let refused = auth_server::cli::client(
        &config,
        auth_server::commands::ClientCommand::Ensure {
            id: "intake\0api".into(),
            name: "intake-api".into(),
            scopes: "revocations:read".into(),
            brands: None,
            auth_method: auth_server::store::clients::AuthMethod::PrivateKeyJwt,
            secret_env: None,
            jwks_file: Some(keys.0.clone()),
        },
    )
    .await
    .expect_err("a NUL in the id");
    assert!(
        refused
            .to_string()
            .contains("must not hold control characters"),
        "{refused}"
    );
    let listed = run(&db.url, &["client", "list"], &[]).json();
    assert_eq!(listed, serde_json::json!([]));
}

/// As replicas' init containers starting together run it (four, to make overlap likely).
async fn ensures_at_once_all_succeed_and_leave_one_client(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_auth-server"))
                .args([
                    "client",
                    "ensure",
                    "--id",
                    "intake-api",
                    "--name",
                    "intake-api",
                    "--scopes",
                    "revocations:read",
                    "--secret-env",
                    SECRET_VAR,
                ])
                .env("AUTH_DATABASE_URL", &db.url)
                .env(
                    "AUTH_KEY_ENCRYPTION_KEY",
                    test_support::TEST_KEY_ENCRYPTION_KEY,
                )
                .env(SECRET_VAR, SECRET)
                .env_remove("RUST_LOG")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("auth-server runs")
        })
        .collect();
    let mut outcomes: Vec<String> = runs
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("auth-server ends");
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{stderr}");
            let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            printed["outcome"].as_str().unwrap().to_owned()
        })
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, ["created", "unchanged", "unchanged", "unchanged"]);
    let listed = run(&db.url, &["client", "list"], &[]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        listed[0]["secrets"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    assert_eq!(audit_actions(&db), ["client.create"]);
}

async fn under_fapi2_ensure_refuses_a_secret_client_and_declares_keys(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let fapi2 = [("AUTH_FAPI2", "true"), (SECRET_VAR, SECRET)];
    let refused = ensure_reader_with(&db, &fapi2);
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("AUTH_FAPI2 is on")
            && refused
                .stderr
                .contains("--auth-method private_key_jwt --jwks-file FILE"),
        "{}",
        refused.stderr
    );
    assert_secrets_not_in(&refused);
    assert_eq!(
        run(&db.url, &["client", "list"], &[]).json(),
        serde_json::json!([])
    );

    let keys = JwksFile::ec("intake-2026", &[]);
    let keyed = |file: &JwksFile| {
        ensure(
            &db,
            &[
                "--id",
                "intake-api",
                "--name",
                "intake-api",
                "--scopes",
                "revocations:read",
                "--auth-method",
                "private_key_jwt",
                "--jwks-file",
                file.path(),
            ],
            &fapi2[..1],
        )
    };
    let created = keyed(&keys);
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    assert_eq!(
        created.json(),
        serde_json::json!({
            "client_id": "intake-api",
            "outcome": "created",
            "changed": true,
            "name": "intake-api",
            "scopes": ["revocations:read"],
            "auth_method": "private_key_jwt",
            "keys": [{"kid": "intake-2026", "kind": "EC P-256", "alg": null}],
        })
    );
    let again = keyed(&keys);
    assert_eq!(again.json()["outcome"], "unchanged", "{}", again.stderr);
    let next = JwksFile::ec("intake-2027", &[("alg", "ES256")]);
    let replaced = keyed(&next);
    assert_eq!(replaced.code, Some(0), "{}", replaced.stderr);
    assert_eq!(replaced.json()["changes"], serde_json::json!(["keys"]));
    assert_eq!(audit_actions(&db), ["client.create", "client.set_keys"]);
    let shown = run(&db.url, &["client", "show", "intake-api"], &[]).json();
    assert_eq!(shown["keys"][0]["kid"], "intake-2027");
    assert_eq!(shown["secrets"], serde_json::json!([]));
}

on_both_backends!(
    a_keyed_client_is_registered_from_a_jwks_file_without_a_secret,
    ensure_creates_the_client_once_then_writes_nothing_and_it_gets_a_token,
    ensure_brings_a_changed_secret_name_and_scopes_to_the_declaration,
    ensure_refuses_a_disabled_client_another_method_and_a_taken_name,
    ensure_refuses_a_missing_empty_or_weak_secret_naming_the_variable_never_the_secret,
    ensure_refuses_an_id_with_control_characters_or_too_long,
    ensures_at_once_all_succeed_and_leave_one_client,
    under_fapi2_ensure_refuses_a_secret_client_and_declares_keys,
    a_portal_client_is_created_and_rebound_to_brands_with_an_audit_entry,
    a_sandbox_client_says_so_in_show_and_list_and_is_never_a_portal,
    the_commands_print_json_and_keep_secrets_off_stderr,
    commands_act_only_on_an_existing_migrated_database,
    client_show_gives_each_secrets_fingerprint_and_expiry_and_never_a_secret,
    disabling_twice_keeps_the_first_date_and_says_so,
    client_names_are_unique_whatever_their_case,
    the_unique_names_migration_renames_older_duplicates,
    output_is_a_table_or_json_as_asked_with_times_to_the_second,
);

/// `auth-server PATH... --help`.
fn help(path: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .args(path)
        .arg("--help")
        .output()
        .expect("auth-server runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// The long flags a help text lists.
fn flags(help: &str) -> Vec<String> {
    help.split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.trim_end_matches(',').to_owned())
        .filter(|w| {
            w.len() > 2
                && w.chars()
                    .skip(2)
                    .all(|c| c.is_ascii_lowercase() || c == '-')
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn each_subcommands_help_lists_only_the_settings_it_uses_and_examples() {
    let reads = ["--database-url", "--help", "--output"];
    let keyed_reads = [
        "--database-url",
        "--help",
        "--key-encryption-key-file",
        "--output",
    ];
    let changes = [
        "--actor",
        "--database-url",
        "--help",
        "--key-encryption-key-file",
        "--output",
    ];
    // The key store's settings besides (those with digits, --pkcs11-*, are not counted).
    let keys = [
        "--actor",
        "--database-url",
        "--help",
        "--key-encryption-key-file",
        "--key-store",
        "--output",
    ];
    let key_changes = [
        "--actor",
        "--client-jwks-allow-insecure",
        "--database-url",
        "--help",
        "--key-encryption-key-file",
        "--output",
    ];
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (
            &["client", "create"],
            &key_changes,
            &[
                "--auth-method",
                "--brands",
                "--jwks-file",
                "--jwks-uri",
                "--name",
                "--sandbox",
                "--scopes",
            ],
        ),
        (
            &["client", "ensure"],
            &changes,
            &[
                "--auth-method",
                "--brands",
                "--id",
                "--jwks-file",
                "--name",
                "--scopes",
                "--secret-env",
            ],
        ),
        (
            &["client", "set-keys"],
            &key_changes,
            &["--jwks-file", "--jwks-uri"],
        ),
        (&["client", "set-brands"], &changes, &["--brands"]),
        (&["client", "set-dpop"], &changes, &["--require-dpop"]),
        (&["client", "list"], &reads, &[]),
        (&["client", "show"], &reads, &[]),
        (&["client", "rotate-secret"], &changes, &["--grace-secs"]),
        (&["client", "disable"], &changes, &[]),
        (&["client", "enable"], &changes, &[]),
        (
            &["key", "rotate"],
            &keys,
            &["--alg", "--move-key-store", "--publish-ahead-secs"],
        ),
        (&["key", "list"], &reads, &["--rotation-interval-secs"]),
        (&["key", "revoke"], &keys, &[]),
        (
            &["apply"],
            &key_changes,
            &["--adopt", "--dry-run", "--file", "--prune", "--show-secret"],
        ),
        (&["audit", "list"], &reads, &["--since"]),
        (&["audit", "verify"], &keyed_reads, &["--head"]),
        (&["audit", "seal"], &changes, &[]),
        (
            &["migrate"],
            &["--database-url", "--help", "--log-format"],
            &[],
        ),
    ];
    for (path, settings, own) in cases {
        let text = help(path);
        let mut expected: Vec<String> = settings
            .iter()
            .chain(own.iter())
            .map(|f| f.to_string())
            .collect();
        expected.sort();
        // Examples name flags too; only the options part counts.
        let options = text.split("Examples:").next().unwrap();
        assert_eq!(flags(options), expected, "{path:?}:\n{text}");
        assert!(
            text.contains("\nExamples:\n  auth-server "),
            "{path:?}:\n{text}"
        );
    }
    for group in ["client", "key", "audit"] {
        let text = help(&[group]);
        assert_eq!(flags(text.split("Examples:").next().unwrap()), ["--help"]);
        assert!(text.contains("\nExamples:\n  auth-server "), "{text}");
    }
    let serve = help(&["serve"]);
    for server_only in ["--bind", "--issuer", "--redis-url", "--token-rate-limit"] {
        assert!(serve.contains(server_only), "{server_only}");
    }
    assert!(!serve.contains("--actor") && !serve.contains("--output"));
    // Secrets are read from the environment or a file, never taken as flags.
    let options: Vec<&str> = serve.lines().map(str::trim_start).collect();
    for secret in ["--key-encryption-key", "--pkcs11-pin"] {
        assert!(
            !options.iter().any(|l| l.starts_with(&format!("{secret} "))),
            "{secret}: {serve}"
        );
        assert!(
            options
                .iter()
                .any(|l| l.starts_with(&format!("{secret}-file <FILE>"))),
            "{secret}: {serve}"
        );
    }
    let top = help(&[]);
    assert!(
        !top.contains("--bind") && !top.contains("--database-url"),
        "{top}"
    );
}
