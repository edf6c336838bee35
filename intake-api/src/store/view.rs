//! Reading cases back: a case's state, as its partners see it, and all of it, as the
//! operator CLI shows it; and the cases the CLI finds and lists.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, DerivePartialModel, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::Serialize;
use uuid::Uuid;

use super::{CaseStore, StoreError, bounded, enquired_by};
use crate::entity::{case, case_event, submission};
use crate::sandbox::World;

/// A case's state, as its partners may read it.
#[derive(Debug, Clone, Serialize, DerivePartialModel)]
#[sea_orm(entity = "case::Entity")]
pub struct CaseSummary {
    /// The reference.
    pub reference: String,
    /// The brand.
    pub brand: String,
    /// Where it is in its life.
    pub status: case::Status,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
    /// When it becomes (or became) active.
    pub activates_at: DateTime<Utc>,
    /// When it became active.
    pub activated_at: Option<DateTime<Utc>>,
    /// The attached eligibility-engine product.
    pub product_uuid: Option<Uuid>,
}

/// A case as `intake-api case show` prints it.
#[derive(Debug, Serialize)]
pub struct CaseView {
    /// Its state.
    #[serde(flatten)]
    pub case: CaseSummary,
    /// Whether its customer's personal data was erased (`intake-api case erase`).
    pub erased: bool,
    /// How many enquiries were accepted for it (an erasure removes them).
    pub submissions: u64,
    /// Its history, oldest first.
    pub events: Vec<EventView>,
}

/// One entry of a case's history.
#[derive(Debug, Serialize)]
pub struct EventView {
    /// What happened.
    pub kind: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The partner that caused it.
    pub client_id: Option<String>,
    /// What it recorded besides (the product attached, who asked for an erasure...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

impl CaseStore {
    /// The case with `reference`, with its submission count and history.
    pub async fn show(&self, reference: &str) -> Result<Option<CaseView>, StoreError> {
        let db = &self.db;
        let Some(c) = case::Entity::find()
            .filter(case::Column::Reference.eq(reference))
            .one(db)
            .await?
        else {
            return Ok(None);
        };
        let submissions = submission::Entity::find()
            .filter(submission::Column::CaseId.eq(c.id))
            .count(db)
            .await?;
        let events = case_event::Entity::find()
            .filter(case_event::Column::CaseId.eq(c.id))
            .order_by_asc(case_event::Column::CreatedAt)
            .all(db)
            .await?
            .into_iter()
            .map(|e| EventView {
                kind: e.kind,
                at: e.created_at,
                client_id: e.client_id,
                detail: e.detail,
            })
            .collect();
        let erased = c.email.starts_with(super::ERASED_EMAIL_PREFIX);
        Ok(Some(CaseView {
            erased,
            case: CaseSummary {
                reference: c.reference,
                brand: c.brand,
                status: c.status,
                created_at: c.created_at,
                updated_at: c.updated_at,
                activates_at: c.activates_at,
                activated_at: c.activated_at,
                product_uuid: c.product_uuid,
            },
            submissions,
            events,
        }))
    }

    /// The cases of the customer with `email` (trimmed, in any case), in every brand, most
    /// recently updated first, of `world`.
    pub async fn find_by_email(
        &self,
        email: &str,
        world: World,
    ) -> Result<Vec<CaseSummary>, StoreError> {
        Ok(case::Entity::find()
            .filter(case::Column::Email.eq(email.trim().to_lowercase()))
            .filter(case::Column::Sandbox.eq(world.is_sandbox()))
            .order_by_desc(case::Column::UpdatedAt)
            .into_partial_model::<CaseSummary>()
            .all(&self.db)
            .await?)
    }

    /// The newest `limit` cases created at or after `since`, in one of `statuses` (any when
    /// none), newest first, of `world`.
    pub async fn list(
        &self,
        statuses: &[case::Status],
        since: Option<DateTime<Utc>>,
        limit: u64,
        world: World,
    ) -> Result<Vec<CaseSummary>, StoreError> {
        let mut query = case::Entity::find().filter(case::Column::Sandbox.eq(world.is_sandbox()));
        if !statuses.is_empty() {
            query = query.filter(case::Column::Status.is_in(statuses.iter().copied()));
        }
        if let Some(since) = since {
            query = query.filter(case::Column::CreatedAt.gte(since));
        }
        Ok(query
            .order_by_desc(case::Column::CreatedAt)
            .order_by_desc(case::Column::Id)
            .limit(limit)
            .into_partial_model::<CaseSummary>()
            .all(&self.db)
            .await?)
    }

    /// The case with `reference`, if partner `client_id` has made an enquiry on it: a
    /// partner reads only its own customers' cases, and anyone else's, or one it only
    /// referred, answer as unknown.
    pub async fn status_for_partner(
        &self,
        reference: &str,
        client_id: &str,
    ) -> Result<Option<CaseSummary>, StoreError> {
        bounded(async {
            let _connection = self.request_connection().await?;
            Ok(Box::pin(
                case::Entity::find()
                    .filter(case::Column::Reference.eq(reference))
                    .filter(enquired_by(client_id, self.db.get_database_backend()))
                    .into_partial_model::<CaseSummary>()
                    .one(&self.db),
            )
            .await?)
        })
        .await
    }
}
