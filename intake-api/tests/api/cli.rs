//! The operator command line, run as a separate process the way operators use it: its
//! output, its exit codes, and its help.

use std::collections::BTreeSet;
use std::process::Command;

use sea_orm::{ConnectionTrait, Database};
use serde_json::Value;
use test_support::on_both_backends;

use crate::helpers::{Backend, TestApp, TestDb, purchase_enquiry};

/// What one run of the binary did.
pub(crate) struct Run {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// Stdout as JSON, after checking the run succeeded and logged nothing.
    pub(crate) fn json(&self) -> Value {
        assert_eq!(self.code, Some(0), "{}", self.stderr);
        assert_eq!(
            self.stderr, "",
            "a successful command logs nothing below warn"
        );
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", self.stdout))
    }
}

/// Runs the binary on the database at `url`, its stdout a pipe, as scripts run it.
pub(crate) fn intake_api(url: &str, args: &[&str]) -> Run {
    intake_api_with_key(
        url,
        args,
        Some(test_support::TEST_INTAKE_KEY_ENCRYPTION_KEY),
    )
}

/// Runs the binary as [`intake_api`] does, with `key` as `INTAKE_KEY_ENCRYPTION_KEY`, or
/// none.
fn intake_api_with_key(url: &str, args: &[&str], key: Option<&str>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_intake-api"));
    command
        .args(args)
        .env("INTAKE_DATABASE_URL", url)
        .env_remove("INTAKE_KEY_ENCRYPTION_KEY")
        .env_remove("RUST_LOG");
    if let Some(key) = key {
        command.env("INTAKE_KEY_ENCRYPTION_KEY", key);
    }
    let out = command.output().expect("intake-api runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// Runs `statement` on the intake database.
async fn sql(app: &TestApp, statement: &str) {
    let db = Database::connect(app.intake_db.url.as_str())
        .await
        .expect("database");
    db.execute_unprepared(statement).await.expect("statement");
    let _ = db.close().await;
}

/// Makes case `reference` two days older.
async fn backdate(app: &TestApp, backend: Backend, reference: &str) {
    let older = match backend {
        Backend::Postgres => "created_at - interval '2 days'".to_owned(),
        // Stored as text that starts with the year.
        Backend::Sqlite => "'2020' || substr(created_at, 5)".to_owned(),
    };
    sql(
        app,
        &format!("UPDATE cases SET created_at = {older} WHERE reference = '{reference}'"),
    )
    .await;
}

fn references(cases: &Value) -> Vec<&str> {
    cases
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| c["reference"].as_str().expect("reference"))
        .collect()
}

/// Whether every RFC 3339 time in `value` is to the second, in UTC; and there is one.
fn whole_seconds(value: &Value) -> bool {
    fn times<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::String(s) if chrono::DateTime::parse_from_rfc3339(s).is_ok() => out.push(s),
            Value::Array(items) => items.iter().for_each(|v| times(v, out)),
            Value::Object(fields) => fields.values().for_each(|v| times(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    times(value, &mut found);
    !found.is_empty() && found.iter().all(|t| t.len() == 20 && t.ends_with('Z'))
}

async fn case_find_gives_a_customers_cases_in_every_brand_newest_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let url = app.intake_db.url.clone();
    let in_a = app
        .submit(&purchase_enquiry("brand_a", "jane.doe@example.com"))
        .await;
    let in_b = app
        .submit(&purchase_enquiry("brand_b", "Jane.Doe@example.com"))
        .await;
    app.submit(&purchase_enquiry("brand_a", "someone.else@example.com"))
        .await;
    // The first one, updated last.
    app.submit(&purchase_enquiry("brand_a", "jane.doe@example.com"))
        .await;

    let found = intake_api(&url, &["case", "find", "--email", " JANE.Doe@Example.com "]).json();
    assert_eq!(references(&found), [in_a.as_str(), in_b.as_str()]);
    assert_eq!(found[0]["brand"], "brand_a");
    assert_eq!(found[0]["status"], "pending_activation");
    for field in ["created_at", "updated_at", "activates_at"] {
        assert!(found[0][field].is_string(), "{field}");
    }
    assert!(whole_seconds(&found), "{found}");
    assert!(
        !found.to_string().contains("jane"),
        "no personal data: {found}"
    );

    let table = intake_api(
        &url,
        &[
            "case",
            "find",
            "--email",
            "jane.doe@example.com",
            "-o",
            "table",
        ],
    );
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    assert!(lines[0].starts_with("REFERENCE"), "{}", table.stdout);
    assert!(
        lines[1].starts_with(&format!("{in_a}  ")),
        "{}",
        table.stdout
    );

    let none = intake_api(&url, &["case", "find", "--email", "nobody@example.com"]);
    assert_eq!(none.json(), Value::Array(Vec::new()));
    let none = intake_api(
        &url,
        &[
            "case",
            "find",
            "--email",
            "nobody@example.com",
            "-o",
            "table",
        ],
    );
    assert_eq!((none.code, none.stdout.as_str()), (Some(0), ""));
    assert_eq!(none.stderr, "No cases for that e-mail address.\n");

    let shown = intake_api(&url, &["case", "show", &in_a]).json();
    assert_eq!(shown["reference"], in_a.as_str());
    assert_eq!(shown["submissions"], 2);
    assert!(whole_seconds(&shown), "{shown}");
    let shown = intake_api(&url, &["case", "show", &in_a, "-o", "table"]);
    assert!(
        shown
            .stdout
            .starts_with(&format!("reference:     {in_a}\n")),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("\nevents:\n  KIND "),
        "{}",
        shown.stdout
    );
    let unknown = intake_api(&url, &["case", "show", "0"]);
    assert_eq!(unknown.code, Some(1));
    assert!(
        unknown.stderr.contains("no case with reference 0"),
        "{}",
        unknown.stderr
    );
}

async fn case_list_gives_the_newest_cases_by_status_and_creation_time(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let url = app.intake_db.url.clone();
    let mut made = Vec::new();
    for n in 0..3 {
        let email = format!("customer{n}@example.com");
        made.push(app.submit(&purchase_enquiry("brand_a", &email)).await);
    }
    let [oldest, middle, newest] = [&made[0], &made[1], &made[2]].map(String::as_str);
    backdate(&app, backend, oldest).await;
    sql(
        &app,
        &format!(
            "UPDATE cases SET status = 'active', activated_at = activates_at \
             WHERE reference = '{middle}'"
        ),
    )
    .await;

    let all = intake_api(&url, &["case", "list"]).json();
    assert_eq!(references(&all), [newest, middle, oldest]);
    assert!(whole_seconds(&all), "{all}");
    let two = intake_api(&url, &["case", "list", "--limit", "2"]).json();
    assert_eq!(references(&two), [newest, middle]);
    let active = intake_api(&url, &["case", "list", "--status", "active"]).json();
    assert_eq!(references(&active), [middle]);
    let pending = intake_api(&url, &["case", "list", "--status", "pending_activation"]).json();
    assert_eq!(references(&pending), [newest, oldest]);
    let both = intake_api(
        &url,
        &["case", "list", "--status", "pending_activation,active"],
    )
    .json();
    assert_eq!(references(&both), [newest, middle, oldest]);
    let recent = intake_api(&url, &["case", "list", "--since", "1d"]).json();
    assert_eq!(references(&recent), [newest, middle]);
    let since = all[2]["created_at"].as_str().unwrap();
    let from_the_oldest = intake_api(&url, &["case", "list", "--since", since]).json();
    assert_eq!(references(&from_the_oldest), [newest, middle, oldest]);

    let table = intake_api(&url, &["case", "list", "--status", "active", "-o", "table"]);
    let lines: Vec<&str> = table.stdout.lines().collect();
    let heading: Vec<&str> = lines[0]
        .split("  ")
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    assert_eq!(
        heading,
        [
            "REFERENCE",
            "BRAND",
            "STATUS",
            "CREATED AT",
            "UPDATED AT",
            "ACTIVATED AT",
            "PRODUCT UUID"
        ]
    );
    assert_eq!(lines.len(), 2, "{}", table.stdout);
    assert!(
        lines[1].starts_with(&format!("{middle}  brand_a  active")),
        "{}",
        table.stdout
    );

    for bad in [
        &["--status", "closed"][..],
        &["--since", "yesterday"],
        &["--limit", "0"],
    ] {
        let refused = intake_api(&url, &[&["case", "list"][..], bad].concat());
        assert_eq!(refused.code, Some(2), "{bad:?}: {}", refused.stderr);
        assert_eq!(refused.stdout, "");
    }
}

async fn webhook_commands_print_their_endpoints_and_fail_on_unknown_ones(backend: Backend) {
    let db = TestDb::intake(backend).await;
    let url = db.url.as_str();
    let empty = intake_api(url, &["webhook", "list", "-o", "table"]);
    assert_eq!((empty.code, empty.stdout.as_str()), (Some(0), ""));
    assert_eq!(empty.stderr, "No webhook endpoints.\n");

    let refused = intake_api(
        url,
        &["webhook", "set", "partner-1", "http://127.0.0.1:9/hooks"],
    );
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    let set_args = [
        "webhook",
        "set",
        "partner-1",
        "http://127.0.0.1:9/hooks",
        "--webhook-allow-insecure",
        "true",
    ];
    // A new endpoint's secret is printed to a pipe only when asked for; unasked, nothing
    // is made.
    let unasked = intake_api(url, &set_args);
    assert_eq!(unasked.code, Some(2), "{}", unasked.stderr);
    assert_eq!(unasked.stdout, "");
    assert!(
        unasked.stderr.contains("add --show-secret"),
        "{}",
        unasked.stderr
    );
    assert_eq!(
        intake_api(url, &["webhook", "list"]).json(),
        Value::Array(Vec::new())
    );
    // Secrets are stored sealed: without the key to seal with, nothing is made.
    for args in [
        &[&set_args[..], &["--show-secret"]].concat()[..],
        &["webhook", "rotate-secret", "partner-1", "--show-secret"],
    ] {
        let keyless = intake_api_with_key(url, args, None);
        assert_eq!(keyless.code, Some(1), "{args:?}: {}", keyless.stderr);
        assert!(
            keyless
                .stderr
                .contains("INTAKE_KEY_ENCRYPTION_KEY is not set"),
            "{}",
            keyless.stderr
        );
        assert_eq!(keyless.stdout, "");
    }
    assert_eq!(
        intake_api(url, &["webhook", "list"]).json(),
        Value::Array(Vec::new())
    );
    let set = intake_api(url, &[&set_args[..], &["--show-secret"]].concat()).json();
    assert_eq!(set["client_id"], "partner-1");
    let secret = set["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{set}");
    assert!(whole_seconds(&set), "{set}");

    // Setting it again keeps the secret and never prints it, asked or not.
    for args in [&set_args[..], &[&set_args[..], &["--show-secret"]].concat()] {
        let again = intake_api(url, args);
        assert_eq!(again.code, Some(0), "{}", again.stderr);
        assert!(!again.stdout.contains("whsec_"), "{}", again.stdout);
        assert!(
            again.stderr.contains("keeps its signing secret"),
            "{}",
            again.stderr
        );
    }
    let rotate = ["webhook", "rotate-secret", "partner-1", "--grace-secs", "0"];
    let unasked = intake_api(url, &rotate);
    assert_eq!(unasked.code, Some(2), "{}", unasked.stderr);
    assert_eq!(unasked.stdout, "");
    let rotated = intake_api(url, &[&rotate[..], &["--show-secret"]].concat()).json();
    let new_secret = rotated["secret"].as_str().unwrap();
    assert!(
        new_secret.starts_with("whsec_") && new_secret != secret,
        "{rotated}"
    );

    let listed = intake_api(url, &["webhook", "list"]).json();
    assert_eq!(listed[0]["url"], "http://127.0.0.1:9/hooks");
    assert!(!listed.to_string().contains(&secret));
    let endpoint = listed[0]["id"].as_str().unwrap().to_owned();
    assert!(
        endpoint.starts_with("ep_") && endpoint.len() == 35,
        "{listed}"
    );
    assert_eq!(listed[0]["event_types"], Value::Null, "every type");
    assert_eq!(
        intake_api(url, &["webhook", "list", "partner-1"]).json(),
        listed
    );
    assert_eq!(
        intake_api(url, &["webhook", "list", "partner-2"]).json(),
        Value::Array(Vec::new())
    );
    let table = intake_api(url, &["webhook", "list", "-o", "table"]);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[0].starts_with("ID ") && lines[0].contains(" CLIENT ID  URL "),
        "{}",
        table.stdout
    );
    assert!(
        lines[1].starts_with(&format!(
            "{endpoint}  partner-1  http://127.0.0.1:9/hooks  -"
        )),
        "{}",
        table.stdout
    );
    let disabled = intake_api(
        url,
        &[
            "webhook",
            "disable",
            "partner-1",
            "--endpoint",
            &endpoint,
            "--reason",
            "paused",
        ],
    )
    .json();
    assert_eq!(disabled["disabled_reason"], "paused");
    let deliveries = intake_api(url, &["webhook", "deliveries", "partner-1"]).json();
    assert_eq!(deliveries, Value::Array(Vec::new()));

    for (args, message) in [
        (
            &["webhook", "remove", "partner-2"][..],
            "client partner-2 has no webhook endpoint",
        ),
        (
            &["webhook", "remove", "partner-2", "--endpoint", &endpoint],
            "client partner-2 has no webhook endpoint ep_",
        ),
        (
            &["webhook", "redeliver", "msg_x"],
            "msg_x is not a delivery id",
        ),
    ] {
        let failed = intake_api(url, args);
        assert_eq!(failed.code, Some(1), "{args:?}");
        assert_eq!(failed.stdout, "");
        assert!(failed.stderr.contains(message), "{}", failed.stderr);
    }
    let removed = intake_api(url, &["webhook", "remove", "partner-1"]).json();
    assert_eq!(removed["removed"], true);
}

on_both_backends!(
    case_find_gives_a_customers_cases_in_every_brand_newest_first,
    case_list_gives_the_newest_cases_by_status_and_creation_time,
    webhook_commands_print_their_endpoints_and_fail_on_unknown_ones,
);

/// `intake-api ARGS...` with no database anywhere near.
fn without_database(args: &[&str]) -> Run {
    intake_api("sqlite:///nonexistent/intake.db", args)
}

#[test]
fn case_show_without_a_reference_names_only_what_is_missing() {
    let run = without_database(&["case", "show"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("Usage: intake-api case show [OPTIONS] <REFERENCE>\n"),
        "{}",
        run.stderr
    );
    for server_setting in ["--bind", "--jwks-url", "--database-url", "--rate-limit"] {
        assert!(!run.stderr.contains(server_setting), "{}", run.stderr);
    }
}

/// The long flags listed before a help text's examples.
fn flags(help: &str) -> Vec<String> {
    let options = help.split("Examples:").next().unwrap_or_default();
    options
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| w.trim_end_matches(','))
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .map(|w| format!("--{w}"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn each_subcommands_help_lists_only_the_settings_it_uses_and_examples() {
    let reads = ["--database-url", "--help", "--output"];
    let cases: &[(&[&str], &[&str])] = &[
        (&["case", "show"], &[]),
        (&["case", "find"], &["--email", "--sandbox"]),
        (
            &["case", "list"],
            &["--limit", "--sandbox", "--since", "--status"],
        ),
        (
            &["webhook", "set"],
            &["--show-secret", "--webhook-allow-insecure"],
        ),
        (&["webhook", "list"], &[]),
        (&["webhook", "remove"], &["--endpoint"]),
        (&["webhook", "disable"], &["--endpoint", "--reason"]),
        (
            &["webhook", "rotate-secret"],
            &["--endpoint", "--grace-secs", "--show-secret"],
        ),
        (&["webhook", "deliveries"], &["--failed", "--limit"]),
        (&["webhook", "redeliver"], &[]),
    ];
    for (path, own) in cases {
        let run = without_database(&[path, &["--help"][..]].concat());
        assert_eq!(run.code, Some(0));
        let mut expected: Vec<String> = reads
            .iter()
            .chain(own.iter())
            .map(|f| f.to_string())
            .collect();
        expected.sort();
        assert_eq!(flags(&run.stdout), expected, "{path:?}:\n{}", run.stdout);
        assert!(
            run.stdout.contains("\nExamples:\n  intake-api "),
            "{path:?}:\n{}",
            run.stdout
        );
    }
    for group in ["case", "webhook"] {
        let text = without_database(&[group, "--help"]).stdout;
        assert_eq!(flags(&text), ["--help"]);
        assert!(text.contains("\nExamples:\n  intake-api "), "{text}");
    }
    let migrate = without_database(&["migrate", "--help"]).stdout;
    assert_eq!(
        flags(&migrate),
        ["--database-url", "--help", "--log-format"]
    );
    let serve = without_database(&["serve", "--help"]).stdout;
    for server_only in [
        "--bind",
        "--jwks-url",
        "--brands",
        "--redis-url",
        "--rate-limit",
    ] {
        assert!(serve.contains(server_only), "{server_only}");
    }
    let top = without_database(&["--help"]).stdout;
    assert!(
        !top.contains("--bind") && !top.contains("--database-url"),
        "{top}"
    );
}

/// The key-encryption key and the revocation client's secret are read from the environment
/// only: on the command line every user of the machine reads them in `ps`. A flag giving
/// one is refused before anything runs, naming the variable and never echoing the value.
#[test]
fn a_secret_given_as_a_flag_is_refused_naming_its_variable_and_never_echoed() {
    const GIVEN: &str = "c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1lY2hvZWQ=";
    let kek = format!("--key-encryption-key={GIVEN}");
    let lines: &[(&[&str], &str)] = &[
        (
            &["serve", "--key-encryption-key", GIVEN],
            "INTAKE_KEY_ENCRYPTION_KEY",
        ),
        (&["serve", &kek], "INTAKE_KEY_ENCRYPTION_KEY"),
        (
            &["serve", "--revocations-client-secret", GIVEN],
            "INTAKE_REVOCATIONS_CLIENT_SECRET",
        ),
        (
            &[
                "webhook",
                "set",
                "acme",
                "https://partner.example/hooks",
                &kek,
            ],
            "INTAKE_KEY_ENCRYPTION_KEY",
        ),
        (
            &[
                "webhook",
                "rotate-secret",
                "acme",
                "--key-encryption-key",
                GIVEN,
            ],
            "INTAKE_KEY_ENCRYPTION_KEY",
        ),
    ];
    for (args, variable) in lines {
        let refused = without_database(args);
        assert_eq!(refused.code, Some(2), "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("is not taken on the command line")
                && refused.stderr.contains(&format!("set {variable}")),
            "{args:?}: {}",
            refused.stderr
        );
        assert!(
            !refused.stderr.contains(GIVEN) && !refused.stdout.contains(GIVEN),
            "{args:?} echoed the secret"
        );
    }
}
