//! `GET /partners/external/webhooks/event-types`: the webhook event catalogue, each type
//! with its description and an example of its body, for partners generating types.

use std::sync::Arc;

use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi, Tags};
use shared::intake::webhooks::EventTypeList;

use super::partner::WebhookManager;
use crate::error::IntakeError;
use crate::state::AppState;

#[derive(Tags)]
enum ApiTags {
    /// A partner's webhook endpoints and the events they receive.
    Webhooks,
}

/// Answers of the event catalogue.
#[derive(ApiResponse)]
pub enum EventTypesResponse {
    /// Every event type an endpoint may receive.
    #[oai(status = 200)]
    Ok(Json<EventTypeList>),
}

/// The partners' webhook operations.
pub struct WebhooksApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

#[OpenApi]
impl WebhooksApi {
    /// List the webhook event types.
    ///
    /// Every type of event a webhook endpoint may receive, with when it is sent and an
    /// example of its body (`WebhookEvent`: `{"type", "timestamp", "data"}`). Each request
    /// is signed as the Standard Webhooks specification has it (README, Webhooks). New
    /// types may be added: ignore a `type` you do not know. Needs a token with the
    /// `webhooks:manage` scope.
    #[oai(
        path = "/partners/external/webhooks/event-types",
        method = "get",
        operation_id = "listWebhookEventTypes",
        tag = "ApiTags::Webhooks"
    )]
    async fn event_types(
        &self,
        _manager: WebhookManager,
    ) -> Result<EventTypesResponse, IntakeError> {
        Ok(EventTypesResponse::Ok(Json(EventTypeList::catalogue())))
    }
}
