//! The audit trail: every change to clients and keys appends one entry, in the transaction
//! that makes the change, chained to the entry before it twice: by a plain SHA-256, which
//! anyone can recompute, and by an HMAC under a key derived from the key-encryption key,
//! which the database never holds. Whoever can write the database can still cut entries
//! off the end, so every server also logs the head (the last entry's place and MAC) and
//! `audit verify --head` checks a head kept from before.
//!
//! Every entry is sealed as it is written, by a writer holding the key; nothing seals an
//! entry afterwards, since nothing can tell an entry written without the key from one whose
//! seal was removed. The one span written without the key (by the migrations that upgrade a
//! database from before sealing) is accepted only below a sealed marker ([`MARKER_ACTION`])
//! that `audit seal` writes once; servers write the marker themselves, vouching for nothing
//! unsealed, on a trail that has no such span.

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, NotSet, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde::Serialize;

use crate::entity::{audit_entry, revision};
use crate::keys::SigningKeySealer;

/// Who is making a change: `--actor`, else `AUTH_ACTOR`, else the operating-system user.
pub fn actor(configured: Option<&str>) -> String {
    service_kit::command_line::operator::actor(configured)
}

/// The actor of the changes the server makes itself (its first keys, sealing old ones).
pub const SERVER_ACTOR: &str = "auth-server";

/// The marker's action: entries from here on are sealed as written, and those up to its
/// `unsealed_through` (none when 0) were written without the key before they were.
pub const MARKER_ACTION: &str = "audit.upgrade";

/// What release 0.2.0's servers and `audit seal` append after sealing entries as they
/// found them: harmless before the marker, proof of a removed seal after it.
const RESEAL_ACTION: &str = "audit.seal";

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
    pub fn derive(kek: &SigningKeySealer) -> anyhow::Result<Self> {
        Ok(Self(kek.derive_hmac_key(AUDIT_KEY_LABEL)?))
    }
}

/// Who makes a change, and the key that seals its entry: no entry is written without it.
#[derive(Clone, Debug)]
pub struct Author {
    name: String,
    key: AuditKey,
}

impl Author {
    /// `name`, sealing with `key`.
    pub fn new(name: impl Into<String>, key: AuditKey) -> Self {
        Self {
            name: name.into(),
            key,
        }
    }

    /// The server itself.
    pub fn server(key: AuditKey) -> Self {
        Self::new(SERVER_ACTOR, key)
    }

    /// The name recorded as the entry's actor.
    pub fn name(&self) -> &str {
        &self.name
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

/// The entries written without the key that no marker accepts, first and last of each
/// run, and the marker's place when there is one.
pub async fn unsealed<C: ConnectionTrait>(db: &C) -> anyhow::Result<Unsealed> {
    let entries: Vec<(i64, String, Option<String>, String)> = audit_entry::Entity::find()
        .select_only()
        .columns([
            audit_entry::Column::Seq,
            audit_entry::Column::Action,
            audit_entry::Column::Mac,
            audit_entry::Column::Detail,
        ])
        .order_by_asc(audit_entry::Column::Seq)
        .into_tuple()
        .all(db)
        .await?;
    let marker = entries
        .iter()
        .find(|(_, action, mac, _)| action == MARKER_ACTION && mac.is_some())
        .map(|(seq, _, _, detail)| (*seq, unsealed_through(*seq, detail)));
    let through = marker.map_or(0, |(_, through)| through);
    let mut first_sealed = None;
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for (seq, _, mac, _) in &entries {
        match mac {
            Some(_) => {
                first_sealed.get_or_insert(*seq);
            }
            None if *seq <= through => {}
            None => match runs.last_mut() {
                Some((_, to)) if *to + 1 == *seq => *to = *seq,
                _ => runs.push((*seq, *seq)),
            },
        }
    }
    Ok(Unsealed {
        marker: marker.map(|(seq, _)| seq),
        runs,
        first_sealed,
    })
}

/// What [`unsealed`] found.
#[derive(Debug)]
pub struct Unsealed {
    /// The marker's place.
    pub marker: Option<i64>,
    /// The runs of entries without a seal that the marker does not accept, oldest first.
    pub runs: Vec<(i64, i64)>,
    /// The first sealed entry's place.
    pub first_sealed: Option<i64>,
}

impl Unsealed {
    /// The one run `audit seal` may accept: entries 1 to N, before every sealed entry, on
    /// a trail with no marker yet (what upgrading a database from before sealing leaves).
    pub fn acceptable(&self) -> Option<(i64, i64)> {
        match (self.marker, self.runs.as_slice()) {
            (None, [(1, to)]) if self.first_sealed.is_none_or(|s| s > *to) => Some((1, *to)),
            _ => None,
        }
    }
}

/// The marker's boundary: below its own place, whatever its detail says.
fn unsealed_through(marker_seq: i64, detail: &str) -> i64 {
    serde_json::from_str::<serde_json::Value>(detail)
        .ok()
        .and_then(|d| d["unsealed_through"].as_i64())
        .unwrap_or(0)
        .clamp(0, marker_seq.saturating_sub(1))
}

/// Appends an entry for a change made in `txn`, which must have bumped the revision first
/// (that takes the revision row's lock, so appends never race), sealed with the author's
/// key; returns the new head.
pub async fn append<C: ConnectionTrait>(
    txn: &C,
    author: &Author,
    action: &str,
    subject: &str,
    detail: serde_json::Value,
) -> anyhow::Result<Head> {
    let last = last_entry(txn).await?;
    // The MAC before: none for the first entry, or after one written without the key (its
    // hash, which this MAC covers, chains it all the same).
    let prev_mac = last
        .as_ref()
        .and_then(|e| e.mac.clone())
        .unwrap_or_default();
    let last = last.map(|e| (e.seq, e.hash));
    let mut entry = new_entry(txn, last, &author.name, action, subject, detail).await?;
    let mac = mac_of(&author.key, &entry, &prev_mac);
    entry.mac = Some(mac.clone());
    let head = Head {
        seq: entry.seq,
        mac,
    };
    insert(txn, entry).await?;
    Ok(head)
}

/// Appends an entry without a seal, for the migrations that run before the sealing one
/// (on a schema without the `mac` column): the entries they write are the span `audit seal`
/// accepts once. Nothing else writes an entry without the key.
pub(crate) async fn append_before_sealing<C: ConnectionTrait>(
    db: &C,
    action: &str,
    subject: &str,
    detail: serde_json::Value,
) -> anyhow::Result<()> {
    // Only the columns that schema has.
    let last: Option<(i64, String)> = audit_entry::Entity::find()
        .select_only()
        .columns([audit_entry::Column::Seq, audit_entry::Column::Hash])
        .order_by_desc(audit_entry::Column::Seq)
        .limit(1)
        .into_tuple()
        .one(db)
        .await?;
    let entry = new_entry(db, last, SERVER_ACTOR, action, subject, detail).await?;
    insert(db, entry).await
}

/// The entry after `last` (its place and hash), hashed, not yet sealed.
async fn new_entry<C: ConnectionTrait>(
    txn: &C,
    last: Option<(i64, String)>,
    actor: &str,
    action: &str,
    subject: &str,
    detail: serde_json::Value,
) -> anyhow::Result<audit_entry::Model> {
    let revision = revision::Entity::find_by_id(1)
        .one(txn)
        .await?
        .map_or(0, |r| r.value);
    let (seq, prev_hash) = last.map_or((1, String::new()), |(seq, hash)| (seq + 1, hash));
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
        mac: None,
    };
    entry.hash = hash_of(&entry);
    Ok(entry)
}

async fn insert<C: ConnectionTrait>(txn: &C, entry: audit_entry::Model) -> anyhow::Result<()> {
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
/// printed before; the error names the first entry that does not hold. An entry without a
/// seal fails too, unless a sealed marker after it accepts it: nothing else shows whether
/// it was changed.
pub async fn verify(
    db: &DatabaseConnection,
    key: &AuditKey,
    kept: Option<&Head>,
) -> anyhow::Result<Verified> {
    let entries = audit_entry::Entity::find()
        .order_by_asc(audit_entry::Column::Seq)
        .all(db)
        .await?;
    check_chain(key, &entries)?;
    let last = entries.last();
    if let Some(kept) = kept {
        let last = last.map_or(0, |p| p.seq);
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
    if let Some(last) = last {
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
    Ok(Verified {
        entries: entries.len(),
        head: last
            .and_then(audit_entry::Model::as_head)
            .map(|h| h.to_string()),
    })
}

/// "audit entry 5 is", or "audit entries 5 to 9 are".
fn entries_are(from: i64, to: i64) -> String {
    if from == to {
        format!("audit entry {from} is")
    } else {
        format!("audit entry {from} (and every entry after it to {to}) is")
    }
}

/// The chain's own checks, oldest entry first: places, hashes, seals, and the marker.
fn check_chain(key: &AuditKey, entries: &[audit_entry::Model]) -> anyhow::Result<()> {
    // Only a sealed marker counts: its MAC is checked below like every other.
    let marker = entries
        .iter()
        .find(|e| e.action == MARKER_ACTION && e.mac.is_some())
        .map(|m| (m.seq, unsealed_through(m.seq, &m.detail)));
    let through = marker.map_or(0, |(_, through)| through);
    let mut prev: Option<&audit_entry::Model> = None;
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
        let Some(mac) = &entry.mac else {
            if entry.seq <= through {
                prev = Some(entry);
                continue;
            }
            let to = entries[i..]
                .iter()
                .take_while(|e| e.mac.is_none())
                .last()
                .map_or(entry.seq, |e| e.seq);
            let which = entries_are(entry.seq, to);
            if marker.is_none() && entry.seq == 1 {
                bail!(
                    "{which} not sealed: written without the key by the migrations that upgrade \
                     a database from before entries were sealed. Check with `auth-server audit \
                     list`, then accept them, once, with `auth-server audit seal`"
                );
            }
            bail!(
                "{which} not sealed: every entry is sealed as it is written, so its seal was \
                 removed and it may have been rewritten (or release 0.2.0 wrote it, run \
                 without AUTH_KEY_ENCRYPTION_KEY: 0.2.0's own `audit seal` seals those)"
            );
        };
        let prev_mac = prev.and_then(|p| p.mac.as_deref()).unwrap_or("");
        if mac_of(key, entry, prev_mac) != *mac {
            if prev.is_none() {
                bail!(
                    "audit entry 1 does not match its seal: it was altered, or \
                     AUTH_KEY_ENCRYPTION_KEY is not the key the servers sealed the \
                     trail with"
                );
            }
            if marker.is_some_and(|(seq, through)| seq == entry.seq && through > 0) {
                bail!(
                    "audit entry {}, the marker accepting entries 1 to {through} written \
                     without the key, does not match its seal: it, or an entry it accepts, \
                     was altered",
                    entry.seq
                );
            }
            bail!(
                "audit entry {} does not match its seal: it was altered or moved, or an \
                 entry before it rewritten",
                entry.seq
            );
        }
        // Release 0.2.0 sealed entries as it found them; after the marker, only entries
        // whose seals were removed (or a 0.2.0 command's without the key) are found so.
        if entry.action == RESEAL_ACTION
            && let Some((marker_seq, _)) = marker
            && entry.seq > marker_seq
        {
            let detail: serde_json::Value = serde_json::from_str(&entry.detail).unwrap_or_default();
            let from = detail["from"].as_i64().unwrap_or(entry.seq);
            let to = detail["to"].as_i64().unwrap_or(entry.seq);
            bail!(
                "{} sealed only afterwards, by entry {} (release 0.2.0's `{RESEAL_ACTION}`, \
                 after the upgrade at entry {marker_seq}): its seal had been removed, so it may \
                 have been rewritten before it was sealed again, or a 0.2.0 command wrote it \
                 without AUTH_KEY_ENCRYPTION_KEY. Check with `auth-server audit list`",
                entries_are(from, to),
                entry.seq
            );
        }
        prev = Some(entry);
    }
    Ok(())
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
        AuditKey::derive(&SigningKeySealer::from_base64(&encoded).unwrap()).unwrap()
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

    /// Entries 1 to `n` chained, with `action_of` naming each entry's action and `sealed`
    /// saying which are sealed with `k`, as the writers of each kind leave them.
    fn trail(
        k: &AuditKey,
        n: i64,
        action_of: impl Fn(i64) -> (&'static str, String),
        sealed: impl Fn(i64) -> bool,
    ) -> Vec<audit_entry::Model> {
        let mut entries: Vec<audit_entry::Model> = Vec::new();
        for seq in 1..=n {
            let prev = entries.last();
            let mut e = entry(seq, prev.map_or("", |p| p.hash.as_str()));
            let (action, detail) = action_of(seq);
            e.action = action.into();
            e.detail = detail;
            e.hash = hash_of(&e);
            if sealed(seq) {
                let prev_mac = prev.and_then(|p| p.mac.clone()).unwrap_or_default();
                e.mac = Some(mac_of(k, &e, &prev_mac));
            }
            entries.push(e);
        }
        entries
    }

    fn plain(_: i64) -> (&'static str, String) {
        ("client.disable", "{}".into())
    }

    /// Recomputes every plain hash from `from` on, as anyone can.
    fn rechain(entries: &mut [audit_entry::Model]) {
        for i in 0..entries.len() {
            let prev = if i == 0 {
                String::new()
            } else {
                entries[i - 1].hash.clone()
            };
            entries[i].prev_hash = prev;
            let hash = hash_of(&entries[i]);
            entries[i].hash = hash;
        }
    }

    /// What verification says of a marker at entry 4, accepting entries 1 to 3, that does
    /// not match its seal.
    const MARKER_REFUSED: &str = "audit entry 4, the marker accepting entries 1 to 3 written \
        without the key, does not match its seal";

    fn refusal(k: &AuditKey, entries: &[audit_entry::Model]) -> String {
        format!("{:#}", check_chain(k, entries).expect_err("refused"))
    }

    #[test]
    fn an_entry_without_its_seal_fails_naming_it_whatever_hashes_are_recomputed() {
        let k = key(7);
        let whole = trail(&k, 6, plain, |_| true);
        check_chain(&k, &whole).unwrap();

        let mut stripped = whole.clone();
        stripped[3].mac = None;
        assert!(refusal(&k, &stripped).starts_with("audit entry 4 is not sealed"));

        // The review's rewrite: entry 2 edited, its seal and every later one removed.
        let mut rewritten = whole.clone();
        rewritten[1].actor = "mallory".into();
        for e in &mut rewritten[1..] {
            e.mac = None;
        }
        rechain(&mut rewritten);
        let refused = refusal(&k, &rewritten);
        assert!(
            refused.starts_with("audit entry 2 (and every entry after it to 6) is not sealed"),
            "{refused}"
        );
        assert!(refused.contains("seal was removed"), "{refused}");
    }

    #[test]
    fn entries_without_a_seal_pass_only_below_a_sealed_markers_boundary() {
        let k = key(7);
        let marker = |through: i64| {
            move |seq: i64| match seq {
                4 => (MARKER_ACTION, format!("{{\"unsealed_through\":{through}}}")),
                _ => plain(seq),
            }
        };
        // Three entries from before sealing, the marker accepting them, two sealed after.
        let upgraded = trail(&k, 6, marker(3), |seq| seq > 3);
        check_chain(&k, &upgraded).unwrap();
        let refused = refusal(&k, &trail(&k, 6, plain, |seq| seq > 3));
        assert!(refused.starts_with("audit entry 1 (and every entry after it to 3)"));
        assert!(refused.contains("audit seal"), "{refused}");

        // Below the marker, an edit shows in the hash its seal covers.
        let mut edited = upgraded.clone();
        edited[1].actor = "mallory".into();
        rechain(&mut edited);
        let refused = refusal(&k, &edited);
        assert!(refused.starts_with(MARKER_REFUSED), "{refused}");

        // Above its boundary, or after it, an entry without a seal fails all the same.
        let mut after = upgraded.clone();
        after[5].mac = None;
        assert!(refusal(&k, &after).starts_with("audit entry 6 is not sealed"));
        let short = trail(&k, 6, marker(2), |seq| seq > 3);
        assert!(refusal(&k, &short).starts_with("audit entry 3 is not sealed"));
        // A boundary at or past the marker's own place counts only up to the entry before.
        let past = trail(&k, 6, marker(99), |seq| seq != 5 && seq > 3);
        assert!(refusal(&k, &past).starts_with("audit entry 5 is not sealed"));
    }

    #[test]
    fn a_marker_made_without_the_key_accepts_nothing() {
        let k = key(7);
        let marker = |seq: i64| match seq {
            4 => (MARKER_ACTION, "{\"unsealed_through\":3}".to_owned()),
            _ => plain(seq),
        };
        // Unsealed, or sealed with another key: the entries before it are not accepted.
        let unsealed = trail(&k, 5, marker, |seq| seq == 5);
        assert!(
            refusal(&k, &unsealed).starts_with("audit entry 1 (and every entry after it to 4)")
        );
        let mut forged = trail(&key(8), 5, marker, |seq| seq >= 4);
        forged[4].mac = Some(mac_of(&k, &forged[4], forged[3].mac.as_deref().unwrap()));
        let refused = refusal(&k, &forged);
        assert!(refused.starts_with(MARKER_REFUSED), "{refused}");
    }

    #[test]
    fn a_reseal_by_release_0_2_0_after_the_marker_fails_naming_the_entries_it_sealed() {
        let k = key(7);
        let actions = |seq: i64| match seq {
            2 => (MARKER_ACTION, "{\"unsealed_through\":0}".to_owned()),
            6 => (RESEAL_ACTION, "{\"from\":3,\"to\":5}".to_owned()),
            _ => plain(seq),
        };
        let resealed = trail(&k, 6, actions, |_| true);
        let refused = refusal(&k, &resealed);
        assert!(
            refused.starts_with("audit entry 3 (and every entry after it to 5) is sealed only afterwards, by entry 6"),
            "{refused}"
        );
        // Before the marker, 0.2.0's seals are the trail's history.
        let before = |seq: i64| match seq {
            3 => (RESEAL_ACTION, "{\"from\":1,\"to\":2}".to_owned()),
            5 => (MARKER_ACTION, "{\"unsealed_through\":0}".to_owned()),
            _ => plain(seq),
        };
        check_chain(&k, &trail(&k, 6, before, |_| true)).unwrap();
    }

    #[test]
    fn the_actor_is_the_configured_one_else_the_os_user() {
        assert_eq!(actor(Some("ops-bot")), "ops-bot");
        assert!(!actor(None).is_empty());
    }
}
