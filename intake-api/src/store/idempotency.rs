//! Partners' `Idempotency-Key`s: a key is claimed before its request is processed, and the
//! request's answer is stored with the change it made, in the same transaction, so a retry
//! of a request whose change committed gets the same answer and changes nothing, whatever
//! the first attempt's caller heard.
//!
//! An answer can carry a secret (an attach's redirect link), so it is stored sealed with a
//! key the database does not hold, bound to its partner, key and status; the request is
//! remembered by a keyed digest, which a known body cannot be confirmed against.

use std::time::Duration;

use anyhow::anyhow;
use aws_lc_rs::aead::LessSafeKey;
use aws_lc_rs::{digest, hmac};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, UpdateStatement};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, EntityTrait,
    QueryFilter, QueryTrait, Statement,
};
use service_kit::kek::KeyEncryptionKey;
use uuid::Uuid;

use super::{CaseStore, StoreError, Submitted, bounded, later, new_row_id};
use crate::entity::idempotency_key::{self, Column};

/// How long a key and its answer are kept.
pub const KEY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long an attempt holds its key. Every unit of a request's database work is bounded
/// ([`super::DB_TIMEOUT`]), so an attempt still holding its key past this has died, and a
/// retry may take the key over; an attempt that fails releases its key at once.
pub const LEASE: Duration = Duration::from_secs(30);

/// A request sent with an `Idempotency-Key`.
#[derive(Debug, Clone)]
pub struct KeyedRequest<'a> {
    /// The partner: keys are per partner.
    pub client_id: &'a str,
    /// The key as sent.
    pub key: &'a str,
    /// The operation, so a key reused on another operation is a different request.
    pub operation: &'static str,
    /// The keyed digest of the request body ([`AnswerKeys::request_hash`]).
    pub request_hash: String,
    /// The request body as digested, to recognise a key 0.1.0 stored with a plain digest.
    pub body: &'a str,
}

/// A successful answer in clear, as sent and replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    /// Its status.
    pub status: u16,
    /// Its JSON body.
    pub body: String,
}

/// A successful answer as stored: its body sealed with [`AnswerKeys::seal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedAnswer {
    /// Its status.
    pub status: u16,
    /// Its body, sealed.
    pub sealed: String,
}

/// A stored answer found for a repeated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    /// Sealed, as every answer is stored now.
    Sealed(SealedAnswer),
    /// In clear, as 0.1.0 stored it: kept as it is until its key expires, within a day.
    Clear(StoredAnswer),
}

/// The prefix of a keyed request digest; 0.1.0's plain ones have none.
const DIGEST_PREFIX: &str = "hmac1:";

/// The prefix of a sealed answer, naming how it was sealed.
const SEALED_ANSWER_PREFIX: &str = "v1:";

/// The keys that seal stored answers and digest requests, each derived for its purpose from
/// `INTAKE_KEY_ENCRYPTION_KEY`.
pub struct AnswerKeys {
    seal: LessSafeKey,
    digest: hmac::Key,
}

impl std::fmt::Debug for AnswerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerKeys([REDACTED])")
    }
}

impl AnswerKeys {
    /// Derives the keys from the intake's key-encryption key.
    pub fn new(kek: &KeyEncryptionKey) -> anyhow::Result<Self> {
        let digest = kek.derive("intake-api idempotency request digest v1")?;
        Ok(Self {
            seal: kek.derive_aes_256_gcm("intake-api idempotency answer seal v1")?,
            digest: hmac::Key::new(hmac::HMAC_SHA256, digest.expose()),
        })
    }

    /// The keyed digest of a request body.
    pub fn request_hash(&self, body: &[u8]) -> String {
        let tag = hmac::sign(&self.digest, body);
        format!("{DIGEST_PREFIX}{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// Seals `answer` for `client_id`'s `key`: it opens only for the same partner, key and
    /// status, so a sealed answer cannot be moved onto another row.
    pub fn seal(
        &self,
        client_id: &str,
        key: &str,
        answer: &StoredAnswer,
    ) -> anyhow::Result<SealedAnswer> {
        let blob = service_kit::kek::seal(
            &self.seal,
            &binding(client_id, key, answer.status),
            answer.body.as_bytes(),
        )
        .map_err(|_| anyhow!("cannot seal a stored answer"))?;
        Ok(SealedAnswer {
            status: answer.status,
            sealed: format!("{SEALED_ANSWER_PREFIX}{}", URL_SAFE_NO_PAD.encode(blob)),
        })
    }

    /// Opens an answer [`Self::seal`] sealed for `client_id`'s `key`.
    pub fn open(
        &self,
        client_id: &str,
        key: &str,
        sealed: &SealedAnswer,
    ) -> anyhow::Result<StoredAnswer> {
        let unreadable = || {
            anyhow!(
                "a stored answer does not open: INTAKE_KEY_ENCRYPTION_KEY is not the key it was \
                 sealed with (or the row was altered)"
            )
        };
        let plain = sealed
            .sealed
            .strip_prefix(SEALED_ANSWER_PREFIX)
            .and_then(|b64| URL_SAFE_NO_PAD.decode(b64).ok())
            .and_then(|blob| {
                service_kit::kek::open(&self.seal, &binding(client_id, key, sealed.status), &blob)
            })
            .ok_or_else(unreadable)?;
        let body = String::from_utf8(plain).map_err(|_| unreadable())?;
        Ok(StoredAnswer {
            status: sealed.status,
            body,
        })
    }
}

/// What a sealed answer is bound to; the lengths keep two bindings from running together.
fn binding(client_id: &str, key: &str, status: u16) -> Vec<u8> {
    let mut aad = Vec::with_capacity(10 + client_id.len() + key.len());
    aad.extend_from_slice(&status.to_be_bytes());
    aad.extend_from_slice(&(client_id.len() as u64).to_be_bytes());
    aad.extend_from_slice(client_id.as_bytes());
    aad.extend_from_slice(key.as_bytes());
    aad
}

/// The plain digest 0.1.0 stored, computed only to recognise its keys until they expire.
fn legacy_hash(body: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, body.as_bytes()).as_ref())
}

/// An attempt's hold on a key: only the holder stores the answer.
#[derive(Debug, Clone)]
pub struct Lease {
    client_id: String,
    key: String,
    attempt: Uuid,
}

impl Lease {
    /// The partner holding the key.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The key as sent.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// How the routes answer what a write did, as a status and a JSON body: the transport's
/// choice, which a keyed write stores with its change.
pub type AnswerOf<'a> =
    dyn Fn(&Submitted) -> Result<(u16, serde_json::Value), serde_json::Error> + Send + Sync + 'a;

/// A keyed attempt as a write needs it: the hold on the key its answer is stored under,
/// the keys that seal the answer, and how what it did is answered. The write seals the
/// answer itself, inside its transaction.
#[derive(Clone, Copy)]
pub struct Keyed<'a> {
    /// The attempt's hold on its key.
    pub lease: &'a Lease,
    /// The keys its answer is sealed with.
    pub keys: &'a AnswerKeys,
    /// The answer to what it did.
    pub answer: &'a AnswerOf<'a>,
}

impl std::fmt::Debug for Keyed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyed").field("lease", self.lease).finish()
    }
}

impl Keyed<'_> {
    /// The answer to `done`, sealed for storage under this attempt's key.
    pub fn seal(&self, done: &Submitted) -> Result<SealedAnswer, StoreError> {
        let (status, body) = (self.answer)(done).map_err(StoreError::Encoding)?;
        seal_json(self.keys, self.lease, status, &body)
    }
}

/// An answer `(status, body)` as it is sealed and replayed: its body encoded as the
/// response's is, through a JSON value, so a replay sends the same bytes.
pub fn json_answer<B: serde::Serialize>(
    (status, body): (u16, B),
) -> Result<(u16, serde_json::Value), serde_json::Error> {
    Ok((status, serde_json::to_value(body)?))
}

/// An answer known before the change, sealed for storage under `lease`'s key.
pub fn seal_answer<B: serde::Serialize>(
    keys: &AnswerKeys,
    lease: &Lease,
    answer: (u16, B),
) -> Result<SealedAnswer, StoreError> {
    let (status, body) = json_answer(answer).map_err(StoreError::Encoding)?;
    seal_json(keys, lease, status, &body)
}

fn seal_json(
    keys: &AnswerKeys,
    lease: &Lease,
    status: u16,
    body: &serde_json::Value,
) -> Result<SealedAnswer, StoreError> {
    let answer = StoredAnswer {
        status,
        body: body.to_string(),
    };
    keys.seal(lease.client_id(), lease.key(), &answer)
        .map_err(StoreError::Sealing)
}

/// What claiming a key found.
#[derive(Debug)]
pub enum Claim {
    /// The key is new (or its earlier attempt died or failed): process the request.
    Granted(Lease),
    /// The same request succeeded before: answer as it was answered.
    Replay(Replayed),
    /// The same request succeeded before, and its answer was erased with its case.
    Erased,
    /// Another attempt with the key is being processed.
    InFlight,
    /// The key was used for a different request.
    Mismatch,
}

impl CaseStore {
    /// Claims `request`'s key for a new attempt, or says why it cannot be.
    pub async fn claim(&self, request: &KeyedRequest<'_>) -> Result<Claim, StoreError> {
        bounded(async {
            let _connection = self.request_connection().await?;
            // A key found neither claimable nor stored was purged in between: look again.
            for _ in 0..2 {
                if let Some(claim) = Box::pin(self.try_claim(request)).await? {
                    return Ok(claim);
                }
            }
            Ok(Claim::InFlight)
        })
        .await
    }

    async fn try_claim(&self, request: &KeyedRequest<'_>) -> Result<Option<Claim>, StoreError> {
        let now = Utc::now();
        let attempt = new_row_id();
        let claimable = Expr::col((idempotency_key::Entity, Column::ExpiresAt))
            .lte(now)
            .or(Expr::col((idempotency_key::Entity, Column::Status))
                .is_null()
                .and(Expr::col((idempotency_key::Entity, Column::LockedUntil)).lte(now))
                .and(Expr::col((idempotency_key::Entity, Column::Operation)).eq(request.operation))
                .and(
                    Expr::col((idempotency_key::Entity, Column::RequestHash))
                        .eq(request.request_hash.as_str()),
                ));
        let claimed = idempotency_key::Entity::insert(idempotency_key::ActiveModel {
            client_id: Set(request.client_id.to_owned()),
            idem_key: Set(request.key.to_owned()),
            operation: Set(request.operation.to_owned()),
            request_hash: Set(request.request_hash.clone()),
            attempt: Set(attempt),
            locked_until: Set(Some(later(now, LEASE))),
            status: Set(None),
            response: Set(None),
            sealed_response: Set(None),
            case_id: Set(None),
            created_at: Set(now),
            expires_at: Set(later(now, KEY_TTL)),
        })
        .on_conflict(
            OnConflict::columns([Column::ClientId, Column::IdemKey])
                .update_columns([
                    Column::Operation,
                    Column::RequestHash,
                    Column::Attempt,
                    Column::LockedUntil,
                    Column::Status,
                    Column::Response,
                    Column::SealedResponse,
                    Column::CaseId,
                    Column::CreatedAt,
                    Column::ExpiresAt,
                ])
                .action_and_where(claimable)
                .to_owned(),
        )
        .exec_without_returning(&self.db)
        .await?;
        if claimed == 1 {
            return Ok(Some(Claim::Granted(Lease {
                client_id: request.client_id.to_owned(),
                key: request.key.to_owned(),
                attempt,
            })));
        }
        let Some(held) = idempotency_key::Entity::find_by_id((
            request.client_id.to_owned(),
            request.key.to_owned(),
        ))
        .one(&self.db)
        .await?
        else {
            return Ok(None);
        };
        let legacy = !held.request_hash.starts_with(DIGEST_PREFIX);
        let same = if legacy {
            held.request_hash == legacy_hash(request.body)
        } else {
            held.request_hash == request.request_hash
        };
        if held.operation != request.operation || !same {
            return Ok(Some(Claim::Mismatch));
        }
        let status = held.status.map(|s| u16::try_from(s).unwrap_or(500));
        Ok(Some(match (status, held.sealed_response, held.response) {
            (Some(status), Some(sealed), _) => {
                Claim::Replay(Replayed::Sealed(SealedAnswer { status, sealed }))
            }
            (Some(status), None, Some(body)) => {
                Claim::Replay(Replayed::Clear(StoredAnswer { status, body }))
            }
            (Some(_), None, None) => Claim::Erased,
            (None, ..) if legacy && held.locked_until.is_some_and(|t| t <= now) => {
                // A 0.1.0 attempt that died: taken over as the upsert takes over ours.
                return Box::pin(self.take_over(request, &held.request_hash, now)).await;
            }
            (None, ..) => Claim::InFlight,
        }))
    }

    /// Takes over a key whose attempt died, if it is still as it was found.
    async fn take_over(
        &self,
        request: &KeyedRequest<'_>,
        found_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Claim>, StoreError> {
        let attempt = new_row_id();
        let taken = idempotency_key::Entity::update_many()
            .col_expr(
                Column::RequestHash,
                Expr::value(request.request_hash.as_str()),
            )
            .col_expr(Column::Attempt, Expr::value(attempt))
            .col_expr(Column::LockedUntil, Expr::value(later(now, LEASE)))
            .filter(Column::ClientId.eq(request.client_id))
            .filter(Column::IdemKey.eq(request.key))
            .filter(Column::RequestHash.eq(found_hash))
            .filter(Column::Status.is_null())
            .filter(Column::LockedUntil.lte(now))
            .exec(&self.db)
            .await?;
        Ok((taken.rows_affected == 1).then(|| {
            Claim::Granted(Lease {
                client_id: request.client_id.to_owned(),
                key: request.key.to_owned(),
                attempt,
            })
        }))
    }

    /// Gives a failed attempt's key back, so a retry with it is processed afresh. If the
    /// attempt's change did commit after all, its answer is stored and stays.
    pub async fn release(&self, lease: &Lease) {
        let released = bounded(async {
            idempotency_key::Entity::delete_many()
                .filter(Column::ClientId.eq(lease.client_id.as_str()))
                .filter(Column::IdemKey.eq(lease.key.as_str()))
                .filter(Column::Attempt.eq(lease.attempt))
                .filter(Column::Status.is_null())
                .exec(&self.db)
                .await?;
            Ok(())
        })
        .await;
        if let Err(e) = released {
            tracing::warn!(error = %e, "an idempotency key could not be released; it frees itself when its lease ends");
        }
    }

    /// Forgets the keys older than [`KEY_TTL`]; returns how many.
    pub async fn purge_expired_keys(&self) -> Result<u64, StoreError> {
        bounded(async {
            let purged = idempotency_key::Entity::delete_many()
                .filter(Column::ExpiresAt.lt(Utc::now()))
                .exec(&self.db)
                .await?;
            Ok(purged.rows_affected)
        })
        .await
    }
}

/// Stores `answer` about case `case_id` for the attempt holding `lease`, inside the
/// transaction of the change it answers; fails, so the change rolls back, if the attempt no
/// longer holds the key.
pub(super) async fn store_answer(
    txn: &DatabaseTransaction,
    lease: &Lease,
    answer: &SealedAnswer,
    case_id: Uuid,
) -> Result<(), StoreError> {
    let stored = txn.execute(&answer_update(lease, answer, case_id)).await?;
    if stored.rows_affected() == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

/// [`store_answer`]'s statement on PostgreSQL, to run after the statement of the change in
/// its transaction: it returns a row if and only if the attempt still held the key.
pub(super) fn answer_statement(lease: &Lease, answer: &SealedAnswer, case_id: Uuid) -> Statement {
    let mut update = answer_update(lease, answer, case_id);
    update.returning_col(Column::Attempt);
    DbBackend::Postgres.build(&update)
}

/// The update that stores `answer` under the key `lease` holds, if it still holds it.
fn answer_update(lease: &Lease, answer: &SealedAnswer, case_id: Uuid) -> UpdateStatement {
    idempotency_key::Entity::update_many()
        .col_expr(Column::Status, Expr::value(answer.status as i16))
        .col_expr(Column::SealedResponse, Expr::value(answer.sealed.as_str()))
        .col_expr(Column::CaseId, Expr::value(case_id))
        .col_expr(Column::LockedUntil, Expr::value(None::<DateTime<Utc>>))
        .filter(Column::ClientId.eq(lease.client_id.as_str()))
        .filter(Column::IdemKey.eq(lease.key.as_str()))
        .filter(Column::Attempt.eq(lease.attempt))
        .filter(Column::Status.is_null())
        .into_query()
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, Statement};

    use serde_json::{Value, json};
    use test_support::{Backend, TestDb};

    use super::super::{NewLink, Outcome};
    use super::*;

    /// An answer as the routes might choose it, which the store keeps as it is given.
    fn answered(done: &Submitted) -> Result<(u16, Value), serde_json::Error> {
        let status = match done.outcome {
            Outcome::Created => 201,
            Outcome::Updated => 200,
        };
        Ok((status, json!({"reference": done.reference})))
    }

    async fn store(backend: Backend) -> (CaseStore, TestDb) {
        super::super::test_store(backend, "intake-keys", Duration::from_secs(60)).await
    }

    fn request<'a>(key: &'a str, hash: &str) -> KeyedRequest<'a> {
        KeyedRequest {
            client_id: "partner",
            key,
            operation: "submitEnquiry",
            request_hash: format!("{DIGEST_PREFIX}{hash}"),
            body: "{}",
        }
    }

    fn sealed(body: &str) -> SealedAnswer {
        SealedAnswer {
            status: 200,
            sealed: body.to_owned(),
        }
    }

    fn answer_keys() -> AnswerKeys {
        let encoded =
            service_kit::Secret::new("a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U=".to_owned());
        AnswerKeys::new(&KeyEncryptionKey::from_base64("TEST_KEK", &encoded).unwrap()).unwrap()
    }

    /// The answer stored for `lease`, opened.
    fn opened(keys: &AnswerKeys, lease: &Lease, stored: &SealedAnswer) -> StoredAnswer {
        keys.open(lease.client_id(), lease.key(), stored).unwrap()
    }

    async fn set(store: &CaseStore, sql: &str) {
        store
            .db
            .execute_raw(Statement::from_string(store.db.get_database_backend(), sql))
            .await
            .unwrap();
    }

    fn lease(claim: Claim) -> Lease {
        match claim {
            Claim::Granted(lease) => lease,
            other => panic!("not granted: {other:?}"),
        }
    }

    /// A retry after an answer the partner never heard (a 503 whose change committed) gets
    /// the committed answer; a retry after a change that did not commit is processed.
    #[tokio::test]
    async fn an_answer_stored_with_its_change_outlives_the_release_of_its_key() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            an_answer_stored_with_its_change_outlives_the_release_of_its_key_on(backend).await;
        }
    }

    async fn an_answer_stored_with_its_change_outlives_the_release_of_its_key_on(backend: Backend) {
        let (store, _db) = store(backend).await;
        let today = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let body = crate::examples::purchase_enquiry("brand_a", "a@example.com");
        let enquiry = crate::domain::parse_enquiry(&body, &["brand_a"], today).unwrap();
        let keys = answer_keys();

        let held = lease(store.claim(&request("k", "h")).await.unwrap());
        assert!(matches!(
            store.claim(&request("k", "h")).await.unwrap(),
            Claim::InFlight
        ));
        let keyed = Keyed {
            lease: &held,
            keys: &keys,
            answer: &answered,
        };
        let submitted = store
            .submit(
                &enquiry,
                "{}",
                "partner",
                crate::sandbox::World::Real,
                Some(keyed),
            )
            .await
            .unwrap();
        store.release(&held).await;
        match store.claim(&request("k", "h")).await.unwrap() {
            Claim::Replay(Replayed::Sealed(stored)) => {
                let expected = StoredAnswer {
                    status: 201,
                    body: json!({"reference": submitted.reference}).to_string(),
                };
                assert_eq!(opened(&keys, &held, &stored), expected);
            }
            other => panic!("not replayed: {other:?}"),
        }
        assert!(matches!(
            store.claim(&request("k", "other")).await.unwrap(),
            Claim::Mismatch
        ));

        let failed = lease(store.claim(&request("k2", "h")).await.unwrap());
        store.release(&failed).await;
        lease(store.claim(&request("k2", "h")).await.unwrap());
    }

    /// An attempt whose key was taken over (it was thought dead) cannot store its answer:
    /// its change is rolled back with it, on the path each backend writes by, and the
    /// successor's change and answer go through.
    #[tokio::test]
    async fn a_dead_attempt_loses_its_key_and_cannot_store_over_its_successor() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            a_dead_attempt_loses_its_key_and_cannot_store_over_its_successor_on(backend).await;
        }
    }

    async fn a_dead_attempt_loses_its_key_and_cannot_store_over_its_successor_on(backend: Backend) {
        let (store, _db) = store(backend).await;
        let expire = "UPDATE idempotency_keys SET locked_until = '2000-01-01 00:00:00+00:00'";
        let today = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let body = crate::examples::purchase_enquiry("brand_a", "a@example.com");
        let enquiry = crate::domain::parse_enquiry(&body, &["brand_a"], today).unwrap();
        let keys = answer_keys();
        let keyed = |lease| Keyed {
            lease,
            keys: &keys,
            answer: &answered,
        };
        let cases = |store: &CaseStore| {
            let db = store.db.clone();
            async move {
                crate::entity::case::Entity::find()
                    .all(&db)
                    .await
                    .unwrap()
                    .len()
            }
        };

        let dead = lease(store.claim(&request("k", "h")).await.unwrap());
        set(&store, expire).await;
        let successor = lease(store.claim(&request("k", "h")).await.unwrap());
        assert!(matches!(
            store
                .submit(
                    &enquiry,
                    "{}",
                    "partner",
                    crate::sandbox::World::Real,
                    Some(keyed(&dead))
                )
                .await,
            Err(StoreError::LeaseLost)
        ));
        assert_eq!(cases(&store).await, 0, "the dead attempt's case was kept");
        let submitted = store
            .submit(
                &enquiry,
                "{}",
                "partner",
                crate::sandbox::World::Real,
                Some(keyed(&successor)),
            )
            .await
            .unwrap();
        match store.claim(&request("k", "h")).await.unwrap() {
            Claim::Replay(Replayed::Sealed(stored)) => {
                let answer = opened(&keys, &successor, &stored);
                assert!(answer.body.contains(&submitted.reference), "{answer:?}");
            }
            other => panic!("not replayed: {other:?}"),
        }

        let email = crate::domain::Email::parse("a@example.com").unwrap();
        let case = store
            .find_for_attach(&email, "partner")
            .await
            .unwrap()
            .expect("the case");
        let dead = lease(store.claim(&request("a", "h")).await.unwrap());
        set(&store, expire).await;
        let successor = lease(store.claim(&request("a", "h")).await.unwrap());
        let link = |hash| NewLink {
            product_uuid: Uuid::nil(),
            token_hash: hash,
        };
        let answer = sealed("link");
        assert!(matches!(
            store
                .attach(&case, link("dead"), "partner", Some((&dead, &answer)))
                .await,
            Err(StoreError::LeaseLost)
        ));
        let links = crate::entity::redirect_token::Entity::find()
            .all(&store.db)
            .await
            .unwrap();
        assert!(links.is_empty(), "the dead attempt's link was kept");
        store
            .attach(&case, link("live"), "partner", Some((&successor, &answer)))
            .await
            .unwrap();
        assert!(matches!(
            store.claim(&request("a", "h")).await.unwrap(),
            Claim::Replay(_)
        ));
    }

    /// Keys 0.1.0 stored (a plain digest, the answer in clear) match and replay until they
    /// expire, and one whose attempt died is taken over.
    #[tokio::test]
    async fn keys_stored_by_the_previous_release_still_match() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            keys_stored_by_the_previous_release_still_match_on(backend).await;
        }
    }

    async fn keys_stored_by_the_previous_release_still_match_on(backend: Backend) {
        let (store, _db) = store(backend).await;
        let old = |key: &str, status: &str, response: &str, locked: &str| {
            format!(
                "INSERT INTO idempotency_keys (client_id, idem_key, operation, request_hash, \
                 attempt, locked_until, status, response, created_at, expires_at) VALUES \
                 ('partner', '{key}', 'submitEnquiry', '{}', {}, {locked}, {status}, \
                 {response}, '2000-01-01 00:00:00+00:00', '2999-01-01 00:00:00+00:00')",
                legacy_hash("{}"),
                match backend {
                    Backend::Postgres => format!("'{}'", Uuid::nil()),
                    Backend::Sqlite => "x'00000000000000000000000000000000'".to_owned(),
                },
            )
        };
        set(
            &store,
            &old("done", "201", "'{\"reference\":\"1\"}'", "NULL"),
        )
        .await;
        set(
            &store,
            &old("dead", "NULL", "NULL", "'2000-01-01 00:00:00+00:00'"),
        )
        .await;
        match store.claim(&request("done", "h")).await.unwrap() {
            Claim::Replay(Replayed::Clear(answer)) => {
                assert_eq!(
                    (answer.status, answer.body.as_str()),
                    (201, r#"{"reference":"1"}"#)
                )
            }
            other => panic!("not replayed: {other:?}"),
        }
        let other_body = KeyedRequest {
            body: "{\"n\":1}",
            ..request("done", "h")
        };
        assert!(matches!(
            store.claim(&other_body).await.unwrap(),
            Claim::Mismatch
        ));
        lease(store.claim(&request("dead", "h")).await.unwrap());
        assert!(matches!(
            store.claim(&request("dead", "h")).await.unwrap(),
            Claim::InFlight
        ));
    }

    #[tokio::test]
    async fn expired_keys_are_purged_and_free() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            expired_keys_are_purged_and_free_on(backend).await;
        }
    }

    async fn expired_keys_are_purged_and_free_on(backend: Backend) {
        let (store, _db) = store(backend).await;
        lease(store.claim(&request("old", "h")).await.unwrap());
        lease(store.claim(&request("new", "h")).await.unwrap());
        set(
            &store,
            "UPDATE idempotency_keys SET expires_at = '2000-01-01 00:00:00+00:00' WHERE idem_key = 'old'",
        )
        .await;
        // An expired key is free even before the purge, whatever it was used for.
        lease(store.claim(&request("old", "other")).await.unwrap());
        set(
            &store,
            "UPDATE idempotency_keys SET expires_at = '2000-01-01 00:00:00+00:00' WHERE idem_key = 'old'",
        )
        .await;
        assert_eq!(store.purge_expired_keys().await.unwrap(), 1);
        assert!(matches!(
            store.claim(&request("new", "h")).await.unwrap(),
            Claim::InFlight
        ));
    }
}
