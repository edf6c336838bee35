//! What the logs say: secrets never reach them, whatever the request and however verbose the
//! logging; every line of a request carries its span; nothing queued is lost at exit.

use std::io::Write;
use std::sync::{Arc, Mutex};

use base64::Engine;
use test_support::{AuthServer, Backend, TestDb};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_secrets_never_appear_in_logs_even_at_trace_level() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_writer(move || writer.clone())
        .init();

    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (id, secret) = auth.create_client("enquiry:case:intake:create").await;
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
    let rotated = auth
        .client_cmd(auth_server::config::ClientCommand::RotateSecret {
            client_id: id.clone(),
            grace_secs: 10,
        })
        .await
        .unwrap();
    let new_secret = rotated["client_secret"].as_str().unwrap().to_owned();
    auth.token(&id, &new_secret, "enquiry:case:intake:create")
        .await;

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    // One line per request; an issuance is recorded on it, with the client, key and jti.
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).expect("each log line is JSON"))
        .collect();
    let issued: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "token_issued")
        .collect();
    assert_eq!(issued.len(), 2, "two tokens were issued: {logs}");
    for line in issued {
        assert_eq!(line["message"], "request finished");
        let request = &line["span"];
        assert_eq!(request["name"], "request");
        assert_eq!(request["client_id"], id.as_str());
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
    let refused = lines
        .iter()
        .filter(|l| l["reason"] == "invalid_client")
        .count();
    assert!(
        refused >= 2,
        "refusals are logged with their reason: {logs}"
    );
    for s in [&secret, &wrong, &new_secret] {
        assert!(!logs.contains(s.as_str()), "a secret reached the logs");
    }
}

#[test]
fn the_last_lines_are_written_before_the_process_exits() {
    let dir = std::env::temp_dir().join(format!("authexit-{}", uuid::Uuid::new_v4().simple()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .arg("migrate")
        .env(
            "AUTH_DATABASE_URL",
            format!("sqlite://{}/auth.db?mode=rwc", dir.display()),
        )
        .env("LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .output()
        .expect("auth-server runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last: serde_json::Value =
        serde_json::from_str(stderr.lines().last().expect("a log line")).expect("JSON");
    assert_eq!(last["message"], "migrations applied", "{stderr}");
}
