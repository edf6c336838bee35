//! `POST /partners/external/referrals`: a customer referred before their enquiry exists.
//!
//! A referral makes the case for its brand and e-mail (status `referred`, which no
//! activation touches) or is kept on the existing one, and answers with a link on the
//! brand's portal where the customer completes the enquiry: the kind of link attach makes,
//! redeemed the same way. The enquiry that follows, from any partner, completes the case,
//! which then activates as any case does. A referral grants its partner nothing on the
//! case and its answer tells nothing of other partners' customers (`crate::store`'s
//! `refer`).

use std::sync::Arc;

use poem_openapi::param::Header;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi, Tags};
use shared::intake::{ReferralRequest, ReferralResponse};

use super::body::LenientJson;
use super::idempotency::{self, Begun, Replayable};
use super::intake::{new_link, record_case};
use super::partner::Referrer;
use crate::domain::parse_referral;
use crate::error::IntakeError;
use crate::sandbox;
use crate::state::AppState;
use crate::store::{Outcome, Submitted, json_answer};

#[derive(Tags)]
enum ApiTags {
    /// Referring a customer before their enquiry.
    Referrals,
}

/// Successful answers of the referral endpoint. `Idempotent-Replayed: true` marks the
/// stored answer to an earlier request with the same `Idempotency-Key`.
#[derive(ApiResponse)]
pub enum ReferResponse {
    /// The partner's first referral of the customer (as far as its own requests go):
    /// `Referral created`, with a new reference. Whether anyone else has the customer is
    /// not told.
    #[oai(status = 201)]
    Created(
        Json<ReferralResponse>,
        #[oai(header = "Idempotent-Replayed")] Option<bool>,
    ),
    /// A customer the partner referred or sent an enquiry for before: `Referral added`,
    /// with the reference it had (its earlier referral's, or its enquiry's case's).
    #[oai(status = 200)]
    Added(
        Json<ReferralResponse>,
        #[oai(header = "Idempotent-Replayed")] Option<bool>,
    ),
}

/// The answer to a referral: 201 for the partner's first referral of the customer, 200 for
/// a customer it referred or sent an enquiry for before.
fn referral_answer(done: &Submitted, redirect: &str) -> (u16, ReferralResponse) {
    let (status, message) = match done.outcome {
        Outcome::Created => (201, "Referral created"),
        Outcome::Updated => (200, "Referral added"),
    };
    let body = ReferralResponse {
        message: message.into(),
        reference: done.reference.clone(),
        redirect: redirect.to_owned(),
    };
    (status, body)
}

impl Replayable for ReferResponse {
    type Body = ReferralResponse;

    fn respond(status: u16, body: Json<ReferralResponse>, replayed: Option<bool>) -> Self {
        match status {
            201 => Self::Created(body, replayed),
            _ => Self::Added(body, replayed),
        }
    }
}

/// The partners' referral endpoint.
pub struct ReferralApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

#[OpenApi]
impl ReferralApi {
    /// Refer a customer.
    ///
    /// For a customer the partner refers before their enquiry exists: answers with a
    /// reference and a link on the brand's customer portal (single-use, expiring) where the
    /// customer completes the enquiry. The partner's first referral of a customer answers
    /// 201, its later ones 200 with the same reference; after an enquiry of its own, 200
    /// with that enquiry's reference. The answer is the same whether or not another
    /// partner has the customer. A referral is kept as sent on the customer's case (made
    /// with status `referred` if there is none) and grants nothing: the case is read,
    /// attached to and heard of (webhooks) only by partners that sent an enquiry for it,
    /// and the referral changes nothing they see (no event is sent for it). The link is
    /// replaced only by the partner's next referral of the customer. An enquiry for the
    /// same brand and e-mail address, by any partner, completes a referred case, which
    /// then activates as any case does. Every problem with the referral is reported at
    /// once (422).
    #[oai(
        path = "/partners/external/referrals",
        method = "post",
        operation_id = "referCustomer",
        tag = "ApiTags::Referrals"
    )]
    async fn refer(
        &self,
        #[oai(scope = "Referrer::SCOPE")] partner: Referrer,
        /// Makes a retry safe: a request repeated with the same key and body within 24 hours
        /// gets the first answer, the same link, again (with `Idempotent-Replayed: true`)
        /// and changes nothing. Up to 255 characters.
        #[oai(name = "Idempotency-Key")]
        idempotency_key: Header<Option<String>>,
        body: LenientJson<ReferralRequest>,
    ) -> Result<ReferResponse, IntakeError> {
        let state = &self.state;
        let referral = parse_referral(&body.value, &state.brand_ids())?;
        let key = idempotency_key.0.as_deref();
        let attempt =
            match idempotency::begin(state, &partner, "referCustomer", key, &body.value).await? {
                Begun::Replay(response) => return Ok(response),
                Begun::Attempt(attempt) => attempt,
            };
        // Made once the request is known to be new: a replay answers the link first made.
        let (token, redirect) = attempt
            .settle(new_link(state, referral.brand.as_str()))
            .await?;
        let world = partner.world();
        let stored = state
            .cases
            .refer(
                &referral,
                &body.raw,
                partner.client_id(),
                world,
                &token.hash(),
                attempt.keyed(&|done| json_answer(referral_answer(done, &redirect))),
            )
            .await;
        let done = attempt.settle(stored).await?;
        let label = match done.outcome {
            Outcome::Created => "created",
            Outcome::Updated => "added",
        };
        let brand = referral.brand.as_str();
        let counter = world.counter(sandbox::REFERRALS);
        metrics::counter!(counter, "brand" => brand.to_owned(), "outcome" => label).increment(1);
        record_case(&format!("referral_{label}"), &done.reference, brand);
        Ok(ReferResponse::fresh(referral_answer(&done, &redirect)))
    }
}
