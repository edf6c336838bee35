//! What checking a DPoP proof costs, by algorithm: makes COUNT proofs by one key (as one
//! partner sends them) and checks each with `shared::dpop::verify`, as both services do.
//! Counted by callgrind within `verify` only (key generation, whose cost varies from run to
//! run, and signing are left out), over COUNT, it is a proof's instructions
//! (bench/RESULTS.md, section 7c):
//!
//! ```sh
//! cargo build --release -p shared --features verify --example proof_cost
//! valgrind --tool=callgrind --toggle-collect='shared::dpop::verify*' \
//!   --callgrind-out-file=/dev/null target/release/examples/proof_cost ES256 1000 2>&1 | grep refs
//! ```
//!
//! ALG is ES256, PS256 or EdDSA; add `sign` to only make the proofs.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RSA_PSS_SHA256,
    RsaKeyPair,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

const URL: &str = "https://intake.example/partners/external/intake";

/// A key that signs proofs, and its public JWK.
enum Signer {
    Es256(EcdsaKeyPair),
    Ps256(RsaKeyPair),
    EdDsa(Ed25519KeyPair),
}

impl Signer {
    fn new(alg: &str) -> Self {
        match alg {
            "ES256" => {
                Self::Es256(EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap())
            }
            "PS256" => Self::Ps256(RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap()),
            "EdDSA" => Self::EdDsa(Ed25519KeyPair::generate().unwrap()),
            other => panic!("ALG is ES256, PS256 or EdDSA, not {other}"),
        }
    }

    fn alg(&self) -> &'static str {
        match self {
            Self::Es256(_) => "ES256",
            Self::Ps256(_) => "PS256",
            Self::EdDsa(_) => "EdDSA",
        }
    }

    fn jwk(&self) -> Value {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        match self {
            Self::Es256(pair) => {
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..])})
            }
            Self::Ps256(pair) => {
                let public = pair.public_key();
                json!({
                    "kty": "RSA",
                    "n": b64(public.modulus().big_endian_without_leading_zero()),
                    "e": b64(public.exponent().big_endian_without_leading_zero()),
                })
            }
            Self::EdDsa(pair) => {
                json!({"kty": "OKP", "crv": "Ed25519", "x": b64(pair.public_key().as_ref())})
            }
        }
    }

    fn sign(&self, input: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match self {
            Self::Es256(pair) => pair.sign(&rng, input).unwrap().as_ref().to_vec(),
            Self::Ps256(pair) => {
                let mut signature = vec![0; pair.public_modulus_len()];
                pair.sign(&RSA_PSS_SHA256, &rng, input, &mut signature)
                    .unwrap();
                signature
            }
            Self::EdDsa(pair) => pair.sign(input).as_ref().to_vec(),
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: proof_cost ALG COUNT [sign]";
    let signer = Signer::new(&args.next().expect(usage));
    let count: usize = args.next().expect(usage).parse().expect(usage);
    let sign_only = args.next().as_deref() == Some("sign");
    let token = "t".repeat(900);
    let now = chrono::Utc::now().timestamp();
    let header = URL_SAFE_NO_PAD
        .encode(json!({"typ": "dpop+jwt", "alg": signer.alg(), "jwk": signer.jwk()}).to_string());
    let ath = shared::dpop::token_hash(&token);
    let proofs: Vec<String> = (0..count)
        .map(|i| {
            let claims = json!({"jti": format!("proof-{i}"), "htm": "POST", "htu": URL, "iat": now, "ath": ath});
            let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
            let signature = URL_SAFE_NO_PAD.encode(signer.sign(input.as_bytes()));
            format!("{input}.{signature}")
        })
        .collect();
    if sign_only {
        println!("{} proofs made", proofs.len());
        return;
    }
    let expected = shared::dpop::Expected {
        method: "POST",
        url: URL,
        access_token: Some(&token),
        now,
        algorithms: &shared::profile::FAPI2_ALGORITHMS,
    };
    let taken = proofs
        .iter()
        .filter(|p| shared::dpop::verify(p, expected).is_ok())
        .count();
    assert_eq!(taken, count, "every proof checks out");
    println!("{taken} proofs checked");
}
