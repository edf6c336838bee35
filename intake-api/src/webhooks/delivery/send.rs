//! One send of an event: signed as Standard Webhooks has it, posted, and judged by its
//! answer (delivered, tried again after a back-off, or given up on).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use chrono::Utc;
use shared::intake::webhooks::WebhookEvent;
use url::Url;
use uuid::Uuid;

use service_kit::outbound::{TargetError, refused_literal};

use super::{MAX_BACKOFF, SEND_TIMEOUT, next_try};
use crate::entity::webhook_endpoint;
use crate::sandbox::WEBHOOK_FAILURES;
use crate::state::AppState;
use crate::webhooks::signing::{Signer, message_id, payload};
use crate::webhooks::store::{DueDelivery, TryOutcome};

/// Where one endpoint's events go, as it was when they were claimed.
pub(super) struct Target {
    pub(super) url: String,
    pub(super) signer: Signer,
    /// Its rounds were all failing when it was read.
    pub(super) failing: bool,
    /// The time between two sends its partner's rate limit asks for; none without one.
    pub(super) gap: Option<Duration>,
    /// That rate limit, in sends a second.
    pub(super) rate: Option<u32>,
    /// The endpoint, to count its sends by.
    pub(super) id: Uuid,
}

/// How a test event's send went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSend {
    /// Its `webhook-id`: a new one, never an event's.
    pub id: String,
    /// The answer's status, when one came.
    pub status: Option<u16>,
    /// What went wrong; none for a 2xx.
    pub error: Option<String>,
    /// How long it took.
    pub duration: Duration,
}

/// Sends `event` (an example, not a case's) to `endpoint` at once, signed as its events
/// are, through the same guard; nothing is queued or recorded.
pub async fn send_test(
    state: &AppState,
    endpoint: &webhook_endpoint::Model,
    event: &WebhookEvent,
) -> anyhow::Result<TestSend> {
    let id = message_id(Uuid::now_v7());
    if let Some(ip) = refused_address(state, endpoint) {
        return Ok(TestSend {
            id,
            status: None,
            error: Some(TargetError::NotPublic(ip).to_string()),
            duration: Duration::ZERO,
        });
    }
    let target = Target {
        url: endpoint.url.clone(),
        signer: signer_of(state, endpoint)?,
        failing: false,
        gap: None,
        rate: None,
        id: endpoint.id,
    };
    let body = serde_json::to_string(event)?;
    let started = Instant::now();
    let sent = post_signed(&state.webhook_http, &target, &id, body).await;
    let duration = started.elapsed();
    let (status, error) = match sent {
        Ok(answer) if (200..300).contains(&answer.status) => (Some(answer.status), None),
        Ok(answer) => (
            Some(answer.status),
            Some(format!("the endpoint answered {}", answer.status)),
        ),
        Err(error) => (None, Some(error)),
    };
    Ok(TestSend {
        id,
        status,
        error,
        duration,
    })
}

/// Counts a try by how it ended.
pub(super) fn count(outcome: &TryOutcome) {
    let label = match outcome {
        TryOutcome::Delivered { .. } => "delivered",
        TryOutcome::Retry { .. } => "retry",
        TryOutcome::Failed {
            status: Some(410), ..
        } => "gone",
        TryOutcome::Failed { .. } => "failed",
    };
    metrics::counter!("intake_webhook_attempts_total", "outcome" => label).increment(1);
}

/// An endpoint's answer to one send.
pub(super) struct Answer {
    pub(super) status: u16,
    /// How long it asked us to wait (`Retry-After`), if it did.
    pub(super) retry_after: Option<Duration>,
}

/// What came of one send: the answer, or why none came.
pub(super) type Sent = Result<Answer, String>;

/// A `Retry-After` header's wait: seconds, or an HTTP date (none for one passed).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?;
    token_client::retry_after(Some(value)).or_else(|| {
        let at = chrono::DateTime::parse_from_rfc2822(value.to_str().ok()?.trim()).ok()?;
        (at.with_timezone(&Utc) - Utc::now()).to_std().ok()
    })
}

pub(super) async fn send(http: &reqwest::Client, target: &Target, event: &DueDelivery) -> Sent {
    if event.fails_on_purpose && event.attempts <= WEBHOOK_FAILURES {
        // The partner's endpoint is not called: the failure is ours, as asked.
        return Err(format!(
            "sandbox: try {} of the {WEBHOOK_FAILURES} that fail on purpose",
            event.attempts
        ));
    }
    post_signed(http, target, &message_id(event.id), payload(event)).await
}

/// POSTs `body` to `target` as message `id`, signed: the endpoint's answer, or why none came.
async fn post_signed(http: &reqwest::Client, target: &Target, id: &str, body: String) -> Sent {
    let timestamp = Utc::now().timestamp();
    let signature = target.signer.sign(id, timestamp, &body);
    let answer = http
        .post(&target.url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                format!("no answer within {} s", SEND_TIMEOUT.as_secs())
            } else {
                format!("could not connect: {e}")
            }
        })?;
    Ok(Answer {
        status: answer.status().as_u16(),
        retry_after: retry_after(answer.headers()),
    })
}

/// How a send ends for the event: delivered on 2xx; on 410 given up (the endpoint is
/// disabled); otherwise tried again, unless the retry window has passed: after the back-off,
/// or the `Retry-After` of a 429 or 503 when that is longer (an hour at most).
pub(super) fn judge(state: &AppState, event: &DueDelivery, sent: Sent) -> TryOutcome {
    let (status, error, asked) = match sent {
        Ok(answer) if (200..300).contains(&answer.status) => {
            return TryOutcome::Delivered {
                status: answer.status,
            };
        }
        Ok(Answer { status: 410, .. }) => {
            return TryOutcome::Failed {
                status: Some(410),
                error: "the endpoint answered 410 Gone".into(),
            };
        }
        Ok(Answer {
            status,
            retry_after,
        }) => {
            let asked = retry_after.filter(|_| matches!(status, 429 | 503));
            let error = match asked {
                Some(wait) => format!(
                    "the endpoint answered {status}, Retry-After {} s",
                    wait.as_secs()
                ),
                None => format!("the endpoint answered {status}"),
            };
            (Some(status), error, asked)
        }
        Err(error) => (None, error, None),
    };
    let now = Utc::now();
    let window =
        chrono::Duration::from_std(state.config.webhooks.retry).unwrap_or(chrono::Duration::MAX);
    if now - event.created_at >= window {
        return TryOutcome::Failed { status, error };
    }
    let base = state.config.webhooks.backoff;
    let mut at = next_try(now, event.attempts, base);
    if let Some(asked) = asked {
        let asked = now + chrono::Duration::from_std(asked.min(MAX_BACKOFF)).unwrap_or_default();
        at = at.max(asked);
    }
    TryOutcome::Retry { at, status, error }
}

/// The address of `endpoint`'s URL when it is an IP literal events may not go to (names are
/// checked as they are resolved).
pub(super) fn refused_address(
    state: &AppState,
    endpoint: &webhook_endpoint::Model,
) -> Option<IpAddr> {
    if state.config.webhooks.insecure.allow {
        return None;
    }
    Url::parse(&endpoint.url)
        .ok()
        .and_then(|url| refused_literal(&url))
}

/// What signs `endpoint`'s events: its secret, and the previous one during its grace.
pub(super) fn signer_of(
    state: &AppState,
    endpoint: &webhook_endpoint::Model,
) -> anyhow::Result<Signer> {
    let mut stored = vec![endpoint.secret.as_str()];
    if let (Some(previous), Some(until)) =
        (&endpoint.previous_secret, endpoint.previous_secret_until)
        && until > Utc::now()
    {
        stored.push(previous);
    }
    let secrets = stored
        .iter()
        .map(|s| state.webhook_secrets.open(&endpoint.client_id, s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Signer::new(
        &secrets
            .iter()
            .map(|s| s.expose().as_str())
            .collect::<Vec<_>>(),
    )
}
