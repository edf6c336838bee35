//! Taking a referral: the case for the brand and e-mail created as `referred` (or found),
//! the referral kept as sent, a link on which the customer completes the enquiry, the event.
//!
//! A referral grants its partner nothing on the case (only an enquiry does: see
//! `fan_out::enquired_on`), and its answer never tells whether another partner has the
//! customer. So what a partner is answered depends only on what it sent itself: its first
//! referral of a customer answers 201 with a reference, its later ones 200 with the same
//! one. For a customer nobody has yet that is the new case's reference; for a customer the
//! partner has no enquiry on but someone else has a case for, a reference of the
//! referral's own, drawn as a case's is, kept on its link and on nothing of the case. A
//! referral leaves the case row as it was (no newer time, no newer link, no webhook event),
//! so the partners on the case see nothing of it; its link lives beside the case's, is
//! replaced only by the same partner's next referral of the customer, and redeems with
//! the referral's reference. Sent after an enquiry of the partner's own, a referral answers
//! 200 with the case's reference, which the enquiry already told.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, DatabaseTransaction, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect,
};
use uuid::Uuid;

use super::idempotency::Keyed;
use super::idempotency::store_answer;
use super::submit::{Outcome, Submitted, case_key, new_reference};
use super::{CaseStore, StoreError, event, later, new_row_id, submission_row};

use crate::domain::Referral;
use crate::entity::{case, case_event, redirect_token, submission};
use crate::sandbox::World;

/// The case event a referral leaves in the case's history (heard of by no partner).
pub const REFERRED_EVENT: &str = "referred";

/// One referral's values, drawn once per attempt.
struct NewReferral<'a> {
    referral: &'a Referral,
    raw_body: &'a str,
    client_id: &'a str,
    world: World,
    token_hash: &'a str,
}

impl CaseStore {
    /// Creates the case for the referral's brand and e-mail with status `referred`, or
    /// finds the existing one (a sandbox client's, among sandbox cases only), and in the
    /// same transaction keeps the referral as sent on it, stores the link whose token hashes
    /// to `token_hash` as the partner's referral link and records the `referred` event in
    /// the case's history; a keyed referral stores its answer, as [`Keyed::answer`] makes
    /// it, with them. The outcome and reference are the partner's own (see the module's text): a case found
    /// is left as it was, its status, time, link and partners' webhooks untouched. Writes
    /// to one case wait in line as submissions do.
    pub async fn refer(
        &self,
        referral: &Referral,
        raw_body: &str,
        client_id: &str,
        world: World,
        token_hash: &str,
        keyed: Option<Keyed<'_>>,
    ) -> Result<Submitted, StoreError> {
        let new = NewReferral {
            referral,
            raw_body,
            client_id,
            world,
            token_hash,
        };
        let key = case_key(referral.brand.as_str(), referral.email.as_str());
        // Boxed, as the ORM's futures are large.
        self.drawing_references(key, || Box::pin(self.refer_in_transaction(&new, keyed)))
            .await
    }

    async fn refer_in_transaction(
        &self,
        new: &NewReferral<'_>,
        keyed: Option<Keyed<'_>>,
    ) -> Result<Submitted, StoreError> {
        let now = Utc::now();
        let token_id = new_row_id();
        let txn = self.begin_write().await?;
        let (case_id, done) = match make_case(&txn, new, token_id, now).await? {
            Some(made) => made,
            None => answer_on_found_case(&txn, new).await?,
        };
        let referral = submission_row(
            case_id,
            new.client_id,
            now,
            new.raw_body,
            submission::KIND_REFERRAL,
        );
        submission::Entity::insert(referral)
            .exec_without_returning(&txn)
            .await?;
        redirect_token::Entity::insert(redirect_token::ActiveModel {
            id: Set(token_id),
            case_id: Set(case_id),
            token_hash: Set(new.token_hash.to_owned()),
            product_uuid: Set(None),
            created_at: Set(now),
            expires_at: Set(later(now, self.timing.redirect_ttl)),
            used_at: Set(None),
            client_id: Set(Some(new.client_id.to_owned())),
            reference: Set(Some(done.reference.clone())),
        })
        .exec_without_returning(&txn)
        .await?;
        // In the case's history only, not queued for webhooks: the partners who hear of
        // the case are those with an enquiry on it, and a referral is not theirs to hear of.
        let detail = serde_json::json!({"reference": done.reference});
        let logged = event(
            case_id,
            REFERRED_EVENT,
            Some(new.client_id),
            Some(detail),
            now,
        );
        case_event::Entity::insert(logged)
            .exec_without_returning(&txn)
            .await?;
        if let Some(keyed) = keyed {
            let answer = keyed.seal(&done)?;
            store_answer(&txn, keyed.lease, &answer, case_id).await?;
        }
        txn.commit().await?;
        Ok(done)
    }
}

/// Makes the referred case for the customer, unless they have one (of any status, by any
/// partner): then nothing is written and none answered. A case made answers 201 with its
/// reference, and its only link is the referral's.
async fn make_case(
    txn: &DatabaseTransaction,
    new: &NewReferral<'_>,
    token_id: Uuid,
    now: DateTime<Utc>,
) -> Result<Option<(Uuid, Submitted)>, StoreError> {
    let case_id = new_row_id();
    let reference = new_reference();
    let inserted = case::Entity::insert(case::ActiveModel {
        id: Set(case_id),
        reference: Set(reference.clone()),
        brand: Set(new.referral.brand.as_str().to_owned()),
        email: Set(new.referral.email.as_str().to_owned()),
        status: Set(case::Status::Referred),
        // No enquiry yet; the first one fills it.
        enquiry: Set(serde_json::json!({})),
        product_uuid: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        // Not read while the case is referred: its enquiry sets the real time.
        activates_at: Set(now),
        activated_at: Set(None),
        // Its only link, which a release before this one redeems as the case's newest.
        redirect_token_id: Set(Some(token_id)),
        sandbox: Set(new.world.is_sandbox()),
    })
    // A case found is not written: nothing of it changes for the partners on it. The
    // conflict is on the case's key (the unique index `ux_cases_brand_email_sandbox`).
    .on_conflict(
        OnConflict::columns([
            case::Column::Brand,
            case::Column::Email,
            case::Column::Sandbox,
        ])
        .do_nothing()
        .to_owned(),
    )
    .exec_without_returning(txn)
    .await?;
    let made = Submitted {
        outcome: Outcome::Created,
        reference,
    };
    Ok((inserted == 1).then_some((case_id, made)))
}

/// What the partner's referral is answered on the customer's existing case, by what the
/// partner itself sent before: 200 with the case's reference after an enquiry of its own,
/// 200 with its earlier referral's reference after a referral of its own, and otherwise
/// what a first referral of a new customer gets, 201 with a new reference of the
/// referral's own.
async fn answer_on_found_case(
    txn: &DatabaseTransaction,
    new: &NewReferral<'_>,
) -> Result<(Uuid, Submitted), StoreError> {
    let (case_id, case_reference): (Uuid, String) = case::Entity::find()
        .select_only()
        .columns([case::Column::Id, case::Column::Reference])
        .filter(case::Column::Brand.eq(new.referral.brand.as_str()))
        .filter(case::Column::Email.eq(new.referral.email.as_str()))
        .filter(case::Column::Sandbox.eq(new.world.is_sandbox()))
        // Two referrals of one partner at two replicas take turns, so the second sees the
        // first's link (SQLite's write transaction already holds the database).
        .lock_exclusive()
        .into_tuple()
        .one(txn)
        .await?
        .ok_or_else(|| sea_orm::DbErr::RecordNotFound("the customer's case".into()))?;
    let own = |kind: &'static str| {
        submission::Entity::find()
            .filter(submission::Column::CaseId.eq(case_id))
            .filter(submission::Column::ClientId.eq(new.client_id))
            .filter(submission::Column::Kind.eq(kind))
            .count(txn)
    };
    let (outcome, reference) = if own(submission::KIND_ENQUIRY).await? > 0 {
        (Outcome::Updated, case_reference)
    } else if let Some((_, Some(earlier))) =
        newest_referral_link(txn, case_id, new.client_id).await?
    {
        (Outcome::Updated, earlier)
    } else if own(submission::KIND_REFERRAL).await? > 0 {
        // Referred before links named their partner: answered the case's reference then.
        (Outcome::Updated, case_reference)
    } else {
        (Outcome::Created, new_reference())
    };
    Ok((case_id, Submitted { outcome, reference }))
}

/// Partner `client_id`'s newest referral link on case `case_id`: its id, and the reference
/// the referral was answered with. Only that link redeems, and a later referral of the
/// customer by the partner answers with that reference again.
pub(super) async fn newest_referral_link(
    txn: &DatabaseTransaction,
    case_id: Uuid,
    client_id: &str,
) -> Result<Option<(Uuid, Option<String>)>, StoreError> {
    Ok(redirect_token::Entity::find()
        .select_only()
        .column(redirect_token::Column::Id)
        .column(redirect_token::Column::Reference)
        .filter(redirect_token::Column::CaseId.eq(case_id))
        .filter(redirect_token::Column::ClientId.eq(client_id))
        .order_by_desc(redirect_token::Column::CreatedAt)
        .order_by_desc(redirect_token::Column::Id)
        .into_tuple()
        .one(txn)
        .await?)
}
