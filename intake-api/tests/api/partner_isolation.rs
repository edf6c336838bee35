//! Partner isolation as a property: for random interleavings of two partners' enquiries,
//! referrals, attaches, reads and redeems of their links, and erasures, on a few customers'
//! e-mails, nothing of one partner's reaches the other.
//!
//! A model says what every answer must be. What it predicts for a partner about a
//! customer it has made no enquiry for is drawn from that partner's own requests alone
//! (its referrals, the erasures): so the run proves the answers do not depend on what the
//! other partner did. The one documented exception is the enquiry's 201 against 200, which
//! the model predicts from both partners' requests; once a partner has made an enquiry, the
//! customer's case is its own too. Every webhook event queued for a partner is for a case
//! it made an enquiry on, and none is a referral's.
//!
//! Each generated run uses e-mails of its own on one pair of services per backend.
//! `PROPTEST_CASES` sets how many runs (16 by default).

use std::collections::HashSet;
use std::sync::Arc;

use intake_api::cli::{CaseCommand, WebhookCommand};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::json;
use test_support::on_both_backends;

use crate::helpers::{
    ATTACH, Backend, ENQUIRY, INTAKE, PORTAL_A, PRODUCT, REFERRAL, REFERRALS, Reply, TestApp,
    message, purchase_enquiry,
};
use crate::webhooks::Receiver;

/// How many customers' e-mails a run shares between the partners.
const CUSTOMERS: usize = 3;

/// A reference no case has: generated ones never start with 0.
const NEVER_ISSUED: &str = "012345678901";

/// One request of a run.
#[derive(Debug, Clone)]
enum Op {
    /// Partner `p` sends an enquiry for customer `e`.
    Enquire { p: usize, e: usize },
    /// Partner `p` refers customer `e`, the address in upper case when `upper`.
    Refer { p: usize, e: usize, upper: bool },
    /// Partner `p` attaches a product for customer `e`.
    Attach { p: usize, e: usize },
    /// Partner `p` reads one of the references either partner was answered (or none's).
    Read { p: usize, pick: usize },
    /// The portal redeems one of the links either partner was answered.
    Redeem { pick: usize },
    /// The operator erases customer `e`'s data.
    Erase { e: usize },
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let p = 0..2usize;
    let e = 0..CUSTOMERS;
    let op = prop_oneof![
        2 => (p.clone(), e.clone()).prop_map(|(p, e)| Op::Enquire { p, e }),
        3 => (p.clone(), e.clone(), any::<bool>()).prop_map(|(p, e, upper)| Op::Refer { p, e, upper }),
        2 => (p.clone(), e.clone()).prop_map(|(p, e)| Op::Attach { p, e }),
        2 => (p, any::<usize>()).prop_map(|(p, pick)| Op::Read { p, pick }),
        2 => any::<usize>().prop_map(|pick| Op::Redeem { pick }),
        1 => e.prop_map(|e| Op::Erase { e }),
    ];
    prop::collection::vec(op, 1..28)
}

/// Modest by default, so the run takes seconds; `PROPTEST_CASES` raises it.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(16);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..ProptestConfig::default()
    }
}

/// The services, the two partners (each with a webhook endpoint) and the brand's portal.
struct Ctx {
    app: TestApp,
    partners: [(String, String); 2],
    portal: String,
    _receiver: Receiver,
}

impl Ctx {
    async fn start(backend: Backend) -> Self {
        let app = TestApp::spawn_with(backend, |c| {
            c.webhooks.insecure.allow = true;
            c.rate_limit = 1_000_000;
        })
        .await;
        let receiver = Receiver::start().await;
        let scopes = format!("{INTAKE} {REFERRAL}");
        let mut partners = Vec::new();
        for _ in 0..2 {
            let (id, secret) = app.auth.create_client(&scopes).await;
            let token = app.auth.token(&id, &secret, &scopes).await;
            intake_api::cli::webhook(
                &app.intake.config,
                WebhookCommand::Set {
                    client_id: id.clone(),
                    url: receiver.url.clone(),
                    show_secret: false,
                },
            )
            .await
            .expect("webhook set");
            partners.push((id, format!("Bearer {token}")));
        }
        let portal = app.portal_bearer().await;
        let partners = partners.try_into().expect("two partners");
        Self {
            app,
            partners,
            portal,
            _receiver: receiver,
        }
    }
}

/// What a link continues with, and the reference its redeem answers.
#[derive(Debug, Clone)]
enum LinkKind {
    Referral,
    Attach,
}

/// A link a partner was answered.
#[derive(Debug, Clone)]
struct Link {
    owner: usize,
    e: usize,
    generation: u32,
    kind: LinkKind,
    reference: String,
    token: String,
    used: bool,
}

/// A reference a partner was answered: the customer's case's, or a referral's own.
#[derive(Debug, Clone)]
struct Known {
    reference: String,
    e: usize,
    generation: u32,
    is_case: bool,
}

/// What the services must hold, from the requests made so far.
struct Model {
    tag: String,
    /// Erasures of each customer so far: a new case starts a new generation.
    generation: [u32; CUSTOMERS],
    /// Each customer's case's reference, when one exists.
    case: [Option<String>; CUSTOMERS],
    /// Whether each partner made an enquiry for each customer (this generation).
    enquired: [[bool; CUSTOMERS]; 2],
    /// Each partner's referral reference for each customer (this generation).
    referred: [[Option<String>; CUSTOMERS]; 2],
    /// Every reference either partner was answered.
    known: Vec<Known>,
    /// The references each partner was answered.
    held: [HashSet<String>; 2],
    /// The cases each partner made an enquiry on.
    enquired_cases: [HashSet<String>; 2],
    links: Vec<Link>,
}

impl Model {
    fn new() -> Self {
        Self {
            tag: uuid::Uuid::new_v4().simple().to_string(),
            generation: [0; CUSTOMERS],
            case: Default::default(),
            enquired: [[false; CUSTOMERS]; 2],
            referred: Default::default(),
            known: Vec::new(),
            held: Default::default(),
            enquired_cases: Default::default(),
            links: Vec::new(),
        }
    }

    fn email(&self, e: usize) -> String {
        format!("iso-{}-{e}@example.com", self.tag)
    }

    fn learn(&mut self, p: usize, reference: &str, e: usize, is_case: bool) {
        self.held[p].insert(reference.to_owned());
        self.known.push(Known {
            reference: reference.to_owned(),
            e,
            generation: self.generation[e],
            is_case,
        });
    }

    /// Whether `link` can still be redeemed: unused, of the customer's current case, and the
    /// newest of its kind (a referral's: of its partner's referrals; attach's: of the case).
    fn live(&self, at: usize) -> bool {
        let link = &self.links[at];
        let replaced = self.links[at + 1..].iter().any(|later| {
            later.e == link.e
                && later.generation == link.generation
                && match (&link.kind, &later.kind) {
                    (LinkKind::Referral, LinkKind::Referral) => later.owner == link.owner,
                    (LinkKind::Attach, LinkKind::Attach) => true,
                    _ => false,
                }
        });
        !link.used && link.generation == self.generation[link.e] && !replaced
    }
}

fn reference_of(reply: &Reply) -> String {
    reply.body["reference"]
        .as_str()
        .unwrap_or_else(|| panic!("no reference: {reply:?}"))
        .to_owned()
}

/// The token of a link in `reply`, whose body has exactly `keys`.
fn token_in(reply: &Reply, keys: &[&str]) -> String {
    let mut got: Vec<&String> = reply.body.as_object().expect("an object").keys().collect();
    got.sort();
    assert_eq!(got, keys, "{reply:?}");
    let url = reqwest::Url::parse(reply.body["redirect"].as_str().expect("a link")).expect("URL");
    assert!(url.as_str().starts_with(PORTAL_A), "{url}");
    let (name, token) = url.query_pairs().next().expect("a token");
    assert_eq!(name, "token");
    token.into_owned()
}

/// Runs `ops` against the services and the model, asserting every answer.
async fn run(ctx: &Ctx, ops: Vec<Op>) {
    let app = &ctx.app;
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Enquire { p, e } => {
                let email = model.email(e);
                let reply = app
                    .post(
                        ENQUIRY,
                        Some(&ctx.partners[p].1),
                        &purchase_enquiry("brand_a", &email),
                    )
                    .await;
                // The spec's 201 against 200: the one answer that tells of a case.
                let reference = match &model.case[e] {
                    Some(case) => {
                        let expected = json!({"message": "Case updated", "reference": case});
                        assert_eq!((reply.status, &reply.body), (200, &expected), "{op:?}");
                        case.clone()
                    }
                    None => {
                        assert_eq!(reply.status, 201, "{op:?}: {reply:?}");
                        assert_eq!(reply.body["message"], "Case created");
                        let made = reference_of(&reply);
                        model.case[e] = Some(made.clone());
                        made
                    }
                };
                model.enquired[p][e] = true;
                model.enquired_cases[p].insert(reference.clone());
                model.learn(p, &reference, e, true);
            }
            Op::Refer { p, e, upper } => {
                let email = model.email(e);
                let sent = if upper { email.to_uppercase() } else { email };
                let body = json!({
                    "brand": "brand_a",
                    "first_name": "Jane",
                    "last_name": "Doe",
                    "email": sent,
                    "mobile_number": "+44 7700 900123",
                    "contact_consent": true,
                });
                let reply = app.post(REFERRALS, Some(&ctx.partners[p].1), &body).await;
                let token = token_in(&reply, &["message", "redirect", "reference"]);
                let reference = reference_of(&reply);
                let earlier = if model.enquired[p][e] {
                    model.case[e].clone()
                } else {
                    model.referred[p][e].clone()
                };
                match earlier {
                    // What the partner itself sent before decides: never the other's.
                    Some(own) => {
                        assert_eq!(reply.status, 200, "{op:?}: {reply:?}");
                        assert_eq!(reply.body["message"], "Referral added");
                        assert_eq!(reference, own, "{op:?}");
                    }
                    None => {
                        assert_eq!(reply.status, 201, "{op:?}: {reply:?}");
                        assert_eq!(reply.body["message"], "Referral created");
                        assert_eq!(reference.len(), 12, "{reply:?}");
                        assert!(
                            !model.held[1 - p].contains(&reference),
                            "{op:?} was answered a reference of the other partner's"
                        );
                        let is_case = match &model.case[e] {
                            None => {
                                model.case[e] = Some(reference.clone());
                                true
                            }
                            Some(case) => {
                                assert_ne!(&reference, case, "{op:?} was told the case");
                                false
                            }
                        };
                        model.referred[p][e] = Some(reference.clone());
                        model.learn(p, &reference, e, is_case);
                    }
                }
                model.links.push(Link {
                    owner: p,
                    e,
                    generation: model.generation[e],
                    kind: LinkKind::Referral,
                    reference,
                    token,
                    used: false,
                });
            }
            Op::Attach { p, e } => {
                let body = json!({"email": model.email(e), "product_uuid": PRODUCT});
                let reply = app.post(ATTACH, Some(&ctx.partners[p].1), &body).await;
                if model.enquired[p][e] {
                    assert_eq!(reply.status, 200, "{op:?}: {reply:?}");
                    let token = token_in(&reply, &["redirect"]);
                    model.links.push(Link {
                        owner: p,
                        e,
                        generation: model.generation[e],
                        kind: LinkKind::Attach,
                        reference: model.case[e].clone().expect("a case"),
                        token,
                        used: false,
                    });
                } else {
                    let answer = (reply.status, reply.body);
                    assert_eq!(answer, (404, message("Case not found")), "{op:?}");
                }
            }
            Op::Read { p, pick } => {
                let at = pick % (model.known.len() + 1);
                let known = model.known.get(at).cloned();
                let reference = known
                    .as_ref()
                    .map_or(NEVER_ISSUED.to_owned(), |k| k.reference.clone());
                let reply = app.case_status(&reference, Some(&ctx.partners[p].1)).await;
                let readable = known.is_some_and(|k| {
                    k.is_case && k.generation == model.generation[k.e] && model.enquired[p][k.e]
                });
                if readable {
                    assert_eq!(reply.status, 200, "{op:?} of {reference}: {reply:?}");
                    assert_eq!(reply.body["reference"], reference.as_str());
                    assert_eq!(reply.body["brand"], "brand_a");
                } else {
                    let answer = (reply.status, reply.body);
                    let expected = (404, message("Case not found"));
                    assert_eq!(answer, expected, "{op:?} of {reference}");
                }
            }
            Op::Redeem { pick } => {
                if model.links.is_empty() {
                    continue;
                }
                let at = pick % model.links.len();
                let live = model.live(at);
                let link = model.links[at].clone();
                let reply = app.redeem(&ctx.portal, &link.token).await;
                if live {
                    let mut expected = json!({
                        "reference": link.reference,
                        "brand": "brand_a",
                        "continue_with": "enquiry",
                        "email": model.email(link.e),
                        "sandbox": false,
                    });
                    if let LinkKind::Attach = link.kind {
                        expected["continue_with"] = json!("product");
                        expected["product_uuid"] = json!(PRODUCT);
                    }
                    assert_eq!(
                        (reply.status, reply.body),
                        (200, expected),
                        "{op:?}: {link:?}"
                    );
                    model.links[at].used = true;
                } else {
                    let answer = (reply.status, reply.body);
                    let expected = (410, message("Link expired or already used"));
                    assert_eq!(answer, expected, "{op:?}: {link:?}");
                }
            }
            Op::Erase { e } => {
                intake_api::cli::case(
                    &app.intake.config,
                    CaseCommand::Erase {
                        email: model.email(e),
                        brand: None,
                    },
                )
                .await
                .expect("case erase");
                model.generation[e] += 1;
                model.case[e] = None;
                for p in 0..2 {
                    model.enquired[p][e] = false;
                    model.referred[p][e] = None;
                }
            }
        }
    }
    check_webhooks(ctx, &model).await;
}

/// Every event queued for a partner about this run's cases is of a case it made an enquiry
/// on, and none is a referral's. Events are queued with the change, so the queue is
/// complete as soon as the answers are in.
async fn check_webhooks(ctx: &Ctx, model: &Model) {
    let ids = [&ctx.partners[0].0, &ctx.partners[1].0];
    let rows = ctx
        .app
        .intake_column(
            &format!(
                "SELECT d.client_id || ' ' || c.reference || ' ' || d.event_type AS row \
                 FROM webhook_deliveries d JOIN cases c ON c.id = d.case_id \
                 WHERE d.client_id IN ('{}', '{}')",
                ids[0], ids[1]
            ),
            "row",
        )
        .await;
    let ours: HashSet<&str> = model.known.iter().map(|k| k.reference.as_str()).collect();
    for row in rows {
        let [client, reference, event_type] = row.split(' ').collect::<Vec<_>>()[..] else {
            panic!("a queued event: {row}");
        };
        if !ours.contains(reference) {
            continue;
        }
        let p = usize::from(client == ids[1]);
        assert!(
            model.enquired_cases[p].contains(reference),
            "partner {p} hears of case {reference}, which it made no enquiry on ({event_type})"
        );
        assert_ne!(event_type, "case.referred", "{row}");
    }
}

async fn nothing_of_one_partners_reaches_the_other(backend: Backend) {
    let ctx = Arc::new(Ctx::start(backend).await);
    let handle = tokio::runtime::Handle::current();
    let outcome = tokio::task::spawn_blocking(move || {
        TestRunner::new(config()).run(&ops(), |ops| {
            handle.block_on(run(&ctx, ops));
            Ok(())
        })
    })
    .await
    .expect("the runner ran");
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

on_both_backends!(nothing_of_one_partners_reaches_the_other);
