//! The replay store's memory: Redis may forget the ids it was given (a restart without
//! persistence, a flush), and an item made before it began remembering again cannot be
//! shown unused, so it is refused, while new ones are taken.

use serde_json::json;

use crate::helpers::{AuthServer, Backend, INTAKE, ProofKey, TestDb};
use crate::private_key_jwt::{PartnerKey, claims, register, token_with};

/// A Redis database of this test's own (the others use 0), so that forgetting everything in
/// it, as a restart would, touches no other test's ids nor their marker.
fn dedicated_redis() -> String {
    let base = std::env::var("TEST_REDIS_URL").unwrap_or("redis://127.0.0.1:6379".into());
    format!("{}/13", base.trim_end_matches('/'))
}

/// A connection to the test's Redis database.
async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("a Redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("Redis reachable")
}

/// Forgets everything the store kept, as a Redis restarted without persistence does.
async fn forget_everything(url: &str) {
    let _: () = redis::cmd("FLUSHDB")
        .query_async(&mut connect(url).await)
        .await
        .unwrap();
}

/// A store that has remembered for an hour, as one long in service has.
async fn remembering_for_an_hour(url: &str) {
    forget_everything(url).await;
    let since = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let _: () = redis::cmd("SET")
        .arg(service_kit::replay::MEMORY_MARKER)
        .arg(since)
        .query_async(&mut connect(url).await)
        .await
        .unwrap();
}

/// A client assertion and a DPoP proof spent before Redis forgot them are refused after
/// (their client is told to make new ones), where they used to be taken a second time; new
/// ones are taken at once, and are single-use again.
async fn items_spent_before_redis_forgot_are_refused_and_new_ones_taken(backend: Backend) {
    let redis = dedicated_redis();
    remembering_for_an_hour(&redis).await;
    let db = TestDb::auth(backend).await;
    let auth = AuthServer::start(&db.url, |c| {
        c.redis_url = Some(redis.parse().unwrap());
        c.token_rate_limit = 1_000_000;
        c.failed_auth_limit = 1_000_000;
    })
    .await
    .unwrap();
    let key = PartnerKey::p256("k1");
    let id = register(&auth, &[&key]).await;
    let (secret_id, secret) = auth.create_client(INTAKE).await;
    // Made two seconds ago: clearly before the moment Redis forgets, to the second items
    // are dated by.
    let mut made = claims(&auth, &id);
    made["iat"] = json!(chrono::Utc::now().timestamp() - 2);
    let assertion = key.sign(&made);
    assert_eq!(token_with(&auth, &assertion).await.0, 200);
    let proofs = ProofKey::generate();
    let endpoint = format!("{}/oauth/token", auth.config.issuer());
    let proof = proofs.proof("POST", &endpoint, None, -2);
    let with_proof = |proof: String| {
        let auth = &auth;
        let (secret_id, secret) = (&secret_id, &secret);
        async move {
            let resp = reqwest::Client::new()
                .post(format!("{}/oauth/token", auth.base_url()))
                .header("dpop", proof)
                .json(
                    &json!({"grant_type": "client_credentials", "client_id": secret_id,
                    "client_secret": secret, "scope": INTAKE}),
                )
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<serde_json::Value>().await.unwrap())
        }
    };
    assert_eq!(with_proof(proof.clone()).await.0, 200);
    assert_eq!(with_proof(proof.clone()).await.0, 400, "spent");

    forget_everything(&redis).await;

    let (status, body) = token_with(&auth, &assertion).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "invalid_client");
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| d.contains("make a new one")),
        "{body}"
    );
    let (status, body) = with_proof(proof).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "invalid_dpop_proof");
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| d.contains("make a new one")),
        "{body}"
    );

    // New ones are taken at once, and once.
    let fresh = key.sign(&claims(&auth, &id));
    assert_eq!(token_with(&auth, &fresh).await.0, 200);
    assert_eq!(token_with(&auth, &fresh).await.0, 401);
    let fresh = proofs.proof("POST", &endpoint, None, 0);
    let (status, body) = with_proof(fresh.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(with_proof(fresh).await.0, 400);
}

test_support::on_sqlite!(items_spent_before_redis_forgot_are_refused_and_new_ones_taken);
