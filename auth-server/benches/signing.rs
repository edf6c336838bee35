//! What signing an access token costs the auth-server's way (the key parsed and its JWT
//! header encoded once, when the key is loaded) against `jsonwebtoken::encode`, which
//! parses and checks the private key and encodes the header again for every token, and
//! against the bare RSA signature both end in (run by `bench/run.sh`).

use std::hint::black_box;

use auth_server::keys::{LoadedKey, generate_key};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use chrono::Utc;
use criterion::{Criterion, criterion_group, criterion_main};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use shared::claims::{ACCESS_TOKEN_TYP, AccessTokenClaims, TokenAlgorithm};

/// The `RSAPrivateKey` (PKCS#1) inside a PKCS#8 `PrivateKeyInfo`, which is what
/// `EncodingKey::from_rsa_der` takes: the last element of the outer sequence, an OCTET
/// STRING with a two-byte length for a 2048-bit key.
fn pkcs1_of(pkcs8: &[u8]) -> Vec<u8> {
    let at = (0..pkcs8.len().saturating_sub(4))
        .find(|&at| {
            let len = usize::from(pkcs8[at + 2]) << 8 | usize::from(pkcs8[at + 3]);
            pkcs8[at..at + 2] == [0x04, 0x82] && at + 4 + len == pkcs8.len()
        })
        .expect("a PKCS#8 RSA-2048 key ends with its PKCS#1 key");
    pkcs8[at + 4..].to_vec()
}

fn signing(c: &mut Criterion) {
    let generated = generate_key(TokenAlgorithm::Rs256).expect("an RSA key");
    let pkcs8 = generated.pkcs8.expose();
    let now = Utc::now();
    let loaded = LoadedKey::new(
        generated.kid.clone(),
        TokenAlgorithm::Rs256,
        now,
        now,
        pkcs8,
    )
    .expect("the key loads");
    let encoding = EncodingKey::from_rsa_der(&pkcs1_of(pkcs8));
    let mut header = Header::new(Algorithm::RS256);
    header.typ = Some(ACCESS_TOKEN_TYP.to_owned());
    header.kid = Some(generated.kid.clone());
    let pair = RsaKeyPair::from_pkcs8(pkcs8).expect("the key parses");
    let claims = AccessTokenClaims {
        iss: "https://auth.partner-intake.example".into(),
        sub: "c0ffee00-0000-4000-8000-000000000001".into(),
        client_id: "c0ffee00-0000-4000-8000-000000000001".into(),
        aud: "partner-intake".into(),
        scope: "enquiry:case:intake:create enquiry:referral:create".into(),
        iat: now.timestamp(),
        nbf: now.timestamp(),
        exp: now.timestamp() + 3600,
        jti: "0192f3c4-d5e6-7a8b-9c0d-1e2f3a4b5c6d".into(),
        brands: None,
        cnf: None,
        sandbox: false,
    };

    // Both make the same token: the header and claims are equal, and both signatures verify.
    let ours = loaded.sign_jwt(&claims).expect("signed");
    let theirs = jsonwebtoken::encode(&header, &claims, &encoding).expect("signed");
    let mut validation = shared::claims::TokenValidation::new(&claims.iss, &claims.aud)
        .for_algorithm(TokenAlgorithm::Rs256)
        .clone();
    validation.set_required_spec_claims(&["exp"]);
    for token in [&ours, &theirs] {
        let decoded =
            jsonwebtoken::decode::<AccessTokenClaims>(token, &loaded.verifier, &validation)
                .expect("the token verifies");
        assert_eq!(decoded.claims, claims);
        assert_eq!(decoded.header.kid, header.kid);
        assert_eq!(decoded.header.typ, header.typ);
    }
    let message = ours.rsplit_once('.').expect("three parts").0.as_bytes();
    let rng = SystemRandom::new();
    let mut signature = vec![0u8; pair.public_modulus_len()];

    c.bench_function("sign_token_prepared_key", |b| {
        b.iter(|| loaded.sign_jwt(black_box(&claims)).expect("signed"))
    });
    c.bench_function("sign_token_jsonwebtoken_encode", |b| {
        b.iter(|| jsonwebtoken::encode(&header, black_box(&claims), &encoding).expect("signed"))
    });
    c.bench_function("sign_token_rsa_signature_alone", |b| {
        b.iter(|| {
            pair.sign(&RSA_PKCS1_SHA256, &rng, black_box(message), &mut signature)
                .expect("signed")
        })
    });
}

criterion_group!(benches, signing);
criterion_main!(benches);
