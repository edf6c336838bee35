//! The worker: each partner's due events on a task of their own, retried with back-off.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use url::Url;

use super::addresses::{SEND_TIMEOUT, TargetError, client, refused_literal};
use super::signing::{message_id, payload, signature};
use super::{DueDelivery, TryOutcome};
use crate::state::AppState;

/// How long a worker holds the events it claimed: longer than a send may take.
const CLAIM_LEASE: Duration = Duration::from_secs(60);

/// Events sent to one partner at once (each about a different case).
const PER_PARTNER: u64 = 16;

/// The longest wait between two tries of one event.
const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// When to try an event again after `attempts` tries: exponential from `base`, at most
/// [`MAX_BACKOFF`], spread by a random ±20% so many partners' retries do not bunch.
pub fn next_try(now: DateTime<Utc>, attempts: i32, base: Duration) -> DateTime<Utc> {
    let exponent = u32::try_from(attempts.saturating_sub(1))
        .unwrap_or(0)
        .min(20);
    let wait = base.saturating_mul(1 << exponent).min(MAX_BACKOFF);
    let mut byte = [0u8; 1];
    let _ = aws_lc_rs::rand::fill(&mut byte);
    let spread = 0.8 + 0.4 * f64::from(byte[0]) / 255.0;
    now + chrono::Duration::from_std(wait.mul_f64(spread)).unwrap_or_default()
}

/// Sends due events until aborted: every poll period, a task for each partner with events
/// due and none running here yet.
pub async fn run(state: Arc<AppState>) {
    let allow_insecure = state.config.webhook_allow_insecure;
    let http = match client(allow_insecure) {
        Ok(http) => http,
        Err(e) => {
            tracing::error!(error = %e, "webhook client could not be built; no webhooks are sent");
            return;
        }
    };
    let period = Duration::from_millis(state.config.webhook_poll_ms.max(10));
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        match state.cases.pending_deliveries().await {
            Ok(n) => metrics::gauge!("intake_webhook_deliveries_pending").set(n as f64),
            Err(e) => tracing::warn!(error = %e, "counting pending webhook deliveries failed"),
        }
        match state.cases.webhook_partners_due().await {
            Ok(partners) => {
                for partner in partners {
                    if !running
                        .lock()
                        .expect("not poisoned")
                        .insert(partner.clone())
                    {
                        continue;
                    }
                    let (state, http, running) = (state.clone(), http.clone(), running.clone());
                    tasks.spawn(async move {
                        deliver_to(&state, &http, &partner).await;
                        running.lock().expect("not poisoned").remove(&partner);
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "looking for due webhook deliveries failed"),
        }
        tokio::time::sleep(period).await;
    }
}

/// Sends `client_id`'s due events, a batch at a time, until none is due or a whole batch
/// failed (the endpoint is down: its events wait for their next try).
async fn deliver_to(state: &AppState, http: &reqwest::Client, client_id: &str) {
    loop {
        let Ok(Some(endpoint)) = state.cases.webhook(client_id).await else {
            return;
        };
        if endpoint.disabled_at.is_some() {
            return;
        }
        let refused = if state.config.webhook_allow_insecure {
            None
        } else {
            Url::parse(&endpoint.url)
                .ok()
                .and_then(|url| refused_literal(&url))
        };
        let due = match state
            .cases
            .claim_deliveries(client_id, PER_PARTNER, CLAIM_LEASE)
            .await
        {
            Ok(due) if !due.is_empty() => due,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, client_id, "claiming webhook deliveries failed");
                return;
            }
        };
        if let Some(ip) = refused {
            refuse(state, client_id, ip, &due).await;
            return;
        }
        let now = Utc::now();
        let mut secrets = vec![endpoint.secret.clone()];
        if let (Some(previous), Some(until)) =
            (&endpoint.previous_secret, endpoint.previous_secret_until)
            && until > now
        {
            secrets.push(previous.clone());
        }
        let secrets = Arc::new(secrets);
        let mut sends = tokio::task::JoinSet::new();
        for (i, event) in due.iter().enumerate() {
            let (http, url, secrets, event) = (
                http.clone(),
                endpoint.url.clone(),
                secrets.clone(),
                event.clone(),
            );
            sends.spawn(async move { (i, send(&http, &url, &secrets, &event).await) });
        }
        let mut outcomes: Vec<Sent> = vec![Err("the send was lost".into()); due.len()];
        while let Some(done) = sends.join_next().await {
            if let Ok((i, sent)) = done {
                outcomes[i] = sent;
            }
        }
        let mut any_delivered = false;
        for (event, outcome) in due.iter().zip(outcomes) {
            let outcome = judge(state, event, outcome);
            if let TryOutcome::Delivered = outcome {
                any_delivered = true;
                let latency = (Utc::now() - event.created_at).num_milliseconds().max(0);
                metrics::histogram!("intake_webhook_delivery_lag_seconds")
                    .record(latency as f64 / 1000.0);
            }
            let label = match &outcome {
                TryOutcome::Delivered => "delivered",
                TryOutcome::Retry { .. } => "retry",
                TryOutcome::Failed {
                    status: Some(410), ..
                } => "gone",
                TryOutcome::Failed { .. } => "failed",
            };
            metrics::counter!("intake_webhook_attempts_total", "outcome" => label).increment(1);
            if let Err(e) = state
                .cases
                .finish_delivery(event.id, client_id, &outcome)
                .await
            {
                tracing::warn!(error = %e, client_id, "recording a webhook delivery failed");
            }
            if label == "gone" {
                tracing::warn!(client_id, "webhook endpoint answered 410 Gone; disabled");
                if let Err(e) = state
                    .cases
                    .disable_webhook(client_id, "the endpoint answered 410 Gone")
                    .await
                {
                    tracing::warn!(error = %e, client_id, "disabling a webhook endpoint failed");
                }
                return;
            }
        }
        if !any_delivered {
            return;
        }
    }
}

/// Gives up on `due`, claimed for `client_id`'s endpoint at `ip`, an address events may
/// not go to (stored before the check knew it, or with the check off), and disables the
/// endpoint saying why: an address never changes, so trying again cannot help.
async fn refuse(state: &AppState, client_id: &str, ip: IpAddr, due: &[DueDelivery]) {
    let reason = TargetError::NotPublic(ip).to_string();
    tracing::warn!(client_id, %ip, "webhook endpoint's address is not public; disabled");
    for event in due {
        let outcome = TryOutcome::Failed {
            status: None,
            error: reason.clone(),
        };
        metrics::counter!("intake_webhook_attempts_total", "outcome" => "failed").increment(1);
        if let Err(e) = state
            .cases
            .finish_delivery(event.id, client_id, &outcome)
            .await
        {
            tracing::warn!(error = %e, client_id, "recording a webhook delivery failed");
        }
    }
    if let Err(e) = state.cases.disable_webhook(client_id, &reason).await {
        tracing::warn!(error = %e, client_id, "disabling a webhook endpoint failed");
    }
}

/// What came of one send: the status, or why none came.
type Sent = Result<u16, String>;

async fn send(http: &reqwest::Client, url: &str, secrets: &[String], event: &DueDelivery) -> Sent {
    let id = message_id(event.id);
    let timestamp = Utc::now().timestamp();
    let body = payload(event);
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let signature = signature(&secrets, &id, timestamp, &body).map_err(|e| e.to_string())?;
    let answer = http
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
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
    Ok(answer.status().as_u16())
}

/// How a send ends for the event: delivered on 2xx; on 410 given up (the endpoint is
/// disabled); otherwise tried again, unless the retry window has passed.
fn judge(state: &AppState, event: &DueDelivery, sent: Sent) -> TryOutcome {
    let (status, error) = match sent {
        Ok(status) if (200..300).contains(&status) => return TryOutcome::Delivered,
        Ok(410) => {
            return TryOutcome::Failed {
                status: Some(410),
                error: "the endpoint answered 410 Gone".into(),
            };
        }
        Ok(status) => (Some(status), format!("the endpoint answered {status}")),
        Err(error) => (None, error),
    };
    let now = Utc::now();
    let window = chrono::Duration::seconds(state.config.webhook_retry_secs as i64);
    if now - event.created_at >= window {
        return TryOutcome::Failed { status, error };
    }
    let base = Duration::from_millis(state.config.webhook_backoff_ms);
    TryOutcome::Retry {
        at: next_try(now, event.attempts, base),
        status,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_grows_to_its_cap() {
        let now = Utc::now();
        let base = Duration::from_secs(5);
        let first = (next_try(now, 1, base) - now).num_milliseconds();
        assert!((4_000..=6_000).contains(&first), "{first}");
        let fourth = (next_try(now, 4, base) - now).num_milliseconds();
        assert!((32_000..=48_000).contains(&fourth), "{fourth}");
        let late = (next_try(now, 40, base) - now).num_milliseconds();
        assert!((48 * 60 * 1000..=72 * 60 * 1000).contains(&late), "{late}");
    }
}
