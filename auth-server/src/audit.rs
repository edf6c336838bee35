//! The audit trail: every change to clients and keys appends one entry, in the transaction
//! that makes the change, chained to the entry before it twice: by a plain SHA-256, which
//! anyone can recompute, and by an HMAC under a key derived from the key-encryption key,
//! which the database never holds. Whoever can write the database can still cut entries
//! off the end, so every server also logs the head (the last entry's place and MAC) and
//! `audit verify --head` checks a head kept from before.

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, NotSet,
    QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::Serialize;

use crate::entity::{audit_entry, revision};
use crate::keys::KeyEncryptionKey;

/// Who is making a change: `--actor`, else `AUTH_ACTOR`, else the operating-system user.
pub fn actor(configured: Option<&str>) -> String {
    service_kit::cli::actor(configured)
}

/// The actor of the changes the server makes itself (its first keys, sealing old ones).
pub const SERVER_ACTOR: &str = "auth-server";

/// What the audit key is derived for; a new label would start a new trail key.
const AUDIT_KEY_LABEL: &str = "partner-intake audit v1";

/// The key entries are sealed with.
#[derive(Clone)]
pub struct AuditKey(hmac::Key);

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuditKey([REDACTED])")
    }
}

impl AuditKey {
    /// The audit key of a key-encryption key: every replica and the CLI derive the same.
    pub fn derive(kek: &KeyEncryptionKey) -> anyhow::Result<Self> {
        Ok(Self(kek.derive_hmac_key(AUDIT_KEY_LABEL)?))
    }
}

/// Who makes a change, and the key that seals its entry when they hold it.
#[derive(Clone, Debug)]
pub struct Author {
    name: String,
    key: Option<AuditKey>,
}

impl Author {
    /// `name`, sealing with `key` when given.
    pub fn new(name: impl Into<String>, key: Option<AuditKey>) -> Self {
        Self {
            name: name.into(),
            key,
        }
    }

    /// The server itself, which always holds the key.
    pub fn server(key: AuditKey) -> Self {
        Self::new(SERVER_ACTOR, Some(key))
    }

    /// The name recorded as the entry's actor.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the entries this author writes are sealed as they are written.
    pub fn seals(&self) -> bool {
        self.key.is_some()
    }
}

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

fn hashed(entry: &audit_entry::Model) -> Hashed<'_> {
    Hashed {
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
    }
}

fn hash_of(entry: &audit_entry::Model) -> String {
    let encoded = serde_json::to_vec(&hashed(entry)).unwrap_or_default();
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &encoded);
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// What an entry's MAC covers: every field the hash does, the hash, and the MAC before.
#[derive(Serialize)]
struct Sealed<'a> {
    #[serde(flatten)]
    entry: Hashed<'a>,
    hash: &'a str,
    prev_mac: &'a str,
}

fn mac_of(key: &AuditKey, entry: &audit_entry::Model, prev_mac: &str) -> String {
    let sealed = Sealed {
        entry: hashed(entry),
        hash: &entry.hash,
        prev_mac,
    };
    let encoded = serde_json::to_vec(&sealed).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(hmac::sign(&key.0, &encoded).as_ref())
}

/// The last entry's place and MAC: kept outside the database (the servers' logs, an
/// operator's record), it shows entries removed from the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The entry's place in the trail.
    pub seq: i64,
    /// Its MAC.
    pub mac: String,
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.mac)
    }
}

impl FromStr for Head {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{text:?} is not a head: SEQ:MAC, as `audit verify` prints it");
        let (seq, mac) = text.trim().split_once(':').ok_or_else(bad)?;
        let seq = seq.parse::<i64>().ok().filter(|s| *s > 0).ok_or_else(bad)?;
        if mac.is_empty() || URL_SAFE_NO_PAD.decode(mac).is_err() {
            return Err(bad());
        }
        Ok(Self {
            seq,
            mac: mac.to_owned(),
        })
    }
}

/// The last entry of the trail.
pub async fn last_entry<C: ConnectionTrait>(db: &C) -> anyhow::Result<Option<audit_entry::Model>> {
    Ok(audit_entry::Entity::find()
        .order_by_desc(audit_entry::Column::Seq)
        .limit(1)
        .one(db)
        .await?)
}

impl audit_entry::Model {
    /// This entry as a head, when it is sealed.
    pub fn as_head(&self) -> Option<Head> {
        self.mac.as_ref().map(|mac| Head {
            seq: self.seq,
            mac: mac.clone(),
        })
    }
}

/// Whether the trail still holds `head`: the entry at its place, with its MAC.
pub async fn holds<C: ConnectionTrait>(db: &C, head: &Head) -> anyhow::Result<bool> {
    Ok(audit_entry::Entity::find_by_id(head.seq)
        .one(db)
        .await?
        .is_some_and(|e| e.mac.as_deref() == Some(head.mac.as_str())))
}

/// The entries after the last sealed one (written without the key), first and last.
pub async fn unsealed<C: ConnectionTrait>(db: &C) -> anyhow::Result<Option<(i64, i64)>> {
    let last_sealed = audit_entry::Entity::find()
        .filter(audit_entry::Column::Mac.is_not_null())
        .order_by_desc(audit_entry::Column::Seq)
        .limit(1)
        .one(db)
        .await?
        .map_or(0, |e| e.seq);
    let Some(last) = last_entry(db).await? else {
        return Ok(None);
    };
    Ok((last.seq > last_sealed).then_some((last_sealed + 1, last.seq)))
}

/// Seals the entries written without the key since the last sealed one, in `txn`; returns
/// the MAC of the last entry (empty for an empty trail), which the next entry chains to.
async fn seal_pending<C: ConnectionTrait>(txn: &C, key: &AuditKey) -> anyhow::Result<String> {
    let last_sealed = audit_entry::Entity::find()
        .filter(audit_entry::Column::Mac.is_not_null())
        .order_by_desc(audit_entry::Column::Seq)
        .limit(1)
        .one(txn)
        .await?;
    let (after, mut prev_mac) =
        last_sealed.map_or((0, String::new()), |e| (e.seq, e.mac.unwrap_or_default()));
    let pending = audit_entry::Entity::find()
        .filter(audit_entry::Column::Seq.gt(after))
        .order_by_asc(audit_entry::Column::Seq)
        .all(txn)
        .await?;
    if let (Some(first), Some(last)) = (pending.first(), pending.last()) {
        tracing::warn!(
            from = first.seq,
            to = last.seq,
            "audit entries written without the key (previous release, migration, or a \
             command run without AUTH_KEY_ENCRYPTION_KEY) are now sealed as they stand"
        );
    }
    for entry in pending {
        let mac = mac_of(key, &entry, &prev_mac);
        let mut row: audit_entry::ActiveModel = entry.into();
        row.mac = Set(Some(mac.clone()));
        row.update(txn).await?;
        prev_mac = mac;
    }
    Ok(prev_mac)
}

/// Appends an entry for a change made in `txn`, which must have bumped the revision first
/// (that takes the revision row's lock, so appends never race). An author holding the key
/// seals the entry, and any written without the key before it; returns the new head then.
pub async fn append<C: ConnectionTrait>(
    txn: &C,
    author: &Author,
    action: &str,
    subject: &str,
    detail: serde_json::Value,
) -> anyhow::Result<Option<Head>> {
    let prev_mac = match &author.key {
        Some(key) => Some(seal_pending(txn, key).await?),
        None => None,
    };
    // Only the columns every schema has: a migration before the `mac` column appends too.
    let last: Option<(i64, String)> = audit_entry::Entity::find()
        .select_only()
        .columns([audit_entry::Column::Seq, audit_entry::Column::Hash])
        .order_by_desc(audit_entry::Column::Seq)
        .limit(1)
        .into_tuple()
        .one(txn)
        .await?;
    let revision = revision::Entity::find_by_id(1)
        .one(txn)
        .await?
        .map_or(0, |r| r.value);
    let (seq, prev_hash) = last.map_or((1, String::new()), |(seq, hash)| (seq + 1, hash));
    let mut entry = audit_entry::Model {
        seq,
        // Stored to the microsecond, as PostgreSQL keeps it, so the hash reads back the same.
        at: Utc::now().trunc_subsecs(6),
        actor: author.name.clone(),
        action: action.to_owned(),
        subject: subject.to_owned(),
        detail: detail.to_string(),
        revision,
        prev_hash,
        hash: String::new(),
        mac: None,
    };
    entry.hash = hash_of(&entry);
    if let (Some(key), Some(prev_mac)) = (&author.key, &prev_mac) {
        entry.mac = Some(mac_of(key, &entry, prev_mac));
    } else {
        tracing::warn!(
            seq,
            action,
            "audit entry written without AUTH_KEY_ENCRYPTION_KEY: it is not sealed until a \
             server, or a command given the key, seals it"
        );
    }
    let head = entry.as_head();
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
        mac: entry.mac.map_or(NotSet, |mac| Set(Some(mac))),
    })
    .exec_without_returning(txn)
    .await?;
    Ok(head)
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

/// A sound trail: how many entries, and the head to keep elsewhere (entries removed from
/// the end can only be told from that record).
#[derive(Debug, Serialize)]
pub struct Verified {
    /// Entries checked.
    pub entries: usize,
    /// The last entry's place and MAC, `SEQ:MAC`.
    pub head: Option<String>,
}

/// Checks the whole chain with the audit key, and that it still holds `kept`, a head
/// printed before; the error names the first entry that does not hold. Entries not yet
/// sealed fail too: nothing shows whether they were changed.
pub async fn verify(
    db: &DatabaseConnection,
    key: &AuditKey,
    kept: Option<&Head>,
) -> anyhow::Result<Verified> {
    let entries = audit_entry::Entity::find()
        .order_by_asc(audit_entry::Column::Seq)
        .all(db)
        .await?;
    let mut prev: Option<&audit_entry::Model> = None;
    let mut unsealed: Option<(i64, i64)> = None;
    for (i, entry) in entries.iter().enumerate() {
        let expected_seq = i as i64 + 1;
        if entry.seq != expected_seq {
            bail!(
                "audit entry {expected_seq} is missing (the trail goes on at entry {})",
                entry.seq
            );
        }
        let expected_prev = prev.map_or("", |p| p.hash.as_str());
        if entry.prev_hash != expected_prev {
            bail!(
                "audit entry {} does not follow entry {}: entries were removed, reordered or altered",
                entry.seq,
                entry.seq - 1
            );
        }
        if hash_of(entry) != entry.hash {
            bail!("audit entry {} was altered", entry.seq);
        }
        match (&entry.mac, unsealed) {
            (None, None) => unsealed = Some((entry.seq, entry.seq)),
            (None, Some((from, _))) => unsealed = Some((from, entry.seq)),
            (Some(_), Some((from, to))) => bail!(
                "audit entry {} is sealed but entries {from} to {to} before it are not: their \
                 seals were removed, and the entries may have been rewritten",
                entry.seq
            ),
            (Some(mac), None) => {
                let prev_mac = prev.and_then(|p| p.mac.as_deref()).unwrap_or("");
                if mac_of(key, entry, prev_mac) != *mac {
                    if prev.is_none() {
                        bail!(
                            "audit entry 1 does not match its seal: it was altered, or \
                             AUTH_KEY_ENCRYPTION_KEY is not the key the servers sealed the \
                             trail with"
                        );
                    }
                    bail!(
                        "audit entry {} does not match its seal: it was altered or moved, or an \
                         entry before it rewritten",
                        entry.seq
                    );
                }
            }
        }
        prev = Some(entry);
    }
    if let Some(kept) = kept {
        let last = prev.map_or(0, |p| p.seq);
        if last < kept.seq {
            bail!(
                "the audit trail ends at entry {last}, before the head you kept (entry {}): \
                 entries were removed from the end",
                kept.seq
            );
        }
        if !holds(db, kept).await? {
            bail!(
                "audit entry {} is not the head you kept: the trail was rewritten from there \
                 on, or the head is another database's",
                kept.seq
            );
        }
    }
    // Every change bumps the revision and writes an entry in one transaction, so a revision
    // beyond the last entry's means entries were removed from the end.
    if let Some(last) = prev {
        let current = revision::Entity::find_by_id(1)
            .one(db)
            .await?
            .map_or(0, |r| r.value);
        if current > last.revision {
            bail!(
                "the audit trail ends at entry {} but the database has changed since (revision {} after {})",
                last.seq,
                current,
                last.revision
            );
        }
    }
    if let Some((from, to)) = unsealed {
        let which = if from == to {
            format!("audit entry {from} is")
        } else {
            format!("audit entries {from} to {to} are")
        };
        bail!(
            "{which} not sealed: written without the key (by the previous release, a migration, \
             or a command run without AUTH_KEY_ENCRYPTION_KEY), so nothing shows whether they \
             were changed since. Check them with `auth-server audit list`, then seal them with \
             `auth-server audit seal` (a running server seals them itself)"
        );
    }
    Ok(Verified {
        entries: entries.len(),
        head: prev
            .and_then(audit_entry::Model::as_head)
            .map(|h| h.to_string()),
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
            mac: None,
        };
        e.hash = hash_of(&e);
        e
    }

    fn key(byte: u8) -> AuditKey {
        let encoded =
            service_kit::Secret::new(base64::engine::general_purpose::STANDARD.encode([byte; 32]));
        AuditKey::derive(&KeyEncryptionKey::from_base64(&encoded).unwrap()).unwrap()
    }

    #[test]
    fn the_mac_covers_every_field_the_mac_before_and_the_key() {
        let first = entry(1, "");
        let second = entry(2, &first.hash);
        let k = key(7);
        let sealed = mac_of(&k, &second, "m1");
        assert_ne!(mac_of(&key(8), &second, "m1"), sealed);
        assert_ne!(mac_of(&k, &second, "m2"), sealed);
        assert_ne!(mac_of(&k, &first, "m1"), sealed);
        for altered in [
            audit_entry::Model {
                actor: "mallory".into(),
                ..second.clone()
            },
            audit_entry::Model {
                action: "client.enable".into(),
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
                seq: 3,
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
            assert_ne!(mac_of(&k, &altered, "m1"), sealed, "{altered:?}");
        }
    }

    #[test]
    fn a_head_reads_back_as_printed_and_nothing_else_reads_as_one() {
        let head = Head {
            seq: 42,
            mac: "q83vEjRWeJA".into(),
        };
        assert_eq!(head.to_string().parse::<Head>(), Ok(head));
        for bad in [
            "", "42", "42:", ":abc", "0:abc", "-1:abc", "x:abc", "42:a+b/",
        ] {
            assert!(bad.parse::<Head>().is_err(), "{bad:?}");
        }
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
