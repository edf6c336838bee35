//! Bearer verification cost: `Verifier::authenticate` on a valid token with a warm JWKS
//! cache, against a real auth-server started in-process (run by `bench/run.sh`): a token
//! seen for the first time (the RSA verification) and one seen before (remembered).

use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use intake_api::auth::Verifier;
use intake_api::jwks::JwksCache;
use shared::claims::scopes;
use test_support::{AuthServer, Backend, TestDb};

/// Everything the benchmark needs, kept alive for its whole run.
struct Fixture {
    _db: TestDb,
    _auth: AuthServer,
    verifier: Verifier,
    first_sight: Verifier,
    authorization: String,
}

async fn fixture() -> Fixture {
    let db = TestDb::auth(Backend::Sqlite).await;
    let auth = AuthServer::start(&db.url, |_| {})
        .await
        .expect("auth-server starts");
    let (id, secret) = auth.create_client(scopes::CASE_INTAKE_CREATE).await;
    let token = auth.token(&id, &secret, scopes::CASE_INTAKE_CREATE).await;
    let jwks = Arc::new(
        JwksCache::new(format!("{}/.well-known/jwks.json", auth.base_url())).expect("JWKS cache"),
    );
    // Warm the cache once, as the background refresher does; no fetch happens while measuring.
    jwks.refresh("schedule").await.expect("JWKS fetch");
    let verifier = Verifier::new(
        jwks.clone(),
        auth.config.issuer(),
        &auth.config.audience,
        shared::profile::Profile::Standard,
    );
    // Remembering nothing, this one verifies the signature every time.
    let first_sight = Verifier::new(
        jwks,
        auth.config.issuer(),
        &auth.config.audience,
        shared::profile::Profile::Standard,
    )
    .with_verified_capacity(0);
    Fixture {
        _db: db,
        _auth: auth,
        verifier,
        first_sight,
        authorization: format!("Bearer {token}"),
    }
}

fn bearer(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let f = rt.block_on(fixture());
    let header = f.authorization.as_bytes();
    // A valid token must pass, or the benchmark would time the refusal path.
    rt.block_on(f.verifier.authenticate(Some(header)))
        .expect("the token verifies");
    for (name, verifier) in [
        ("authenticate_valid_token_first_sight", &f.first_sight),
        ("authenticate_valid_token_seen_before", &f.verifier),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| {
                let verify = verifier.authenticate(black_box(Some(header)));
                // Polled once, without an executor: with a warm cache nothing waits.
                match pin!(verify).poll(&mut Context::from_waker(Waker::noop())) {
                    Poll::Ready(claims) => claims.expect("the token verifies"),
                    Poll::Pending => panic!("a warm JWKS cache must not wait"),
                }
            })
        });
    }
    drop(f);
    rt.shutdown_timeout(Duration::from_secs(5));
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bearer
}
criterion_main!(benches);
