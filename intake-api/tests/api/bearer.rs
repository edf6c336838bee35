//! Bearer-token verification: every way a token can be missing, malformed, forged or out of date
//! gets 401 with the right challenge; a token without the intake scope gets 403. Forged tokens
//! are signed with the auth-server's real key (read from its database) unless the attack is a
//! foreign key, and controls signed the same way prove the forgeries would otherwise pass.

use aws_lc_rs::hmac;
use serde_json::{Value, json};

use crate::helpers::{
    ATTACH, Backend, ENQUIRY, KeyServer, KeySource, REFERRAL, Signer, TestApp, b64, compact,
    fresh_email, message, purchase_enquiry, remortgage_enquiry, with,
};
use test_support::document::Served;
use test_support::on_both_backends;

/// What a request with a given `Authorization` header must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The request goes through.
    Accepted,
    /// 401 with `WWW-Authenticate: Bearer`: no bearer token was sent.
    NoToken,
    /// 401 with `WWW-Authenticate: Bearer error="invalid_token", error_description="..."`.
    InvalidToken,
    /// 403: the token lacks the intake scope.
    Forbidden,
}

/// (case, Authorization header, expectation)
type Case = (&'static str, Option<String>, Expect);

async fn every_bearer_failure_gets_its_exact_status_body_and_challenge(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let attach_email = fresh_email();
    app.submit(&remortgage_enquiry("brand_a", &attach_email))
        .await;
    let real = app.real_signer().await;
    let foreign = Signer::foreign();
    let mut impostor = Signer::foreign();
    impostor.kid = real.kid.clone();
    let attacker = KeyServer::start(KeySource::Fixed(json!({"keys": [foreign.jwk()]}))).await;
    let now = chrono::Utc::now().timestamp();
    let claims = app.claims();
    let bearer = |jwt: String| Some(format!("Bearer {jwt}"));
    let signed = |patch: Value| bearer(real.sign(&real.header(), &with(claims.clone(), patch)));
    let headed = |patch: Value| bearer(real.sign(&with(real.header(), patch), &claims));
    let referral_only = app
        .auth
        .token(&app.client_id, &app.client_secret, REFERRAL)
        .await;
    let hs256 = {
        let header = json!({"alg": "HS256", "typ": "at+jwt", "kid": real.kid});
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let key = hmac::Key::new(hmac::HMAC_SHA256, &real.public_key_der());
        format!(
            "{input}.{}",
            b64(hmac::sign(&key, input.as_bytes()).as_ref())
        )
    };
    let altered = {
        let token = real.sign(
            &real.header(),
            &with(claims.clone(), json!({"scope": REFERRAL})),
        );
        let signature = token.rsplit('.').next().expect("signature").to_owned();
        let header = real.header();
        format!(
            "{}.{}.{signature}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        )
    };
    let mut without_typ = real.header();
    without_typ.as_object_mut().expect("header").remove("typ");
    let mut without_kid = real.header();
    without_kid.as_object_mut().expect("header").remove("kid");
    let mut without_exp = claims.clone();
    without_exp.as_object_mut().expect("claims").remove("exp");
    let jku = json!({"jku": attacker.url});
    let x5u = json!({"x5u": attacker.url});

    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // Controls: the real token, and forgeries that only differ from valid tokens where
        // the other cases break them.
        ("the_issued_token_is_accepted", bearer(app.token.clone()), Expect::Accepted),
        ("a_token_signed_with_the_real_key_is_accepted", signed(json!({})), Expect::Accepted),
        ("the_scheme_is_case_insensitive", Some(format!("bearer {}", app.token)), Expect::Accepted),
        ("typ_application_at_jwt_is_accepted", headed(json!({"typ": "application/at+jwt"})), Expect::Accepted),
        ("expiry_within_the_30_s_leeway_is_accepted", signed(json!({"iat": now - 900, "nbf": now - 900, "exp": now - 10})), Expect::Accepted),
        ("nbf_within_the_30_s_leeway_is_accepted", signed(json!({"nbf": now + 10})), Expect::Accepted),
        // No bearer token at all.
        ("no_authorization_header", None, Expect::NoToken),
        ("a_basic_scheme", Some("Basic dXNlcjpwYXNz".into()), Expect::NoToken),
        ("bearer_without_a_token", Some("Bearer".into()), Expect::NoToken),
        // Malformed.
        ("a_token_that_is_no_jwt", Some("Bearer not-a-jwt".into()), Expect::InvalidToken),
        ("a_token_whose_header_is_not_base64url_json", Some("Bearer a.b.c".into()), Expect::InvalidToken),
        ("a_token_with_four_parts", bearer(format!("{}.x", app.token)), Expect::InvalidToken),
        ("a_token_of_100_kb", signed(json!({"padding": "a".repeat(100_000)})), Expect::InvalidToken),
        // Out of date, or not for us.
        ("an_expired_token", signed(json!({"iat": now - 1000, "nbf": now - 1000, "exp": now - 60})), Expect::InvalidToken),
        ("a_token_not_yet_valid", signed(json!({"nbf": now + 120})), Expect::InvalidToken),
        ("a_token_without_exp", bearer(real.sign(&real.header(), &without_exp)), Expect::InvalidToken),
        ("a_token_from_another_issuer", signed(json!({"iss": "https://evil.example"})), Expect::InvalidToken),
        ("a_token_for_another_audience", signed(json!({"aud": "someone-else"})), Expect::InvalidToken),
        // Headers the verifier must not obey.
        ("alg_none", bearer(compact(&json!({"alg": "none", "typ": "at+jwt", "kid": real.kid}), &claims, b"")), Expect::InvalidToken),
        ("hs256_keyed_with_the_rsa_public_key", bearer(hs256), Expect::InvalidToken),
        ("a_token_without_typ", bearer(real.sign(&without_typ, &claims)), Expect::InvalidToken),
        ("typ_jwt", headed(json!({"typ": "JWT"})), Expect::InvalidToken),
        ("a_crit_header", headed(json!({"crit": ["exp"]})), Expect::InvalidToken),
        ("a_token_without_kid", bearer(real.sign(&without_kid, &claims)), Expect::InvalidToken),
        // Wrong keys.
        ("a_foreign_key_under_the_real_kid", bearer(impostor.sign(&impostor.header(), &claims)), Expect::InvalidToken),
        ("an_unknown_kid", bearer(foreign.sign(&foreign.header(), &claims)), Expect::InvalidToken),
        ("claims_altered_after_signing", bearer(altered), Expect::InvalidToken),
        ("jku_pointing_at_a_foreign_key_server", bearer(foreign.sign(&with(foreign.header(), jku.clone()), &claims)), Expect::InvalidToken),
        ("jku_with_the_real_kid_and_a_foreign_key", bearer(impostor.sign(&with(impostor.header(), jku), &claims)), Expect::InvalidToken),
        ("x5u_pointing_at_a_foreign_key_server", bearer(foreign.sign(&with(foreign.header(), x5u), &claims)), Expect::InvalidToken),
        ("an_embedded_jwk_of_a_foreign_key", bearer(foreign.sign(&with(foreign.header(), json!({"jwk": foreign.jwk()})), &claims)), Expect::InvalidToken),
        // Valid, but without the intake scope.
        ("a_token_with_only_the_referral_scope", bearer(referral_only), Expect::Forbidden),
        ("a_forged_token_with_only_the_referral_scope", signed(json!({"scope": REFERRAL})), Expect::Forbidden),
    ];

    let mut failures = Vec::new();
    for (name, authorization, expect) in &cases {
        let enquiry = purchase_enquiry("brand_a", &fresh_email());
        let attach = json!({"email": attach_email, "product_uuid": crate::helpers::PRODUCT});
        for (path, body, accepted) in [(ENQUIRY, &enquiry, 201), (ATTACH, &attach, 200)] {
            let reply = app.post(path, authorization.as_deref(), body).await;
            let unauthenticated = message("Unauthenticated.");
            let (status, challenge) = match expect {
                Expect::Accepted => (accepted, None),
                Expect::NoToken => (401, Some("Bearer")),
                Expect::InvalidToken => (401, Some(r#"Bearer error="invalid_token""#)),
                Expect::Forbidden => (
                    403,
                    Some(
                        r#"Bearer error="insufficient_scope", scope="enquiry:case:intake:create""#,
                    ),
                ),
            };
            let body_ok = match expect {
                Expect::Accepted => true,
                Expect::NoToken | Expect::InvalidToken => reply.body == unauthenticated,
                Expect::Forbidden => reply.body == message("Invalid scope(s) provided."),
            };
            let challenge_ok = match expect {
                Expect::Accepted => true,
                // Each refusal says why in its own words (`error_description`).
                Expect::InvalidToken => reply.challenge.as_deref().is_some_and(|c| {
                    c.starts_with(r#"Bearer error="invalid_token", error_description=""#)
                }),
                _ => reply.challenge.as_deref() == challenge,
            };
            if reply.status != status || !body_ok || !challenge_ok {
                failures.push(format!(
                    "{name} on {path}: got {} {} (WWW-Authenticate: {:?})",
                    reply.status, reply.body, reply.challenge
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len() * 2,
        failures.join("\n")
    );
    assert_eq!(
        attacker.hits(),
        0,
        "the verifier fetched a key from a token header"
    );
}

on_both_backends!(every_bearer_failure_gets_its_exact_status_body_and_challenge);

/// Every operation of the served document names, in its security requirement, the one
/// scope its own check asks for: a token holding none of the partners' scopes is refused
/// with 403, whose challenge names the scope wanted, and the document names that scope.
#[tokio::test]
async fn every_operation_names_the_scope_it_enforces_in_the_document() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (id, secret) = app.auth.create_client("revocations:read").await;
    let unscoped = format!(
        "Bearer {}",
        app.auth.token(&id, &secret, "revocations:read").await
    );
    let served = Served::fetch(&app.http, &app.intake.base_url()).await;
    for operation in &served.operations {
        let refused = app
            .http
            .request(operation.method.clone(), app.url(&operation.path))
            .header("authorization", &unscoped)
            .json(&json!({}))
            .send()
            .await
            .expect("answered");
        served.assert_names_enforced_scope(operation, &refused, "partnerOAuth");
    }
    assert!(
        served.operations.len() > 10,
        "only {} operations",
        served.operations.len()
    );
}
