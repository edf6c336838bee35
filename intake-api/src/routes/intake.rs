//! `POST /partners/external/intake`, `POST /partners/external/intake/attach` and
//! `GET /partners/external/cases/{reference}`.

use std::sync::Arc;

use poem_openapi::param::{Header, Path};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi, Tags};
use service_kit::telemetry::{OUTCOME, record};
use shared::intake::{
    self as wire, CaseResponse, CaseState, CaseStatusBody, EnquiryRequest, RedirectResponse,
};

use super::body::LenientJson;
use super::idempotency::{self, Attempt, Begun, Replayable};
use super::partner::Partner;
use super::{BRAND, REFERENCE};
use crate::domain::{AttachRequest, CaseReference, RedirectToken, parse_attach, parse_enquiry};
use crate::entity::case;
use crate::error::IntakeError;
use crate::sandbox::{self, Trigger};
use crate::state::AppState;
use crate::store::{NewLink, Outcome, StoreError, Submitted, json_answer};

#[derive(Tags)]
enum ApiTags {
    /// Submitting enquiries and attaching products.
    Intake,
}

/// Successful answers of the enquiry endpoint. `Idempotent-Replayed: true` marks the
/// stored answer to an earlier request with the same `Idempotency-Key`.
#[derive(ApiResponse)]
pub enum IntakeResponse {
    /// A new case was created for this brand and e-mail address.
    #[oai(status = 201)]
    Created(
        Json<CaseResponse>,
        #[oai(header = "Idempotent-Replayed")] Option<bool>,
    ),
    /// The existing case for this brand and e-mail address was updated.
    #[oai(status = 200)]
    Updated(
        Json<CaseResponse>,
        #[oai(header = "Idempotent-Replayed")] Option<bool>,
    ),
}

/// Successful answer of the attach endpoint.
#[derive(ApiResponse)]
pub enum AttachResponse {
    /// The product was attached; send the customer to `redirect`. `Idempotent-Replayed:
    /// true` marks the stored answer to an earlier request with the same `Idempotency-Key`.
    #[oai(status = 200)]
    Ok(
        Json<RedirectResponse>,
        #[oai(header = "Idempotent-Replayed")] Option<bool>,
    ),
}

impl Replayable for IntakeResponse {
    type Body = CaseResponse;

    fn respond(status: u16, body: Json<CaseResponse>, replayed: Option<bool>) -> Self {
        match status {
            201 => Self::Created(body, replayed),
            _ => Self::Updated(body, replayed),
        }
    }
}

impl Replayable for AttachResponse {
    type Body = RedirectResponse;

    fn respond(_: u16, body: Json<RedirectResponse>, replayed: Option<bool>) -> Self {
        Self::Ok(body, replayed)
    }
}

/// Successful answer of the case status endpoint.
#[derive(ApiResponse)]
pub enum CaseStatusResponse {
    /// The case.
    #[oai(status = 200)]
    Ok(Json<CaseStatusBody>),
}

/// The answer to an accepted enquiry: 201 for a new case, 200 for one updated.
fn case_answer(done: &Submitted) -> (u16, CaseResponse) {
    let (status, message) = match done.outcome {
        Outcome::Created => (201, "Case created"),
        Outcome::Updated => (200, "Case updated"),
    };
    let body = CaseResponse {
        message: message.into(),
        reference: done.reference.clone(),
    };
    (status, body)
}

/// A case's status as partners read it.
fn wire_state(status: case::Status) -> CaseState {
    match status {
        case::Status::Referred => CaseState::Referred,
        case::Status::PendingActivation => CaseState::PendingActivation,
        case::Status::Active => CaseState::Active,
    }
}

/// What happened to a case, on the request's log line.
pub(super) fn record_case(outcome: &str, reference: &str, brand: &str) {
    record(OUTCOME, outcome);
    record(REFERENCE, reference);
    record(BRAND, brand);
}

/// A new single-use link on `brand`'s portal: its token (stored only as a hash) and the URL
/// the customer is sent to. Nothing is stored unless the link can be made: an unknown
/// portal or no randomness answers the spec's 500 `Failed to generate redirect link`.
pub(super) fn new_link(
    state: &AppState,
    brand: &str,
) -> Result<(RedirectToken, String), IntakeError> {
    let portal = state
        .portal_url(brand)
        .map_err(IntakeError::RedirectFailed)?;
    let token = RedirectToken::generate().map_err(|e| IntakeError::RedirectFailed(e.into()))?;
    let url = token.link(portal).into();
    Ok((token, url))
}

/// Longest case reference the document lets through: ours are 12 digits, and anything else
/// answers 404 without a query ([`CaseReference`]).
pub const MAX_REFERENCE_CHARS: usize = 64;

/// The partner intake endpoints.
pub struct IntakeApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

#[OpenApi]
impl IntakeApi {
    /// Submit a customer enquiry.
    ///
    /// Creates a case for the brand and e-mail address (201), or updates the existing one
    /// (200) with the same reference. Every problem with the enquiry is reported at once (422).
    /// A sandbox client's enquiries make sandbox cases, apart from real ones; with it, the
    /// customer addresses `unavailable-before-storing@sandbox.example` and
    /// `unavailable-after-storing@sandbox.example` make this answer 503 before or after
    /// storing (README, "Practising in the sandbox").
    #[oai(
        path = "/partners/external/intake",
        method = "post",
        operation_id = "submitEnquiry",
        tag = "ApiTags::Intake"
    )]
    async fn intake(
        &self,
        #[oai(scope = "Partner::SCOPE")] partner: Partner,
        /// Makes a retry safe: a request repeated with the same key and body within 24 hours
        /// gets the first answer again (with `Idempotent-Replayed: true`) and changes
        /// nothing. Up to 255 characters; a fresh UUID per enquiry is a good key.
        #[oai(name = "Idempotency-Key")]
        idempotency_key: Header<Option<String>>,
        body: LenientJson<EnquiryRequest>,
    ) -> Result<IntakeResponse, IntakeError> {
        let state = &self.state;
        let today = chrono::Utc::now().date_naive();
        let enquiry = parse_enquiry(&body.value, &state.brand_ids(), today)?;
        let trigger = partner.world().trigger(enquiry.email.as_str());
        if trigger == Some(Trigger::UnavailableBeforeStoring)
            && state
                .sandbox_tries
                .first(partner.client_id(), enquiry.email.as_str())
        {
            return Err(IntakeError::Triggered(Trigger::UnavailableBeforeStoring));
        }
        let key = idempotency_key.0.as_deref();
        let attempt =
            match idempotency::begin(state, &partner, "submitEnquiry", key, &body.value).await? {
                Begun::Replay(response) => return Ok(response),
                Begun::Attempt(attempt) => attempt,
            };
        let submitted = attempt
            .settle(
                state
                    .cases
                    .submit(
                        &enquiry,
                        &body.raw,
                        partner.client_id(),
                        partner.world(),
                        attempt.keyed(&|done| json_answer(case_answer(done))),
                    )
                    .await,
            )
            .await?;
        let label = match submitted.outcome {
            Outcome::Created => "created",
            Outcome::Updated => "updated",
        };
        let brand = enquiry.brand.as_str();
        let counter = partner.world().counter(sandbox::CASES);
        metrics::counter!(counter, "brand" => brand.to_owned(), "outcome" => label).increment(1);
        record_case(label, &submitted.reference, brand);
        if trigger == Some(Trigger::UnavailableAfterStoring)
            && submitted.outcome == Outcome::Created
        {
            return Err(IntakeError::Triggered(Trigger::UnavailableAfterStoring));
        }
        Ok(IntakeResponse::fresh(case_answer(&submitted)))
    }

    /// Attach an eligibility-engine product to a case.
    ///
    /// Finds the most recently updated case for the e-mail address (any brand) among the
    /// cases the calling partner has submitted an enquiry on, records the product on it, and answers with a link on the brand's customer portal that carries a
    /// fresh, single-use, expiring token. With a sandbox client, the customer addresses
    /// `attach-not-found@sandbox.example` and `attach-fails@sandbox.example` make this
    /// answer 404 and 500, to test the fallbacks.
    #[oai(
        path = "/partners/external/intake/attach",
        method = "post",
        operation_id = "attachProduct",
        tag = "ApiTags::Intake"
    )]
    async fn attach(
        &self,
        #[oai(scope = "Partner::SCOPE")] partner: Partner,
        /// Makes a retry safe: a request repeated with the same key and body within 24 hours
        /// gets the first answer, the same link, again (with `Idempotent-Replayed: true`)
        /// and changes nothing. Up to 255 characters.
        #[oai(name = "Idempotency-Key")]
        idempotency_key: Header<Option<String>>,
        body: LenientJson<wire::AttachRequest>,
    ) -> Result<AttachResponse, IntakeError> {
        let state = &self.state;
        let request = parse_attach(&body.value)?;
        if let Some(trigger @ (Trigger::AttachNotFound | Trigger::AttachFails)) =
            partner.world().trigger(request.email.as_str())
        {
            return Err(IntakeError::Triggered(trigger));
        }
        let key = idempotency_key.0.as_deref();
        let attempt =
            match idempotency::begin(state, &partner, "attachProduct", key, &body.value).await? {
                Begun::Replay(response) => return Ok(response),
                Begun::Attempt(attempt) => attempt,
            };
        let done = self.attach_now(&partner, &request, &attempt).await;
        attempt.settle(done).await
    }

    /// Read a case back.
    ///
    /// The case's state for a reference from an earlier enquiry: whether it is active
    /// yet and what is attached to it. Only cases the calling partner has itself submitted
    /// an enquiry on are found; any other reference (another partner's customer, or a
    /// referral's, which grants nothing) answers 404.
    #[oai(
        path = "/partners/external/cases/:reference",
        method = "get",
        operation_id = "getCase",
        tag = "ApiTags::Intake"
    )]
    async fn case_status(
        &self,
        #[oai(scope = "Partner::SCOPE")] partner: Partner,
        /// The case reference a submission answered with.
        reference: Path<String>,
    ) -> Result<CaseStatusResponse, IntakeError> {
        let reference = CaseReference::parse(&reference.0).ok_or(IntakeError::CaseNotFound)?;
        let found = self
            .state
            .cases
            .status_for_partner(reference.as_str(), partner.client_id())
            .await?
            .ok_or(IntakeError::CaseNotFound)?;
        record(REFERENCE, &found.reference);
        let status = wire_state(found.status);
        Ok(CaseStatusResponse::Ok(Json(CaseStatusBody {
            reference: found.reference,
            brand: found.brand,
            status,
            created_at: found.created_at,
            updated_at: found.updated_at,
            activates_at: (status != CaseState::Referred).then_some(found.activates_at),
            activated_at: found.activated_at,
            product_uuid: found.product_uuid,
        })))
    }
}

impl IntakeApi {
    /// Attaches the product and makes the link; a keyed attach stores its answer with it.
    async fn attach_now(
        &self,
        partner: &Partner,
        request: &AttachRequest,
        attempt: &Attempt<'_>,
    ) -> Result<AttachResponse, IntakeError> {
        let state = &self.state;
        let case = state
            .cases
            .find_for_attach(&request.email, partner.client_id())
            .await?
            .ok_or(IntakeError::CaseNotFound)?;
        record(REFERENCE, &case.reference);
        record(BRAND, &case.brand);
        let (token, redirect) = new_link(state, &case.brand)?;
        let link = NewLink {
            product_uuid: request.product_uuid,
            token_hash: &token.hash(),
        };
        let response = RedirectResponse { redirect };
        let keyed = attempt
            .sealed_now((200, &response))
            .map_err(|e| IntakeError::RedirectFailed(e.into()))?;
        let keyed = keyed.as_ref().map(|(lease, sealed)| (*lease, sealed));
        state
            .cases
            .attach(&case, link, partner.client_id(), keyed)
            .await
            .map_err(|e| match e {
                StoreError::LeaseLost => IntakeError::from(e),
                e => IntakeError::RedirectFailed(e.into()),
            })?;
        let counter = partner.world().counter(sandbox::PRODUCTS_ATTACHED);
        metrics::counter!(counter, "brand" => case.brand.clone()).increment(1);
        record_case("product_attached", &case.reference, &case.brand);
        Ok(AttachResponse::fresh((200, response)))
    }
}
