//! The delivery history's paging cursor as partners hold it: where the next page starts
//! (the last event of a page and its endpoint), with a MAC over that and the partner under
//! a key derived from the key-encryption key. Every replica shares the key, so a cursor
//! works at any of them; a made-up cursor, an altered one or another partner's is refused
//! (422) instead of being read as the end of the list.

use aws_lc_rs::{constant_time, hmac};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use service_kit::kek::KeyEncryptionKey;
use uuid::Uuid;

/// Where a page of the history starts: after this event and endpoint, going back in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryCursor {
    /// The last event of the page before.
    pub id: Uuid,
    /// Its endpoint.
    pub endpoint: Uuid,
}

/// Bytes of the MAC a cursor carries: 128 bits, beyond guessing.
const TAG_LEN: usize = 16;

/// Bytes of a cursor: the event's id, its endpoint's, and the MAC.
const CURSOR_LEN: usize = 16 + 16 + TAG_LEN;

/// Signs and checks history cursors.
pub struct CursorKey {
    key: hmac::Key,
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey([REDACTED])")
    }
}

impl CursorKey {
    /// Derives the cursors' key from the intake's key-encryption key.
    pub fn new(kek: &KeyEncryptionKey) -> anyhow::Result<Self> {
        let bytes = kek.derive("intake-api history cursor v1")?;
        Ok(Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes.expose()),
        })
    }

    /// `cursor` as `client_id` is handed it: opaque, URL-safe.
    pub fn encode(&self, client_id: &str, cursor: HistoryCursor) -> String {
        let mut bytes = Vec::with_capacity(CURSOR_LEN);
        bytes.extend_from_slice(cursor.id.as_bytes());
        bytes.extend_from_slice(cursor.endpoint.as_bytes());
        let tag = self.tag(client_id, &bytes);
        bytes.extend_from_slice(&tag.as_ref()[..TAG_LEN]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The cursor in `text`, when this deployment gave it to `client_id`; `None` for
    /// anything else.
    pub fn decode(&self, client_id: &str, text: &str) -> Option<HistoryCursor> {
        if text.len() != URL_SAFE_NO_PAD.encode([0; CURSOR_LEN]).len() {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let (ids, tag) = bytes.split_at_checked(32)?;
        let expected = self.tag(client_id, ids);
        constant_time::verify_slices_are_equal(&expected.as_ref()[..TAG_LEN], tag).ok()?;
        let (id, endpoint) = ids.split_at(16);
        Some(HistoryCursor {
            id: Uuid::from_slice(id).ok()?,
            endpoint: Uuid::from_slice(endpoint).ok()?,
        })
    }

    fn tag(&self, client_id: &str, ids: &[u8]) -> hmac::Tag {
        let mut context = hmac::Context::with_key(&self.key);
        // The partner's id is of any length: its length goes first, so no two partners'
        // inputs run together.
        context.update(&(client_id.len() as u64).to_be_bytes());
        context.update(client_id.as_bytes());
        context.update(ids);
        context.sign()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use service_kit::Secret;

    fn key(byte: u8) -> CursorKey {
        let encoded = Secret::new(base64::engine::general_purpose::STANDARD.encode([byte; 32]));
        let kek = KeyEncryptionKey::from_base64("TEST_KEK", &encoded).expect("a key");
        CursorKey::new(&kek).expect("derived")
    }

    #[test]
    fn a_cursor_reads_back_only_for_its_partner_and_its_deployment() {
        let cursor = HistoryCursor {
            id: Uuid::now_v7(),
            endpoint: Uuid::now_v7(),
        };
        let ours = key(7);
        let text = ours.encode("partner-a", cursor);
        assert_eq!(ours.decode("partner-a", &text), Some(cursor));
        assert_eq!(ours.decode("partner-b", &text), None);
        assert_eq!(key(8).decode("partner-a", &text), None);
        // One bit changed anywhere, or a cursor made up in the right shape, is refused.
        let mut bytes = URL_SAFE_NO_PAD.decode(&text).unwrap();
        for i in [0, 20, CURSOR_LEN - 1] {
            bytes[i] ^= 1;
            assert_eq!(
                ours.decode("partner-a", &URL_SAFE_NO_PAD.encode(&bytes)),
                None
            );
            bytes[i] ^= 1;
        }
        let made_up = URL_SAFE_NO_PAD.encode([0u8; CURSOR_LEN]);
        assert_eq!(ours.decode("partner-a", &made_up), None);
        for hostile in ["", "not a cursor", &"A".repeat(4096), "\u{0}"] {
            assert_eq!(ours.decode("partner-a", hostile), None, "{hostile:?}");
        }
    }
}
