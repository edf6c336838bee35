//! The database records where its signing keys live, and nothing makes a key anywhere
//! else: on a PKCS#11 deployment a command or server without the token's settings is
//! refused before it makes or marks anything; a revoke never leaves a private key in the
//! token; the keys move only with `key rotate --move-key-store`; a schedule never moves
//! them.

use std::time::Duration;

use auth_server::entity::signing_key;
use cryptoki::object::{Attribute, ObjectClass};
use cryptoki::session::UserType;
use cryptoki::types::AuthPin;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use test_support::{on_both_backends, softhsm};

use crate::helpers::{
    AuthServer, Backend, INTAKE, Run, TestDb, eventually, exits_failing, kid_of, metrics_text, run,
    sample,
};

/// The token these tests keep keys in: one of their own, as their commands write to it from
/// processes of their own.
const TOKEN: &str = softhsm::SHARED_TOKEN_LABEL;

/// What the token's settings are, as the servers' environment gives them.
fn token_env() -> Vec<(&'static str, String)> {
    softhsm::shared_key_store();
    vec![
        ("AUTH_KEY_STORE", "pkcs11".to_owned()),
        (
            "AUTH_PKCS11_MODULE",
            softhsm::module().display().to_string(),
        ),
        ("AUTH_PKCS11_TOKEN_LABEL", TOKEN.to_owned()),
        ("AUTH_PKCS11_PIN", softhsm::PIN.to_owned()),
    ]
}

/// The binary on `db` with `args`, with the test token's settings when `in_token`.
fn command(db: &TestDb, args: &[&str], in_token: bool) -> Run {
    let env = if in_token { token_env() } else { Vec::new() };
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run(&db.url, args, &env)
}

/// An auth-server on `db` whose keys live in the test token.
async fn token_server(db: &TestDb) -> AuthServer {
    AuthServer::start(&db.url, |c| c.key_store = softhsm::shared_key_store())
        .await
        .expect("an auth-server with its keys in the token starts")
}

/// How many private keys labelled `kid` the test token holds, as this process sees it; an
/// error when the token cannot answer now.
fn private_keys_in_token(kid: &str) -> anyhow::Result<usize> {
    let library = auth_server::key_store::pkcs11::library(&softhsm::module())?;
    let slot = auth_server::key_store::pkcs11::find_token(&library, TOKEN)?;
    let session = library.open_ro_session(slot)?;
    match session.login(
        UserType::User,
        Some(&AuthPin::from(softhsm::PIN.to_owned())),
    ) {
        Ok(())
        | Err(cryptoki::error::Error::Pkcs11(cryptoki::error::RvError::UserAlreadyLoggedIn, _)) => {
        }
        Err(e) => return Err(e.into()),
    }
    Ok(session
        .find_objects(&[
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::Label(kid.as_bytes().to_vec()),
        ])?
        .len())
}

/// Whether the token comes to hold `count` private keys labelled `kid`. Another process
/// (the command) changed it: SoftHSM2 shows this process the change once it has read the
/// token's files again, and answers an error while another process writes them.
async fn token_holds(kid: &str, count: usize) -> bool {
    eventually(Duration::from_secs(10), || async {
        (private_keys_in_token(kid).ok()? == count).then_some(())
    })
    .await
    .is_some()
}

/// Every signing key row: kid and where its private half is (`private_key`'s scheme).
async fn stored_keys(db: &TestDb) -> Vec<(String, String)> {
    let conn = sea_orm::Database::connect(&db.url).await.unwrap();
    let rows = signing_key::Entity::find().all(&conn).await.unwrap();
    let _ = conn.close().await;
    rows.into_iter()
        .map(|k| {
            let scheme = k
                .private_key
                .split(':')
                .next()
                .unwrap_or_default()
                .to_owned();
            (k.kid, scheme)
        })
        .collect()
}

/// Whether any key is sealed in the database.
async fn any_database_key(db: &TestDb) -> bool {
    stored_keys(db)
        .await
        .iter()
        .any(|(_, scheme)| scheme == "aes256gcm")
}

/// `key list`'s keys (JSON) and what it says on stderr.
fn key_list(db: &TestDb) -> (Vec<Value>, String) {
    let listed = command(db, &["key", "list", "-o", "json"], false);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let keys = listed.json().as_array().cloned().unwrap_or_default();
    (keys, listed.stderr)
}

/// The kid of the key in `state`.
fn kid_in(db: &TestDb, state: &str) -> String {
    key_list(db)
        .0
        .iter()
        .find(|k| k["state"] == state)
        .and_then(|k| k["kid"].as_str())
        .unwrap_or_else(|| panic!("no {state} key"))
        .to_owned()
}

/// Marks key `kid` revoked as an earlier release's revoke did before failing to destroy it.
async fn mark_revoked(db: &TestDb, kid: &str) {
    let conn = sea_orm::Database::connect(&db.url).await.unwrap();
    signing_key::Entity::update_many()
        .col_expr(
            signing_key::Column::RevokedAt,
            Expr::value(chrono::Utc::now()),
        )
        .filter(signing_key::Column::Kid.eq(kid))
        .exec(&conn)
        .await
        .unwrap();
    let _ = conn.close().await;
}

async fn on_a_token_deployment_key_rotate_without_the_tokens_settings_makes_no_database_key(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let _auth = token_server(&db).await;
    let before = stored_keys(&db).await;

    let refused = command(&db, &["key", "rotate"], false);
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    for said in [
        "live in the pkcs11 token \"partner-intake-shared-tests\"",
        "was given the database",
        "AUTH_KEY_STORE=pkcs11",
        "--move-key-store",
    ] {
        assert!(refused.stderr.contains(said), "{said}: {}", refused.stderr);
    }
    assert_eq!(stored_keys(&db).await, before, "no key made");
    assert!(!any_database_key(&db).await);

    // `key list` says where the keys live, and each key where it is.
    let (keys, said) = key_list(&db);
    assert!(
        said.contains(
            "new signing keys are made in the pkcs11 token \"partner-intake-shared-tests\""
        ),
        "{said}"
    );
    assert!(keys.iter().all(|k| k["store"] == "pkcs11"), "{keys:?}");

    // With the token's settings it rotates, in the token.
    let rotated = command(&db, &["key", "rotate", "-o", "json"], true);
    assert_eq!(rotated.code, Some(0), "{}", rotated.stderr);
    assert_eq!(rotated.json()["key_store"]["store"], "pkcs11");
    assert!(!any_database_key(&db).await);
}

async fn a_revoke_without_the_tokens_settings_marks_nothing_and_a_rerun_destroys_what_was_left(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let auth = token_server(&db).await;
    let (id, secret) = auth.create_client(INTAKE).await;
    let signing = kid_of(&auth.token(&id, &secret, INTAKE).await);

    // A kid may begin with `-`: after `--` it is never read as a flag.
    let refused = command(&db, &["key", "revoke", "--", &signing], false);
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("nothing was marked") && refused.stderr.contains("pkcs11"),
        "{}",
        refused.stderr
    );
    assert_eq!(kid_in(&db, "active"), signing, "still the signing key");
    assert!(token_holds(&signing, 1).await);

    // A key an earlier revoke marked and did not destroy: run again, it is destroyed.
    let standby = kid_in(&db, "standby");
    mark_revoked(&db, &standby).await;
    let unfinished = command(&db, &["key", "revoke", "--", &standby], false);
    assert_eq!(unfinished.code, Some(3), "{}", unfinished.stderr);
    assert!(token_holds(&standby, 1).await);
    for _ in 0..2 {
        let completed = command(&db, &["key", "revoke", "-o", "json", "--", &standby], true);
        assert_eq!(completed.code, Some(0), "{}", completed.stderr);
        assert!(
            completed.stderr.contains("already revoked"),
            "{}",
            completed.stderr
        );
        assert_eq!(completed.json()["changed"], false);
        assert!(token_holds(&standby, 0).await, "destroyed in the token");
    }
}

/// Runs `auth-server serve` on `db` with `env` besides the database and the key-encryption
/// key; it must fail within 30 seconds: its stderr.
fn serve_fails(db: &TestDb, env: &[(&str, String)]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_auth-server"));
    command
        .arg("serve")
        .env("AUTH_DATABASE_URL", &db.url)
        .env(
            "AUTH_KEY_ENCRYPTION_KEY",
            test_support::TEST_KEY_ENCRYPTION_KEY,
        )
        .env("AUTH_BIND", "127.0.0.1:0")
        .env_remove("AUTH_KEY_STORE")
        .envs(env.iter().map(|(k, v)| (k, v)));
    exits_failing(command, "without the token's settings")
}

async fn a_server_without_the_tokens_settings_on_a_token_deployment_makes_no_database_key(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    drop(token_server(&db).await);
    // A start that has a key to make: the standby is gone.
    let standby = kid_in(&db, "standby");
    mark_revoked(&db, &standby).await;
    let said = serve_fails(&db, &[]);
    assert!(
        said.contains("live in the pkcs11 token \"partner-intake-shared-tests\""),
        "{said}"
    );
    assert!(!any_database_key(&db).await, "{:?}", stored_keys(&db).await);
}

async fn key_rotate_with_move_key_store_moves_the_keys_into_the_token_and_only_then(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    let before = stored_keys(&db).await;

    let refused = command(&db, &["key", "rotate"], true);
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("live in the database")
            && refused.stderr.contains("was given the pkcs11 token"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        stored_keys(&db).await,
        before,
        "nothing made, in the token either"
    );

    let moved = command(
        &db,
        &[
            "key",
            "rotate",
            "--move-key-store",
            "--publish-ahead-secs",
            "0",
            "-o",
            "json",
        ],
        true,
    );
    assert_eq!(moved.code, Some(0), "{}", moved.stderr);
    let out = moved.json();
    assert_eq!(out["key_store"]["store"], "pkcs11", "{out}");
    assert_eq!(out["key_store"]["token_label"], TOKEN);
    assert_eq!(out["moved_key_store_from"]["store"], "database", "{out}");
    assert!(
        moved.stderr.contains("moved from the database"),
        "{}",
        moved.stderr
    );
    // The key that takes over and the new standby are the token's; the old standby is
    // withdrawn.
    let new_kid = out["kid"].as_str().unwrap();
    let standby_kid = out["standby_kid"].as_str().unwrap();
    assert!(out["withdrawn_standby_kid"].is_string(), "{out}");
    for kid in [new_kid, standby_kid] {
        assert!(token_holds(kid, 1).await, "{kid}");
    }
    let (_, said) = key_list(&db);
    assert!(said.contains("pkcs11 token"), "{said}");
    let entries = command(&db, &["audit", "list", "-o", "json"], false).json();
    assert!(
        entries
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "key.move_store"),
        "{entries}"
    );
    // Now a rotation with the database's settings is the one refused.
    let back = command(&db, &["key", "rotate"], false);
    assert_eq!(back.code, Some(3), "{}", back.stderr);
    drop(auth);
    // A server with the token's settings signs with the moved key.
    let in_token = token_server(&db).await;
    let signed = eventually(Duration::from_secs(5), || async {
        let t = in_token.token(&id, &secret, INTAKE).await;
        (kid_of(&t) == new_kid).then_some(())
    })
    .await;
    assert!(
        signed.is_some(),
        "the key moved into the token never signed"
    );
}

async fn a_schedule_with_another_store_than_the_keys_rotates_nothing(backend: Backend) {
    let db = TestDb::auth(backend).await;
    // Keys in the database; then a replica given the token, rotating every second.
    let _auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let before = stored_keys(&db).await;
    let replica = AuthServer::start(&db.url, |c| {
        c.key_store = softhsm::shared_key_store();
        c.key_rotation_interval_secs = Some(1);
    })
    .await
    .expect("a replica that makes no key at start starts");
    let refused = eventually(Duration::from_secs(10), || async {
        let metrics = metrics_text(&replica.base_url()).await;
        (sample(
            &metrics,
            "auth_scheduled_rotations_total",
            &[("outcome", "error")],
        ) > 0.0)
            .then_some(())
    })
    .await;
    assert!(refused.is_some(), "the schedule never tried");
    assert_eq!(
        stored_keys(&db).await,
        before,
        "no key made, in the token or not"
    );
}

on_both_backends!(
    on_a_token_deployment_key_rotate_without_the_tokens_settings_makes_no_database_key,
    a_revoke_without_the_tokens_settings_marks_nothing_and_a_rerun_destroys_what_was_left,
    a_server_without_the_tokens_settings_on_a_token_deployment_makes_no_database_key,
    key_rotate_with_move_key_store_moves_the_keys_into_the_token_and_only_then,
    a_schedule_with_another_store_than_the_keys_rotates_nothing,
);
