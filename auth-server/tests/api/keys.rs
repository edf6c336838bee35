//! Signing-key rotation and revocation never break a valid token, and replicas agree.

use std::time::Duration;

use auth_server::commands::{ClientCommand, KeyCommand};
use base64::Engine;
use sea_orm::{ConnectionTrait, Database};
use shared::claims::TokenAlgorithm;
use shared::claims::scopes::REVOCATIONS_READ;

use crate::helpers::{AuthServer, Backend, INTAKE, TestApp, eventually, kid_of};
use test_support::alg_of;
use test_support::on_both_backends;

async fn rotation_without_publish_ahead_signs_with_the_new_key_and_old_tokens_still_verify(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let old_token = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    let old_kid = kid_of(&old_token);
    let rotated = app.auth.rotate_key(None, Some(0)).await;
    let new_kid = rotated["kid"].as_str().unwrap().to_owned();
    assert_ne!(new_kid, old_kid);
    assert_eq!(rotated["state"], "active");
    assert!(app.wait_for_signing_kid(&new_kid).await, "new kid not used");
    let kids = app.published_kids().await;
    assert!(
        kids.contains(&old_kid) && kids.contains(&new_kid),
        "{kids:?}"
    );
    app.verify(&old_token)
        .await
        .expect("old token still verifies");
    let listed = app.auth.key_list().await;
    let old = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == old_kid.as_str())
        .unwrap();
    assert_eq!(old["state"], "retired");
    assert!(old["unpublish_at"].is_string());
}

async fn a_key_rotated_with_publish_ahead_is_published_before_it_signs(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let old_kid = kid_of(
        &app.auth
            .token(&app.client_id, &app.client_secret, INTAKE)
            .await,
    );
    let rotated = app.auth.rotate_key(None, None).await;
    let new_kid = rotated["kid"].as_str().unwrap().to_owned();
    assert_eq!(rotated["state"], "pending");
    let published = eventually(Duration::from_secs(3), || async {
        app.published_kids().await.contains(&new_kid).then_some(())
    })
    .await;
    assert!(published.is_some(), "pending key not published");
    // It does not sign before its time (the JWKS max-age, 300 s by default).
    for _ in 0..3 {
        let t = app
            .auth
            .token(&app.client_id, &app.client_secret, INTAKE)
            .await;
        assert_eq!(kid_of(&t), old_kid);
    }
}

async fn a_revoked_key_leaves_the_jwks_and_a_new_one_signs(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    let kid = kid_of(&token);
    let out = app
        .auth
        .key_cmd(KeyCommand::Revoke { kid: kid.clone() })
        .await
        .unwrap();
    let replacement = out["replacement_kid"]
        .as_str()
        .expect("replacement")
        .to_owned();
    let gone = eventually(Duration::from_secs(3), || async {
        (!app.published_kids().await.contains(&kid)).then_some(())
    })
    .await;
    assert!(gone.is_some(), "revoked key still published");
    assert!(
        app.verify(&token).await.is_err(),
        "token of a revoked key verifies"
    );
    assert!(app.wait_for_signing_kid(&replacement).await);
    // Again: nothing more to do, and nothing changes.
    let again = app.auth.key_cmd(KeyCommand::Revoke { kid }).await.unwrap();
    assert_eq!(again["changed"], false, "{again}");
    assert!(app.wait_for_signing_kid(&replacement).await);
}

async fn two_servers_on_one_database_agree_on_the_signing_key_after_rotation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let second = AuthServer::start(&app.db.url, |_| {}).await.unwrap();
    let rotated = app.auth.rotate_key(None, Some(0)).await;
    let new_kid = rotated["kid"].as_str().unwrap().to_owned();
    for server in [&app.auth, &second] {
        let seen = eventually(Duration::from_secs(3), || async {
            let t = server
                .token(&app.client_id, &app.client_secret, INTAKE)
                .await;
            (kid_of(&t) == new_kid).then_some(())
        })
        .await;
        assert!(seen.is_some(), "a replica kept the old key");
    }
}

/// Every private key in the database is sealed; without a key-encryption key, or with the
/// wrong one, the server refuses to start and says why; keys an older version stored in
/// clear are sealed at start.
async fn private_keys_are_never_at_rest_in_clear(backend: Backend) {
    let db = test_support::TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let (id, secret) = auth.create_client(INTAKE).await;
    auth.token(&id, &secret, INTAKE).await;
    let conn = Database::connect(db.url.as_str()).await.unwrap();
    let stored_keys = || async {
        let rows = conn
            .query_all_raw(sea_orm::Statement::from_string(
                conn.get_database_backend(),
                "SELECT kid, private_key FROM signing_keys",
            ))
            .await
            .unwrap();
        rows.iter()
            .map(|row| {
                (
                    row.try_get::<String>("", "kid").unwrap(),
                    row.try_get::<String>("", "private_key").unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let keys = stored_keys().await;
    assert_eq!(keys.len(), 2, "the signing key and the standby");
    assert!(
        keys.iter().all(|(_, k)| k.starts_with("aes256gcm:")),
        "stored in the clear"
    );
    auth.server.stop().await;

    let without = AuthServer::start(&db.url, |c| c.key_encryption_key = None).await;
    let err = format!(
        "{:#}",
        without.err().expect("started without a key-encryption key")
    );
    assert!(err.contains("AUTH_KEY_ENCRYPTION_KEY is not set"), "{err}");
    assert!(err.contains("openssl rand -base64 32"), "{err}");
    let wrong = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";
    let with_wrong = AuthServer::start(&db.url, |c| {
        c.key_encryption_key = Some(wrong.parse().unwrap());
    })
    .await;
    let err = format!(
        "{:#}",
        with_wrong.err().expect("started with the wrong key")
    );
    assert!(err.contains("cannot decrypt signing key"), "{err}");

    // A key an older version stored in clear: readable, and sealed at the next start.
    let (kid, _) = &keys[0];
    let kek = auth.config.kek().unwrap();
    let pkcs8 = auth_server::keys::open_private_key(&kek, kid, &keys[0].1).unwrap();
    let clear = format!(
        "pkcs8:{}",
        base64::engine::general_purpose::STANDARD.encode(&pkcs8)
    );
    conn.execute_raw(sea_orm::Statement::from_sql_and_values(
        conn.get_database_backend(),
        match backend {
            Backend::Postgres => "UPDATE signing_keys SET private_key = $1 WHERE kid = $2",
            Backend::Sqlite => "UPDATE signing_keys SET private_key = ? WHERE kid = ?",
        },
        [clear.into(), kid.clone().into()],
    ))
    .await
    .unwrap();
    let again = AuthServer::start(&db.url, |_| {}).await.unwrap();
    let keys = stored_keys().await;
    assert!(
        keys.iter().all(|(_, k)| k.starts_with("aes256gcm:")),
        "left in the clear"
    );
    again.token(&id, &secret, INTAKE).await;
}

/// A standby key is published from the start; revoking the signing key makes that standby
/// sign at once, never an older key still in the JWKS, and a new standby is published.
async fn revoking_the_signing_key_makes_the_standby_sign_and_never_an_older_key(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let first = kid_of(
        &app.auth
            .token(&app.client_id, &app.client_secret, INTAKE)
            .await,
    );
    let listed = app.auth.key_list().await;
    let standby = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["state"] == "standby")
        .expect("a standby key from the start")["kid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(app.published_kids().await.contains(&standby));
    // The first key retires (still published), the standby signs, a new standby appears.
    let rotated = app.auth.rotate_key(None, Some(0)).await;
    assert_eq!(rotated["kid"], standby.as_str());
    let second_standby = rotated["standby_kid"].as_str().unwrap().to_owned();
    assert!(app.wait_for_signing_kid(&standby).await);
    let revoked = app
        .auth
        .key_cmd(KeyCommand::Revoke {
            kid: standby.clone(),
        })
        .await
        .unwrap();
    assert_eq!(revoked["replacement_kid"], second_standby.as_str());
    assert!(revoked["standby_kid"].is_string());
    for _ in 0..3 {
        let t = app
            .auth
            .token(&app.client_id, &app.client_secret, INTAKE)
            .await;
        assert_eq!(kid_of(&t), second_standby, "not the standby that took over");
        assert_ne!(kid_of(&t), first);
    }
    let kids = app.published_kids().await;
    assert!(kids.contains(&first), "the retired key left the JWKS early");
    assert!(kids.iter().any(|k| revoked["standby_kid"] == k.as_str()));
    assert!(!kids.contains(&standby));
}

/// Resource servers poll the JWKS and the revocation list with `If-None-Match`: an unchanged
/// document answers 304, a changed one 200 with a new tag.
async fn the_jwks_and_the_revocation_list_answer_304_while_unchanged(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (reader, secret) = app.auth.resource_client().await;
    let bearer = format!(
        "Bearer {}",
        app.auth.token(&reader, &secret, REVOCATIONS_READ).await
    );
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("authorization", bearer.parse().unwrap());
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    for path in ["/.well-known/jwks.json", "/revocations"] {
        let url = format!("{}{path}", app.auth.base_url());
        let first = http.get(&url).send().await.unwrap();
        assert_eq!(first.status(), 200);
        let etag = first.headers()["etag"].to_str().unwrap().to_owned();
        let again = http
            .get(&url)
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(again.headers()["etag"], etag.as_str());
        assert!(again.bytes().await.unwrap().is_empty());
    }
    let url = format!("{}/revocations", app.auth.base_url());
    let before = http.get(&url).send().await.unwrap();
    let etag = before.headers()["etag"].to_str().unwrap().to_owned();
    let body: serde_json::Value = before.json().await.unwrap();
    assert_eq!(body, serde_json::json!({"disabled_clients": []}));
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: app.client_id.clone(),
        })
        .await
        .unwrap();
    let after = http
        .get(&url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 200);
    let body: serde_json::Value = after.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"disabled_clients": [app.client_id]})
    );
}

/// A security team moves the deployment to ES256, then PS256, by staged rotations: each new
/// key is published before it signs, the old algorithm's tokens keep verifying, later
/// rotations and revokes stay with the new algorithm, and the auth-server's own endpoints
/// accept the new algorithm's tokens.
async fn a_rotation_with_alg_moves_the_deployment_to_another_algorithm_key_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let rsa_token = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    assert_eq!(alg_of(&rsa_token), "RS256");
    let listed = app.auth.key_list().await;
    let rs_standby = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["state"] == "standby")
        .and_then(|k| k["kid"].as_str())
        .expect("a standby key")
        .to_owned();

    let rotated = app
        .auth
        .rotate_key(Some(TokenAlgorithm::Es256), Some(3))
        .await;
    assert_eq!(rotated["alg"], "ES256");
    assert_eq!(rotated["state"], "pending", "{rotated}");
    // The RS256 standby never signed: it is withdrawn, not promoted.
    assert_eq!(rotated["withdrawn_standby_kid"], rs_standby.as_str());
    let es_kid = rotated["kid"].as_str().unwrap().to_owned();
    let jwks = app.jwks().await;
    let published = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == es_kid.as_str())
        .expect("the new key is published before it signs")
        .clone();
    assert_eq!(published["kty"], "EC");
    assert_eq!(published["crv"], "P-256");
    assert_eq!(published["alg"], "ES256");
    assert!(published.get("n").is_none() && published.get("d").is_none());
    assert!(!app.published_kids().await.contains(&rs_standby));
    // Pending: RS256 still signs meanwhile.
    let meanwhile = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    assert_eq!(alg_of(&meanwhile), "RS256");

    let es_token = eventually(Duration::from_secs(10), || async {
        let t = app
            .auth
            .token(&app.client_id, &app.client_secret, INTAKE)
            .await;
        (kid_of(&t) == es_kid).then_some(t)
    })
    .await
    .expect("the ES256 key signs once its publish-ahead has passed");
    assert_eq!(alg_of(&es_token), "ES256");
    let claims = app
        .verify(&es_token)
        .await
        .expect("an ES256 token verifies");
    assert_eq!(claims["client_id"], app.client_id.as_str());
    app.verify(&rsa_token)
        .await
        .expect("an RS256 token of before still verifies");

    let listed = app.auth.key_list().await;
    let alg_by_state = |state: &str| -> Vec<String> {
        listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["state"] == state)
            .map(|k| k["alg"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(alg_by_state("active"), ["ES256"]);
    assert_eq!(alg_by_state("standby"), ["ES256"], "{listed}");
    assert_eq!(alg_by_state("retired"), ["RS256"]);

    // The auth-server's own bearer check takes the new algorithm.
    let (reader, secret) = app.auth.resource_client().await;
    let reader_token = app.auth.token(&reader, &secret, REVOCATIONS_READ).await;
    assert_eq!(alg_of(&reader_token), "ES256");
    let revocations = app
        .http
        .get(app.url("/revocations"))
        .bearer_auth(&reader_token)
        .send()
        .await
        .unwrap();
    assert_eq!(revocations.status(), 200);

    // A rotation without --alg, and a revoke, stay with ES256.
    let again = app.auth.rotate_key(None, Some(0)).await;
    assert_eq!(again["alg"], "ES256");
    assert!(again["withdrawn_standby_kid"].is_null());
    let again_kid = again["kid"].as_str().unwrap().to_owned();
    assert!(app.wait_for_signing_kid(&again_kid).await);
    let revoked = app
        .auth
        .key_cmd(KeyCommand::Revoke { kid: again_kid })
        .await
        .unwrap();
    let replacement = revoked["replacement_kid"].as_str().unwrap().to_owned();
    assert!(app.wait_for_signing_kid(&replacement).await);
    let after_revoke = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    assert_eq!(alg_of(&after_revoke), "ES256");

    // And on to PS256, an RSA key again, published first as well.
    let ps = app
        .auth
        .rotate_key(Some(TokenAlgorithm::Ps256), Some(0))
        .await;
    assert_eq!(ps["alg"], "PS256");
    let ps_kid = ps["kid"].as_str().unwrap().to_owned();
    assert!(app.wait_for_signing_kid(&ps_kid).await);
    let ps_token = app
        .auth
        .token(&app.client_id, &app.client_secret, INTAKE)
        .await;
    assert_eq!(alg_of(&ps_token), "PS256");
    app.verify(&ps_token).await.expect("a PS256 token verifies");
    app.verify(&after_revoke)
        .await
        .expect("the ES256 token of before still verifies");
}

on_both_backends!(
    a_rotation_with_alg_moves_the_deployment_to_another_algorithm_key_first,
    revoking_the_signing_key_makes_the_standby_sign_and_never_an_older_key,
    the_jwks_and_the_revocation_list_answer_304_while_unchanged,
    rotation_without_publish_ahead_signs_with_the_new_key_and_old_tokens_still_verify,
    a_key_rotated_with_publish_ahead_is_published_before_it_signs,
    a_revoked_key_leaves_the_jwks_and_a_new_one_signs,
    two_servers_on_one_database_agree_on_the_signing_key_after_rotation,
    private_keys_are_never_at_rest_in_clear,
);
