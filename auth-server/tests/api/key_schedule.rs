//! Signing keys rotated on a schedule: by one replica of several, once per interval, and
//! no valid token refused by a resource server that caches the JWKS for its max-age.

use std::time::{Duration, Instant};

use auth_server::commands::{AuditCommand, KeyCommand};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::helpers::{AuthServer, Backend, INTAKE, TestDb, jwks_of, verify_with};
use test_support::on_both_backends;

const INTERVAL_SECS: u64 = 2;
const MAX_AGE: Duration = Duration::from_secs(1);
/// Scheduled rotations the test waits for.
const ROTATIONS: usize = 3;

/// The scheduler's rotations in the audit trail: when each was made, and when its key
/// started signing.
async fn scheduled_rotations(server: &AuthServer) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let entries = server
        .audit_cmd(AuditCommand::List { since: None })
        .await
        .expect("audit list");
    let time = |v: &Value| {
        v.as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
            .expect("a time")
    };
    entries
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["action"] == "key.rotate" && e["actor"] == "scheduler")
        .map(|e| (time(&e["at"]), time(&e["detail"]["activates_at"])))
        .collect()
}

async fn two_replicas_rotate_once_per_interval_and_refuse_no_valid_token(backend: Backend) {
    rotations_on_schedule(backend, false).await;
}

/// The same with the keys in a PKCS#11 token: made there every few seconds under load.
async fn keys_in_a_token_rotate_on_schedule_and_refuse_no_valid_token(backend: Backend) {
    rotations_on_schedule(backend, true).await;
}

async fn rotations_on_schedule(backend: Backend, in_token: bool) {
    let db = TestDb::auth(backend).await;
    let configure = |c: &mut auth_server::config::Config| {
        if in_token {
            c.key_store = test_support::softhsm::key_store();
        }
        c.key_rotation_interval_secs = Some(INTERVAL_SECS);
        c.jwks_max_age_secs = MAX_AGE.as_secs();
        c.token_rate_limit = 1_000_000;
        c.source_rate_limit = 1_000_000;
    };
    let a = AuthServer::start(&db.url, configure)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let b = AuthServer::start(&db.url, configure)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let (id, secret) = a.create_client(INTAKE).await;
    // A resource server's view of the keys: the JWKS as fetched at most its max-age ago,
    // never refetched for a kid it does not know.
    let mut cached = jwks_of(&a).await;
    let mut fetched = Instant::now();
    let mut issued = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last_look = Instant::now();
    loop {
        for server in [&a, &b] {
            let token = server.token(&id, &secret, INTAKE).await;
            // The cache is at most the max-age old when the token is verified (not when it
            // was asked for: on a busy machine the request itself can take a while).
            if fetched.elapsed() >= MAX_AGE {
                cached = jwks_of(server).await;
                fetched = Instant::now();
            }
            if let Err(e) = verify_with(server, &cached, &token) {
                panic!(
                    "a token was refused with the JWKS fetched {:?} ago: {e}",
                    fetched.elapsed()
                );
            }
            issued.push(token);
        }
        // Until the rotations are made and their keys have signed: on a busy machine a
        // round of requests may take longer than a key signs alone, so a key is looked
        // for until it has signed, not when its rotation is seen.
        if last_look.elapsed() >= Duration::from_millis(500) {
            last_look = Instant::now();
            let kids: std::collections::HashSet<String> =
                issued.iter().map(|t| test_support::kid_of(t)).collect();
            if scheduled_rotations(&a).await.len() >= ROTATIONS && kids.len() >= ROTATIONS {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{ROTATIONS} scheduled rotations whose keys signed did not happen"
        );
    }

    let rotations = scheduled_rotations(&a).await;
    // Once per interval: each rotation waited until the key of the one before had signed
    // for the interval; two replicas never made two.
    for pair in rotations.windows(2) {
        let ((_, signing_from), (next_at, _)) = (pair[0], pair[1]);
        assert!(
            next_at >= signing_from + chrono::Duration::seconds(INTERVAL_SECS as i64),
            "rotated at {next_at}, before the interval of the key signing from {signing_from} ran out: {rotations:?}"
        );
    }
    // Each key published for the max-age before it signed: the scheduler rotates as the
    // operator would.
    let kids: std::collections::HashSet<String> =
        issued.iter().map(|t| test_support::kid_of(t)).collect();
    assert!(kids.len() >= ROTATIONS, "tokens were signed by {kids:?}");
    // Every token issued is still valid, and verifies against the JWKS now.
    let now = jwks_of(&b).await;
    for token in &issued {
        verify_with(&b, &now, token).expect("a token of a rotated key still verifies");
    }
    // `key list` shows when the newest key is next rotated.
    let listed = a
        .key_cmd(KeyCommand::List {
            rotation_interval_secs: Some(INTERVAL_SECS),
        })
        .await
        .unwrap();
    let scheduled: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["rotates_at"].is_string())
        .collect();
    assert_eq!(scheduled.len(), 1, "{listed}");
}

on_both_backends!(
    two_replicas_rotate_once_per_interval_and_refuse_no_valid_token,
    keys_in_a_token_rotate_on_schedule_and_refuse_no_valid_token,
);
