//! The webhook outbox's fan-out: which partners hear of a case event.
//!
//! An event is queued in the transaction of the change it reports, as one row per partner
//! with an active endpoint and an enquiry on the case: an acknowledged change always has
//! its events, and a rolled-back one never does. The rows are the delivery worker's queue
//! (`crate::webhooks`).

use sea_orm::sea_query::{Alias, Expr, ExprTrait, InsertStatement, JoinType, Query};

use crate::entity::{case_event, webhook_delivery, webhook_endpoint};
use uuid::Uuid;

/// Who hears of an event on case `case` (an SQL expression): partners (`"ep"`, a row of
/// `webhook_endpoints`) whose endpoint is active and who made an enquiry on the case, or
/// who are `submitter`, making one in the very statement, which cannot see it yet. SQL text
/// made at compile time, so the hand-written statements and the ORM's queue share the rule.
macro_rules! hears_of {
    (case: $case:literal) => {
        concat!(
            r#""ep"."disabled_at" IS NULL AND "#,
            $crate::store::outbox::enquired_on!(case: $case, client: r#""ep"."client_id""#)
        )
    };
    (case: $case:literal, submitter: $submitter:literal) => {
        concat!(
            r#""ep"."disabled_at" IS NULL AND ("ep"."client_id" = "#,
            $submitter,
            " OR ",
            $crate::store::outbox::enquired_on!(case: $case, client: r#""ep"."client_id""#),
            ")"
        )
    };
}

/// Whether partner `client` made an enquiry on case `case` (SQL expressions): who hears
/// of a case's events ([`hears_of`]), and which cases a partner may see and attach to
/// (`super::enquired_by`). Only an enquiry counts: a referral (or any other kind of
/// submission) is kept as sent and grants its partner nothing on the case, so another
/// partner's customer stays theirs.
macro_rules! enquired_on {
    (case: $case:literal, client: $client:literal) => {
        concat!(
            r#"EXISTS (SELECT 1 FROM "submissions" WHERE "submissions"."case_id" = "#,
            $case,
            r#" AND "submissions"."client_id" = "#,
            $client,
            r#" AND "submissions"."kind" = 'enquiry')"#
        )
    };
}

pub(super) use {enquired_on, hears_of};

/// The columns an event is queued with; the rest start empty. The hand-written statements
/// that queue events list the same ones (a test checks).
pub(super) const QUEUED_COLUMNS: [webhook_delivery::Column; 7] = [
    webhook_delivery::Column::Id,
    webhook_delivery::Column::ClientId,
    webhook_delivery::Column::CaseId,
    webhook_delivery::Column::EventType,
    webhook_delivery::Column::CreatedAt,
    webhook_delivery::Column::NextAttemptAt,
    webhook_delivery::Column::Attempts,
];

/// The webhook event type of each case event kind that partners hear of.
const EVENT_TYPES: [(&str, &str); 5] = [
    ("created", "case.created"),
    ("referred", "case.referred"),
    ("updated", "case.updated"),
    ("activated", "case.activated"),
    ("product_attached", "product.attached"),
];

/// The SQL of the event type of `kind`, a column holding a case event's kind.
fn event_type_of(kind: &str) -> String {
    let arms: String = EVENT_TYPES
        .iter()
        .map(|(k, t)| format!(" WHEN '{k}' THEN '{t}'"))
        .collect();
    format!("CASE {kind}{arms} END")
}

/// Queues the case events `event_ids` for every partner with an active endpoint that has an
/// enquiry on the event's case; run it in the transaction that wrote the events.
pub(super) fn queue_events(event_ids: &[Uuid]) -> InsertStatement {
    let ev = Alias::new("ev");
    let ep = Alias::new("ep");
    let mut select = Query::select();
    select
        .column((ev.clone(), case_event::Column::Id))
        .column((ep.clone(), webhook_endpoint::Column::ClientId))
        .column((ev.clone(), case_event::Column::CaseId))
        .expr(Expr::cust(event_type_of(r#""ev"."kind""#)))
        .column((ev.clone(), case_event::Column::CreatedAt))
        .column((ev.clone(), case_event::Column::CreatedAt))
        .expr(Expr::val(0))
        .from_as(case_event::Entity, ev.clone())
        .join_as(
            JoinType::InnerJoin,
            webhook_endpoint::Entity,
            ep,
            Expr::cust(hears_of!(case: r#""ev"."case_id""#)),
        )
        .and_where(
            Expr::col((ev.clone(), case_event::Column::Id)).is_in(event_ids.iter().copied()),
        );
    Query::insert()
        .into_table(webhook_delivery::Entity)
        .columns(QUEUED_COLUMNS)
        .select_from(select)
        .expect("the select lists the insert's columns")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use shared::intake::webhooks::EventType;

    /// The event types the store writes, in the queueing statement and in the hot paths'
    /// own SQL, are the catalogue's: a type written but not documented, or documented but
    /// never written, fails here.
    #[test]
    fn the_store_writes_exactly_the_catalogues_event_types() {
        let mut written: BTreeSet<String> = super::EVENT_TYPES
            .iter()
            .map(|(_, t)| (*t).to_owned())
            .collect();
        for sql in [
            super::super::submit::SUBMIT.postgres(),
            super::super::attach::ATTACH.postgres(),
        ] {
            // Every quoted `word.word` literal is an event type.
            for literal in sql.split('\'').skip(1).step_by(2) {
                let dotted = literal.split_once('.').is_some_and(|(a, b)| {
                    !a.is_empty()
                        && a.bytes().all(|c| c.is_ascii_lowercase())
                        && !b.is_empty()
                        && b.bytes().all(|c| c.is_ascii_lowercase() || c == b'_')
                });
                if dotted {
                    written.insert(literal.to_owned());
                }
            }
        }
        let documented: BTreeSet<String> =
            EventType::ALL.iter().map(|t| t.name().to_owned()).collect();
        assert_eq!(written, documented);
    }
}
