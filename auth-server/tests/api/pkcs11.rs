//! Signing keys inside a PKCS#11 token (SoftHSM2): made there for every algorithm, never
//! readable from it nor found in the database, shared by replicas, destroyed by a revoke,
//! and a server that cannot reach its token or keys does not start.

use std::time::Duration;

use auth_server::commands::KeyCommand;
use auth_server::key_store::pkcs11;
use cryptoki::object::{Attribute, AttributeType, ObjectClass};
use cryptoki::session::{Session, UserType};
use cryptoki::types::AuthPin;
use sea_orm::{ConnectionTrait, Database};
use shared::claims::TokenAlgorithm;
use test_support::{alg_of, on_both_backends, softhsm};

use crate::helpers::{
    AuthServer, Backend, INTAKE, TestDb, eventually, exits_failing, jwks_of, kid_of, verify_with,
};

/// An auth-server on `db` whose keys live in the test token.
async fn token_server(db: &TestDb) -> AuthServer {
    AuthServer::start(&db.url, |c| {
        c.key_store = softhsm::key_store();
        c.token_rate_limit = 1_000_000;
        c.source_rate_limit = 1_000_000;
    })
    .await
    .expect("an auth-server with its keys in the token starts")
}

/// A logged-in session with the test token, to look at what it holds.
fn token_session() -> Session {
    let settings = softhsm::key_store();
    let library = pkcs11::library(&softhsm::module()).unwrap();
    let slot = pkcs11::find_token(&library, softhsm::TOKEN_LABEL).unwrap();
    let session = library.open_rw_session(slot).unwrap();
    let pin = AuthPin::from(settings.pkcs11_pin.unwrap().expose().clone());
    match session.login(UserType::User, Some(&pin)) {
        Ok(())
        | Err(cryptoki::error::Error::Pkcs11(cryptoki::error::RvError::UserAlreadyLoggedIn, _)) => {
        }
        Err(e) => panic!("login: {e}"),
    }
    session
}

/// The token's objects labelled `kid`, private keys first.
fn objects(kid: &str) -> (usize, usize) {
    let session = token_session();
    let count = |class| {
        session
            .find_objects(&[
                Attribute::Class(class),
                Attribute::Label(kid.as_bytes().to_vec()),
            ])
            .unwrap()
            .len()
    };
    (
        count(ObjectClass::PRIVATE_KEY),
        count(ObjectClass::PUBLIC_KEY),
    )
}

/// The rows of `signing_keys`: kid, private_key, public_jwk.
async fn rows(url: &str) -> Vec<(String, String, Option<String>)> {
    let conn = Database::connect(url).await.unwrap();
    let rows = conn
        .query_all_raw(sea_orm::Statement::from_string(
            conn.get_database_backend(),
            "SELECT kid, private_key, public_jwk FROM signing_keys",
        ))
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.try_get::<String>("", "kid").unwrap(),
                r.try_get::<String>("", "private_key").unwrap(),
                r.try_get::<Option<String>>("", "public_jwk").unwrap(),
            )
        })
        .collect();
    let _ = conn.close().await;
    rows
}

async fn keys_made_in_the_token_sign_tokens_that_verify_with_every_algorithm(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = token_server(&db).await;
    let (id, secret) = auth.create_client(INTAKE).await;
    let first = auth.token(&id, &secret, INTAKE).await;
    assert_eq!(alg_of(&first), "RS256");
    verify_with(&auth, &jwks_of(&auth).await, &first).expect("an RS256 token of the token's key");
    for alg in [
        TokenAlgorithm::Ps256,
        TokenAlgorithm::Es256,
        TokenAlgorithm::Rs256,
    ] {
        let rotated = auth.rotate_key(Some(alg), Some(0)).await;
        let kid = rotated["kid"].as_str().unwrap().to_owned();
        let signed = eventually(Duration::from_secs(5), || async {
            let t = auth.token(&id, &secret, INTAKE).await;
            (kid_of(&t) == kid).then_some(t)
        })
        .await
        .unwrap_or_else(|| panic!("{alg:?}: the rotated key never signed"));
        assert_eq!(alg_of(&signed), alg.name());
        verify_with(&auth, &jwks_of(&auth).await, &signed)
            .unwrap_or_else(|e| panic!("{alg:?}: {e}"));
        assert_eq!(
            objects(&kid),
            (1, 1),
            "{alg:?}: one key pair labelled by its kid"
        );
    }
    // Tokens of the earlier keys still verify: rotation in the token keeps the guarantees.
    verify_with(&auth, &jwks_of(&auth).await, &first).expect("the first token still verifies");
}

async fn the_private_keys_cannot_be_read_from_the_token_nor_found_in_the_database(
    backend: Backend,
) {
    let db = TestDb::auth(backend).await;
    let auth = token_server(&db).await;
    let stored = rows(&db.url).await;
    assert!(stored.len() >= 2, "a signing key and a standby: {stored:?}");
    let session = token_session();
    for (kid, private_key, public_jwk) in &stored {
        // The database holds the label and the public half, nothing that signs.
        assert_eq!(private_key, &format!("pkcs11:{kid}"));
        let jwk: serde_json::Value = serde_json::from_str(public_jwk.as_deref().unwrap()).unwrap();
        assert!(jwk.get("d").is_none() && jwk.get("p").is_none(), "{jwk}");
        // Not even with the key-encryption key.
        let kek = auth.config.kek().unwrap();
        assert!(auth_server::keys::open_private_key(&kek, kid, private_key).is_err());
        // In the token: sensitive, never extractable, its secret parts refused.
        let handle = session
            .find_objects(&[
                Attribute::Class(ObjectClass::PRIVATE_KEY),
                Attribute::Label(kid.as_bytes().to_vec()),
            ])
            .unwrap()[0];
        let attributes = session
            .get_attributes(
                handle,
                &[
                    AttributeType::Sensitive,
                    AttributeType::Extractable,
                    AttributeType::PrivateExponent,
                    AttributeType::Value,
                ],
            )
            .unwrap();
        assert!(
            attributes.contains(&Attribute::Sensitive(true)),
            "{attributes:?}"
        );
        assert!(
            attributes.contains(&Attribute::Extractable(false)),
            "{attributes:?}"
        );
        assert!(
            !attributes
                .iter()
                .any(|a| matches!(a, Attribute::PrivateExponent(_) | Attribute::Value(_))),
            "a secret part was read: {attributes:?}"
        );
    }
}

async fn two_replicas_sign_with_the_tokens_keys_after_a_rotation(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let a = token_server(&db).await;
    let b = token_server(&db).await;
    let (id, secret) = a.create_client(INTAKE).await;
    let rotated = a.rotate_key(None, Some(0)).await;
    let kid = rotated["kid"].as_str().unwrap().to_owned();
    for server in [&a, &b] {
        let signed = eventually(Duration::from_secs(5), || async {
            let t = server.token(&id, &secret, INTAKE).await;
            (kid_of(&t) == kid).then_some(t)
        })
        .await
        .expect("both replicas sign with the new key");
        verify_with(server, &jwks_of(server).await, &signed).unwrap();
    }
}

async fn a_revoke_under_load_destroys_the_key_and_no_request_fails(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let auth = token_server(&db).await;
    let (id, secret) = auth.create_client(INTAKE).await;
    let before = auth.token(&id, &secret, INTAKE).await;
    let revoked = kid_of(&before);
    let load = {
        let (base, id, secret) = (auth.base_url(), id.clone(), secret.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut statuses = Vec::new();
            for _ in 0..200 {
                let answer = http
                    .post(format!("{base}/oauth/token"))
                    .json(&serde_json::json!({
                        "grant_type": "client_credentials",
                        "client_id": id,
                        "client_secret": secret,
                        "scope": INTAKE,
                    }))
                    .send()
                    .await
                    .unwrap();
                statuses.push(answer.status().as_u16());
            }
            statuses
        })
    };
    let out = auth
        .key_cmd(KeyCommand::Revoke {
            kid: revoked.clone(),
        })
        .await
        .unwrap();
    let statuses = load.await.unwrap();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(
        objects(&revoked),
        (0, 0),
        "the revoked key is gone from the token"
    );
    assert!(verify_with(&auth, &jwks_of(&auth).await, &before).is_err());
    let replacement = out["replacement_kid"].as_str().unwrap();
    let after = auth.token(&id, &secret, INTAKE).await;
    assert_eq!(kid_of(&after), replacement);
}

/// Runs `auth-server serve` on `db` with its keys in the test token, `changes` made to its
/// environment (a value of `None` unsets the variable). It must exit, failing, within 30
/// seconds: its stderr. A process of its own, as an operator's server is: the token's login
/// is the process's.
fn serve_fails(db: &TestDb, changes: &[(&str, Option<&str>)]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_auth-server"));
    command
        .arg("serve")
        .env("AUTH_DATABASE_URL", &db.url)
        .env(
            "AUTH_KEY_ENCRYPTION_KEY",
            test_support::TEST_KEY_ENCRYPTION_KEY,
        )
        .env("AUTH_BIND", "127.0.0.1:0")
        .env("AUTH_KEY_STORE", "pkcs11")
        .env("AUTH_PKCS11_MODULE", softhsm::module())
        .env("AUTH_PKCS11_TOKEN_LABEL", softhsm::TOKEN_LABEL)
        .env("AUTH_PKCS11_PIN", softhsm::PIN);
    for (name, value) in changes {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    exits_failing(command, &format!("with {changes:?}"))
}

async fn a_server_that_cannot_reach_its_token_or_keys_does_not_start(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let no_module = serve_fails(
        &db,
        &[("AUTH_PKCS11_MODULE", Some("/nowhere/libpkcs11.so"))],
    );
    assert!(no_module.contains("/nowhere/libpkcs11.so"), "{no_module}");
    let no_token = serve_fails(&db, &[("AUTH_PKCS11_TOKEN_LABEL", Some("no-such-token"))]);
    assert!(no_token.contains("no-such-token"), "{no_token}");
    let wrong_pin = serve_fails(&db, &[("AUTH_PKCS11_PIN", Some("0000"))]);
    assert!(
        wrong_pin.contains("PIN") && wrong_pin.contains("wrong"),
        "{wrong_pin}"
    );
    assert!(
        !wrong_pin.contains(softhsm::PIN),
        "the PIN never shows: {wrong_pin}"
    );
    let no_pin = serve_fails(&db, &[("AUTH_PKCS11_PIN", None)]);
    assert!(no_pin.contains("AUTH_PKCS11_PIN"), "{no_pin}");

    // A key the database names, gone from the token: named at start.
    let auth = token_server(&db).await;
    let kid = rows(&db.url).await[0].0.clone();
    drop(auth);
    let session = token_session();
    for object in session
        .find_objects(&[Attribute::Label(kid.as_bytes().to_vec())])
        .unwrap()
    {
        session.destroy_object(object).unwrap();
    }
    let missing = serve_fails(&db, &[]);
    assert!(missing.contains(&kid), "{missing}");
}

on_both_backends!(
    keys_made_in_the_token_sign_tokens_that_verify_with_every_algorithm,
    the_private_keys_cannot_be_read_from_the_token_nor_found_in_the_database,
    two_replicas_sign_with_the_tokens_keys_after_a_rotation,
    a_revoke_under_load_destroys_the_key_and_no_request_fails,
    a_server_that_cannot_reach_its_token_or_keys_does_not_start,
);
