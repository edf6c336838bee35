//! The committed OpenAPI documents are exactly what the services serve.
//!
//! `UPDATE_OPENAPI=1 cargo test --test openapi` rewrites them from the running services.

use std::path::PathBuf;

use serde_json::Value;
use test_support::{AuthServer, Backend, IntakeServer, TestDb};

fn committed_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("openapi")
        .join(name)
}

async fn served(base: &str) -> Value {
    reqwest::get(format!("{base}/openapi.json"))
        .await
        .expect("openapi.json")
        .json()
        .await
        .expect("openapi.json is JSON")
}

fn check(name: &str, served: &Value) {
    let path = committed_path(name);
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, serde_yaml::to_string(served).expect("YAML")).expect("write");
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{} missing ({e}); run UPDATE_OPENAPI=1 cargo test --test openapi",
            path.display()
        )
    });
    let committed: Value = serde_yaml::from_str(&text).expect("committed YAML parses");
    assert!(
        committed == *served,
        "{} differs from what the service serves; run UPDATE_OPENAPI=1 cargo test --test openapi and review the diff",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_openapi_documents_match_the_served_ones() {
    let auth_db = TestDb::auth(Backend::Sqlite).await;
    let intake_db = TestDb::intake(Backend::Sqlite).await;
    let auth = AuthServer::start(&auth_db.url, |_| {})
        .await
        .expect("auth-server");
    let intake = IntakeServer::start(&intake_db.url, &auth, |_| {})
        .await
        .expect("intake-api");
    let auth_doc = served(&auth.base_url()).await;
    let intake_doc = served(&intake.base_url()).await;
    for (doc, path, op) in [
        (&auth_doc, "/oauth/token", "post"),
        (&auth_doc, "/.well-known/jwks.json", "get"),
        (&intake_doc, "/partners/external/intake", "post"),
        (&intake_doc, "/partners/external/intake/attach", "post"),
    ] {
        assert!(
            doc["paths"][path][op].is_object(),
            "{path} missing from the document"
        );
    }
    check("auth-server.yaml", &auth_doc);
    check("intake-api.yaml", &intake_doc);
}
