//! The audit trail: every change to clients and keys appends one entry, in the transaction
//! that makes the change, hash-chained to the entry before it, so that an entry altered,
//! removed or moved shows when the chain is checked.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde::Serialize;

use crate::entity::{audit_entry, revision};

/// Who is making a change: `--actor`, else `AUTH_ACTOR`, else the operating-system user.
pub fn actor(configured: Option<&str>) -> String {
    service_kit::cli::actor(configured)
}

/// The actor of the changes the server makes itself (its first keys, sealing old ones).
pub const SERVER_ACTOR: &str = "auth-server";

/// What an entry's hash covers, in a fixed order and encoding.
#[derive(Serialize)]
struct Hashed<'a> {
    seq: i64,
    at: String,
    actor: &'a str,
    action: &'a str,
    subject: &'a str,
    detail: &'a str,
    revision: i64,
    prev_hash: &'a str,
}

fn hash_of(entry: &audit_entry::Model) -> String {
    let hashed = Hashed {
        seq: entry.seq,
        at: entry
            .at
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        actor: &entry.actor,
        action: &entry.action,
        subject: &entry.subject,
        detail: &entry.detail,
        revision: entry.revision,
        prev_hash: &entry.prev_hash,
    };
    let encoded = serde_json::to_vec(&hashed).unwrap_or_default();
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &encoded);
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// Appends an entry for a change made in `txn`, which must have bumped the revision first
/// (that takes the revision row's lock, so appends never race).
pub async fn append<C: ConnectionTrait>(
    txn: &C,
    actor: &str,
    action: &str,
    subject: &str,
    detail: serde_json::Value,
) -> anyhow::Result<()> {
    let last = audit_entry::Entity::find()
        .order_by_desc(audit_entry::Column::Seq)
        .limit(1)
        .one(txn)
        .await?;
    let revision = revision::Entity::find_by_id(1)
        .one(txn)
        .await?
        .map_or(0, |r| r.value);
    let (seq, prev_hash) = last.map_or((1, String::new()), |l| (l.seq + 1, l.hash));
    let mut entry = audit_entry::Model {
        seq,
        // Stored to the microsecond, as PostgreSQL keeps it, so the hash reads back the same.
        at: Utc::now().trunc_subsecs(6),
        actor: actor.to_owned(),
        action: action.to_owned(),
        subject: subject.to_owned(),
        detail: detail.to_string(),
        revision,
        prev_hash,
        hash: String::new(),
    };
    entry.hash = hash_of(&entry);
    audit_entry::Entity::insert(audit_entry::ActiveModel {
        seq: Set(entry.seq),
        at: Set(entry.at),
        actor: Set(entry.actor),
        action: Set(entry.action),
        subject: Set(entry.subject),
        detail: Set(entry.detail),
        revision: Set(entry.revision),
        prev_hash: Set(entry.prev_hash),
        hash: Set(entry.hash),
    })
    .exec_without_returning(txn)
    .await?;
    Ok(())
}

/// An entry as `audit list` prints it.
#[derive(Debug, Serialize)]
pub struct EntryView {
    /// Its place in the trail.
    pub seq: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// Who.
    pub actor: String,
    /// What was done.
    pub action: String,
    /// To what.
    pub subject: String,
    /// What changed.
    pub detail: serde_json::Value,
}

/// The entries made at or after `since` (all of them without), oldest first.
pub async fn list(
    db: &DatabaseConnection,
    since: Option<DateTime<Utc>>,
) -> anyhow::Result<Vec<EntryView>> {
    let mut query = audit_entry::Entity::find().order_by_asc(audit_entry::Column::Seq);
    if let Some(since) = since {
        query = query.filter(audit_entry::Column::At.gte(since));
    }
    Ok(query
        .all(db)
        .await?
        .into_iter()
        .map(|e| EntryView {
            seq: e.seq,
            at: e.at,
            actor: e.actor,
            action: e.action,
            detail: serde_json::from_str(&e.detail).unwrap_or(serde_json::Value::Null),
            subject: e.subject,
        })
        .collect())
}

/// A sound trail: how many entries, and the hash of the last, to record elsewhere (an
/// entry removed from the end can only be told from that record).
#[derive(Debug, Serialize)]
pub struct Verified {
    /// Entries checked.
    pub entries: usize,
    /// The last entry's hash.
    pub head: Option<String>,
}

/// Checks the whole chain; the error names the first entry that does not hold.
pub async fn verify(db: &DatabaseConnection) -> anyhow::Result<Verified> {
    let entries = audit_entry::Entity::find()
        .order_by_asc(audit_entry::Column::Seq)
        .all(db)
        .await?;
    let mut prev: Option<&audit_entry::Model> = None;
    for (i, entry) in entries.iter().enumerate() {
        let expected_seq = i as i64 + 1;
        if entry.seq != expected_seq {
            anyhow::bail!(
                "audit entry {expected_seq} is missing (the trail goes on at entry {})",
                entry.seq
            );
        }
        let expected_prev = prev.map_or("", |p| p.hash.as_str());
        if entry.prev_hash != expected_prev {
            anyhow::bail!(
                "audit entry {} does not follow entry {}: entries were removed, reordered or altered",
                entry.seq,
                entry.seq - 1
            );
        }
        if hash_of(entry) != entry.hash {
            anyhow::bail!("audit entry {} was altered", entry.seq);
        }
        prev = Some(entry);
    }
    // Every change bumps the revision and writes an entry in one transaction, so a revision
    // beyond the last entry's means entries were removed from the end.
    if let Some(last) = prev {
        let current = revision::Entity::find_by_id(1)
            .one(db)
            .await?
            .map_or(0, |r| r.value);
        if current > last.revision {
            anyhow::bail!(
                "the audit trail ends at entry {} but the database has changed since (revision {} after {})",
                last.seq,
                current,
                last.revision
            );
        }
    }
    Ok(Verified {
        entries: entries.len(),
        head: prev.map(|p| p.hash.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, prev_hash: &str) -> audit_entry::Model {
        let mut e = audit_entry::Model {
            seq,
            at: DateTime::from_timestamp(1_800_000_000, 123_456_000).unwrap(),
            actor: "alice".into(),
            action: "client.disable".into(),
            subject: "c1".into(),
            detail: "{}".into(),
            revision: seq,
            prev_hash: prev_hash.into(),
            hash: String::new(),
        };
        e.hash = hash_of(&e);
        e
    }

    #[test]
    fn the_hash_covers_every_field_and_the_entry_before() {
        let first = entry(1, "");
        let second = entry(2, &first.hash);
        assert_ne!(first.hash, second.hash);
        for altered in [
            audit_entry::Model {
                actor: "mallory".into(),
                ..second.clone()
            },
            audit_entry::Model {
                subject: "c2".into(),
                ..second.clone()
            },
            audit_entry::Model {
                detail: "{\"x\":1}".into(),
                ..second.clone()
            },
            audit_entry::Model {
                prev_hash: "x".into(),
                ..second.clone()
            },
            audit_entry::Model {
                revision: 9,
                ..second.clone()
            },
            audit_entry::Model {
                at: second.at + chrono::Duration::microseconds(1),
                ..second.clone()
            },
        ] {
            assert_ne!(hash_of(&altered), second.hash, "{altered:?}");
        }
    }

    #[test]
    fn the_actor_is_the_configured_one_else_the_os_user() {
        assert_eq!(actor(Some("ops-bot")), "ops-bot");
        assert!(!actor(None).is_empty());
    }
}
