//! DPoP-bound tokens at the intake-api: good only under the `DPoP` scheme, beside a fresh
//! proof for the request made with the key the token is bound to, each proof once, on any
//! replica sharing the Redis. The bound tokens are signed with the auth-server's real key
//! (read from its database), and the proofs are made by the partner client's `DpopKey`.

use partner_client::DpopKey;
use serde_json::{Value, json};

use crate::helpers::{
    ATTACH, Backend, ENQUIRY, Reply, TestApp, fresh_email, metric, purchase_enquiry,
};
use test_support::on_both_backends;

/// A token of the app's partner bound to `key`, signed by the auth-server's key.
async fn bound_token(app: &TestApp, key: &DpopKey) -> String {
    let signer = app.real_signer().await;
    let mut claims = app.claims();
    claims["cnf"] = json!({"jkt": key.thumbprint()});
    signer.sign(&signer.header(), &claims)
}

/// POSTs `body` to `path` with `authorization` and each of `proofs` as a `DPoP` header.
async fn post(
    app: &TestApp,
    path: &str,
    authorization: &str,
    proofs: &[&str],
    body: &Value,
) -> Reply {
    let mut request = app
        .http
        .post(app.url(path))
        .header("content-type", "application/json")
        .header("authorization", authorization)
        .body(body.to_string());
    for proof in proofs {
        request = request.header("dpop", *proof);
    }
    Reply::read(request.send().await.expect("request sent")).await
}

/// Asserts a 401 whose `DPoP` challenge carries `error` and the accepted algorithms.
fn refused(reply: &Reply, error: &str, case: &str) {
    assert_eq!(reply.status, 401, "{case}: {:?}", reply.body);
    assert_eq!(reply.body, json!({"message": "Unauthenticated."}), "{case}");
    let challenge = reply.challenge.as_deref().unwrap_or_default();
    assert!(
        challenge.starts_with(&format!(r#"DPoP error="{error}""#)),
        "{case}: {challenge}"
    );
    assert!(
        challenge.contains(r#"algs="ES256 PS256 RS256 EdDSA""#),
        "{case}: {challenge}"
    );
}

async fn a_bound_token_works_only_with_a_fresh_proof_by_its_key(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    let dpop = format!("DPoP {token}");
    let url = app.url(ENQUIRY);
    let body = purchase_enquiry("brand_a", &fresh_email());

    let proof = key.proof("POST", &url, Some(&token)).unwrap();
    let accepted = post(&app, ENQUIRY, &dpop, &[&proof], &body).await;
    assert_eq!(accepted.status, 201, "{:?}", accepted.body);
    // The same proof again: a replay.
    refused(
        &post(&app, ENQUIRY, &dpop, &[&proof], &body).await,
        "invalid_dpop_proof",
        "a replayed proof",
    );
    // A new proof for the next request goes through.
    let next = key.proof("POST", &url, Some(&token)).unwrap();
    assert_eq!(
        post(&app, ENQUIRY, &dpop, &[&next], &body).await.status,
        200
    );

    let thief = DpopKey::generate().unwrap();
    let fresh = || key.proof("POST", &url, Some(&token)).unwrap();
    let other_token = app.token.clone();
    let cases: Vec<(&str, String, Vec<String>, &str)> = vec![
        (
            "the bound token as Bearer",
            format!("Bearer {token}"),
            vec![],
            "invalid_token",
        ),
        (
            "the bound token as Bearer, with a proof",
            format!("Bearer {token}"),
            vec![fresh()],
            "invalid_token",
        ),
        (
            "a proof by another key",
            dpop.clone(),
            vec![thief.proof("POST", &url, Some(&token)).unwrap()],
            "invalid_token",
        ),
        ("no proof", dpop.clone(), vec![], "invalid_dpop_proof"),
        (
            "two proofs",
            dpop.clone(),
            vec![fresh(), fresh()],
            "invalid_dpop_proof",
        ),
        (
            "a proof for another URL",
            dpop.clone(),
            vec![key.proof("POST", &app.url(ATTACH), Some(&token)).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "a proof for another method",
            dpop.clone(),
            vec![key.proof("GET", &url, Some(&token)).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "a proof without the token's hash",
            dpop.clone(),
            vec![key.proof("POST", &url, None).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "a proof for another token",
            dpop.clone(),
            vec![key.proof("POST", &url, Some(&other_token)).unwrap()],
            "invalid_dpop_proof",
        ),
        (
            "not a proof",
            dpop.clone(),
            vec!["a.b.c".into()],
            "invalid_dpop_proof",
        ),
        (
            "a token that is not bound, under DPoP",
            format!("DPoP {other_token}"),
            vec![key.proof("POST", &url, Some(&other_token)).unwrap()],
            "invalid_token",
        ),
        (
            "DPoP and no token",
            "DPoP".into(),
            vec![fresh()],
            "invalid_token",
        ),
    ];
    for (case, authorization, proofs, error) in cases {
        let proofs: Vec<&str> = proofs.iter().map(String::as_str).collect();
        refused(
            &post(&app, ENQUIRY, &authorization, &proofs, &body).await,
            error,
            case,
        );
    }
    // Bearer tokens are as they were.
    assert_eq!(app.enquiry(&body).await.status, 200);
    let base = app.intake.base_url();
    for reason in [
        "proof_replayed",
        "bound_token_as_bearer",
        "proof_key_mismatch",
        "proof_htu",
    ] {
        let counted = metric(&app.http, &base, "intake_auth_failures_total", reason).await;
        assert!(counted >= 1.0, "{reason}: {counted}");
    }
}

/// A proof used at one replica is refused at another sharing the Redis.
async fn a_proof_is_used_once_across_replicas(backend: Backend) {
    let redis = |c: &mut intake_api::config::Config| {
        c.redis_url = Some(
            std::env::var("TEST_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
                .parse()
                .unwrap(),
        )
    };
    let app = TestApp::spawn_with(backend, redis).await;
    let replica = app.second_intake(redis).await;
    let key = DpopKey::generate().unwrap();
    let token = bound_token(&app, &key).await;
    let body = purchase_enquiry("brand_a", &fresh_email());
    // Each replica is called at its own address, which the proof must name.
    let first_url = app.url(ENQUIRY);
    let proof = key.proof("POST", &first_url, Some(&token)).unwrap();
    let dpop = format!("DPoP {token}");
    assert_eq!(
        post(&app, ENQUIRY, &dpop, &[&proof], &body).await.status,
        201
    );
    let host = first_url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    // Sent to the second replica as if through a proxy that keeps the Host it was called
    // with, so that the proof's URL matches there too.
    let at_replica = |proof: String| {
        app.http
            .post(format!("{}{ENQUIRY}", replica.base_url()))
            .header("content-type", "application/json")
            .header("authorization", &dpop)
            .header("dpop", proof)
            .header("host", &host)
            .body(body.to_string())
            .send()
    };
    let fresh = key.proof("POST", &first_url, Some(&token)).unwrap();
    let control = Reply::read(at_replica(fresh).await.expect("request sent")).await;
    assert_eq!(control.status, 200, "{:?}", control.body);
    let replayed = Reply::read(at_replica(proof).await.expect("request sent")).await;
    refused(
        &replayed,
        "invalid_dpop_proof",
        "replayed at a second replica",
    );
}

on_both_backends!(
    a_bound_token_works_only_with_a_fresh_proof_by_its_key,
    a_proof_is_used_once_across_replicas,
);
