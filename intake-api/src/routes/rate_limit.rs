//! Middleware: each partner's requests per window, counted once its token has verified.

use std::sync::Arc;

use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use service_kit::ratelimit::Decision;

use super::partner::Authentication;
use crate::error::IntakeError;
use crate::state::AppState;

/// Refuses a partner's requests over its limit (429) before the operation runs. Requests
/// whose token did not verify are not counted: they are refused anyway, and counting them
/// would let anyone use up a partner's allowance.
pub struct PartnerRateLimit {
    state: Arc<AppState>,
}

impl PartnerRateLimit {
    /// Limits by `state`'s limiter and configured limit.
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

impl<E: Endpoint> Middleware<E> for PartnerRateLimit {
    type Output = PartnerRateLimitEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        PartnerRateLimitEndpoint {
            inner,
            state: self.state.clone(),
        }
    }
}

/// Endpoint produced by [`PartnerRateLimit`].
pub struct PartnerRateLimitEndpoint<E> {
    inner: E,
    state: Arc<AppState>,
}

impl<E: Endpoint> Endpoint for PartnerRateLimitEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Self::Output> {
        let client_id = match req.extensions().get::<Authentication>() {
            Some(Authentication(Ok(claims))) => Some(claims.client_id.clone()),
            _ => None,
        };
        if let Some(client_id) = client_id {
            let decision = self
                .state
                .limiter
                .hit(&format!("intake:{client_id}"), self.state.partner_limit())
                .await;
            if decision != Decision::Allowed {
                metrics::counter!("ratelimit_refused_total", "service" => "intake-api")
                    .increment(1);
                let refused = IntakeError::TooManyRequests {
                    retry_after_secs: decision.retry_after_secs(),
                };
                return Ok(refused.into_response());
            }
        }
        self.inner.call(req).await.map(IntoResponse::into_response)
    }
}
