//! The one-process quick start, run as a user runs it: from an empty directory, with no
//! settings, it serves, and leaves no signing key in clear on disk.

use std::process::{Command, Stdio};
use std::time::Duration;

use sea_orm::{ConnectionTrait, Database, Statement};
use test_support::eventually;

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_quick_start_serves_and_keeps_no_signing_key_in_clear() {
    let dir = std::env::temp_dir().join(format!("quickstart-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let (auth_port, intake_port) = (free_port(), free_port());
    let auth = format!("http://127.0.0.1:{auth_port}");
    let mut stack = Command::new(env!("CARGO_BIN_EXE_partner-intake"))
        .current_dir(&dir)
        .env("AUTH_BIND", format!("127.0.0.1:{auth_port}"))
        .env("INTAKE_BIND", format!("127.0.0.1:{intake_port}"))
        .env("AUTH_ISSUER", &auth)
        .env("INTAKE_ISSUER", &auth)
        .env("INTAKE_JWKS_URL", format!("{auth}/.well-known/jwks.json"))
        .env_remove("AUTH_KEY_ENCRYPTION_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the stack starts");
    let ready = eventually(Duration::from_secs(30), || async {
        let r = reqwest::get(format!("http://127.0.0.1:{intake_port}/readyz"))
            .await
            .ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    let _ = Command::new("kill")
        .args(["-TERM", &stack.id().to_string()])
        .status();
    let _ = stack.wait();
    assert!(ready.is_some(), "the stack never became ready");

    let kek = dir.join("data/key-encryption-key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kek)
            .expect("a key-encryption key was made")
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the key-encryption key is readable by others"
        );
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
