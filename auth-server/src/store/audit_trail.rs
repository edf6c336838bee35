//! The audit trail's marker: the one sealed entry that says from where every entry is
//! sealed as written, and which entries before it were written without the key.

use anyhow::bail;
use sea_orm::DatabaseConnection;
use serde_json::json;

use super::begin_change;
use crate::audit::{self, Unsealed};

/// What `audit seal` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Sealing {
    /// The marker now accepts entries 1 to `to`, written without the key.
    Accepted {
        /// The last entry accepted.
        to: i64,
    },
    /// Nothing was written without the key: the marker accepts none.
    NothingUnsealed,
    /// The trail has its marker already: nothing changed.
    AlreadyMarked {
        /// The marker's place.
        marker: i64,
    },
}

/// The one-time upgrade of a trail from before entries were sealed as written (`audit
/// seal`): writes the sealed marker accepting entries 1 to N written without the key, as
/// they stand now. Refuses any other entry without a seal (one after a sealed entry, or
/// after the marker): only a removed seal leaves one.
pub async fn seal_audit_trail(
    db: &DatabaseConnection,
    author: &audit::Author,
) -> anyhow::Result<Sealing> {
    let txn = begin_change(db).await?;
    let found = audit::unsealed(&txn).await?;
    let sealing = match (&found, found.acceptable()) {
        (_, Some((_, to))) => Sealing::Accepted { to },
        (Unsealed { runs, .. }, None) if !runs.is_empty() => refuse(&found)?,
        (
            Unsealed {
                marker: Some(m), ..
            },
            None,
        ) => return Ok(Sealing::AlreadyMarked { marker: *m }),
        _ => Sealing::NothingUnsealed,
    };
    let through = match sealing {
        Sealing::Accepted { to } => to,
        _ => 0,
    };
    let detail = json!({"unsealed_through": through});
    audit::append(&txn, author, audit::MARKER_ACTION, "audit_log", detail).await?;
    txn.commit().await?;
    Ok(sealing)
}

fn refuse(found: &Unsealed) -> anyhow::Result<Sealing> {
    let (from, to) = found.runs[0];
    let span = if from == to {
        format!("audit entry {from} has no seal")
    } else {
        format!("audit entries {from} to {to} have no seal")
    };
    match found.marker {
        Some(marker) => bail!(
            "{span}, after the marker at entry {marker}: every entry since is sealed as it \
             is written, so the seal was removed and the entry may have been rewritten; \
             nothing is sealed"
        ),
        None => bail!(
            "{span}, and sealed entries come before it: entries are sealed as they are \
             written, so the seal was removed and the entry may have been rewritten \
             (or release 0.2.0 wrote it without AUTH_KEY_ENCRYPTION_KEY: seal it with \
             0.2.0's `audit seal` before upgrading); nothing is sealed"
        ),
    }
}

/// At a server's start: marks a trail that has no marker and no entry without a seal
/// (a new database, or one release 0.2.0 sealed), so `audit seal` can never accept an entry
/// whose seal is removed later. Vouches for nothing itself: a trail with entries without a
/// seal is left for `audit seal`, and a warning says so. Returns the marker's place when it
/// wrote one.
pub async fn mark_audit_trail(
    db: &DatabaseConnection,
    author: &audit::Author,
) -> anyhow::Result<Option<i64>> {
    let found = audit::unsealed(db).await?;
    if found.marker.is_some() {
        return Ok(None);
    }
    if let Some((from, to)) = found.runs.first() {
        tracing::warn!(
            from,
            to,
            "audit entries without a seal and no upgrade marker: `auth-server audit verify` \
             fails until they are accepted; read them with `auth-server audit list`, then \
             run `auth-server audit seal` once (upgrading from before entries were sealed)"
        );
        return Ok(None);
    }
    let txn = begin_change(db).await?;
    // Another process may have marked it, or written meanwhile.
    let found = audit::unsealed(&txn).await?;
    if found.marker.is_some() || !found.runs.is_empty() {
        return Ok(None);
    }
    let head = audit::append(
        &txn,
        author,
        audit::MARKER_ACTION,
        "audit_log",
        json!({"unsealed_through": 0}),
    )
    .await?;
    txn.commit().await?;
    Ok(Some(head.seq))
}
