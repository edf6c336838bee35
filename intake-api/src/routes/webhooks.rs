//! The partners' webhook operations under `/partners/external/webhooks`: the event
//! catalogue, and their own endpoints (make, list, read, change, remove, rotate the
//! secret). A partner sees and changes only its own endpoints: another's id is answered
//! as one that does not exist.

use std::sync::Arc;

use chrono::Utc;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi, Tags};
use shared::intake::webhook_endpoints::{
    EndpointStatus, NewWebhookEndpoint, SecretRotation, WebhookEndpoint, WebhookEndpointChange,
    WebhookEndpointList, WebhookEndpointWithSecret,
};
use shared::intake::webhooks::EventTypeList;

use super::body::LenientJson;
use super::partner::WebhookManager;
use crate::domain::{
    EndpointRequest, ValidationErrors, parse_endpoint_change, parse_new_endpoint,
    parse_secret_rotation,
};
use crate::error::IntakeError;
use crate::state::AppState;
use crate::webhooks::signing::new_secret;
use crate::webhooks::store::{
    Created, EndpointChange, EndpointView, NewEndpoint, Subscription, endpoint_name,
    parse_endpoint_name,
};

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

/// Answers with an endpoint and its new secret.
#[derive(ApiResponse)]
pub enum WithSecretResponse {
    /// The endpoint was made: its signing secret is shown this once.
    #[oai(status = 201)]
    Created(
        Json<WebhookEndpointWithSecret>,
        #[oai(header = "Cache-Control")] String,
    ),
    /// The endpoint has a new secret, shown this once; the previous one signs beside it
    /// until `previous_secret_expires_at`.
    #[oai(status = 200)]
    Rotated(
        Json<WebhookEndpointWithSecret>,
        #[oai(header = "Cache-Control")] String,
    ),
}

/// Answers with the partner's endpoints.
#[derive(ApiResponse)]
pub enum EndpointListResponse {
    /// The partner's endpoints, oldest first.
    #[oai(status = 200)]
    Ok(Json<WebhookEndpointList>),
}

/// Answers with one endpoint.
#[derive(ApiResponse)]
pub enum EndpointResponse {
    /// The endpoint, as it is now.
    #[oai(status = 200)]
    Ok(Json<WebhookEndpoint>),
}

/// Answers of a removal.
#[derive(ApiResponse)]
pub enum RemovedResponse {
    /// The endpoint is gone, with its events not yet delivered.
    #[oai(status = 204)]
    Removed,
}

/// Secrets are in the answer: no cache along the way may keep it.
fn no_store() -> String {
    "no-store".to_owned()
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

    /// Make a webhook endpoint.
    ///
    /// Events of the chosen types (every type when `event_types` is left out) on cases you
    /// sent an enquiry for are POSTed to `url`, an https URL on a public address, signed
    /// with the endpoint's secret: the answer shows it this once. A partner may have a few
    /// endpoints (409 past the limit). Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints",
        method = "post",
        operation_id = "createWebhookEndpoint",
        tag = "ApiTags::Webhooks"
    )]
    async fn create(
        &self,
        manager: WebhookManager,
        body: LenientJson<NewWebhookEndpoint>,
    ) -> Result<WithSecretResponse, IntakeError> {
        let request = parse_new_endpoint(&body.value)?;
        let url = self.checked_url(request.url.as_deref()).await?;
        let secret = new_secret().map_err(IntakeError::Internal)?;
        let new = NewEndpoint {
            client_id: manager.client_id(),
            url: url.as_deref().unwrap_or_default(),
            event_types: subscription(request.event_types.flatten()),
            secret: &secret,
            limit: self.state.config.webhook_endpoints_per_partner,
        };
        match self
            .state
            .cases
            .create_endpoint(new, &self.state.webhook_secrets)
            .await?
        {
            Created::Made(view) => Ok(WithSecretResponse::Created(
                Json(WebhookEndpointWithSecret {
                    endpoint: wire(view),
                    secret,
                }),
                no_store(),
            )),
            Created::AtLimit(limit) => Err(IntakeError::EndpointLimit(limit)),
        }
    }

    /// List your webhook endpoints.
    ///
    /// Every endpoint you made, oldest first, without its secret. Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints",
        method = "get",
        operation_id = "listWebhookEndpoints",
        tag = "ApiTags::Webhooks"
    )]
    async fn list(&self, manager: WebhookManager) -> Result<EndpointListResponse, IntakeError> {
        let endpoints = self
            .state
            .cases
            .endpoints(Some(manager.client_id()))
            .await?;
        Ok(EndpointListResponse::Ok(Json(WebhookEndpointList {
            data: endpoints.into_iter().map(wire).collect(),
        })))
    }

    /// Read a webhook endpoint.
    ///
    /// One of your endpoints, without its secret: whether it is enabled, and if not why
    /// (a `410 Gone` from it disables it). Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id",
        method = "get",
        operation_id = "getWebhookEndpoint",
        tag = "ApiTags::Webhooks"
    )]
    async fn read(
        &self,
        manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
    ) -> Result<EndpointResponse, IntakeError> {
        let id = endpoint_id_of(&endpoint_id)?;
        let view = self
            .state
            .cases
            .endpoint(manager.client_id(), id)
            .await?
            .ok_or(IntakeError::EndpointNotFound)?;
        Ok(EndpointResponse::Ok(Json(wire(view))))
    }

    /// Change a webhook endpoint.
    ///
    /// Its `url`, its `event_types` (null for every type), or whether it is `enabled`:
    /// what the body leaves out stays as it is. Events are not queued for a disabled
    /// endpoint; enabling it again (after a `410 Gone` too) sends the ones still waiting.
    /// Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id",
        method = "patch",
        operation_id = "updateWebhookEndpoint",
        tag = "ApiTags::Webhooks"
    )]
    async fn update(
        &self,
        manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
        body: LenientJson<WebhookEndpointChange>,
    ) -> Result<EndpointResponse, IntakeError> {
        let id = endpoint_id_of(&endpoint_id)?;
        let EndpointRequest {
            url,
            event_types,
            enabled,
        } = parse_endpoint_change(&body.value)?;
        let url = self.checked_url(url.as_deref()).await?;
        let change = EndpointChange {
            url,
            event_types: event_types.map(subscription),
            disabled: enabled.map(|on| (!on).then(|| "disabled by the partner".to_owned())),
        };
        let view = self
            .state
            .cases
            .change_endpoint(manager.client_id(), id, change)
            .await?
            .ok_or(IntakeError::EndpointNotFound)?;
        Ok(EndpointResponse::Ok(Json(wire(view))))
    }

    /// Remove a webhook endpoint.
    ///
    /// Nothing more is sent to it; its events not yet delivered are dropped. Needs
    /// `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id",
        method = "delete",
        operation_id = "deleteWebhookEndpoint",
        tag = "ApiTags::Webhooks"
    )]
    async fn delete(
        &self,
        manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
    ) -> Result<RemovedResponse, IntakeError> {
        let id = endpoint_id_of(&endpoint_id)?;
        if !self
            .state
            .cases
            .delete_endpoint(manager.client_id(), id)
            .await?
        {
            return Err(IntakeError::EndpointNotFound);
        }
        Ok(RemovedResponse::Removed)
    }

    /// Rotate a webhook endpoint's signing secret.
    ///
    /// Makes a new secret, shown this once; the previous one keeps signing beside it (each
    /// request carries both signatures) for `grace_period_secs`, a day at most and when left
    /// out, so you switch without missing a delivery. 0 stops the previous one at once.
    /// Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id/rotate-secret",
        method = "post",
        operation_id = "rotateWebhookEndpointSecret",
        tag = "ApiTags::Webhooks"
    )]
    async fn rotate_secret(
        &self,
        manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
        body: LenientJson<SecretRotation>,
    ) -> Result<WithSecretResponse, IntakeError> {
        let id = endpoint_id_of(&endpoint_id)?;
        let grace = parse_secret_rotation(&body.value)?;
        let secret = new_secret().map_err(IntakeError::Internal)?;
        let until = Utc::now() + chrono::Duration::seconds(i64::from(grace));
        let view = self
            .state
            .cases
            .rotate_endpoint_secret(
                manager.client_id(),
                id,
                &secret,
                until,
                &self.state.webhook_secrets,
            )
            .await?
            .ok_or(IntakeError::EndpointNotFound)?;
        Ok(WithSecretResponse::Rotated(
            Json(WebhookEndpointWithSecret {
                endpoint: wire(view),
                secret,
            }),
            no_store(),
        ))
    }
}

impl WebhooksApi {
    /// `url` as events may be sent to it (https, on a public address, unless this
    /// deployment allows otherwise), or the 422 saying why not.
    async fn checked_url(&self, url: Option<&str>) -> Result<Option<String>, IntakeError> {
        let Some(url) = url else {
            return Ok(None);
        };
        match service_kit::outbound::check_target(url, self.state.config.webhook_reach()).await {
            Ok(checked) => Ok(Some(checked.to_string())),
            Err(e) => {
                let mut errors = ValidationErrors::default();
                errors.add(
                    "url",
                    format!("The url field is not one events may go to: {e}."),
                );
                Err(errors.into())
            }
        }
    }
}

/// The endpoint an id names; one that names none is answered as one not found.
fn endpoint_id_of(name: &str) -> Result<uuid::Uuid, IntakeError> {
    parse_endpoint_name(name).ok_or(IntakeError::EndpointNotFound)
}

/// The subscription to `types`, every type for none.
fn subscription(types: Option<Vec<shared::intake::webhooks::EventType>>) -> Subscription {
    types.map_or(Subscription::ALL, |types| Subscription::only(&types))
}

/// An endpoint as partners read it.
fn wire(view: EndpointView) -> WebhookEndpoint {
    WebhookEndpoint {
        id: endpoint_name(view.id),
        url: view.url,
        event_types: view.event_types.types(),
        status: if view.disabled_at.is_some() {
            EndpointStatus::Disabled
        } else {
            EndpointStatus::Enabled
        },
        disabled_reason: view.disabled_at.and(view.disabled_reason),
        disabled_at: view.disabled_at,
        failing_since: view.failing_since,
        previous_secret_expires_at: view.previous_secret_until,
        created_at: view.created_at,
        updated_at: view.updated_at,
    }
}
