//! The webhook outbox's fan-out: which partners hear of a case event.
//!
//! An event is queued in the transaction of the change it reports, as one row per active
//! endpoint subscribed to its type, of a partner with an enquiry on the case: an acknowledged change always has
//! its events, and a rolled-back one never does. The rows are the delivery worker's queue
//! (`crate::webhooks`).

use sea_orm::sea_query::{Alias, Expr, ExprTrait, InsertStatement, JoinType, Query};

use crate::entity::{case_event, webhook_delivery, webhook_endpoint};
use shared::intake::webhooks::EventType;
use uuid::Uuid;

/// Which endpoints hear of an event on case `case` whose type has bit `bit` (SQL
/// expressions): endpoints (`"ep"`, a row of `webhook_endpoints`) that are active and
/// subscribed to the type, of partners who made an enquiry on the case, or who are
/// `submitter`, making one in the very statement, which cannot see it yet. SQL text made
/// at compile time, so the hand-written statements and the ORM's queue share the rule.
macro_rules! hears_of {
    (case: $case:literal, bit: $bit:literal) => {
        concat!(
            r#""ep"."disabled_at" IS NULL AND "#,
            $crate::store::fan_out::subscribed!($bit),
            " AND ",
            $crate::store::fan_out::enquired_on!(case: $case, client: r#""ep"."client_id""#)
        )
    };
    (case: $case:literal, submitter: $submitter:literal, bit: $bit:literal) => {
        concat!(
            r#""ep"."disabled_at" IS NULL AND "#,
            $crate::store::fan_out::subscribed!($bit),
            r#" AND ("ep"."client_id" = "#,
            $submitter,
            " OR ",
            $crate::store::fan_out::enquired_on!(case: $case, client: r#""ep"."client_id""#),
            ")"
        )
    };
}

/// Whether endpoint `"ep"` receives events whose type has bit `bit` (an SQL expression):
/// a null mask is every type.
macro_rules! subscribed {
    ($bit:literal) => {
        concat!(
            r#"("ep"."event_types" IS NULL OR ("ep"."event_types" & ("#,
            $bit,
            ")) <> 0)"
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

pub(super) use {enquired_on, hears_of, subscribed};

/// The columns an event is queued with; the rest start empty. The hand-written statements
/// that queue events list the same ones (a test checks).
pub(super) const QUEUED_COLUMNS: [webhook_delivery::Column; 8] = [
    webhook_delivery::Column::Id,
    webhook_delivery::Column::ClientId,
    webhook_delivery::Column::EndpointId,
    webhook_delivery::Column::CaseId,
    webhook_delivery::Column::EventType,
    webhook_delivery::Column::CreatedAt,
    webhook_delivery::Column::NextAttemptAt,
    webhook_delivery::Column::Attempts,
];

/// The webhook event type of each case event kind that partners hear of.
const EVENT_TYPES: [(&str, EventType); 5] = [
    ("created", EventType::CaseCreated),
    ("referred", EventType::CaseReferred),
    ("updated", EventType::CaseUpdated),
    ("activated", EventType::CaseActivated),
    ("product_attached", EventType::ProductAttached),
];

/// The bit of `event_type` in an endpoint's `event_types` mask. Stored masks keep these,
/// so a type keeps its bit for good; the hot paths' SQL writes the same numbers (a test
/// checks).
pub(crate) const fn event_bit(event_type: EventType) -> i32 {
    match event_type {
        EventType::CaseCreated => 1,
        EventType::CaseUpdated => 2,
        EventType::CaseActivated => 4,
        EventType::ProductAttached => 8,
        EventType::CaseReferred => 16,
    }
}

/// The SQL of the event type of `kind`, a column holding a case event's kind.
fn event_type_of(kind: &str) -> String {
    let arms: String = EVENT_TYPES
        .iter()
        .map(|(k, t)| format!(" WHEN '{k}' THEN '{}'", t.name()))
        .collect();
    format!("CASE {kind}{arms} END")
}

/// The SQL of the bit of the event type of `kind` ([`event_bit`]).
fn event_bit_of(kind: &str) -> String {
    let arms: String = EVENT_TYPES
        .iter()
        .map(|(k, t)| format!(" WHEN '{k}' THEN {}", event_bit(*t)))
        .collect();
    format!("CASE {kind}{arms} ELSE 0 END")
}

/// Which endpoints `"ep"` hear of case event `"ev"` ([`hears_of`]).
pub(super) fn queue_rule() -> String {
    hears_of!(case: r#""ev"."case_id""#, bit: "$bit")
        .replace("$bit", &event_bit_of(r#""ev"."kind""#))
}

/// Queues the case events `event_ids` for every active endpoint subscribed to their type,
/// of a partner with an enquiry on the event's case; run it in the transaction that wrote
/// the events.
pub(super) fn queue_events(event_ids: &[Uuid]) -> InsertStatement {
    let ev = Alias::new("ev");
    let ep = Alias::new("ep");
    let mut select = Query::select();
    select
        .column((ev.clone(), case_event::Column::Id))
        .column((ep.clone(), webhook_endpoint::Column::ClientId))
        .column((ep.clone(), webhook_endpoint::Column::Id))
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
            Expr::cust(queue_rule()),
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
            .map(|(_, t)| t.name().to_owned())
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

    /// The hot paths' own SQL checks each endpoint's subscription with the bits
    /// [`super::event_bit`] gives their types.
    #[test]
    fn the_hot_paths_check_subscriptions_with_the_types_bits() {
        let submit = format!(
            r#"("ep"."event_types" & (CASE "logged"."kind" WHEN 'created' THEN {} ELSE {} END)) <> 0"#,
            super::event_bit(EventType::CaseCreated),
            super::event_bit(EventType::CaseUpdated)
        );
        assert!(super::super::submit::SUBMIT.postgres().contains(&submit));
        let attach = format!(
            r#"("ep"."event_types" & ({})) <> 0"#,
            super::event_bit(EventType::ProductAttached)
        );
        assert!(super::super::attach::ATTACH.postgres().contains(&attach));
        let bits: BTreeSet<i32> = EventType::ALL
            .iter()
            .map(|t| super::event_bit(*t))
            .collect();
        assert_eq!(bits.len(), EventType::ALL.len(), "each type its own bit");
        assert!(bits.iter().all(|b| b.count_ones() == 1));
    }
}
