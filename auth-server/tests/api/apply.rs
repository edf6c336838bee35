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

    let applied = apply(&db, &["-f", &file, "--show-secret"], &env);
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
    let first = apply(
        &db,
        &["-f", &declared.write("clients.yaml", FILE), "--show-secret"],
        &env,
    );
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

async fn a_bad_file_lists_every_problem_at_the_line_of_its_field_and_writes_nothing(
    backend: Backend,
) {
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
        "line 3: unknown scope \"no:such:scope\"",
        "line 4: client \"ACME\" is listed twice (first at line 2)",
        "line 8: client \"Beta\": a secret is never written in the file",
        "line 11: client \"Gamma\": `secret_env` names NOT_SET_FOR_THE_TEST",
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
        apply(
            &db,
            &["-f", &declared.write("c.yaml", real), "--show-secret"],
            &[]
        )
        .code,
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

/// The client named `name`, as `client list` shows it.
fn listed(db: &TestDb, name: &str) -> Value {
    let listed = run(&db.url, &["client", "list", "-o", "json"], &[]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no client {name}"))
        .clone()
}

/// The changes a run printed, as (client, change) pairs.
fn changes_of(run: &Run) -> Vec<(String, String)> {
    run.json()["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes: {} {}", run.stdout, run.stderr))
        .iter()
        .map(|c| {
            (
                c["client"].as_str().unwrap().to_owned(),
                c["change"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

const READER_SECRET: &str = "reader-secret-reader-secret-reader-secret-01";

async fn apply_prune_never_disables_a_client_no_file_made(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    // The intake-api's own client, as the compose file and the Kubernetes Job make it.
    let ensured = run(
        &db.url,
        &[
            "client",
            "ensure",
            "--id",
            "intake-api",
            "--name",
            "intake-api",
            "--scopes",
            "revocations:read",
            "--secret-env",
            "READER_SECRET",
        ],
        &[("READER_SECRET", READER_SECRET)],
    );
    assert_eq!(ensured.code, Some(0), "{}", ensured.stderr);
    // And a partner made by hand.
    let (by_hand, by_hand_secret) = auth.create_client(INTAKE).await;
    let intake_db = TestDb::intake(backend).await;
    let intake = test_support::IntakeServer::start(&intake_db.url, &auth, |c| {
        c.auth_server.client_id = Some("intake-api".into());
        c.auth_server.client_secret = Some(READER_SECRET.parse().unwrap());
        // A reader whose client is refused goes not ready within 2 s.
        c.auth_server.revocations_max_age = std::time::Duration::from_secs(2);
    })
    .await
    .unwrap();
    assert!(intake.wait_ready().await);

    let declared = Declared::new();
    let partners = "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create]\n";
    let file = declared.write("clients.yaml", partners);
    let dry = apply(&db, &["-f", &file, "--prune", "--dry-run"], &[]);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert_eq!(changes_of(&dry), [("Acme".to_owned(), "create".to_owned())]);
    let pruned = apply(&db, &["-f", &file, "--prune", "--show-secret"], &[]);
    assert_eq!(pruned.code, Some(0), "{}", pruned.stderr);
    assert_eq!(
        changes_of(&pruned),
        [("Acme".to_owned(), "create".to_owned())]
    );
    assert_eq!(listed(&db, "intake-api")["disabled"], false);
    let hand_made = run(&db.url, &["client", "show", &by_hand, "-o", "json"], &[]).json();
    assert_eq!(hand_made["disabled"], false, "{hand_made}");
    assert_eq!(hand_made["managed_by"], Value::Null, "{hand_made}");
    assert_eq!(listed(&db, "Acme")["managed_by"], "apply");

    // The intake-api keeps reading the list with its client: a partner disabled after the
    // apply is refused there, and it stays ready.
    let token = auth.token(&by_hand, &by_hand_secret, INTAKE).await;
    let case = format!("{}/partners/external/cases/000000000000", intake.base_url());
    let status = || async {
        reqwest::Client::new()
            .get(&case)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(status().await, 404, "a valid token, an unknown case");
    let disabled = run(&db.url, &["client", "disable", &by_hand], &[]);
    assert_eq!(disabled.code, Some(0), "{}", disabled.stderr);
    let refused = crate::helpers::eventually(std::time::Duration::from_secs(10), || async {
        (status().await == 401).then_some(())
    })
    .await;
    assert!(refused.is_some(), "the intake-api stopped reading the list");
    let ready = reqwest::get(format!("{}/readyz", intake.base_url()))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());

    // Pruned again, with the hand-made client disabled: still nothing of theirs touched.
    let again = apply(&db, &["-f", &file, "--prune"], &[]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.json()["changed"], false, "{}", again.stdout);
    assert_eq!(listed(&db, "intake-api")["disabled"], false);
}

async fn a_client_made_by_hand_is_changed_only_once_adopted_and_the_dry_run_shows_it(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let declared = Declared::new();
    let one = "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create]\n";
    let made = run(
        &db.url,
        &[
            "client",
            "create",
            "--name",
            "acme",
            "--scopes",
            "enquiry:case:intake:create enquiry:referral:create",
        ],
        &[],
    );
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    let id = made.json()["client_id"].as_str().unwrap().to_owned();
    let entries = audit(&db).len();

    let file = declared.write("clients.yaml", one);
    for args in [&["-f", &file][..], &["-f", &file, "--dry-run"]] {
        let refused = apply(&db, args, &[]);
        assert_eq!(refused.code, Some(3), "{}", refused.stderr);
        assert!(
            refused.stderr.contains(&format!("({id}) was made by hand"))
                && refused.stderr.contains("--adopt"),
            "{}",
            refused.stderr
        );
    }
    assert_eq!(audit(&db).len(), entries, "nothing written");

    let dry = apply(&db, &["-f", &file, "--adopt", "--dry-run"], &[]);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert_eq!(
        changes_of(&dry),
        [
            ("Acme".to_owned(), "adopt".to_owned()),
            ("Acme".to_owned(), "set_scopes".to_owned()),
        ]
    );
    assert_eq!(audit(&db).len(), entries, "--dry-run wrote nothing");
    let adopted = apply(&db, &["-f", &file, "--adopt"], &[]);
    assert_eq!(adopted.code, Some(0), "{}", adopted.stderr);
    let actions: Vec<String> = audit(&db)[entries..]
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(actions, ["client.adopt", "client.set_scopes"]);
    assert_eq!(listed(&db, "acme")["managed_by"], "apply");
    // From now on the file's: applied without --adopt, nothing to change.
    let again = apply(&db, &["-f", &file], &[]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.json()["changed"], false);
}

async fn a_disable_made_outside_the_file_is_kept_until_the_file_says_disabled_false(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let declared = Declared::new();
    let plain = "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create]\n";
    let file = declared.write("clients.yaml", plain);
    let first = apply(&db, &["-f", &file, "--show-secret"], &[]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let id = first.json()["made"][0]["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // An incident: the client disabled by hand.
    let disabled = run(&db.url, &["client", "disable", &id], &[]);
    assert_eq!(disabled.code, Some(0), "{}", disabled.stderr);
    let since = listed(&db, "Acme")["disabled_at"].clone();
    let entries = audit(&db).len();

    // The unchanged file, applied again (twice, as a pipeline would): the disable is kept.
    for _ in 0..2 {
        let again = apply(&db, &["-f", &file, "--prune"], &[]);
        assert_eq!(again.code, Some(0), "{}", again.stderr);
        let out = again.json();
        assert_eq!(out["changed"], false, "{out}");
        assert_eq!(out["changes"], serde_json::json!([]), "{out}");
        assert_eq!(out["kept_disabled"][0]["client_id"], id.as_str(), "{out}");
        assert!(again.stderr.contains("stays disabled"), "{}", again.stderr);
        assert_eq!(listed(&db, "Acme")["disabled_at"], since);
    }
    assert_eq!(audit(&db).len(), entries, "nothing written");

    // The file enables it only when it says so, and the dry run shows it first.
    let enabled =
        "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create]\n    disabled: false\n";
    let file = declared.write("clients.yaml", enabled);
    let dry = apply(&db, &["-f", &file, "--dry-run"], &[]);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert_eq!(changes_of(&dry), [("Acme".to_owned(), "enable".to_owned())]);
    assert_eq!(
        listed(&db, "Acme")["disabled"],
        true,
        "--dry-run changed nothing"
    );
    let applied = apply(&db, &["-f", &file], &[]);
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);
    assert_eq!(listed(&db, "Acme")["disabled"], false);
    let second = apply(&db, &["-f", &file], &[]);
    assert_eq!(second.json()["changed"], false, "{}", second.stdout);
}

/// `auth-server apply` as [`apply`] runs it, killed (and failed) unless it exits within
/// `seconds`.
fn apply_within(db: &TestDb, args: &[&str], seconds: u64) -> Run {
    let mut all = vec!["apply", "--actor", "test", "-o", "json"];
    all.extend_from_slice(args);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .args(&all)
        .env("AUTH_DATABASE_URL", &db.url)
        .env(
            "AUTH_KEY_ENCRYPTION_KEY",
            test_support::TEST_KEY_ENCRYPTION_KEY,
        )
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("apply {args:?} did not end within {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

async fn apply_reads_a_secret_file_only_when_small_and_regular(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let declared = Declared::new();
    let fifo = declared.dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    declared.write("large", &"s".repeat(64 * 1024));
    for (secret_file, said) in [
        ("/dev/zero", "/dev/zero is not a regular file"),
        (fifo.to_str().unwrap(), "fifo is not a regular file"),
        ("large", "is larger than 4096 bytes"),
    ] {
        let file = declared.write(
            "clients.yaml",
            &format!(
                "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create]\n    secret_file: {secret_file}\n"
            ),
        );
        let refused = apply_within(&db, &["-f", &file], 20);
        assert_eq!(refused.code, Some(2), "{secret_file}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("line 4:") && refused.stderr.contains(said),
            "{secret_file}: {}",
            refused.stderr
        );
    }
    assert!(audit(&db).is_empty());
    // The clients file itself is read up to a bound, not forever.
    let endless = apply_within(&db, &["-f", "/dev/zero"], 20);
    assert_eq!(endless.code, Some(2), "{}", endless.stderr);
    assert!(endless.stderr.contains("larger than"), "{}", endless.stderr);
}

async fn apply_prints_a_secret_it_makes_into_a_pipe_only_with_show_secret(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let declared = Declared::new();
    let file = declared.write(
        "clients.yaml",
        "clients:\n  - name: Acme\n    scopes: [enquiry:case:intake:create]\n",
    );
    // Stdout is a pipe here, as in a CI job.
    let refused = apply(&db, &["-f", &file], &[]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("\"Acme\"")
            && refused.stderr.contains("--show-secret")
            && refused.stderr.contains("nothing was changed"),
        "{}",
        refused.stderr
    );
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    assert!(audit(&db).is_empty());
    let listed = run(&db.url, &["client", "list", "-o", "json"], &[]).json();
    assert_eq!(listed, serde_json::json!([]));
    // The dry run shows the difference, with no secret to print.
    let dry = apply(&db, &["-f", &file, "--dry-run"], &[]);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let shown = apply(&db, &["-f", &file, "--show-secret"], &[]);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert!(shown.json()["made"][0]["client_secret"].is_string());
}

on_both_backends!(
    apply_makes_the_declared_clients_and_a_second_apply_changes_nothing,
    what_differs_is_changed_and_prune_disables_what_the_file_drops,
    a_bad_file_lists_every_problem_at_the_line_of_its_field_and_writes_nothing,
    a_change_no_apply_may_make_is_refused_and_nothing_written,
    apply_prune_never_disables_a_client_no_file_made,
    a_client_made_by_hand_is_changed_only_once_adopted_and_the_dry_run_shows_it,
    a_disable_made_outside_the_file_is_kept_until_the_file_says_disabled_false,
    apply_reads_a_secret_file_only_when_small_and_regular,
    apply_prints_a_secret_it_makes_into_a_pipe_only_with_show_secret,
);
