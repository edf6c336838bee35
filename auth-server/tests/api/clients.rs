//! Client management: secret rotation with grace, disabling, portal and sandbox clients,
//! and what `client list` shows.

use std::time::Duration;

use auth_server::commands::{AuditCommand, ClientCommand};
use service_kit::http::Server;

use crate::helpers::{Backend, INTAKE, TestApp, TestDb, eventually};
use test_support::on_both_backends;

async fn after_a_secret_rotation_both_secrets_work_until_the_grace_ends(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let out = app
        .auth
        .client_cmd(ClientCommand::RotateSecret {
            client_id: app.client_id.clone(),
            grace_secs: 3600,
        })
        .await
        .unwrap();
    let new_secret = out["client_secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, app.client_secret);
    assert!(out["previous_secret_valid_until"].is_string());
    let new_works = eventually(Duration::from_secs(3), || async {
        (app.try_token(&app.client_id, &new_secret).await.0 == 200).then_some(())
    })
    .await;
    assert!(new_works.is_some(), "new secret refused");
    assert_eq!(
        app.try_token(&app.client_id, &app.client_secret).await.0,
        200
    );

    // A second rotation without grace ends both earlier secrets at once.
    let out = app
        .auth
        .client_cmd(ClientCommand::RotateSecret {
            client_id: app.client_id.clone(),
            grace_secs: 0,
        })
        .await
        .unwrap();
    let newest = out["client_secret"].as_str().unwrap().to_owned();
    let switched = eventually(Duration::from_secs(5), || async {
        let old = app.try_token(&app.client_id, &app.client_secret).await.0;
        let mid = app.try_token(&app.client_id, &new_secret).await.0;
        let cur = app.try_token(&app.client_id, &newest).await.0;
        (old == 401 && mid == 401 && cur == 200).then_some(())
    })
    .await;
    assert!(switched.is_some(), "expired secrets still accepted");
}

async fn a_disabled_client_gets_no_token_within_seconds(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_eq!(
        app.try_token(&app.client_id, &app.client_secret).await.0,
        200
    );
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: app.client_id.clone(),
        })
        .await
        .unwrap();
    let refused = eventually(Duration::from_secs(5), || async {
        (app.try_token(&app.client_id, &app.client_secret).await.0 == 401).then_some(())
    })
    .await;
    assert!(refused.is_some(), "disabled client still gets tokens");
}

async fn client_list_never_shows_a_secret(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.auth.client_cmd(ClientCommand::List).await.unwrap();
    let text = list.to_string();
    assert!(!text.contains(&app.client_secret));
    let entry = &list[0];
    assert_eq!(entry["client_id"], app.client_id.as_str());
    assert_eq!(entry["scopes"], serde_json::json!([crate::helpers::INTAKE]));
    assert_eq!(entry["disabled"], false);
    let unknown = app
        .auth
        .client_cmd(ClientCommand::RotateSecret {
            client_id: "nope".into(),
            grace_secs: 1,
        })
        .await;
    assert!(unknown.is_err());
    let bad_scope = app
        .auth
        .client_cmd(ClientCommand::Create {
            name: "x".into(),
            scopes: "admin".into(),
            brands: None,
            auth_method: Default::default(),
            jwks_file: None,
            jwks_uri: None,
            sandbox: false,
        })
        .await;
    assert!(bad_scope.is_err());
}

/// A client made after the server was built and before it serves (as the one-process
/// launcher makes its demo client) is known from the first request, not from the first
/// poll for changes.
async fn a_client_made_before_serving_gets_a_token_from_the_first_request(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let mut config = auth_server::config::Config::with_database(&db.url);
    config.listen.bind = "127.0.0.1:0".into();
    config.key_encryption_key = Some(
        test_support::TEST_KEY_ENCRYPTION_KEY
            .parse()
            .expect("infallible"),
    );
    let app = auth_server::startup::Application::build(config.clone())
        .await
        .expect("builds");
    let created = auth_server::cli::client(
        &config,
        ClientCommand::Create {
            name: "Made before serving".into(),
            scopes: INTAKE.into(),
            brands: None,
            auth_method: Default::default(),
            jwks_file: None,
            jwks_uri: None,
            sandbox: false,
        },
    )
    .await
    .expect("client created");
    let server = test_support::Running::spawn(app.port(), move |rx| async move {
        app.run_until(async {
            let _ = rx.await;
        })
        .await
    });
    // The listener is bound: this first request waits in its backlog for serving to start.
    let answer = reqwest::Client::new()
        .post(format!("{}/oauth/token", server.base_url()))
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", created["client_id"].as_str().unwrap()),
            ("client_secret", created["client_secret"].as_str().unwrap()),
            ("scope", INTAKE),
        ])
        .send()
        .await
        .expect("the server answers");
    let status = answer.status();
    assert_eq!(status, 200, "{}", answer.text().await.unwrap_or_default());
    server.stop().await;
}

const PORTAL: &str = "portal:redirect:redeem";

/// What a fresh token of `id` for `scope` says, verified as a resource server would.
async fn claims_of(app: &TestApp, id: &str, secret: &str, scope: &str) -> serde_json::Value {
    let jwt = app.auth.token(id, secret, scope).await;
    app.verify(&jwt).await.expect("token verifies")
}

async fn a_portal_clients_tokens_name_its_brands_and_no_other_token_does(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (portal, secret) = app.auth.create_portal("brand_b, brand_a,brand_b").await;
    let claims = claims_of(&app, &portal, &secret, PORTAL).await;
    assert_eq!(claims["brands"], serde_json::json!(["brand_b", "brand_a"]));
    let partner = claims_of(&app, &app.client_id, &app.client_secret, INTAKE).await;
    assert!(partner.get("brands").is_none(), "{partner}");
    let shown = app
        .auth
        .client_cmd(ClientCommand::Show {
            client_id: portal.clone(),
        })
        .await
        .unwrap();
    assert_eq!(shown["brands"], serde_json::json!(["brand_b", "brand_a"]));

    // Rebinding takes effect on the next token.
    app.auth.set_brands(&portal, "brand_a").await;
    let claims = claims_of(&app, &portal, &secret, PORTAL).await;
    assert_eq!(claims["brands"], serde_json::json!(["brand_a"]));
}

async fn brands_bind_portal_clients_only_and_must_be_well_formed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let create = |scopes: &str, brands: Option<&str>| {
        app.auth.client_cmd(ClientCommand::Create {
            name: format!("Portal {}", uuid::Uuid::new_v4().simple()),
            scopes: scopes.into(),
            brands: brands.map(str::to_owned),
            auth_method: Default::default(),
            jwks_file: None,
            jwks_uri: None,
            sandbox: false,
        })
    };
    let refusals = [
        ("a portal with no brand", PORTAL, None, "--brands"),
        ("brands on a partner", INTAKE, Some("brand_a"), PORTAL),
        ("an upper-case brand", PORTAL, Some("Brand_A"), "Brand_A"),
        ("an empty brand list", PORTAL, Some(" , "), "--brands"),
    ];
    for (name, scopes, brands, says) in refusals {
        let refused = create(scopes, brands).await.expect_err(name).to_string();
        assert!(refused.contains(says), "{name}: {refused}");
    }
    let set = |client_id: &str, brands: &str| {
        app.auth.client_cmd(ClientCommand::SetBrands {
            client_id: client_id.into(),
            brands: brands.into(),
        })
    };
    let partner = set(&app.client_id, "brand_a").await.expect_err("partner");
    assert!(partner.to_string().contains(PORTAL), "{partner}");
    let nobody = set("no-such-client", "brand_a").await.expect_err("unknown");
    assert!(nobody.to_string().contains("no client with id"), "{nobody}");
    let list = app.auth.client_cmd(ClientCommand::List).await.unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "nothing was created");
}

/// Registers a sandbox client with `scopes` (and `brands`, for a portal); returns what
/// `client create` printed, or why it refused.
async fn create_sandbox(
    app: &TestApp,
    scopes: &str,
    brands: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    app.auth
        .client_cmd(ClientCommand::Create {
            name: format!("Sandbox {}", uuid::Uuid::new_v4().simple()),
            scopes: scopes.into(),
            brands: brands.map(str::to_owned),
            auth_method: Default::default(),
            jwks_file: None,
            jwks_uri: None,
            sandbox: true,
        })
        .await
}

async fn a_sandbox_clients_tokens_say_so_and_no_other_token_does(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let created = create_sandbox(&app, INTAKE, None).await.expect("created");
    assert_eq!(created["sandbox"], true, "{created}");
    let id = created["client_id"].as_str().unwrap().to_owned();
    let secret = created["client_secret"].as_str().unwrap().to_owned();
    let claims = claims_of(&app, &id, &secret, INTAKE).await;
    assert_eq!(claims["sandbox"], true, "{claims}");
    // A real client's token is as before: no sandbox claim at all, not even false.
    let real = claims_of(&app, &app.client_id, &app.client_secret, INTAKE).await;
    assert!(real.get("sandbox").is_none(), "{real}");

    let show = |client_id: String| app.auth.client_cmd(ClientCommand::Show { client_id });
    assert_eq!(show(id.clone()).await.unwrap()["sandbox"], true);
    assert_eq!(show(app.client_id.clone()).await.unwrap()["sandbox"], false);
    let list = app.auth.client_cmd(ClientCommand::List).await.unwrap();
    let listed: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["client_id"].as_str().unwrap(), c["sandbox"].clone()))
        .collect();
    assert_eq!(
        listed,
        [
            (app.client_id.as_str(), serde_json::json!(false)),
            (id.as_str(), serde_json::json!(true))
        ]
    );

    let entries = app
        .auth
        .audit_cmd(AuditCommand::List { since: None })
        .await
        .unwrap();
    let created_details: Vec<_> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "client.create")
        .map(|e| (e["subject"].as_str().unwrap(), e["detail"].get("sandbox")))
        .collect();
    assert_eq!(
        created_details,
        [
            (app.client_id.as_str(), None),
            (id.as_str(), Some(&serde_json::json!(true)))
        ]
    );
}

async fn a_sandbox_client_is_a_partner_never_a_portal_or_a_resource_server(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let revocations = shared::claims::scopes::REVOCATIONS_READ;
    let refusals = [
        ("a portal", PORTAL, Some("brand_a"), PORTAL),
        (
            "a portal among partner scopes",
            &*format!("{INTAKE} {PORTAL}"),
            Some("brand_a"),
            PORTAL,
        ),
        ("a resource server", revocations, None, revocations),
    ];
    for (name, scopes, brands, says) in refusals {
        let refused = create_sandbox(&app, scopes, brands)
            .await
            .expect_err(name)
            .to_string();
        assert!(
            refused.contains("sandbox") && refused.contains(says),
            "{name}: {refused}"
        );
    }
    let list = app.auth.client_cmd(ClientCommand::List).await.unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "nothing was created");
}

on_both_backends!(
    a_sandbox_clients_tokens_say_so_and_no_other_token_does,
    a_sandbox_client_is_a_partner_never_a_portal_or_a_resource_server,
    a_portal_clients_tokens_name_its_brands_and_no_other_token_does,
    brands_bind_portal_clients_only_and_must_be_well_formed,
    a_client_made_before_serving_gets_a_token_from_the_first_request,
    after_a_secret_rotation_both_secrets_work_until_the_grace_ends,
    a_disabled_client_gets_no_token_within_seconds,
    client_list_never_shows_a_secret,
);
