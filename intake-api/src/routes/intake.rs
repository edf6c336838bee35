//! `POST /partners/external/intake` and `POST /partners/external/intake/attach`.

use std::sync::Arc;

use poem_openapi::payload::Json;
use poem_openapi::types::Example;
use poem_openapi::{ApiResponse, Object, OpenApi, Tags};

use crate::domain::{AttachRequestBody, EnquiryRequest, parse_attach, parse_enquiry};
use crate::routes::bodies::*;
use crate::routes::extract::{LenientJson, Partner, ValidationErrorBody};
use crate::startup::AppState;
use crate::store::{self, Outcome};

#[derive(Tags)]
enum ApiTags {
    /// Submitting enquiries and attaching products.
    Intake,
}

/// `{"message": "Case created" | "Case updated", "reference": "..."}`
#[derive(Debug, Object)]
#[oai(example)]
pub struct CaseResponse {
    /// `Case created` or `Case updated`.
    pub message: String,
    /// The case reference number.
    pub reference: String,
}

impl Example for CaseResponse {
    fn example() -> Self {
        Self {
            message: "Case created".into(),
            reference: "418290357116".into(),
        }
    }
}

/// `{"redirect": "https://..."}`
#[derive(Debug, Object)]
#[oai(example)]
pub struct RedirectResponse {
    /// Link to send the customer to: the brand's portal, with a single-use token.
    pub redirect: String,
}

impl Example for RedirectResponse {
    fn example() -> Self {
        Self {
            redirect: "https://portal.brand-a.example/continue?token=q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM".into(),
        }
    }
}

/// Responses of the enquiry endpoint.
#[derive(ApiResponse)]
pub enum IntakeResponse {
    /// A new case was created for this brand and e-mail address.
    #[oai(status = 201)]
    Created(Json<CaseResponse>),
    /// The existing case for this brand and e-mail address was updated.
    #[oai(status = 200)]
    Updated(Json<CaseResponse>),
    /// The body is not JSON.
    #[oai(status = 400)]
    BadRequest(Json<NotJson>),
    /// No valid bearer token: `{"message":"Unauthenticated."}`.
    #[oai(status = 401)]
    Unauthorized(
        Json<Unauthenticated>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// The token lacks `enquiry:case:intake:create`: `{"message":"Invalid scope(s) provided."}`.
    #[oai(status = 403)]
    Forbidden(
        Json<InvalidScope>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// The body is larger than 64 KiB.
    #[oai(status = 413)]
    PayloadTooLarge(Json<TooLarge>),
    /// The enquiry is invalid; every problem is listed by field.
    #[oai(status = 422)]
    Invalid(Json<ValidationErrorBody>),
    /// Too many requests from this partner: `{"message":"Too Many Attempts."}`.
    #[oai(status = 429)]
    TooManyRequests(Json<TooManyAttempts>, #[oai(header = "Retry-After")] u64),
    /// The database is unavailable; retry after the given seconds.
    #[oai(status = 503)]
    Unavailable(Json<Unavailable>, #[oai(header = "Retry-After")] u32),
}

/// Responses of the attach endpoint.
#[derive(ApiResponse)]
pub enum AttachResponse {
    /// The product was attached; send the customer to `redirect`.
    #[oai(status = 200)]
    Ok(Json<RedirectResponse>),
    /// The body is not JSON.
    #[oai(status = 400)]
    BadRequest(Json<NotJson>),
    /// No valid bearer token: `{"message":"Unauthenticated."}`.
    #[oai(status = 401)]
    Unauthorized(
        Json<Unauthenticated>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// The token lacks `enquiry:case:intake:create`.
    #[oai(status = 403)]
    Forbidden(
        Json<InvalidScope>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// No case for this e-mail address: `{"message":"Case not found"}`. Send the customer
    /// to the enquiry form instead.
    #[oai(status = 404)]
    NotFound(Json<CaseNotFound>),
    /// The body is larger than 64 KiB.
    #[oai(status = 413)]
    PayloadTooLarge(Json<TooLarge>),
    /// `email` or `product_uuid` is invalid.
    #[oai(status = 422)]
    Invalid(Json<ValidationErrorBody>),
    /// The link could not be made: `{"message":"Failed to generate redirect link"}`. Send
    /// the customer to the customer dashboard instead.
    #[oai(status = 500)]
    Failed(Json<RedirectFailed>),
    /// Too many requests from this partner: `{"message":"Too Many Attempts."}`.
    #[oai(status = 429)]
    TooManyRequests(Json<TooManyAttempts>, #[oai(header = "Retry-After")] u64),
    /// The database is unavailable; retry after the given seconds.
    #[oai(status = 503)]
    Unavailable(Json<Unavailable>, #[oai(header = "Retry-After")] u32),
}

const RETRY_AFTER_SECS: u32 = 5;

/// What happened to a case, on the request's log line.
fn record_case(outcome: &str, reference: &str, brand: &str) {
    use intake_shared::telemetry::{Field, record};
    record(Field::Outcome, outcome);
    record(Field::Reference, reference);
    record(Field::Brand, brand);
}

fn unavailable(e: &sea_orm::DbErr) -> Json<Unavailable> {
    tracing::error!(request_id = intake_shared::telemetry::request_id(), error = %e, "database unavailable");
    Json(Unavailable::default())
}

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
    #[oai(
        path = "/partners/external/intake",
        method = "post",
        operation_id = "submitEnquiry",
        tag = "ApiTags::Intake"
    )]
    async fn intake(&self, partner: Partner, body: LenientJson<EnquiryRequest>) -> IntakeResponse {
        let state = &self.state;
        let today = chrono::Utc::now().date_naive();
        let enquiry = match parse_enquiry(&body.value, &state.brand_ids(), today) {
            Ok(e) => e,
            Err(errors) => return IntakeResponse::Invalid(Json(ValidationErrorBody::new(errors))),
        };
        let client_id = &partner.0.client_id;
        match store::submit_enquiry(
            &state.db,
            state.kept.as_ref(),
            &state.turns,
            &enquiry,
            &body.raw,
            client_id,
            state.config.activation_delay(),
        )
        .await
        {
            Ok(s) => {
                let (message, created) = match s.outcome {
                    Outcome::Created => ("Case created", true),
                    Outcome::Updated => ("Case updated", false),
                };
                let label = if created { "created" } else { "updated" };
                metrics::counter!("intake_cases_total", "brand" => enquiry.brand.as_str().to_owned(), "outcome" => label)
                    .increment(1);
                record_case(label, &s.reference, enquiry.brand.as_str());
                let body = Json(CaseResponse {
                    message: message.into(),
                    reference: s.reference,
                });
                if created {
                    IntakeResponse::Created(body)
                } else {
                    IntakeResponse::Updated(body)
                }
            }
            Err(e) => IntakeResponse::Unavailable(unavailable(&e), RETRY_AFTER_SECS),
        }
    }

    /// Attach an eligibility-engine product to a case.
    ///
    /// Finds the most recently updated case for the e-mail address (any brand), records the
    /// product on it, and answers with a link on the brand's customer portal that carries a
    /// fresh, single-use, expiring token.
    #[oai(
        path = "/partners/external/intake/attach",
        method = "post",
        operation_id = "attachProduct",
        tag = "ApiTags::Intake"
    )]
    async fn attach(
        &self,
        partner: Partner,
        body: LenientJson<AttachRequestBody>,
    ) -> AttachResponse {
        let state = &self.state;
        let request = match parse_attach(&body.value) {
            Ok(r) => r,
            Err(errors) => return AttachResponse::Invalid(Json(ValidationErrorBody::new(errors))),
        };
        let case = match store::latest_case_for_email(
            &state.db,
            state.kept.as_ref(),
            &request.email,
        )
        .await
        {
            Ok(Some(c)) => c,
            Ok(None) => return AttachResponse::NotFound(Json(CaseNotFound::default())),
            Err(e) => return AttachResponse::Unavailable(unavailable(&e), RETRY_AFTER_SECS),
        };
        match state
            .make_redirect(&case, request.product_uuid, &partner.0.client_id)
            .await
        {
            Ok(url) => {
                metrics::counter!("intake_products_attached_total", "brand" => case.brand.clone())
                    .increment(1);
                record_case("product_attached", &case.reference, &case.brand);
                AttachResponse::Ok(Json(RedirectResponse { redirect: url }))
            }
            Err(e) => {
                tracing::error!(request_id = intake_shared::telemetry::request_id(), error = %format!("{e:#}"), reference = %case.reference, brand = %case.brand, "failed to generate redirect link");
                AttachResponse::Failed(Json(RedirectFailed::default()))
            }
        }
    }
}
