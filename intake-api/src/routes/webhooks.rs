//! The partners' webhook operations under `/partners/external/webhooks`: the event
//! catalogue, their own endpoints (make, list, read, change, remove, rotate the secret),
//! and the delivery history (list, read with each try, send one again, recover the failed
//! ones since a time). A partner sees and changes only its own endpoints and events:
//! another's id is answered as one that does not exist.

use std::sync::Arc;

use chrono::Utc;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi, Tags};
use shared::intake::webhook_deliveries::{
    RecoverRequest, RecoverResult, WebhookAttempt, WebhookDelivery, WebhookDeliveryDetail,
    WebhookDeliveryList,
};
use shared::intake::webhook_endpoints::{
    EndpointStatus, NewWebhookEndpoint, SecretRotation, WebhookEndpoint, WebhookEndpointChange,
    WebhookEndpointList, WebhookEndpointWithSecret, WebhookTestRequest, WebhookTestResult,
    endpoint_name, parse_endpoint_name,
};
use shared::intake::webhooks::{EventType, EventTypeList};

use super::body::{LenientJson, OptionalJson};
use super::partner::WebhookManager;
use crate::domain::{
    EndpointRequest, HistoryParams, ValidationErrors, parse_endpoint_change, parse_history_filter,
    parse_new_endpoint, parse_recover, parse_secret_rotation, parse_test_event,
};
use crate::error::IntakeError;
use crate::state::AppState;
use crate::webhooks::delivery::send_test;
use crate::webhooks::signing::{message_id, new_secret, parse_message_id};
use crate::webhooks::store::{
    AttemptView, ChangedBy, Created, DeliveryView, EndpointChange, EndpointView, HistoryQuery,
    NewEndpoint, Subscription,
};
use crate::webhooks::target::endpoint_url;

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

/// Answers with a page of the delivery history.
#[derive(ApiResponse)]
pub enum DeliveryListResponse {
    /// The events, newest first.
    #[oai(status = 200)]
    Ok(Json<WebhookDeliveryList>),
}

/// Answers with one event for one endpoint, and its tries.
#[derive(ApiResponse)]
pub enum DeliveryResponse {
    /// The event, how it stands, and each try.
    #[oai(status = 200)]
    Ok(Json<WebhookDeliveryDetail>),
}

/// Answers of a redelivery.
#[derive(ApiResponse)]
pub enum RedeliveredResponse {
    /// The event is queued to be sent at once (or is being sent now).
    #[oai(status = 202)]
    Accepted(Json<WebhookDelivery>),
}

/// Answers of a recovery.
#[derive(ApiResponse)]
pub enum RecoveredResponse {
    /// The failed events found are queued to be sent again.
    #[oai(status = 202)]
    Accepted(Json<RecoverResult>),
}

/// Answers of a test event.
#[derive(ApiResponse)]
pub enum TestedResponse {
    /// The test event was sent; whether the endpoint took it is in the body.
    #[oai(status = 200)]
    Ok(Json<WebhookTestResult>),
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
        #[oai(scope = "WebhookManager::SCOPE")] _manager: WebhookManager,
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
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
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
            limit: self.state.config.webhooks.endpoints_per_partner,
            rate_limit: request.rate_limit.flatten(),
            by: &ChangedBy::partner(),
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
    async fn list(
        &self,
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
    ) -> Result<EndpointListResponse, IntakeError> {
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
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
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
    /// what the body leaves out stays as it is. Once a new `url` or a disable is answered,
    /// nothing more is sent by the endpoint as it was. Events are not queued for a disabled
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
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
        body: LenientJson<WebhookEndpointChange>,
    ) -> Result<EndpointResponse, IntakeError> {
        let id = endpoint_id_of(&endpoint_id)?;
        let EndpointRequest {
            url,
            event_types,
            enabled,
            rate_limit,
        } = parse_endpoint_change(&body.value)?;
        let url = self.checked_url(url.as_deref()).await?;
        let change = EndpointChange {
            url,
            event_types: event_types.map(subscription),
            disabled: enabled.map(|on| (!on).then(|| "disabled by the partner".to_owned())),
            rate_limit,
            by: ChangedBy::partner(),
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
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
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
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
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
                &ChangedBy::partner(),
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

    /// Send a test event to a webhook endpoint.
    ///
    /// Sends the catalogue's example of `event_type` (`case.created` when left out) to the
    /// endpoint at once, signed as its events are, with a new `webhook-id`, whether or not
    /// the endpoint is enabled, and answers how it went: check an endpoint before you
    /// enable it. A test event is not retried and not in the delivery history. Needs
    /// `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id/test",
        method = "post",
        operation_id = "testWebhookEndpoint",
        tag = "ApiTags::Webhooks"
    )]
    async fn test(
        &self,
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
        /// Optional: a request without a body sends `case.created`'s example, as `{}` does.
        body: OptionalJson<WebhookTestRequest>,
    ) -> Result<TestedResponse, IntakeError> {
        let id = endpoint_id_of(&endpoint_id)?;
        let event_type = parse_test_event(&body.value)?;
        let endpoint = self
            .state
            .cases
            .endpoint_of(manager.client_id(), id)
            .await?
            .ok_or(IntakeError::EndpointNotFound)?;
        let mut event = EventTypeList::catalogue()
            .data
            .into_iter()
            .find(|entry| entry.event_type == event_type)
            .map(|entry| entry.example)
            .ok_or_else(|| {
                IntakeError::Internal(anyhow::anyhow!("the catalogue has no {event_type:?}"))
            })?;
        event.timestamp = Utc::now();
        let sent = send_test(&self.state, &endpoint, &event)
            .await
            .map_err(IntakeError::Internal)?;
        Ok(TestedResponse::Ok(Json(WebhookTestResult {
            id: sent.id,
            delivered: sent.error.is_none(),
            status: sent.status,
            error: sent.error,
            duration_ms: u32::try_from(sent.duration.as_millis()).unwrap_or(u32::MAX),
        })))
    }

    /// List webhook deliveries.
    ///
    /// Your events for each of your endpoints, newest first, with how each stands
    /// (`pending`, `failing`, `delivered`, `failed`), its tries so far and the next one's
    /// time; filter by endpoint, status, event type and time, and page with `cursor`. The
    /// history keeps an event for the days the deployment says (README, Webhooks) once it
    /// is delivered or given up on. Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/deliveries",
        method = "get",
        operation_id = "listWebhookDeliveries",
        tag = "ApiTags::Webhooks"
    )]
    #[allow(clippy::too_many_arguments)]
    async fn deliveries(
        &self,
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
        /// Only this endpoint's (`ep_` and 32 hex digits).
        endpoint_id: Query<Option<String>>,
        /// Only those that stand so: `pending`, `failing`, `delivered` or `failed`.
        status: Query<Option<String>>,
        /// Only events of this type (`case.activated`...).
        event_type: Query<Option<String>>,
        /// Only events that happened at or after this time (RFC 3339, e.g.
        /// `2026-12-01T09:00:00Z`).
        since: Query<Option<String>>,
        /// Only events that happened before this time (RFC 3339).
        until: Query<Option<String>>,
        /// How many at most: 1 to 100, 20 when left out.
        limit: Query<Option<String>>,
        /// The `next_cursor` of the page before, to go on from it: good only for the
        /// partner it was given to.
        cursor: Query<Option<String>>,
    ) -> Result<DeliveryListResponse, IntakeError> {
        let mut errors = ValidationErrors::default();
        let filter = parse_history_filter(
            HistoryParams {
                status: status.as_deref(),
                event_type: event_type.as_deref(),
                since: since.as_deref(),
                until: until.as_deref(),
                limit: limit.as_deref(),
            },
            &mut errors,
        );
        // Another partner's endpoint is not refused: its events are simply not yours.
        let endpoint = endpoint_id.as_deref().and_then(|name| {
            let id = parse_endpoint_name(name);
            if id.is_none() {
                errors.add(
                    "endpoint_id",
                    "The endpoint_id parameter must be an endpoint's id: ep_ and 32 hex digits.",
                );
            }
            id
        });
        let cursors = &self.state.history_cursors;
        let after = cursor.as_deref().and_then(|text| {
            let cursor = cursors.decode(manager.client_id(), text);
            if cursor.is_none() {
                errors.add(
                    "cursor",
                    "The cursor parameter must be a next_cursor this operation gave.",
                );
            }
            cursor
        });
        if !errors.is_empty() {
            return Err(errors.into());
        }
        let query = HistoryQuery {
            client_id: manager.client_id(),
            endpoint,
            status: filter.status,
            event_type: filter.event_type.map(EventType::name),
            since: filter.since,
            until: filter.until,
            after,
            limit: filter.limit,
        };
        let (views, next) = self.state.cases.history(query).await?;
        Ok(DeliveryListResponse::Ok(Json(WebhookDeliveryList {
            data: views.into_iter().filter_map(delivery_wire).collect(),
            next_cursor: next.map(|next| cursors.encode(manager.client_id(), next)),
        })))
    }

    /// Read a webhook delivery.
    ///
    /// One of your events for one of your endpoints, with each try: when, the answer's
    /// status or why none came, how long it took, and when the next try was set for.
    /// `delivery_id` is the event's `webhook-id`. Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id/deliveries/:delivery_id",
        method = "get",
        operation_id = "getWebhookDelivery",
        tag = "ApiTags::Webhooks"
    )]
    async fn delivery(
        &self,
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
        /// The event's id, its `webhook-id` (`msg_` and 32 hex digits).
        delivery_id: Path<String>,
    ) -> Result<DeliveryResponse, IntakeError> {
        let (endpoint, id) = delivery_of(&endpoint_id, &delivery_id)?;
        let (view, attempts) = self
            .state
            .cases
            .delivery(manager.client_id(), endpoint, id)
            .await?
            .ok_or(IntakeError::DeliveryNotFound)?;
        let delivery = delivery_wire(view).ok_or(IntakeError::DeliveryNotFound)?;
        Ok(DeliveryResponse::Ok(Json(WebhookDeliveryDetail {
            delivery,
            attempts: attempts.into_iter().map(attempt_wire).collect(),
        })))
    }

    /// Send a webhook delivery again.
    ///
    /// Queues one of your events for one of your endpoints to be sent at once, whether it
    /// was delivered, failed or waits for a retry; one being sent right now is left to
    /// that send. It keeps its `webhook-id`, so a receiver that drops repeats drops it. An
    /// event older than the retry window gets one try. A disabled endpoint gets it once
    /// enabled; a removed one's events are not sent again (404). Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id/deliveries/:delivery_id/redeliver",
        method = "post",
        operation_id = "redeliverWebhookDelivery",
        tag = "ApiTags::Webhooks"
    )]
    async fn redeliver(
        &self,
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
        /// The event's id, its `webhook-id` (`msg_` and 32 hex digits).
        delivery_id: Path<String>,
    ) -> Result<RedeliveredResponse, IntakeError> {
        let (endpoint, id) = delivery_of(&endpoint_id, &delivery_id)?;
        let client_id = manager.client_id();
        // An event of an endpoint since removed is in the history, but nothing would send it.
        self.state
            .cases
            .endpoint(client_id, endpoint)
            .await?
            .ok_or(IntakeError::DeliveryNotFound)?;
        self.state
            .cases
            .redeliver(Some((client_id, endpoint)), id)
            .await?;
        let (view, _) = self
            .state
            .cases
            .delivery(client_id, endpoint, id)
            .await?
            .ok_or(IntakeError::DeliveryNotFound)?;
        self.state.cases.events_queued().notify_one();
        let delivery = delivery_wire(view).ok_or(IntakeError::DeliveryNotFound)?;
        Ok(RedeliveredResponse::Accepted(Json(delivery)))
    }

    /// Recover an endpoint's undelivered webhook deliveries.
    ///
    /// Queues again, to be sent at once, every event for this endpoint that happened in the
    /// window (`since`, up to `until` or now) and was not delivered: given up on (`failed`)
    /// or waiting for its next try (`failing`). Oldest first: each is sent once more, each
    /// case's events in order, keeping their `webhook-id`s. At most 1,000 a request: when
    /// `more` is true, send the same request again. A delivered event is sent again with
    /// `redeliver`. Needs `webhooks:manage`.
    #[oai(
        path = "/partners/external/webhooks/endpoints/:endpoint_id/recover",
        method = "post",
        operation_id = "recoverWebhookDeliveries",
        tag = "ApiTags::Webhooks"
    )]
    async fn recover(
        &self,
        #[oai(scope = "WebhookManager::SCOPE")] manager: WebhookManager,
        /// The endpoint's id (`ep_` and 32 hex digits).
        endpoint_id: Path<String>,
        body: LenientJson<RecoverRequest>,
    ) -> Result<RecoveredResponse, IntakeError> {
        let id = endpoint_id_of(&endpoint_id)?;
        let (since, until) = parse_recover(&body.value, Utc::now())?;
        let client_id = manager.client_id();
        self.state
            .cases
            .endpoint(client_id, id)
            .await?
            .ok_or(IntakeError::EndpointNotFound)?;
        let (queued, more) = self
            .state
            .cases
            .recover(client_id, id, since, until)
            .await?;
        if queued > 0 {
            self.state.cases.events_queued().notify_one();
        }
        Ok(RecoveredResponse::Accepted(Json(RecoverResult {
            queued,
            more,
        })))
    }
}

impl WebhooksApi {
    /// `url` as events may be sent to it (https, on a public address, unless this
    /// deployment allows otherwise), or the 422 saying why not.
    async fn checked_url(&self, url: Option<&str>) -> Result<Option<String>, IntakeError> {
        let Some(url) = url else {
            return Ok(None);
        };
        match endpoint_url(url, self.state.config.webhook_reach()).await {
            Ok(checked) => Ok(Some(checked.to_string())),
            Err(refused) => {
                let mut errors = ValidationErrors::default();
                errors.add(
                    "url",
                    format!(
                        "The url field is not one events may go to: {}.",
                        refused.for_partner()
                    ),
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

/// The endpoint and event a delivery's path names; a path naming none is answered as a
/// delivery not found.
fn delivery_of(endpoint: &str, delivery: &str) -> Result<(uuid::Uuid, uuid::Uuid), IntakeError> {
    parse_endpoint_name(endpoint)
        .zip(parse_message_id(delivery))
        .ok_or(IntakeError::DeliveryNotFound)
}

/// A delivery as partners read it; `None` for an event type this release does not know
/// (one a later release queued, during a rollback).
fn delivery_wire(view: DeliveryView) -> Option<WebhookDelivery> {
    Some(WebhookDelivery {
        id: message_id(view.id),
        endpoint_id: endpoint_name(view.endpoint_id),
        event_type: EventType::from_name(&view.event_type)?,
        reference: view.reference,
        created_at: view.created_at,
        status: view.state,
        attempt_count: u32::try_from(view.attempts).unwrap_or(0),
        next_attempt_at: view.next_attempt_at,
        delivered_at: view.delivered_at,
        last_status: view.last_status.and_then(|s| u16::try_from(s).ok()),
        last_error: view.last_error,
    })
}

/// A try as partners read it.
fn attempt_wire(a: AttemptView) -> WebhookAttempt {
    WebhookAttempt {
        attempt: u32::try_from(a.attempt).unwrap_or(0),
        attempted_at: a.attempted_at,
        status: a.status.and_then(|s| u16::try_from(s).ok()),
        error: a.error,
        duration_ms: u32::try_from(a.duration_ms).unwrap_or(0),
        next_attempt_at: a.next_attempt_at,
    }
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
        rate_limit: view.rate_limit,
        created_at: view.created_at,
        updated_at: view.updated_at,
    }
}
