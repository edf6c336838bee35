//! The worker: each endpoint's due events on a task of their own, sent several at a time
//! while the next ones are claimed and the last ones' outcomes recorded, retried with
//! back-off.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use shared::intake::webhooks::WebhookEvent;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use url::Url;
use uuid::Uuid;

use service_kit::outbound::{TargetError, refused_literal};
use service_kit::ratelimit::{Decision, Limit};

use super::signing::{Signer, message_id, payload};
use super::store::{CHECKED_WITHIN, ChangedBy, DueDelivery, EndpointDue, Tried, TryOutcome};
use crate::entity::webhook_endpoint;
use crate::sandbox::WEBHOOK_FAILURES;
use crate::state::AppState;

/// How long a partner has to answer.
pub const SEND_TIMEOUT: Duration = crate::config::WEBHOOK_SEND_TIMEOUT;

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
    let period = Duration::from_millis(state.config.webhook_poll_ms.max(10));
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
    let base = Duration::from_millis(state.config.webhook_backoff_ms);
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

/// How a round of sends to one endpoint ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Nothing was due, or the endpoint is gone, disabled or refused.
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

/// Where one endpoint's events go, as it was when they were claimed.
struct Target {
    url: String,
    signer: Signer,
    /// Its rounds were all failing when it was read.
    failing: bool,
    /// The time between two sends its partner's rate limit asks for; none without one.
    gap: Option<Duration>,
    /// That rate limit, in sends a second.
    rate: Option<u32>,
    /// The endpoint, to count its sends by.
    id: Uuid,
}

/// What of an endpoint decides where and how its events go: a change to any of it ends a
/// round, whose events not yet sent then go by the endpoint as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    url: String,
    secret: String,
    previous_secret: Option<String>,
    previous_secret_until: Option<DateTime<Utc>>,
    rate_limit: Option<i32>,
}

impl Shape {
    /// `endpoint`'s shape; `None` when it is disabled.
    fn of(endpoint: &webhook_endpoint::Model) -> Option<Self> {
        endpoint.disabled_at.is_none().then(|| Self {
            url: endpoint.url.clone(),
            secret: endpoint.secret.clone(),
            previous_secret: endpoint.previous_secret.clone(),
            previous_secret_until: endpoint.previous_secret_until,
            rate_limit: endpoint.rate_limit,
        })
    }
}

/// What stands between a round's claimed events and the network: each is handed over
/// only if its endpoint, read no longer than [`CHECKED_WITHIN`] before, is as it was
/// claimed for and the event is still to be sent. A change is thus obeyed by every replica
/// within that time, and the change waits as long before it is acknowledged.
struct Gate {
    state: Arc<AppState>,
    endpoint: Endpoint,
    shape: Shape,
    /// Claimed events not yet handed over or given back.
    outstanding: Mutex<HashSet<Uuid>>,
    /// The last check, shared by the round's sends: one read serves every send in its time.
    last: tokio::sync::Mutex<Check>,
}

/// What a gate's check found.
struct Check {
    /// When it began: what it read was so at least from then.
    at: tokio::time::Instant,
    /// The endpoint is as claimed for.
    open: bool,
    /// The database did not answer: nothing is known.
    failed: bool,
    /// Events no longer to be sent (erased, or their endpoint removed).
    dropped: HashSet<Uuid>,
}

/// Whether a claimed event may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Hand it to the network.
    Go,
    /// It is no longer to be sent.
    Dropped,
    /// The endpoint changed: give it back, and end the round.
    Changed,
    /// The database did not answer the check: give it back, and end the round.
    Unchecked,
}

impl Gate {
    fn new(state: &Arc<AppState>, endpoint: &Endpoint, shape: Shape) -> Self {
        let stale = tokio::time::Instant::now()
            .checked_sub(CHECKED_WITHIN)
            .unwrap_or_else(tokio::time::Instant::now);
        Self {
            state: state.clone(),
            endpoint: endpoint.clone(),
            shape,
            outstanding: Mutex::default(),
            last: tokio::sync::Mutex::new(Check {
                at: stale,
                open: false,
                failed: false,
                dropped: HashSet::new(),
            }),
        }
    }

    /// Takes in events just claimed: the next send checks again, so that each event is
    /// checked after its claim.
    async fn claimed(&self, due: &[DueDelivery]) {
        lock(&self.outstanding).extend(due.iter().map(|e| e.id));
        if let Some(at) = tokio::time::Instant::now().checked_sub(CHECKED_WITHIN) {
            self.last.lock().await.at = at;
        }
    }

    /// Whether event `id` may be handed to the network now.
    async fn admit(&self, id: Uuid) -> Admission {
        let mut last = self.last.lock().await;
        if last.at.elapsed() >= CHECKED_WITHIN {
            *last = self.check().await;
        }
        if last.failed {
            return Admission::Unchecked;
        }
        // Read last, after any wait on the database, so that what this replica heard while
        // the check ran holds the send back.
        if !last.open || client_disabled(&self.state, &self.endpoint.client_id) {
            return Admission::Changed;
        }
        if last.dropped.contains(&id) {
            lock(&self.outstanding).remove(&id);
            return Admission::Dropped;
        }
        lock(&self.outstanding).remove(&id);
        Admission::Go
    }

    /// Reads the endpoint and which outstanding events are still to be sent.
    async fn check(&self) -> Check {
        let at = tokio::time::Instant::now();
        let ids: Vec<Uuid> = lock(&self.outstanding).iter().copied().collect();
        let Endpoint { id, client_id } = &self.endpoint;
        match self.state.cases.still_to_send(*id, &ids).await {
            Ok((endpoint, pending)) => {
                let open = endpoint.as_ref().and_then(Shape::of).as_ref() == Some(&self.shape);
                let pending: HashSet<Uuid> = pending.into_iter().collect();
                let dropped = ids.into_iter().filter(|e| !pending.contains(e)).collect();
                if !open {
                    tracing::info!(%client_id, endpoint = %id, "webhook endpoint changed while its events were out; the rest go by it as it is now");
                }
                Check {
                    at,
                    open,
                    failed: false,
                    dropped,
                }
            }
            Err(e) => {
                // Sent blind, a change could be missed: nothing goes until the database answers.
                tracing::warn!(error = %e, %client_id, endpoint = %id, "checking a webhook endpoint before sending failed");
                Check {
                    at,
                    open: false,
                    failed: true,
                    dropped: HashSet::new(),
                }
            }
        }
    }
}

/// `set`, to read or change: each change to it is one call, so a panic elsewhere left it whole.
fn lock<T>(set: &Mutex<T>) -> MutexGuard<'_, T> {
    set.lock().unwrap_or_else(PoisonError::into_inner)
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
async fn deliver_to(
    state: &Arc<AppState>,
    http: &reqwest::Client,
    endpoint: &Endpoint,
    probe: bool,
    next_send: &mut tokio::time::Instant,
) -> Round {
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

/// Endpoints disabled by the worker, by why: `gone` (410), `not_public` (its address), or
/// `failing` (every try failed for `INTAKE_WEBHOOK_DISABLE_AFTER_SECS`).
pub const DISABLED_METRIC: &str = "intake_webhook_endpoints_disabled_total";

/// The reasons of [`DISABLED_METRIC`], each counted from zero from the start so the first
/// disabling shows as an increase.
pub const DISABLED_REASONS: [&str; 3] = ["gone", "not_public", "failing"];

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
    let allowed = Duration::from_secs(state.config.webhook_disable_after_secs);
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
    let lease = Duration::from_secs(state.config.webhook_lease_secs);
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

/// The address of `endpoint`'s URL when it is an IP literal events may not go to (names are
/// checked as they are resolved).
fn refused_address(state: &AppState, endpoint: &webhook_endpoint::Model) -> Option<IpAddr> {
    if state.config.webhook_allow_insecure {
        return None;
    }
    Url::parse(&endpoint.url)
        .ok()
        .and_then(|url| refused_literal(&url))
}

/// What signs `endpoint`'s events: its secret, and the previous one during its grace.
fn signer_of(state: &AppState, endpoint: &webhook_endpoint::Model) -> anyhow::Result<Signer> {
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

/// Counts a try by how it ended.
fn count(outcome: &TryOutcome) {
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
struct Answer {
    status: u16,
    /// How long it asked us to wait (`Retry-After`), if it did.
    retry_after: Option<Duration>,
}

/// What came of one send: the answer, or why none came.
type Sent = Result<Answer, String>;

/// A `Retry-After` header's wait: seconds, or an HTTP date (none for one passed).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?;
    token_client::retry_after(Some(value)).or_else(|| {
        let at = chrono::DateTime::parse_from_rfc2822(value.to_str().ok()?.trim()).ok()?;
        (at.with_timezone(&Utc) - Utc::now()).to_std().ok()
    })
}

async fn send(http: &reqwest::Client, target: &Target, event: &DueDelivery) -> Sent {
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
fn judge(state: &AppState, event: &DueDelivery, sent: Sent) -> TryOutcome {
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
    let window = chrono::Duration::seconds(state.config.webhook_retry_secs as i64);
    if now - event.created_at >= window {
        return TryOutcome::Failed { status, error };
    }
    let base = Duration::from_millis(state.config.webhook_backoff_ms);
    let mut at = next_try(now, event.attempts, base);
    if let Some(asked) = asked {
        let asked = now + chrono::Duration::from_std(asked.min(MAX_BACKOFF)).unwrap_or_default();
        at = at.max(asked);
    }
    TryOutcome::Retry { at, status, error }
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
        let probe = backoff(40, base, MAX_PROBE_WAIT).as_millis();
        assert!((48_000..=72_000).contains(&probe), "{probe}");
    }
}
