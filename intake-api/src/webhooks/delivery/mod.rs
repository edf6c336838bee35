//! The worker: each endpoint's due events on a task of their own, sent several at a time
//! while the next ones are claimed and the last ones' outcomes recorded, retried with
//! back-off. A round of one endpoint's sends (`round`) hands each claimed event to the
//! network only past the endpoint's gate (`gate`), and each send is signed, posted and
//! judged by `send`.

mod gate;
mod round;
mod send;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::store::EndpointDue;
use crate::state::AppState;
use round::{Round, deliver_to};
pub use send::{TestSend, send_test};

/// How long a partner has to answer.
pub const SEND_TIMEOUT: Duration = crate::config::WEBHOOK_SEND_TIMEOUT;

/// The longest wait between two tries of one event.
const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// The longest wait between two tries of an endpoint that is down: once it is back, its
/// backlog flows within this, however long it was down.
const MAX_PROBE_WAIT: Duration = Duration::from_secs(60);

/// The shortest time between two looks for due endpoints, so a burst of changes costs one
/// look rather than one each.
const LOOK_SPACING: Duration = Duration::from_millis(10);

/// The same while no endpoint is active: a change then queues nothing unless an endpoint
/// was set since the last look, so one look a second at most finds a new one without a
/// look for each change.
const LOOK_SPACING_WITHOUT_ENDPOINTS: Duration = Duration::from_secs(1);

/// How often the pending-events gauge is refreshed: counting reads every pending row.
const GAUGE_PERIOD: Duration = Duration::from_secs(15);

/// When to try an event again after `attempts` tries: exponential from `base`, at most
/// [`MAX_BACKOFF`], spread by a random ±20% so many endpoints' retries do not bunch.
pub fn next_try(now: DateTime<Utc>, attempts: i32, base: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(backoff(attempts, base, MAX_BACKOFF)).unwrap_or_default()
}

/// The wait after the `tries`th failed try in a row: `base` doubling with each, at most
/// `cap`, spread by a random ±20%.
fn backoff(tries: i32, base: Duration, cap: Duration) -> Duration {
    let exponent = u32::try_from(tries.saturating_sub(1)).unwrap_or(0).min(20);
    let wait = base.saturating_mul(1 << exponent).min(cap);
    let mut byte = [0u8; 1];
    let _ = aws_lc_rs::rand::fill(&mut byte);
    wait.mul_f64(0.8 + 0.4 * f64::from(byte[0]) / 255.0)
}

/// What this replica knows of one endpoint between rounds.
#[derive(Debug, Default)]
struct Known {
    /// A round is under way.
    running: bool,
    /// Events fell due while it was: run another before stopping.
    again: bool,
    /// Rounds in a row in which every send failed.
    down_rounds: i32,
    /// Not tried before this, while its endpoint is down.
    resume_at: Option<Instant>,
    /// Under a rate limit, when the next send may go (a round's pace holds into the next).
    next_send: Option<tokio::time::Instant>,
    /// The endpoint's count of requests to send again, as last seen: when it changes, a
    /// partner or an operator asked for events to go at once, and `resume_at` is dropped.
    resends_seen: Option<i64>,
}

/// Every endpoint this replica has sent to.
type Endpoints = Arc<Mutex<HashMap<Uuid, Known>>>;

/// The endpoints, to read or change: a task that panicked while holding them left nothing
/// half-changed (each change is one assignment), so the worker goes on.
fn known(endpoints: &Endpoints) -> MutexGuard<'_, HashMap<Uuid, Known>> {
    endpoints.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An endpoint a task serves: its id, and its partner for the logs.
#[derive(Debug, Clone)]
struct Endpoint {
    id: Uuid,
    client_id: Arc<str>,
}

/// Sends due events until aborted. Each endpoint with events due gets a task, when it has
/// none here yet; the worker looks for them at every poll period, and, while any endpoint
/// is active, at once (within [`LOOK_SPACING`]) when this replica made a change that may
/// queue events.
pub async fn run(state: Arc<AppState>) {
    let http = state.webhook_http.clone();
    let period = state.config.webhooks.poll;
    for reason in DISABLED_REASONS {
        metrics::counter!(DISABLED_METRIC, "reason" => reason).increment(0);
    }
    let endpoints = Endpoints::default();
    let mut tasks = JoinSet::new();
    let mut counted: Option<Instant> = None;
    loop {
        while tasks.try_join_next().is_some() {}
        if counted.is_none_or(|at| at.elapsed() >= GAUGE_PERIOD) {
            counted = Some(Instant::now());
            match state.cases.pending_deliveries().await {
                Ok(n) => metrics::gauge!("intake_webhook_deliveries_pending").set(n as f64),
                Err(e) => tracing::warn!(error = %e, "counting pending webhook deliveries failed"),
            }
        }
        let mut active = true;
        match state.cases.webhook_endpoints_due().await {
            Ok(found) => {
                active = !found.is_empty();
                for EndpointDue {
                    id,
                    client_id,
                    due,
                    resend_requests,
                } in found
                {
                    resent(&endpoints, id, resend_requests);
                    // A disabled partner's events wait; it gets them if enabled again.
                    if due && !client_disabled(&state, &client_id) {
                        let endpoint = Endpoint {
                            id,
                            client_id: client_id.into(),
                        };
                        start(&state, &http, &endpoints, &mut tasks, endpoint);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "looking for due webhook deliveries failed"),
        }
        let now = tokio::time::Instant::now();
        let mut next_look = now + period;
        let spacing = if active {
            LOOK_SPACING
        } else {
            LOOK_SPACING_WITHOUT_ENDPOINTS
        };
        tokio::time::sleep(LOOK_SPACING).await;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next_look) => break,
                () = state.cases.events_queued().notified() => {
                    next_look = next_look.min(now + spacing);
                }
            }
        }
    }
}

/// Notes endpoint `id`'s count of requests to send again: once it moves, the wait this
/// replica keeps after the endpoint's failures ends, so what was asked goes at once.
fn resent(endpoints: &Endpoints, id: Uuid, count: i64) {
    let mut known = known(endpoints);
    let this = known.entry(id).or_default();
    if this.resends_seen.is_some_and(|seen| seen != count) {
        this.resume_at = None;
    }
    this.resends_seen = Some(count);
}

/// Whether `client_id` was disabled at the auth-server, as this replica last heard: its
/// endpoints are sent nothing.
fn client_disabled(state: &AppState, client_id: &str) -> bool {
    state
        .verifier
        .revocations()
        .is_some_and(|revoked| revoked.contains(client_id))
}

/// Starts a round for `endpoint`, unless one runs (it is asked to look again when done)
/// or it is down and not yet due for another try.
fn start(
    state: &Arc<AppState>,
    http: &reqwest::Client,
    endpoints: &Endpoints,
    tasks: &mut JoinSet<()>,
    endpoint: Endpoint,
) {
    let mut known = known(endpoints);
    let this = known.entry(endpoint.id).or_default();
    if this.running {
        this.again = true;
        return;
    }
    if this.resume_at.is_some_and(|at| at > Instant::now()) {
        return;
    }
    this.running = true;
    tasks.spawn(serve(
        state.clone(),
        http.clone(),
        endpoints.clone(),
        endpoint,
    ));
}

/// Runs rounds for `endpoint` while they find work, then marks it idle. After a round in
/// which every send failed, the next one waits, and tries a single event.
async fn serve(
    state: Arc<AppState>,
    http: reqwest::Client,
    endpoints: Endpoints,
    endpoint: Endpoint,
) {
    let base = state.config.webhooks.backoff;
    let mut serving = Serving {
        endpoints: endpoints.clone(),
        id: endpoint.id,
        ended: false,
    };
    loop {
        let (probe, mut next_send) =
            known(&endpoints)
                .get(&endpoint.id)
                .map_or((false, tokio::time::Instant::now()), |e| {
                    let next = e.next_send.unwrap_or_else(tokio::time::Instant::now);
                    (e.down_rounds > 0, next)
                });
        let round = deliver_to(&state, &http, &endpoint, probe, &mut next_send).await;
        let mut known = known(&endpoints);
        let this = known.entry(endpoint.id).or_default();
        this.next_send = Some(next_send);
        match round {
            Round::Down { asked } => {
                this.down_rounds = this.down_rounds.saturating_add(1);
                let wait =
                    backoff(this.down_rounds, base, MAX_PROBE_WAIT).max(asked.min(MAX_BACKOFF));
                this.resume_at = Some(Instant::now() + wait);
                this.again = false;
            }
            Round::Delivered { more } => {
                this.down_rounds = 0;
                this.resume_at = None;
                if more {
                    continue;
                }
            }
            // What was left goes by the endpoint as it is now, if it still takes events.
            Round::Changed => continue,
            Round::Idle => {}
        }
        if std::mem::take(&mut this.again) {
            continue;
        }
        this.running = false;
        serving.ended = true;
        return;
    }
}

/// Marks an endpoint's task as gone should it end without saying so (a panic in a round),
/// so that the next look starts another instead of leaving the endpoint unserved here.
struct Serving {
    endpoints: Endpoints,
    id: Uuid,
    /// The task marked the endpoint idle itself, in the same hold of the lock in which it
    /// found nothing more to do.
    ended: bool,
}

impl Drop for Serving {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if let Some(this) = known(&self.endpoints).get_mut(&self.id) {
            this.running = false;
        }
    }
}

/// Endpoints disabled by the worker, by why: `gone` (410), `not_public` (its address), or
/// `failing` (every try failed for `INTAKE_WEBHOOK_DISABLE_AFTER_SECS`).
pub const DISABLED_METRIC: &str = "intake_webhook_endpoints_disabled_total";

/// The reasons of [`DISABLED_METRIC`], each counted from zero from the start so the first
/// disabling shows as an increase.
pub const DISABLED_REASONS: [&str; 3] = ["gone", "not_public", "failing"];

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
        let probe = backoff(40, base, MAX_PROBE_WAIT).as_millis();
        assert!((48_000..=72_000).contains(&probe), "{probe}");
    }
}
