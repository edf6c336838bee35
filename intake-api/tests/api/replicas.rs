//! The production layout in miniature: two auth-server and two intake-api replicas on one
//! PostgreSQL and one Redis. They share one rate limit, agree on one signing key after a
//! rotation, and activate each case exactly once.

use std::time::Duration;

use crate::helpers::{
    AuthServer, Backend, INTAKE, IntakeServer, TestDb, case_show, event_kinds, eventually,
    fresh_email, kid_of, purchase_enquiry,
};

fn redis() -> service_kit::Secret<String> {
    std::env::var("TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_of_each_service_share_limits_keys_and_activation() {
    let auth_db = TestDb::auth(Backend::Postgres).await;
    let intake_db = TestDb::intake(Backend::Postgres).await;
    let auth_a = AuthServer::start(&auth_db.url, |c| c.redis_url = Some(redis()))
        .await
        .unwrap();
    let auth_b = AuthServer::start(&auth_db.url, |c| c.redis_url = Some(redis()))
        .await
        .unwrap();
    let configure = |c: &mut intake_api::config::Config| {
        c.redis_url = Some(redis());
        c.rate_limit = 8;
        c.activation_delay_secs = 1;
        c.activation_poll_ms = 50;
    };
    let intake_a = IntakeServer::start(&intake_db.url, &auth_a, configure)
        .await
        .unwrap();
    let intake_b = IntakeServer::start(&intake_db.url, &auth_b, configure)
        .await
        .unwrap();
    assert!(intake_a.wait_ready().await && intake_b.wait_ready().await);
    let (id, secret) = auth_a.create_client(INTAKE).await;

    // One signing key after a rotation, on both auth replicas, accepted by both intakes.
    let rotated = auth_a.rotate_key(None, Some(0)).await;
    let kid = rotated["kid"].as_str().unwrap().to_owned();
    let token_a = auth_a.token(&id, &secret, INTAKE).await;
    let token_b = auth_b.token(&id, &secret, INTAKE).await;
    assert_eq!(kid_of(&token_a), kid);
    assert_eq!(kid_of(&token_b), kid);

    // Six cases through alternating replicas, with alternating tokens: all accepted.
    let http = reqwest::Client::new();
    let mut references = Vec::new();
    for i in 0..6 {
        let (intake, token) = if i % 2 == 0 {
            (&intake_a, &token_b)
        } else {
            (&intake_b, &token_a)
        };
        let resp = http
            .post(format!("{}/partners/external/intake", intake.base_url()))
            .bearer_auth(token)
            .json(&purchase_enquiry("brand_a", &fresh_email()))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
        let body: serde_json::Value = resp.json().await.unwrap();
        references.push(body["reference"].as_str().unwrap().to_owned());
    }
    // The shared limit (8 per window) is spent across both replicas: 2 more, then 429.
    let mut statuses = Vec::new();
    for i in 0..3 {
        let intake = if i % 2 == 0 { &intake_b } else { &intake_a };
        let resp = http
            .post(format!("{}/partners/external/intake", intake.base_url()))
            .bearer_auth(&token_a)
            .json(&purchase_enquiry("brand_b", &fresh_email()))
            .send()
            .await
            .unwrap();
        statuses.push(resp.status().as_u16());
    }
    assert_eq!(statuses, [201, 201, 429]);

    // Each case is activated exactly once, with both replicas' workers racing.
    for reference in &references {
        eventually(Duration::from_secs(10), || async {
            let case = case_show(&intake_a.config, reference).await;
            (case["status"] == "active").then_some(())
        })
        .await
        .expect("case activated");
        // A second activation must not follow: both workers get a few more passes (every
        // 50 ms) to make one.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let kinds = event_kinds(&case_show(&intake_a.config, reference).await);
        assert_eq!(
            kinds.iter().filter(|k| *k == "activated").count(),
            1,
            "{reference}: {kinds:?}"
        );
    }
}
