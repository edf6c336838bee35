//! One round of an endpoint's sends: its due events claimed a batch at a time, several
//! sends in flight, outcomes recorded in batches as they come.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use uuid::Uuid;

use service_kit::outbound::TargetError;
use service_kit::ratelimit::{Decision, Limit};

use super::gate::{Admission, Gate, Shape};
use super::send::{Sent, Target, count, judge, refused_address, send, signer_of};
use super::{DISABLED_METRIC, Endpoint, client_disabled};
use crate::state::AppState;
use crate::webhooks::store::{ChangedBy, DueDelivery, Tried, TryOutcome};

/// Events sent to one endpoint at once (each about a different case): what one slow
/// endpoint can hold of this replica, and what a fast one gets.
const PER_ENDPOINT: usize = 16;

/// Events one claim takes: several rounds' worth of sends, so the next claim runs while
/// these go out.
const CLAIM_BATCH: u64 = 64;

/// Claim again once fewer than this many claimed events wait for a send.
const REFILL_BELOW: usize = 32;

/// Outcomes recorded in one write at most.
const RECORD_BATCH: usize = 256;

/// How a round of sends to one endpoint ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// Nothing was due, the endpoint is gone, disabled or refused, or its partner is
    /// disabled at the auth-server.
    Idle,
    /// Events were delivered; `more` when later events of their cases may have become due
    /// after the round's last claim.
    Delivered {
        /// Whether to look again at once.
        more: bool,
    },
    /// Sends were tried and none was delivered: the endpoint looks down. `asked` is the
    /// longest `Retry-After` it answered with (zero when none).
    Down {
        /// How long the endpoint asked to be left alone.
        asked: Duration,
    },
    /// The endpoint was changed (disabled, removed, pointed elsewhere, a new secret or
    /// rate limit) or its partner disabled while its events were out: those not yet sent
    /// were given back.
    Changed,
}

/// How a send task ended.
enum SendEnd {
    /// Sent: the answer, and when.
    Sent(DueDelivery, Sent, Tried),
    /// Held back, as the gate said: to be given back.
    GivenBack(DueDelivery, Admission),
    /// No longer to be sent.
    Dropped,
}

/// What a claim found: where to send, and what.
enum Claimed {
    /// The endpoint, what of it decides where its events go, its due events (maybe none),
    /// and how many the claim could take (fewer than asked under a rate limit).
    Due(Arc<Target>, Shape, Vec<DueDelivery>, u64),
    /// The endpoint's address is one events may not go to; `Vec` is what was claimed.
    Refused(IpAddr, Vec<DueDelivery>),
    /// The endpoint is disabled or removed.
    Off,
    /// The database did not answer.
    Nothing,
}

/// One round for `endpoint`: claims its due events a batch at a time, keeps up to
/// [`PER_ENDPOINT`] sends in flight, and records outcomes in batches as they come, until
/// nothing is due or the endpoint looks down. A `probe` round (the endpoint was down)
/// claims a single event and goes on at full pace only once it is delivered. Under a rate
/// limit, sends are spaced evenly from `next_send` on (left where the next one may go), and
/// every replica's sends to the endpoint together stay within it each second.
pub(super) async fn deliver_to(
    state: &Arc<AppState>,
    http: &reqwest::Client,
    endpoint: &Endpoint,
    probe: bool,
    next_send: &mut tokio::time::Instant,
) -> Round {
    // A partner disabled at the auth-server gets nothing until enabled again: no claim, so
    // a round its gate stopped is not followed by another that claims the same events.
    if client_disabled(state, &endpoint.client_id) {
        return Round::Idle;
    }
    let (outcomes, to_record) = mpsc::channel(RECORD_BATCH * 2);
    let recorder = tokio::spawn(record(state.clone(), endpoint.id, to_record));
    let mut limit = if probe { 1 } else { CLAIM_BATCH };
    let mut target: Option<Arc<Target>> = None;
    let mut gate: Option<Arc<Gate>> = None;
    let mut waiting: VecDeque<DueDelivery> = VecDeque::new();
    let mut sends = JoinSet::new();
    let mut claims = JoinSet::new();
    // Under a rate limit, how few claimed events may wait, so each is sent well within its
    // lease.
    let mut refill_below = REFILL_BELOW;
    let (mut delivered, mut failed, mut failed_in_a_row) = (0, 0, 0);
    // A claim may find more; the cases sent hold later events, due once these are recorded.
    let (mut more, mut successors) = (true, false);
    // The endpoint is down, gone, refused or changed: nothing more is sent this round.
    let (mut stop, mut gone, mut refused, mut changed) = (false, false, None, false);
    // The endpoint could not be checked before a send: the round ends, the next look
    // tries again.
    let mut unchecked = false;
    // The longest `Retry-After` of the round's answers, and whether the endpoint was failing.
    let (mut asked, mut failing) = (Duration::ZERO, false);
    loop {
        if more && !stop && claims.is_empty() && waiting.len() < refill_below {
            let (state, id) = (state.clone(), endpoint.id);
            claims.spawn(async move { claim(&state, id, limit).await });
        }
        if let (Some(target), Some(gate)) = (&target, &gate) {
            while !stop && sends.len() < PER_ENDPOINT {
                let now = tokio::time::Instant::now();
                if target.gap.is_some() && now < *next_send {
                    break;
                }
                let Some(event) = waiting.pop_front() else {
                    break;
                };
                if let Some(gap) = target.gap {
                    *next_send = (*next_send).max(now) + gap;
                }
                let (http, target, shared) = (http.clone(), target.clone(), state.clone());
                let gate = gate.clone();
                sends.spawn(async move {
                    within_shared_limit(&shared, &target).await;
                    match gate.admit(event.id).await {
                        Admission::Go => {}
                        Admission::Dropped => return SendEnd::Dropped,
                        held => return SendEnd::GivenBack(event, held),
                    }
                    let (at, started) = (Utc::now(), Instant::now());
                    let sent = send(&http, &target, &event).await;
                    let duration = started.elapsed();
                    SendEnd::Sent(event, sent, Tried { at, duration })
                });
            }
        }
        if sends.is_empty() && claims.is_empty() && (stop || waiting.is_empty()) {
            break;
        }
        let paced = target.as_ref().is_some_and(|t| t.gap.is_some())
            && !stop
            && !waiting.is_empty()
            && sends.len() < PER_ENDPOINT;
        tokio::select! {
            () = tokio::time::sleep_until(*next_send), if paced => {}
            Some(done) = claims.join_next() => {
                let Ok(found) = done else {
                    more = false;
                    continue;
                };
                match found {
                    Claimed::Due(read, shape, due, taken) => {
                        let held = gate.get_or_insert_with(|| {
                            Arc::new(Gate::new(state, endpoint, shape.clone()))
                        });
                        if held.shape != shape {
                            // Changed since the round began: these go back with the rest.
                            (stop, changed) = (true, true);
                            waiting.extend(due);
                            continue;
                        }
                        held.claimed(&due).await;
                        more = due.len() as u64 == taken;
                        refill_below = REFILL_BELOW.min(taken as usize);
                        // Their cases' later events fall due once these are recorded.
                        successors |= due.iter().any(|e| e.later_waiting);
                        failing |= read.failing;
                        target = Some(read);
                        waiting.extend(due);
                    }
                    Claimed::Refused(ip, due) => {
                        let reason = TargetError::NotPublic(ip).to_string();
                        let tried = Tried { at: Utc::now(), duration: Duration::ZERO };
                        for event in due {
                            let outcome = TryOutcome::Failed { status: None, error: reason.clone() };
                            count(&outcome);
                            let _ = outcomes.send((event, outcome, tried)).await;
                        }
                        (stop, refused) = (true, Some((ip, reason)));
                    }
                    Claimed::Off => {
                        more = false;
                        if gate.is_some() {
                            // Events of this round still wait: they go back.
                            (stop, changed) = (true, true);
                        }
                    }
                    Claimed::Nothing => more = false,
                }
            }
            Some(done) = sends.join_next() => {
                // A send task does not panic; were one to, its event falls due again when
                // the claim's lease ends.
                let (event, sent, tried) = match done {
                    Ok(SendEnd::Sent(event, sent, tried)) => (event, sent, tried),
                    Ok(SendEnd::GivenBack(event, held)) => {
                        waiting.push_front(event);
                        stop = true;
                        changed |= held == Admission::Changed;
                        unchecked |= held == Admission::Unchecked;
                        continue;
                    }
                    Ok(SendEnd::Dropped) | Err(_) => continue,
                };
                if let Ok(answer) = &sent {
                    asked = asked.max(answer.retry_after.unwrap_or_default());
                }
                let outcome = judge(state, &event, sent);
                count(&outcome);
                match &outcome {
                    TryOutcome::Delivered { .. } => {
                        delivered += 1;
                        failed_in_a_row = 0;
                        let lag = (Utc::now() - event.created_at).num_milliseconds().max(0);
                        metrics::histogram!("intake_webhook_delivery_lag_seconds")
                            .record(lag as f64 / 1000.0);
                        if limit == 1 {
                            // The probe went through: the endpoint is back.
                            (limit, more) = (CLAIM_BATCH, true);
                        }
                    }
                    TryOutcome::Failed { status: Some(410), .. } => (stop, gone) = (true, true),
                    _ => {
                        failed += 1;
                        failed_in_a_row += 1;
                        let allowed = if limit == 1 { 1 } else { PER_ENDPOINT };
                        stop |= failed_in_a_row >= allowed;
                    }
                }
                let _ = outcomes.send((event, outcome, tried)).await;
            }
        }
    }
    let Endpoint { id, client_id } = endpoint;
    if !waiting.is_empty() {
        let ids: Vec<_> = waiting.iter().map(|e| e.id).collect();
        if let Err(e) = state.cases.release_deliveries(*id, &ids).await {
            tracing::warn!(error = %e, %client_id, endpoint = %id, "giving back unsent webhook deliveries failed");
        }
    }
    drop(outcomes);
    let _ = recorder.await;
    let round = match (delivered, failed) {
        _ if changed => return Round::Changed,
        _ if unchecked => return Round::Idle,
        (0, 0) => Round::Idle,
        (0, _) => Round::Down { asked },
        _ => Round::Delivered { more: successors },
    };
    let disabled = if gone {
        tracing::warn!(%client_id, endpoint = %id, "webhook endpoint answered 410 Gone; disabled");
        Some(("gone", "the endpoint answered 410 Gone".to_owned()))
    } else if let Some((ip, reason)) = refused {
        tracing::warn!(%client_id, endpoint = %id, %ip, "webhook endpoint's address is not public; disabled");
        Some(("not_public", reason))
    } else {
        match round {
            Round::Down { .. } => failing_too_long(state, endpoint).await,
            Round::Delivered { .. } if failing => {
                if let Err(e) = state.cases.endpoint_recovered(*id).await {
                    tracing::warn!(error = %e, %client_id, endpoint = %id, "noting a webhook endpoint's recovery failed");
                }
                None
            }
            _ => None,
        }
    };
    if let Some((label, reason)) = disabled {
        match state
            .cases
            .disable_endpoint(*id, &reason, &ChangedBy::worker())
            .await
        {
            Ok(()) => metrics::counter!(DISABLED_METRIC, "reason" => label).increment(1),
            Err(e) => {
                tracing::warn!(error = %e, %client_id, endpoint = %id, "disabling a webhook endpoint failed");
            }
        }
        return Round::Idle;
    }
    round
}

/// Waits until every replica's sends to `target` this second leave room for one more, when
/// its partner set a rate limit. The count is kept where the deployment keeps its rate
/// limits (Redis, or this replica alone without it).
async fn within_shared_limit(state: &AppState, target: &Target) {
    let Some(rate) = target.rate else {
        return;
    };
    let key = format!("webhook-endpoint:{}", target.id);
    while let Decision::Limited { retry_after } = state.limiter.hit(&key, Limit::per(rate, 1)).await
    {
        tokio::time::sleep(retry_after.max(Duration::from_millis(10))).await;
    }
}

/// Notes a failed round of `endpoint`'s; the reason to disable it when its rounds have all
/// failed for longer than the deployment allows.
async fn failing_too_long(state: &AppState, endpoint: &Endpoint) -> Option<(&'static str, String)> {
    let Endpoint { id, client_id } = endpoint;
    let now = Utc::now();
    let since = match state.cases.endpoint_failing(*id, now).await {
        Ok(since) => since?,
        Err(e) => {
            tracing::warn!(error = %e, %client_id, endpoint = %id, "noting a webhook endpoint's failure failed");
            return None;
        }
    };
    let allowed = state.config.webhooks.disable_after;
    let failing = (now - since).to_std().unwrap_or_default();
    if failing < allowed {
        return None;
    }
    tracing::warn!(%client_id, endpoint = %id, %since, "webhook endpoint failed every delivery for too long; disabled");
    Some((
        "failing",
        format!(
            "every delivery failed for {} (since {}); fix the endpoint, then enable it again",
            humane(allowed),
            since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
    ))
}

/// A duration as people read it: the largest whole unit.
fn humane(d: Duration) -> String {
    let secs = d.as_secs();
    let (n, unit) = match secs {
        s if s >= 86_400 && s % 86_400 == 0 => (s / 86_400, "day"),
        s if s >= 3_600 && s % 3_600 == 0 => (s / 3_600, "hour"),
        s if s >= 60 && s % 60 == 0 => (s / 60, "minute"),
        s => (s, "second"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// Reads endpoint `id` and, when it is active, claims up to `limit` of its due events.
async fn claim(state: &AppState, id: Uuid, limit: u64) -> Claimed {
    let (endpoint, shape) = match state.cases.endpoint_row(id).await {
        Ok(Some(endpoint)) => match Shape::of(&endpoint) {
            Some(shape) => (endpoint, shape),
            None => return Claimed::Off,
        },
        Ok(None) => return Claimed::Off,
        Err(e) => {
            tracing::warn!(error = %e, endpoint = %id, "reading a webhook endpoint failed");
            return Claimed::Nothing;
        }
    };
    let client_id = endpoint.client_id.as_str();
    let refused = refused_address(state, &endpoint);
    let signer = match signer_of(state, &endpoint) {
        Ok(signer) => signer,
        Err(e) => {
            tracing::error!(error = %e, client_id, endpoint = %id, "a webhook endpoint's secret is unusable");
            return Claimed::Nothing;
        }
    };
    let lease = state.config.webhooks.lease;
    let rate = endpoint
        .rate_limit
        .and_then(|r| u32::try_from(r).ok())
        .filter(|r| *r > 0);
    // Under a rate limit, what one claim takes and what waits besides it are each sent
    // within a quarter of the lease.
    let limit = rate.map_or(limit, |rate| {
        limit.min((u64::from(rate) * lease.as_secs() / 4).max(1))
    });
    let due = match state.cases.claim_deliveries(id, limit, lease).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, client_id, endpoint = %id, "claiming webhook deliveries failed");
            return Claimed::Nothing;
        }
    };
    match refused {
        Some(ip) => Claimed::Refused(ip, due),
        None => Claimed::Due(
            Arc::new(Target {
                url: endpoint.url.clone(),
                signer,
                failing: endpoint.failing_since.is_some(),
                gap: rate.map(|rate| Duration::from_secs(1) / rate),
                rate,
                id,
            }),
            shape,
            due,
            limit,
        ),
    }
}

/// Records the outcomes sent on `outcomes` as they come, as many at once as have come
/// while the last write ran. An outcome that could not be
/// recorded leaves its event claimed: it is sent again when the lease ends.
async fn record(
    state: Arc<AppState>,
    endpoint: Uuid,
    mut outcomes: mpsc::Receiver<(DueDelivery, TryOutcome, Tried)>,
) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while outcomes.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        if let Err(e) = state.cases.finish_deliveries(endpoint, &batch).await {
            tracing::warn!(error = %e, %endpoint, "recording webhook deliveries failed");
        }
        batch.clear();
    }
}
