//! The audit trail: every operator change leaves one entry saying who did what to which
//! client or key, never a secret; `audit verify` passes on an untouched trail and names the
//! first entry altered, removed or moved.

use std::process::Command;

use auth_server::cli;
use auth_server::config::{AuditCommand, ClientCommand, KeyCommand, Settings};
use sea_orm::{ConnectionTrait, Database, Statement};
use serde_json::Value;
use test_support::on_both_backends;

use crate::helpers::{Backend, TestApp};

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
            publish_ahead_secs: Some(0),
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
        summary[..2],
        [by_server("key.create"), by_server("key.create")]
    );
    assert_eq!(summary[2].1, "client.create", "{summary:?}");
    assert_eq!(
        summary[3..],
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
    assert_eq!(entries[3]["subject"], app.client_id.as_str());
    assert_eq!(entries[6]["subject"], key["kid"]);
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
    let verified = app.auth.audit_cmd(AuditCommand::Verify).await.unwrap();
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
