//! Clients kept as code: `auth-server apply -f FILE` makes what the file declares, changes
//! what differs, shows the difference without changing anything, disables (never deletes)
//! what the file no longer lists, refuses a bad file or a forbidden change with nothing
//! written, and a second apply changes nothing.

use serde_json::Value;
use test_support::on_both_backends;

use crate::helpers::{AuthServer, Backend, INTAKE, Run, TestDb, run};

/// A directory holding the clients file (and what it names), removed afterwards.
struct Declared {
    dir: std::path::PathBuf,
}

impl Declared {
    fn new() -> Self {
        let dir =
            std::env::temp_dir().join(format!("partner-intake-apply-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// Writes `name` in the directory; its path.
    fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

impl Drop for Declared {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `auth-server apply` on `db` with `args` and the environment `env`.
fn apply(db: &TestDb, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut all = vec!["apply", "--actor", "clients.yaml@test", "-o", "json"];
    all.extend_from_slice(args);
    run(&db.url, &all, env)
}

/// The audit trail's entries, as `audit list` prints them.
fn audit(db: &TestDb) -> Vec<Value> {
    let listed = run(&db.url, &["audit", "list", "-o", "json"], &[]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    listed.json().as_array().cloned().unwrap_or_default()
}

const PORTAL_SECRET: &str = "portal-secret-portal-secret-portal-secret-00";

const FILE: &str = r#"clients:
  - name: Acme Mortgages
    scopes: [enquiry:case:intake:create, enquiry:referral:create]
  - name: Brand A portal
    scopes: [portal:redirect:redeem]
    brands: [brand_a]
    secret_env: PORTAL_A_SECRET
  - name: Keyed Partner
    scopes: [enquiry:case:intake:create]
    auth: private_key_jwt
    jwks_file: keyed.json
    dpop_required: true
"#;

const KEYS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig","alg":"ES256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;

async fn apply_makes_the_declared_clients_and_a_second_apply_changes_nothing(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let declared = Declared::new();
    declared.write("keyed.json", KEYS);
    let file = declared.write("clients.yaml", FILE);
    let env = [("PORTAL_A_SECRET", PORTAL_SECRET)];
    // The server's own entries: its first keys.
    let before = audit(&db).len();

    let dry = apply(&db, &["-f", &file, "--dry-run"], &env);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let shown = dry.json();
    let kinds: Vec<&str> = shown["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["change"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["create", "create", "create", "set_dpop"], "{shown}");
    assert_eq!(audit(&db).len(), before, "--dry-run wrote nothing");

    let applied = apply(&db, &["-f", &file], &env);
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);
    let out = applied.json();
    assert_eq!(out["changed"], true);
    let made = out["made"].as_array().unwrap();
    assert_eq!(made.len(), 3, "{out}");
    // Only the client with no secret named gets one made, shown this once.
    let acme = made
        .iter()
        .find(|m| m["client"] == "Acme Mortgages")
        .unwrap();
    let acme_secret = acme["client_secret"]
        .as_str()
        .expect("a secret made for Acme");
    assert!(
        made.iter()
            .filter(|m| m["client_secret"].is_string())
            .count()
            == 1
    );
    assert!(!applied.stderr.contains(acme_secret) && !applied.stderr.contains(PORTAL_SECRET));
    // One audit entry per change, by the file's actor.
    let entries = audit(&db);
    let made_by_apply = &entries[before..];
    assert_eq!(made_by_apply.len(), 4, "{entries:?}");
    assert!(
        made_by_apply
            .iter()
            .all(|e| e["actor"] == "clients.yaml@test")
    );
    // The clients work: with the made secret, and with the declared one.
    let acme_id = acme["client_id"].as_str().unwrap();
    auth.token(acme_id, acme_secret, INTAKE).await;
    let portal = made
        .iter()
        .find(|m| m["client"] == "Brand A portal")
        .unwrap();
    let portal_id = portal["client_id"].as_str().unwrap();
    auth.token(portal_id, PORTAL_SECRET, "portal:redirect:redeem")
        .await;

    // Again: nothing to change, nothing written, no secret printed.
    let again = apply(&db, &["-f", &file], &env);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.json()["changed"], false);
    assert_eq!(again.json()["changes"], serde_json::json!([]));
    assert_eq!(audit(&db).len(), before + 4);
}

async fn what_differs_is_changed_and_prune_disables_what_the_file_drops(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let declared = Declared::new();
    declared.write("keyed.json", KEYS);
    let env = [("PORTAL_A_SECRET", PORTAL_SECRET)];
    let first = apply(&db, &["-f", &declared.write("clients.yaml", FILE)], &env);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    // Acme loses a scope and is disabled; the portal's secret changes; the keyed partner
    // is no longer listed.
    let changed = r#"clients:
  - name: acme mortgages
    scopes: [enquiry:case:intake:create]
    disabled: true
  - name: Brand A portal
    scopes: [portal:redirect:redeem]
    brands: [brand_a]
    secret_file: portal.secret
"#;
    declared.write(
        "portal.secret",
        "another-portal-secret-another-portal-secret\n",
    );
    let file = declared.write("clients.yaml", changed);
    let without_prune = apply(&db, &["-f", &file, "--dry-run"], &[]);
    let kinds = |run: &Run| -> Vec<(String, String)> {
        run.json()["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["client"].as_str().unwrap().to_owned(),
                    c["change"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        kinds(&without_prune),
        [
            ("acme mortgages".to_owned(), "set_scopes".to_owned()),
            ("acme mortgages".to_owned(), "disable".to_owned()),
            ("Brand A portal".to_owned(), "set_secret".to_owned()),
        ]
    );
    let pruned = apply(&db, &["-f", &file, "--prune"], &[]);
    assert_eq!(pruned.code, Some(0), "{}", pruned.stderr);
    assert_eq!(
        kinds(&pruned).last().unwrap(),
        &("Keyed Partner".to_owned(), "disable".to_owned())
    );
    // Disabled, not deleted: the pruned client is still listed.
    let listed = run(&db.url, &["client", "list", "-o", "json"], &[]).json();
    let keyed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Keyed Partner")
        .expect("the pruned client is kept");
    assert!(keyed["disabled_at"].is_string(), "{keyed}");
    let again = apply(&db, &["-f", &file, "--prune"], &[]);
    assert_eq!(again.json()["changed"], false, "{}", again.stdout);
    let verified = run(&db.url, &["audit", "verify", "-o", "json"], &[]);
    assert_eq!(verified.code, Some(0), "{}", verified.stderr);
}

async fn a_bad_file_lists_every_problem_with_its_line_and_writes_nothing(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let declared = Declared::new();
    let bad = r#"clients:
  - name: Acme
    scopes: [enquiry:case:intake:create, no:such:scope]
  - name: ACME
    scopes: [enquiry:case:intake:create]
  - name: Beta
    scopes: [enquiry:case:intake:create]
    client_secret: written-here-written-here-written-here-0
  - name: Gamma
    scopes: [enquiry:case:intake:create]
    secret_env: NOT_SET_FOR_THE_TEST
"#;
    let run = apply(&db, &["-f", &declared.write("clients.yaml", bad)], &[]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    for expected in [
        "4 problems",
        "line 2: unknown scope \"no:such:scope\"",
        "line 4: client \"ACME\" is listed twice (first at line 2)",
        "line 6: client \"Beta\": a secret is never written in the file",
        "line 9: client \"Gamma\": `secret_env` names NOT_SET_FOR_THE_TEST",
    ] {
        assert!(run.stderr.contains(expected), "{expected}: {}", run.stderr);
    }
    assert!(!run.stderr.contains("written-here"), "{}", run.stderr);
    assert!(audit(&db).is_empty());
    let not_yaml = apply(&db, &["-f", &declared.write("x.yaml", "clients: [")], &[]);
    assert_eq!(not_yaml.code, Some(2), "{}", not_yaml.stderr);
}

async fn a_change_no_apply_may_make_is_refused_and_nothing_written(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let declared = Declared::new();
    let real = "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create]\n";
    assert_eq!(
        apply(&db, &["-f", &declared.write("c.yaml", real)], &[]).code,
        Some(0)
    );
    let written = audit(&db).len();
    let moved = "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create, enquiry:referral:create]\n    sandbox: true\n  - name: Beta\n    scopes: [enquiry:case:intake:create]\n";
    let run = apply(&db, &["-f", &declared.write("c.yaml", moved)], &[]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("sandbox"), "{}", run.stderr);
    assert_eq!(
        audit(&db).len(),
        written,
        "nothing of the file applied, Beta neither"
    );
}

on_both_backends!(
    apply_makes_the_declared_clients_and_a_second_apply_changes_nothing,
    what_differs_is_changed_and_prune_disables_what_the_file_drops,
    a_bad_file_lists_every_problem_with_its_line_and_writes_nothing,
    a_change_no_apply_may_make_is_refused_and_nothing_written,
);
