//! What the logs say: secrets never reach them, whatever the request and however verbose the
//! logging; every line of a request carries its span; nothing queued is lost at exit.

use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde_json::Value;

use crate::helpers::{AuthServer, Backend, TestDb};
use crate::private_key_jwt::{PartnerKey, claims, register, token_with};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Set in the process that captures the logs for
/// [`client_secrets_never_appear_in_logs_even_at_trace_level`].
const CAPTURING: &str = "AUTH_SERVER_TEST_CAPTURING_LOGS";

#[test]
fn client_secrets_never_appear_in_logs_even_at_trace_level() {
    if std::env::var_os(CAPTURING).is_some() {
        return every_line_of_the_process_is_checked_for_secrets();
    }
    // Only a subscriber for the whole process sees every thread's lines, and in this binary
    // it would see the other tests' lines too. One for the test's own threads is not enough:
    // tracing remembers a log call site as unwanted when another thread reaches it first
    // (tokio-rs/tracing#2874). So the capture runs in a process of its own: this binary,
    // running only this test.
    let path = concat!(
        module_path!(),
        "::client_secrets_never_appear_in_logs_even_at_trace_level"
    );
    let name = path.split_once("::").map_or(path, |(_crate, name)| name);
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([name, "--exact", "--test-threads", "1"])
        .env(CAPTURING, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the capturing run did not run the test: {stdout}"
    );
}

fn every_line_of_the_process_is_checked_for_secrets() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_writer(move || writer.clone())
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut secrets = Vec::new();
    let mut id = String::new();
    let mut keyed = String::new();
    runtime.block_on(async {
        let db = TestDb::auth(Backend::Sqlite).await;
        let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
        let (client_id, secret) = auth.create_client("enquiry:case:intake:create").await;
        id = client_id;
        let http = reqwest::Client::new();
        let url = format!("{}/oauth/token", auth.base_url());
        let wrong = format!("{secret}x");
        for s in [&secret, &wrong] {
            http.post(&url)
                .json(&serde_json::json!({"grant_type": "client_credentials", "client_id": id, "client_secret": s, "scope": "enquiry:case:intake:create"}))
                .send()
                .await
                .unwrap();
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{s}"));
            http.post(&url)
                .header("authorization", format!("Basic {basic}"))
                .form(&[
                    ("grant_type", "client_credentials"),
                    ("scope", "enquiry:referral:create"),
                ])
                .send()
                .await
                .unwrap();
        }
        // A partner that swaps the fields sends its secret as the id: an unknown id is
        // never logged, so neither is the secret.
        http.post(&url)
            .json(&serde_json::json!({"grant_type": "client_credentials", "client_id": secret, "client_secret": id, "scope": "enquiry:case:intake:create"}))
            .send()
            .await
            .unwrap();
        let rotated = auth
            .client_cmd(auth_server::commands::ClientCommand::RotateSecret {
                client_id: id.clone(),
                grace_secs: 10,
            })
            .await
            .unwrap();
        let new_secret = rotated["client_secret"].as_str().unwrap().to_owned();
        auth.token(&id, &new_secret, "enquiry:case:intake:create")
            .await;
        // A keyed partner: an assertion accepted, then replayed, and one from a stranger.
        let key = PartnerKey::ed25519("k1");
        keyed = register(&auth, &[&key]).await;
        let assertion = key.sign(&claims(&auth, &keyed));
        assert_eq!(token_with(&auth, &assertion).await.0, 200);
        assert_eq!(token_with(&auth, &assertion).await.0, 401);
        let forged = PartnerKey::ed25519("k1").sign(&claims(&auth, &keyed));
        assert_eq!(token_with(&auth, &forged).await.0, 401);
        secrets = vec![secret, wrong, new_secret];
        // Each part of an assertion but its header (which only names the key) is a secret
        // of sorts: the whole, its claims with their jti, its signature.
        for a in [assertion, forged] {
            let parts: Vec<String> = a.split('.').map(str::to_owned).collect();
            secrets.extend([a.clone(), parts[1].clone(), parts[2].clone()]);
        }
    });

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    // One line per request; an issuance is recorded on it, with the client, key and jti.
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).expect("each log line is JSON"))
        .collect();
    let issued: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "token_issued")
        .collect();
    assert_eq!(issued.len(), 3, "three tokens were issued: {logs}");
    for (line, client) in issued.into_iter().zip([&id, &id, &keyed]) {
        assert_eq!(line["message"], "request finished");
        let request = &line["span"];
        assert_eq!(request["name"], "request");
        assert_eq!(request["client_id"], client.as_str());
        assert_eq!(request["route"], "/oauth/token");
        assert_eq!(request["service"], "auth-server");
        assert!(
            request["request_id"]
                .as_str()
                .is_some_and(|r| r.len() == 32)
        );
        assert_eq!(line["status"], 200);
        assert!(line["jti"].as_str().is_some_and(|j| j.len() == 32));
        assert!(line["kid"].as_str().is_some());
        assert_eq!(line["scope"], "enquiry:case:intake:create");
    }
    // Refusals carry their reason, and the client's id when the id names a client.
    let refused = |reason: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l["outcome"] == "refused" && l["reason"] == reason)
            .collect()
    };
    let wrong = refused("wrong_secret");
    assert_eq!(wrong.len(), 2, "two wrong secrets were sent: {logs}");
    let out_of_scope = refused("invalid_scope");
    assert_eq!(out_of_scope.len(), 1, "one scope not granted: {logs}");
    for line in wrong.iter().chain(&out_of_scope) {
        assert_eq!(line["message"], "request finished");
        assert_eq!(line["span"]["client_id"], id.as_str(), "{line}");
    }
    for reason in ["assertion_replayed", "assertion_signature"] {
        let lines = refused(reason);
        assert_eq!(lines.len(), 1, "{reason}: {logs}");
        assert_eq!(
            lines[0]["span"]["client_id"],
            keyed.as_str(),
            "{}",
            lines[0]
        );
    }
    let unknown = refused("unknown_client");
    assert_eq!(unknown.len(), 1, "one unknown id was sent: {logs}");
    assert!(
        unknown[0]["span"].get("client_id").is_none(),
        "{}",
        unknown[0]
    );
    for s in &secrets {
        assert!(!logs.contains(s.as_str()), "a secret reached the logs");
    }
}

#[tokio::test]
async fn log_lines_waiting_in_the_buffer_are_written_before_the_process_exits() {
    // Empty: `migrate` has all of its work to do, and logs it last.
    let db = TestDb::new(Backend::Sqlite, "authlog").await;
    let out = Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .arg("migrate")
        .env("AUTH_DATABASE_URL", &db.url)
        .env("RUST_LOG", "info")
        .env("LOG_FORMAT", "json")
        .output()
        .expect("auth-server runs");
    let stderr = String::from_utf8(out.stderr).expect("utf-8 stderr");
    assert!(out.status.success(), "{stderr}");
    let last: Value = serde_json::from_str(stderr.lines().last().expect("a log line"))
        .unwrap_or_else(|e| panic!("the last line is not JSON ({e}): {stderr}"));
    assert_eq!(last["level"], "INFO", "{stderr}");
    assert_eq!(last["message"], "migrations applied", "{stderr}");
}
