//! Taking a referral: the case for the brand and e-mail created as `referred` (or found),
//! the referral kept as sent, a link on which the customer completes the enquiry, the event.

use chrono::Utc;
use sea_orm::{ActiveValue::Set, EntityTrait};

use super::idempotency::Keyed;
use super::idempotency::store_answer;
use super::outbox::log_event;
use super::submit::{Outcome, Submitted, case_key, new_reference, on_case_key, outcome_of};
use super::{CaseStore, StoreError, event, later, new_row_id, submission_row};
use shared::intake::ReferralResponse;

use crate::domain::Referral;
use crate::entity::{case, redirect_token, submission};

/// The case event a referral leaves, and the kind of webhook event `case.referred`.
pub const REFERRED_EVENT: &str = "referred";

/// One referral's values, drawn once per attempt.
struct NewReferral<'a> {
    referral: &'a Referral,
    raw_body: &'a str,
    client_id: &'a str,
    sandbox: bool,
    link: ReferralLink<'a>,
}

/// The link a referral makes, on which the customer completes the enquiry.
#[derive(Debug, Clone, Copy)]
pub struct ReferralLink<'a> {
    /// The hash of its token, as stored.
    pub token_hash: &'a str,
    /// The link itself, for the answer.
    pub redirect: &'a str,
}

impl Submitted {
    /// The answer to the referral, as sent and as stored for its key: 201 for a new case,
    /// 200 for one the referral was added to.
    pub fn referral_answer(&self, redirect: &str) -> (u16, ReferralResponse) {
        let (status, message) = match self.outcome {
            Outcome::Created => (201, "Referral created"),
            Outcome::Updated => (200, "Referral added"),
        };
        let body = ReferralResponse {
            message: message.into(),
            reference: self.reference.clone(),
            redirect: redirect.to_owned(),
        };
        (status, body)
    }
}

impl CaseStore {
    /// Creates the case for the referral's brand and e-mail with status `referred`, or
    /// finds the existing one (a sandbox client's, among sandbox cases only), and in the
    /// same transaction keeps the referral as sent, makes `link` the case's newest and
    /// queues `case.referred`; a keyed referral stores its answer,
    /// [`Submitted::referral_answer`], with them. A case found keeps its status: a referral
    /// never undoes an enquiry. Writes to one case wait in line as submissions do.
    pub async fn refer(
        &self,
        referral: &Referral,
        raw_body: &str,
        client_id: &str,
        sandbox: bool,
        link: ReferralLink<'_>,
        keyed: Option<Keyed<'_>>,
    ) -> Result<Submitted, StoreError> {
        let new = NewReferral {
            referral,
            raw_body,
            client_id,
            sandbox,
            link,
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
        let case_id = new_row_id();
        let token_id = new_row_id();
        let txn = self.begin_write().await?;
        let upserted = case::Entity::insert(case::ActiveModel {
            id: Set(case_id),
            reference: Set(new_reference()),
            brand: Set(new.referral.brand.as_str().to_owned()),
            email: Set(new.referral.email.as_str().to_owned()),
            status: Set(case::STATUS_REFERRED.to_owned()),
            // No enquiry yet; the first one fills it.
            enquiry: Set(serde_json::json!({})),
            product_uuid: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            // Not read while the case is referred: its enquiry sets the real time.
            activates_at: Set(now),
            activated_at: Set(None),
            redirect_token_id: Set(Some(token_id)),
            sandbox: Set(new.sandbox),
        })
        .on_conflict(
            on_case_key()
                .update_columns([case::Column::UpdatedAt, case::Column::RedirectTokenId])
                .to_owned(),
        )
        .exec_with_returning(&txn)
        .await?;
        let referral = submission_row(
            upserted.id,
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
            case_id: Set(upserted.id),
            token_hash: Set(new.link.token_hash.to_owned()),
            product_uuid: Set(None),
            created_at: Set(now),
            expires_at: Set(later(now, self.timing.redirect_ttl)),
            used_at: Set(None),
        })
        .exec_without_returning(&txn)
        .await?;
        let logged = event(upserted.id, REFERRED_EVENT, Some(new.client_id), None, now);
        log_event(&txn, logged).await?;
        let done = Submitted {
            outcome: outcome_of(case_id, upserted.id),
            reference: upserted.reference,
        };
        if let Some(keyed) = keyed {
            let answer = keyed.seal(done.referral_answer(new.link.redirect))?;
            store_answer(&txn, keyed.lease, &answer, upserted.id).await?;
        }
        txn.commit().await?;
        Ok(done)
    }
}
