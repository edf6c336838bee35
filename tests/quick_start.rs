//! The one-process quick start, run as a user runs it: from an empty directory, with no
//! settings, it serves, and leaves no signing key in clear on disk.

use std::process::{Command, Stdio};
use std::time::Duration;

use sea_orm::{ConnectionTrait, Database, Statement};

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// The launcher, started as a user starts it in `dir`, on free ports.
struct Stack {
    process: std::process::Child,
    auth: String,
    intake: String,
}

impl Stack {
    fn start(dir: &std::path::Path) -> Self {
        let (auth_port, intake_port) = (free_port(), free_port());
        let auth = format!("http://127.0.0.1:{auth_port}");
        let process = Command::new(env!("CARGO_BIN_EXE_partner-intake"))
            .current_dir(dir)
            .env("AUTH_BIND", format!("127.0.0.1:{auth_port}"))
            .env("INTAKE_BIND", format!("127.0.0.1:{intake_port}"))
            .env("AUTH_ISSUER", &auth)
            .env("INTAKE_ISSUER", &auth)
            .env("INTAKE_JWKS_URL", format!("{auth}/.well-known/jwks.json"))
            .env_remove("AUTH_KEY_ENCRYPTION_KEY")
            .env_remove("INTAKE_KEY_ENCRYPTION_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the stack starts");
        Self {
            process,
            auth,
            intake: format!("http://127.0.0.1:{intake_port}"),
        }
    }

    /// Waits until the intake-api's `/readyz` answers 200, asking again at once, as a
    /// script looping on curl would: what it announces must be true the first instant.
    async fn ready(&self) -> bool {
        let url = format!("{}/readyz", self.intake);
        let http = reqwest::Client::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(r) = http.get(&url).send().await
                && r.status() == 200
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        false
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.process.id().to_string()])
            .status();
        let _ = self.process.wait();
    }
}

fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_quick_start_serves_and_keeps_no_signing_key_in_clear() {
    let dir = fresh_dir("quickstart");
    let stack = Stack::start(&dir);
    let ready = stack.ready().await;
    stack.stop();
    assert!(ready, "the stack never became ready");

    #[cfg(unix)]
    for file in ["key-encryption-key", "intake-key-encryption-key"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("data").join(file))
            .expect("a key-encryption key was made")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file} is readable by others");
    }
    let url = format!("sqlite://{}/data/auth.db?mode=ro", dir.display());
    let db = Database::connect(url.as_str())
        .await
        .expect("the auth database");
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT private_key FROM signing_keys",
        ))
        .await
        .expect("signing keys");
    assert!(!rows.is_empty());
    for row in rows {
        let stored: String = row.try_get("", "private_key").expect("text");
        assert!(
            stored.starts_with("aes256gcm:"),
            "a signing key is stored in clear"
        );
    }
    let _ = db.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A script that waits for `/readyz` and then asks for a token with the credentials the
/// launcher wrote must never be refused: what the launcher announces is already true.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_client_gets_a_token_the_moment_the_stack_is_ready() {
    let http = reqwest::Client::new();
    for start in 1..=20 {
        let dir = fresh_dir("quickstart-demo");
        let stack = Stack::start(&dir);
        let ready = stack.ready().await;
        let demo: Option<serde_json::Value> = std::fs::read(dir.join("data/demo-client.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        let answer = match (&demo, ready) {
            (Some(demo), true) => {
                let r = http
                    .post(format!("{}/oauth/token", stack.auth))
                    .form(&[
                        ("grant_type", "client_credentials"),
                        ("client_id", demo["client_id"].as_str().unwrap_or_default()),
                        (
                            "client_secret",
                            demo["client_secret"].as_str().unwrap_or_default(),
                        ),
                        ("scope", "enquiry:case:intake:create"),
                    ])
                    .send()
                    .await
                    .expect("the token endpoint answers");
                Some((r.status(), r.text().await.unwrap_or_default()))
            }
            _ => None,
        };
        stack.stop();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(ready, "start {start}: the stack never became ready");
        assert!(demo.is_some(), "start {start}: no data/demo-client.json");
        let (status, body) = answer.expect("asked");
        assert_eq!(
            status, 200,
            "start {start}: the demo client was refused: {body}"
        );
    }
}
