//! `Idempotency-Key` on both POST operations: a retry with the same key and body gets the
//! first answer again and changes nothing; the same key with another body, or while the
//! first attempt is in flight, is refused; failures are not kept.

use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use intake_api::entity::idempotency_key;
use serde_json::{Value, json};

use crate::erasure::table_values;
use crate::helpers::{
    ATTACH, Backend, CaseRowLock, ENQUIRY, INTAKE, PRODUCT, Reply, TestApp, event_kinds,
    eventually, fresh_email, invalid, message, purchase_enquiry, with,
};
use test_support::{TestDb, on_both_backends};

/// POSTs `body` (as these exact bytes) to the intake-api at `base` with `bearer` and `key`.
async fn send(app: &TestApp, base: &str, path: &str, bearer: &str, key: &str, body: &str) -> Reply {
    let resp = app
        .http
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("authorization", bearer)
        .header("idempotency-key", key)
        .body(body.to_owned())
        .send()
        .await
        .expect("request sent");
    Reply::read(resp).await
}

/// POSTs `body` to this app's intake-api with its partner's token and `key`.
async fn keyed(app: &TestApp, path: &str, key: &str, body: &Value) -> Reply {
    let (base, bearer) = (app.intake.base_url(), app.bearer());
    send(app, &base, path, &bearer, key, &body.to_string()).await
}

fn fresh_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn a_repeated_enquiry_gets_the_first_answer_and_changes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = fresh_key();
    let enquiry = purchase_enquiry("brand_a", &fresh_email());

    let first = keyed(&app, ENQUIRY, &key, &enquiry).await;
    assert_eq!(first.status, 201, "{:?}", first.body);
    assert_eq!(first.replayed, None);
    let reference = first.body["reference"].as_str().unwrap().to_owned();
    // The same JSON, spaced differently, is the same request.
    let (base, bearer) = (app.intake.base_url(), app.bearer());
    let pretty = serde_json::to_string_pretty(&enquiry).unwrap();
    for _ in 0..2 {
        let again = send(&app, &base, ENQUIRY, &bearer, &key, &pretty).await;
        assert_eq!((again.status, &again.body), (201, &first.body));
        assert_eq!(again.replayed.as_deref(), Some("true"));
    }
    let case = app.case_show(&reference).await;
    assert_eq!(case["submissions"], 1);
    assert_eq!(event_kinds(&case), ["created"]);

    // A new key is a new request: the case is updated.
    let update = keyed(&app, ENQUIRY, &fresh_key(), &enquiry).await;
    assert_eq!(update.status, 200, "{:?}", update.body);
    assert_eq!(update.body["reference"], reference.as_str());
    assert_eq!(update.replayed, None);
    // Without a key every request is applied, as before.
    let unkeyed = app.enquiry(&enquiry).await;
    assert_eq!(unkeyed.status, 200);
    assert_eq!(app.case_show(&reference).await["submissions"], 3);
}

async fn a_repeated_attach_gets_the_same_link_and_makes_no_other(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let reference = app.submit(&purchase_enquiry("brand_a", &email)).await;
    let key = fresh_key();
    let body = json!({"email": email, "product_uuid": PRODUCT});

    let first = keyed(&app, ATTACH, &key, &body).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let again = keyed(&app, ATTACH, &key, &body).await;
    assert_eq!((again.status, &again.body), (200, &first.body));
    assert_eq!(again.replayed.as_deref(), Some("true"));
    let case = app.case_show(&reference).await;
    assert_eq!(event_kinds(&case), ["created", "product_attached"]);
    let tokens = app
        .intake_column(
            "SELECT CAST(count(*) AS TEXT) AS n FROM redirect_tokens",
            "n",
        )
        .await;
    assert_eq!(tokens, ["1"]);
    // The replayed link is the one stored: it still redeems.
    let token = reqwest::Url::parse(first.body["redirect"].as_str().unwrap())
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let portal = app.portal_bearer().await;
    assert_eq!(app.redeem(&portal, &token).await.status, 200);
}

/// The body's digest as the previous release stored it, unkeyed: SHA-256 of its JSON, in
/// base64url and in hex.
fn plain_digests(body: &Value) -> [String; 2] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body.to_string().as_bytes());
    let hex = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    [URL_SAFE_NO_PAD.encode(digest.as_ref()), hex]
}

/// The `token` parameter of a redirect link.
fn token_of(link: &str) -> String {
    reqwest::Url::parse(link)
        .expect("a URL")
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .expect("a token")
}

async fn stored_answers_hold_no_link_and_no_plain_digest_of_the_request(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let enquiry = purchase_enquiry("brand_a", &email);
    let submitted = keyed(&app, ENQUIRY, &fresh_key(), &enquiry).await;
    assert_eq!(submitted.status, 201, "{:?}", submitted.body);
    let reference = submitted.body["reference"].as_str().unwrap().to_owned();
    let attach = json!({"email": email, "product_uuid": PRODUCT});
    let key = fresh_key();
    let first = keyed(&app, ATTACH, &key, &attach).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let link = first.body["redirect"].as_str().unwrap().to_owned();

    let stored = table_values::<idempotency_key::Entity>(&app.intake_db.url, backend).await;
    assert!(
        stored.iter().any(|v| v == &key),
        "the key is stored: {stored:?}"
    );
    let mut secrets = vec![link.clone(), token_of(&link), reference];
    secrets.extend(plain_digests(&enquiry));
    secrets.extend(plain_digests(&attach));
    for secret in &secrets {
        let found: Vec<&String> = stored
            .iter()
            .filter(|v| v.contains(secret.as_str()))
            .collect();
        assert!(found.is_empty(), "{secret} is stored: {found:?}");
    }

    // Sealed, the answer still replays as it was given: the same link.
    let again = keyed(&app, ATTACH, &key, &attach).await;
    assert_eq!((again.status, &again.body), (200, &first.body));
    assert_eq!(again.replayed.as_deref(), Some("true"));
}

/// Runs `intake-api serve` on a database of its own with `key` as its key-encryption key;
/// answers its exit code and stderr, or `None` if it was still serving after 20 seconds.
async fn serve_with_key(key: Option<&str>) -> Option<(Option<i32>, String)> {
    let client = [
        ("INTAKE_REVOCATIONS_CLIENT_ID", "kek-check"),
        ("INTAKE_REVOCATIONS_CLIENT_SECRET", "kek-check"),
    ];
    serve_with(key, &client).await
}

/// [`serve_with_key`], with `settings` set too.
async fn serve_with(key: Option<&str>, settings: &[(&str, &str)]) -> Option<(Option<i32>, String)> {
    let db = TestDb::new(Backend::Sqlite, "intake-kek").await;
    let mut serve = Command::new(env!("CARGO_BIN_EXE_intake-api"));
    serve
        .arg("serve")
        .env("INTAKE_DATABASE_URL", &db.url)
        .env("INTAKE_BIND", "127.0.0.1:0")
        .env_remove("INTAKE_ADMIN_BIND")
        .env_remove("INTAKE_KEY_ENCRYPTION_KEY")
        .env_remove("INTAKE_REVOCATIONS_CLIENT_ID")
        .env_remove("INTAKE_REVOCATIONS_CLIENT_SECRET")
        .env_remove("RUST_LOG")
        .envs(settings.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(key) = key {
        serve.env("INTAKE_KEY_ENCRYPTION_KEY", key);
    }
    let mut child = serve.spawn().expect("intake-api runs");
    let exited = eventually(Duration::from_secs(20), || {
        let status = child.try_wait().expect("wait");
        async move { status }
    })
    .await;
    let Some(status) = exited else {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("utf-8 stderr");
    Some((status.code(), stderr))
}

#[tokio::test]
async fn serve_refuses_to_start_without_a_usable_key_encryption_key() {
    let (code, stderr) = serve_with_key(None)
        .await
        .expect("serve started without INTAKE_KEY_ENCRYPTION_KEY");
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("INTAKE_KEY_ENCRYPTION_KEY is not set"),
        "{stderr}"
    );
    let short = base64::engine::general_purpose::STANDARD.encode([9u8; 16]);
    let (code, stderr) = serve_with_key(Some(&short))
        .await
        .expect("serve started with a 16-byte key");
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("INTAKE_KEY_ENCRYPTION_KEY must be the base64 of exactly 32 bytes"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(&short),
        "the key is never printed: {stderr}"
    );
}

#[tokio::test]
async fn serve_refuses_to_start_without_its_own_client_for_the_revocation_list() {
    let key = test_support::TEST_INTAKE_KEY_ENCRYPTION_KEY;
    for settings in [
        &[][..],
        &[("INTAKE_REVOCATIONS_CLIENT_ID", "intake-api")][..],
        &[
            ("INTAKE_REVOCATIONS_CLIENT_ID", "intake-api"),
            ("INTAKE_REVOCATIONS_CLIENT_SECRET", ""),
        ][..],
    ] {
        let (code, stderr) = serve_with(Some(key), settings)
            .await
            .expect("serve started without a revocation client");
        assert_ne!(code, Some(0), "{settings:?}: {stderr}");
        assert!(
            stderr.contains(
                "INTAKE_REVOCATIONS_CLIENT_ID and INTAKE_REVOCATIONS_CLIENT_SECRET (or \
                 INTAKE_REVOCATIONS_CLIENT_KEY_FILE) must be set"
            ),
            "{settings:?}: {stderr}"
        );
    }
}

async fn a_key_reused_with_another_request_or_malformed_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let enquiry = purchase_enquiry("brand_a", &email);
    let key = fresh_key();
    assert_eq!(keyed(&app, ENQUIRY, &key, &enquiry).await.status, 201);

    let reused = message("Idempotency-Key reused with a different request.");
    let changed = with(enquiry.clone(), json!({"first_name": "Someone"}));
    let other_body = keyed(&app, ENQUIRY, &key, &changed).await;
    assert_eq!((other_body.status, other_body.body), (409, reused.clone()));
    let attach = json!({"email": email, "product_uuid": PRODUCT});
    let other_operation = keyed(&app, ATTACH, &key, &attach).await;
    assert_eq!(
        (other_operation.status, other_operation.body),
        (409, reused)
    );

    let bad = message("The Idempotency-Key header must be 1 to 255 characters.");
    for key in [String::new(), "k".repeat(256)] {
        let refused = keyed(&app, ENQUIRY, &key, &enquiry).await;
        assert_eq!((refused.status, &refused.body), (400, &bad), "{key:?}");
    }
    let longest = keyed(&app, ENQUIRY, &"k".repeat(255), &enquiry).await;
    assert_eq!(longest.status, 200, "{:?}", longest.body);

    // An invalid enquiry is refused before its key is looked at, and does not take it.
    let invalid_key = fresh_key();
    let broken = with(enquiry.clone(), json!({"email": "not an address"}));
    let refused = keyed(&app, ENQUIRY, &invalid_key, &broken).await;
    assert_eq!(
        (refused.status, refused.body),
        (
            422,
            invalid(json!({"email": ["The email field must be a valid email address."]}))
        )
    );
    assert_eq!(
        keyed(&app, ENQUIRY, &invalid_key, &enquiry).await.status,
        200
    );
}

async fn a_failed_request_leaves_its_key_free(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let key = fresh_key();
    let attach = json!({"email": email, "product_uuid": PRODUCT});
    let missing = keyed(&app, ATTACH, &key, &attach).await;
    assert_eq!(
        (missing.status, missing.body),
        (404, message("Case not found"))
    );
    app.submit(&purchase_enquiry("brand_a", &email)).await;
    let retried = keyed(&app, ATTACH, &key, &attach).await;
    assert_eq!(retried.status, 200, "{:?}", retried.body);
    assert_eq!(retried.replayed, None);
}

async fn keys_are_per_partner_and_shared_by_replicas(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let replica = app.second_intake(|_| {}).await;
    let key = fresh_key();
    let enquiry = purchase_enquiry("brand_a", &fresh_email());
    let body = enquiry.to_string();
    let bearer = app.bearer();

    let first = send(&app, &app.intake.base_url(), ENQUIRY, &bearer, &key, &body).await;
    assert_eq!(first.status, 201, "{:?}", first.body);
    let elsewhere = send(&app, &replica.base_url(), ENQUIRY, &bearer, &key, &body).await;
    assert_eq!((elsewhere.status, &elsewhere.body), (201, &first.body));
    assert_eq!(elsewhere.replayed.as_deref(), Some("true"));

    // Another partner's same key is its own: its request is applied.
    let (id, secret) = app.auth.create_client(INTAKE).await;
    let other = format!("Bearer {}", app.auth.token(&id, &secret, INTAKE).await);
    let theirs = send(&app, &app.intake.base_url(), ENQUIRY, &other, &key, &body).await;
    assert_eq!(theirs.status, 200, "{:?}", theirs.body);
    assert_eq!(theirs.replayed, None);
}

/// While the first attempt waits on its case, a second with the same key is told to come
/// back; once the first is done, the second gets its answer.
async fn a_repeat_while_the_first_is_in_flight_gets_409(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let enquiry = purchase_enquiry("brand_a", &fresh_email());
    let reference = app.submit(&enquiry).await;
    let key = fresh_key();
    let lock = CaseRowLock::take(&app, &reference).await;

    let (base, bearer, body) = (app.intake.base_url(), app.bearer(), enquiry.to_string());
    let first = send(&app, &base, ENQUIRY, &bearer, &key, &body);
    let meanwhile = async {
        assert_eq!(
            lock.first_waiters().await,
            1,
            "the first attempt waits on the row"
        );
        let second = send(&app, &base, ENQUIRY, &bearer, &key, &body).await;
        assert_eq!(
            (second.status, second.body),
            (
                409,
                message("A request with this Idempotency-Key is still being processed.")
            )
        );
        lock.release().await;
    };
    let (first, ()) = tokio::join!(first, meanwhile);
    assert_eq!(first.status, 200, "{:?}", first.body);
    let third = send(&app, &base, ENQUIRY, &bearer, &key, &body).await;
    assert_eq!((third.status, &third.body), (200, &first.body));
    assert_eq!(third.replayed.as_deref(), Some("true"));
    assert_eq!(app.case_show(&reference).await["submissions"], 2);
}

on_both_backends!(
    a_repeated_enquiry_gets_the_first_answer_and_changes_nothing,
    a_repeated_attach_gets_the_same_link_and_makes_no_other,
    a_key_reused_with_another_request_or_malformed_is_refused,
    a_failed_request_leaves_its_key_free,
    keys_are_per_partner_and_shared_by_replicas,
    stored_answers_hold_no_link_and_no_plain_digest_of_the_request,
);

mod in_flight {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::a_repeat_while_the_first_is_in_flight_gets_409(crate::helpers::Backend::Postgres)
            .await
    }
}
