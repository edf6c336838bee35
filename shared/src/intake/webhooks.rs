//! The webhook events partners receive, as the event catalogue documents them: each type's
//! body ([`WebhookEvent`]) and the list `GET /partners/external/webhooks/event-types` answers
//! with ([`EventTypeList`]).
//!
//! The sender writes the bodies from the outbox's own text, not from these types, so a
//! replica of an earlier release still sends an event type a later one added; the
//! intake-api's tests hold every type it writes to this catalogue.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::CaseState;

/// What an event says happened. New types may come, which receivers must ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
pub enum EventType {
    /// Your enquiry made a case.
    #[serde(rename = "case.created")]
    #[cfg_attr(feature = "openapi", oai(rename = "case.created"))]
    CaseCreated,
    /// Your enquiry changed a case you had sent an enquiry for before.
    #[serde(rename = "case.updated")]
    #[cfg_attr(feature = "openapi", oai(rename = "case.updated"))]
    CaseUpdated,
    /// A case became active.
    #[serde(rename = "case.activated")]
    #[cfg_attr(feature = "openapi", oai(rename = "case.activated"))]
    CaseActivated,
    /// A product was attached to a case: `data.product_uuid` says which.
    #[serde(rename = "product.attached")]
    #[cfg_attr(feature = "openapi", oai(rename = "product.attached"))]
    ProductAttached,
    /// No longer sent: a referral opens its case to no partner, so nobody hears of it. Kept
    /// for receivers built against it.
    #[serde(rename = "case.referred")]
    #[cfg_attr(feature = "openapi", oai(rename = "case.referred"))]
    CaseReferred,
}

impl EventType {
    /// Every type there is, those sent first, in the catalogue's order.
    pub const ALL: [EventType; 5] = [
        EventType::CaseCreated,
        EventType::CaseUpdated,
        EventType::CaseActivated,
        EventType::ProductAttached,
        EventType::CaseReferred,
    ];

    /// The types sent today: the catalogue's.
    pub const SENT: [EventType; 4] = [
        EventType::CaseCreated,
        EventType::CaseUpdated,
        EventType::CaseActivated,
        EventType::ProductAttached,
    ];

    /// The type's wire name (`case.created`...).
    pub fn name(self) -> &'static str {
        match self {
            EventType::CaseCreated => "case.created",
            EventType::CaseReferred => "case.referred",
            EventType::CaseUpdated => "case.updated",
            EventType::CaseActivated => "case.activated",
            EventType::ProductAttached => "product.attached",
        }
    }

    /// The type named `name`, if it is one of this catalogue's.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// When the type is sent, for people.
    pub fn description(self) -> &'static str {
        match self {
            EventType::CaseCreated => {
                "Your enquiry made a new case (the answer to it said `Case created`)."
            }
            EventType::CaseReferred => "No longer sent: nobody hears of a referral.",
            EventType::CaseUpdated => {
                "Your enquiry changed a case you had sent an enquiry for (`Case updated`)."
            }
            EventType::CaseActivated => {
                "A case you sent an enquiry for became active, at its `activates_at`."
            }
            EventType::ProductAttached => {
                "A product was attached to a case you sent an enquiry for; `data.product_uuid` \
                 names it."
            }
        }
    }
}

/// The body of every webhook request: `{"type", "timestamp", "data"}`. It is thin: read the
/// case back (`GET /partners/external/cases/{reference}`) for more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookEvent {
    /// What happened.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", oai(rename = "type"))]
    pub event_type: EventType,
    /// When it happened (RFC 3339, UTC, milliseconds); the same on every retry.
    pub timestamp: DateTime<Utc>,
    /// The case it happened to, as it is when the event is sent.
    pub data: WebhookEventData,
}

/// What an event is about: the case, as it stands when the event is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookEventData {
    /// The case's reference.
    pub reference: String,
    /// The case's brand.
    pub brand: String,
    /// The case's status when the event is sent (not when it happened).
    pub status: CaseState,
    /// The product attached: `product.attached` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", oai(skip_serializing_if_is_none))]
    pub product_uuid: Option<Uuid>,
}

/// One entry of the event catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct EventTypeEntry {
    /// The type's name, as an event's `type` carries it.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", oai(rename = "type"))]
    pub event_type: EventType,
    /// When it is sent.
    pub description: String,
    /// An event of the type, as it is sent.
    pub example: WebhookEvent,
}

/// `{"data": [...]}`: every event type an endpoint may receive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct EventTypeList {
    /// The types, each with its description and an example.
    pub data: Vec<EventTypeEntry>,
}

impl EventTypeList {
    /// The catalogue: every type sent, each with an example of its event.
    pub fn catalogue() -> Self {
        let timestamp = DateTime::parse_from_rfc3339("2026-03-14T09:26:53.589Z")
            .expect("a valid time")
            .with_timezone(&Utc);
        Self {
            data: EventType::SENT
                .into_iter()
                .map(|event_type| EventTypeEntry {
                    event_type,
                    description: event_type.description().to_owned(),
                    example: WebhookEvent {
                        event_type,
                        timestamp,
                        data: WebhookEventData {
                            reference: "418290357116".into(),
                            brand: "brand_a".into(),
                            status: match event_type {
                                EventType::CaseReferred => CaseState::Referred,
                                EventType::CaseActivated | EventType::ProductAttached => {
                                    CaseState::Active
                                }
                                _ => CaseState::PendingActivation,
                            },
                            product_uuid: (event_type == EventType::ProductAttached).then(|| {
                                Uuid::parse_str("6f1c2a4e-8b3d-4c5e-9f70-1a2b3c4d5e6f")
                                    .expect("a valid UUID")
                            }),
                        },
                    },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each type's `name` is its serde name, and names are told apart.
    #[test]
    fn names_are_the_wire_names() {
        for t in EventType::ALL {
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
            assert_eq!(EventType::from_name(t.name()), Some(t));
        }
        assert_eq!(EventType::from_name("case.deleted"), None);
    }

    /// The catalogue lists every type sent once, each example of its own type, and reads
    /// back.
    #[test]
    fn the_catalogue_lists_every_type_sent_with_its_example() {
        let list = EventTypeList::catalogue();
        let types: Vec<EventType> = list.data.iter().map(|e| e.event_type).collect();
        assert_eq!(types, EventType::SENT);
        assert_eq!(EventType::ALL[..EventType::SENT.len()], EventType::SENT);
        for entry in &list.data {
            assert_eq!(entry.example.event_type, entry.event_type);
            assert_eq!(
                entry.example.data.product_uuid.is_some(),
                entry.event_type == EventType::ProductAttached
            );
        }
        let text = serde_json::to_string(&list).unwrap();
        assert!(text.contains(r#""type":"case.created""#), "{text}");
        assert!(
            text.contains(r#""timestamp":"2026-03-14T09:26:53.589Z""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<EventTypeList>(&text).unwrap(), list);
    }
}
