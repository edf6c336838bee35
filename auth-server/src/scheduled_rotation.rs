//! The signing keys rotated on a schedule (`AUTH_KEY_ROTATION_INTERVAL_SECS`), so no
//! security team has to remember to: every replica watches for the rotation falling due,
//! and the one that takes the database's lease performs it, the same staged rotation an
//! operator's `key rotate` makes, audited as [`ACTOR`]. Every replica also reports the
//! signing key's age, whether or not a schedule is set, and whether its algorithm is one the
//! FAPI 2.0 profile allows.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::audit;
use crate::registry::PROPAGATION;
use crate::state::AppState;
use crate::store::key_schedule;

/// Who scheduled rotations are by, in the audit trail.
pub const ACTOR: &str = "scheduler";

/// How long a replica holds the lease while it rotates: far longer than a rotation takes,
/// and the longest a replica that died holding it keeps the others waiting.
const LEASE: Duration = Duration::from_secs(60);

/// How often the key's age is reported when no schedule is set.
const REPORT_EVERY: Duration = Duration::from_secs(15);

/// How often a replica looks whether a rotation on an `interval` schedule is due: a tenth
/// of the interval, between a tenth of a second and half a minute.
fn look_every(interval: Option<Duration>) -> Duration {
    interval.map_or(REPORT_EVERY, |i| {
        (i / 10).clamp(Duration::from_millis(100), Duration::from_secs(30))
    })
}

/// Reports the signing key's age, and rotates the keys when the schedule says so; runs
/// until the task is aborted.
pub async fn run(state: Arc<AppState>) {
    let interval = state.config.key_rotation_interval();
    metrics::gauge!("auth_key_rotation_interval_seconds")
        .set(interval.map_or(0.0, |i| i.as_secs_f64()));
    // Distinct per process, so a replica never mistakes another's lease for its own.
    let holder = uuid::Uuid::new_v4().to_string();
    loop {
        look(&state, &holder, interval).await;
        tokio::time::sleep(look_every(interval)).await;
    }
}

/// Reports the signing key's age and, when the schedule says a rotation is due, makes it.
async fn look(state: &AppState, holder: &str, interval: Option<Duration>) {
    let now = Utc::now();
    let snapshot = state.registry.snapshot();
    if let Some(signer) = snapshot.signing_key(now) {
        let age = (now - signer.activates_at).to_std().unwrap_or_default();
        metrics::gauge!("auth_signing_key_age_seconds").set(age.as_secs_f64());
    }
    let outside = snapshot.signing_alg_outside(state.config.profile(), now);
    metrics::gauge!("auth_fapi2_token_alg_nonconformant")
        .set(f64::from(u8::from(outside.is_some())));
    let Some(interval) = interval else { return };
    // By the newest scheduled key, a pending one included: a rotation made is not due again.
    let due = snapshot
        .keys
        .last()
        .zip(chrono::Duration::from_std(interval).ok())
        .is_some_and(|(newest, interval)| newest.activates_at + interval <= now);
    if !due {
        return;
    }
    let outcome = match rotate(state, holder, interval).await {
        Ok(Some(kid)) => {
            tracing::info!(%kid, actor = ACTOR, "signing keys rotated on schedule");
            "ok"
        }
        // Another replica has the lease, or rotated first.
        Ok(None) => return,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "the scheduled key rotation failed; it is tried again at the next look");
            "error"
        }
    };
    metrics::counter!("auth_scheduled_rotations_total", "outcome" => outcome).increment(1);
}

/// Under the lease, the rotation if it is still due: the kid that takes over, or none when
/// another replica has the lease or rotated first.
async fn rotate(
    state: &AppState,
    holder: &str,
    interval: Duration,
) -> anyhow::Result<Option<String>> {
    let db = state.registry.db();
    if !key_schedule::take_lease(db, holder, chrono::Duration::from_std(LEASE)?).await? {
        return Ok(None);
    }
    let keys = state.registry.keys();
    let actor = audit::Author::new(ACTOR, audit::AuditKey::derive(keys.sealer())?);
    let rotated = key_schedule::rotate_if_due(
        db,
        keys,
        chrono::Duration::from_std(interval)?,
        chrono::Duration::seconds(i64::try_from(state.config.jwks_max_age_secs)?),
        Utc::now() + chrono::Duration::from_std(PROPAGATION)?,
        &actor,
    )
    .await;
    // Given up whatever happened: the next look, at any replica, reads the keys afresh.
    if let Err(e) = key_schedule::release_lease(db, holder).await {
        tracing::warn!(error = %e, "the key rotation lease could not be given up; it runs out by itself");
    }
    Ok(rotated?.map(|r| r.kid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_looked_at_ten_times_per_interval_within_bounds() {
        assert_eq!(look_every(None), REPORT_EVERY);
        assert_eq!(
            look_every(Some(Duration::from_secs(2))),
            Duration::from_millis(200)
        );
        assert_eq!(
            look_every(Some(Duration::from_millis(10))),
            Duration::from_millis(100)
        );
        assert_eq!(
            look_every(Some(Duration::from_secs(86_400))),
            Duration::from_secs(30)
        );
    }
}
