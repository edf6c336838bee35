//! Per-partner rate limits on the intake endpoints.

use serde_json::json;

use crate::helpers::{AuthServer, Backend, INTAKE, IntakeServer, PRODUCT, TestDb};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partner_over_its_limit_gets_429_with_retry_after_and_others_are_unaffected() {
    let auth_db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&auth_db.url, |_| {}).await.unwrap();
    let intake_db = TestDb::intake(Backend::Sqlite).await;
    let intake = IntakeServer::start(&intake_db.url, &auth, |c| c.rate_limit = 2)
        .await
        .unwrap();
    assert!(intake.wait_ready().await);
    let (a_id, a_secret) = auth.create_client(INTAKE).await;
    let (b_id, b_secret) = auth.create_client(INTAKE).await;
    let a = auth.token(&a_id, &a_secret, INTAKE).await;
    let b = auth.token(&b_id, &b_secret, INTAKE).await;
    let http = reqwest::Client::new();
    let attach = |token: String| {
        let http = http.clone();
        let url = format!("{}/partners/external/intake/attach", intake.base_url());
        async move {
            http.post(url)
                .bearer_auth(token)
                .json(&json!({"email": "nobody@example.com", "product_uuid": PRODUCT}))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(attach(a.clone()).await.status(), 404);
    assert_eq!(attach(a.clone()).await.status(), 404);
    let refused = attach(a.clone()).await;
    assert_eq!(refused.status(), 429);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry));
    assert_eq!(
        refused.json::<serde_json::Value>().await.unwrap(),
        json!({"message": "Too Many Attempts."})
    );
    assert_eq!(
        attach(b).await.status(),
        404,
        "another partner has its own limit"
    );
}
