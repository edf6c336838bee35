//! The bodies of the webhook endpoint operations: making one, changing one, rotating its
//! secret. A field these operations do not take is refused, so a misspelt one is not
//! silently ignored.

use chrono::{DateTime, Utc};
use serde_json::Value;
use shared::intake::webhook_deliveries::DeliveryStatus;
use shared::intake::webhook_endpoints::{MAX_RATE_LIMIT, MAX_SECRET_GRACE_SECS};
use shared::intake::webhooks::EventType;

use super::ValidationErrors;
use super::fields::{Attr, Fields, array, bounded_text, finish, flag};

/// Longest endpoint URL taken.
pub const MAX_URL_CHARS: usize = 2048;

/// What a body asks of an endpoint; what it leaves out is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointRequest {
    /// Where events go (not yet checked to be https on a public address).
    pub url: Option<String>,
    /// Which event types: `Some(None)` for every type.
    pub event_types: Option<Option<Vec<EventType>>>,
    /// Whether deliveries run.
    pub enabled: Option<bool>,
    /// Events a second at most: `Some(None)` for as fast as the endpoint answers.
    pub rate_limit: Option<Option<u32>>,
}

/// The body of `createWebhookEndpoint`: `url` (required), `event_types` and `rate_limit`.
pub fn parse_new_endpoint(body: &Value) -> Result<EndpointRequest, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    only(body, &["url", "event_types", "rate_limit"], &mut errors);
    let mut f = Fields::root(body, &mut errors);
    let url = f.required("url", url);
    let event_types = event_types(&mut f);
    let rate_limit = rate_limit(&mut f);
    let request = url.map(|url| EndpointRequest {
        url: Some(url),
        event_types: event_types.or(Some(None)),
        enabled: None,
        rate_limit,
    });
    finish(request, errors)
}

/// The body of `updateWebhookEndpoint`: any of `url`, `event_types` (null: every type),
/// `enabled` and `rate_limit` (null: none).
pub fn parse_endpoint_change(body: &Value) -> Result<EndpointRequest, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    only(
        body,
        &["url", "event_types", "enabled", "rate_limit"],
        &mut errors,
    );
    let mut f = Fields::root(body, &mut errors);
    let request = EndpointRequest {
        url: f.optional("url", url),
        event_types: event_types(&mut f),
        enabled: f.optional("enabled", flag),
        rate_limit: rate_limit(&mut f),
    };
    finish(Some(request), errors)
}

/// The body of `rotateWebhookEndpointSecret`: `grace_period_secs`, 0 to a day, a day when
/// left out.
pub fn parse_secret_rotation(body: &Value) -> Result<u32, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    only(body, &["grace_period_secs"], &mut errors);
    let mut f = Fields::root(body, &mut errors);
    let grace = f
        .optional_value("grace_period_secs", |v, attr| {
            v.as_u64()
                .and_then(|secs| u32::try_from(secs).ok())
                .filter(|secs| *secs <= MAX_SECRET_GRACE_SECS)
                .ok_or_else(|| {
                    format!(
                        "The {attr} field must be an integer from 0 to {MAX_SECRET_GRACE_SECS}."
                    )
                })
        })
        .unwrap_or(MAX_SECRET_GRACE_SECS);
    finish(Some(grace), errors)
}

/// The body of `testWebhookEndpoint`: `event_type`, one the catalogue lists, `case.created`
/// when left out.
pub fn parse_test_event(body: &Value) -> Result<EventType, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    only(body, &["event_type"], &mut errors);
    let mut f = Fields::root(body, &mut errors);
    let chosen = f.optional_value("event_type", |v, attr| {
        v.as_str()
            .and_then(EventType::from_name)
            .filter(|t| EventType::SENT.contains(t))
            .ok_or_else(|| {
                let names: Vec<&str> = EventType::SENT.iter().map(|t| t.name()).collect();
                format!("The {attr} field must be one of: {}.", names.join(", "))
            })
    });
    finish(Some(chosen.unwrap_or(EventType::CaseCreated)), errors)
}

/// The body of `recoverWebhookDeliveries`: `since` (required) and `until` (now when left
/// out), RFC 3339 times, `since` before `until`.
pub fn parse_recover(
    body: &Value,
    now: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>), ValidationErrors> {
    let mut errors = ValidationErrors::default();
    only(body, &["since", "until"], &mut errors);
    let mut f = Fields::root(body, &mut errors);
    let since = f.required("since", instant);
    let until = f.optional_value("until", instant);
    let window = since.map(|since| (since, until.unwrap_or(now)));
    if let Some((since, until)) = window
        && since >= until
    {
        errors.add(
            "since",
            "The since field must be before until (now when left out).",
        );
    }
    finish(window, errors)
}

/// An RFC 3339 time, with its offset (`2026-12-01T09:00:00Z`).
fn instant(value: &Value, attr: Attr<'_>) -> Result<DateTime<Utc>, String> {
    value
        .as_str()
        .and_then(rfc3339)
        .ok_or_else(|| format!("The {attr} field {TIME_FORMAT}."))
}

/// What a time field or parameter must be.
const TIME_FORMAT: &str = "must be a time as RFC 3339 writes it, e.g. 2026-12-01T09:00:00Z";

fn rfc3339(text: &str) -> Option<DateTime<Utc>> {
    (text.len() <= 40)
        .then(|| DateTime::parse_from_rfc3339(text).ok())
        .flatten()
        .map(|at| at.with_timezone(&Utc))
}

/// The filters of `listWebhookDeliveries` as sent, before they are read.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryParams<'a> {
    /// `status`: pending, failing, delivered or failed.
    pub status: Option<&'a str>,
    /// `event_type`: one of the catalogue's.
    pub event_type: Option<&'a str>,
    /// `since`: an RFC 3339 time.
    pub since: Option<&'a str>,
    /// `until`: an RFC 3339 time.
    pub until: Option<&'a str>,
    /// `limit`: 1 to [`MAX_HISTORY_PAGE`].
    pub limit: Option<&'a str>,
}

/// The filters of `listWebhookDeliveries`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryFilter {
    /// Only deliveries that stand so.
    pub status: Option<DeliveryStatus>,
    /// Only this type's.
    pub event_type: Option<EventType>,
    /// Only events at or after.
    pub since: Option<DateTime<Utc>>,
    /// Only events before.
    pub until: Option<DateTime<Utc>>,
    /// How many at most.
    pub limit: u64,
}

/// The longest page of the delivery history.
pub const MAX_HISTORY_PAGE: u64 = 100;

/// The page of the delivery history when `limit` is left out.
pub const DEFAULT_HISTORY_PAGE: u64 = 20;

/// Reads the history's filters, each problem into `errors` (under the parameter's name).
pub fn parse_history_filter(
    params: HistoryParams<'_>,
    errors: &mut ValidationErrors,
) -> HistoryFilter {
    let one_of = |names: Vec<&str>| format!("must be one of: {}", names.join(", "));
    let status = param(
        errors,
        "status",
        params.status,
        DeliveryStatus::from_name,
        || one_of(DeliveryStatus::ALL.iter().map(|s| s.name()).collect()),
    );
    let event_type = param(
        errors,
        "event_type",
        params.event_type,
        EventType::from_name,
        || one_of(EventType::ALL.iter().map(|t| t.name()).collect()),
    );
    let since = param(errors, "since", params.since, rfc3339, || {
        TIME_FORMAT.into()
    });
    let until = param(errors, "until", params.until, rfc3339, || {
        TIME_FORMAT.into()
    });
    if let (Some(since), Some(until)) = (since, until)
        && since >= until
    {
        errors.add("since", "The since parameter must be before until.");
    }
    let limit = param(
        errors,
        "limit",
        params.limit,
        |text| {
            text.parse::<u64>()
                .ok()
                .filter(|n| (1..=MAX_HISTORY_PAGE).contains(n) && text.len() <= 3)
        },
        || format!("must be a whole number from 1 to {MAX_HISTORY_PAGE}"),
    )
    .unwrap_or(DEFAULT_HISTORY_PAGE);
    HistoryFilter {
        status,
        event_type,
        since,
        until,
        limit,
    }
}

/// Query parameter `name` as `read` reads its `text`: `None` when left out, or when it does
/// not read, which is reported as "The `name` parameter `expected`."
fn param<T>(
    errors: &mut ValidationErrors,
    name: &str,
    text: Option<&str>,
    read: impl FnOnce(&str) -> Option<T>,
    expected: impl FnOnce() -> String,
) -> Option<T> {
    let value = read(text?);
    if value.is_none() {
        errors.add(name, format!("The {name} parameter {}.", expected()));
    }
    value
}

/// Refuses a body that is not an object, and every field of it not in `taken`.
fn only(body: &Value, taken: &[&str], errors: &mut ValidationErrors) {
    let Some(object) = body.as_object() else {
        errors.add("body", "The request body must be a JSON object.");
        return;
    };
    for key in object.keys().filter(|k| !taken.contains(&k.as_str())) {
        // Named as every other message names a field of the body (underscores as spaces).
        let name = if key.contains('.') {
            key.clone()
        } else {
            key.replace('_', " ")
        };
        errors.add(
            key.as_str(),
            format!("The {name} field is not one this operation takes."),
        );
    }
}

/// `rate_limit` as sent: `Some(None)` for null (no limit), `None` when left out or invalid
/// (reported).
fn rate_limit(f: &mut Fields<'_, '_>) -> Option<Option<u32>> {
    if f.obj
        .and_then(|o| o.get("rate_limit"))
        .is_some_and(Value::is_null)
    {
        return Some(None);
    }
    f.optional_value("rate_limit", |v, attr| {
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (1..=MAX_RATE_LIMIT).contains(n))
            .ok_or_else(|| {
                format!("The {attr} field must be a whole number of events a second from 1 to {MAX_RATE_LIMIT}, or null for none.")
            })
    })
    .map(Some)
}

fn url(value: &Value, attr: Attr<'_>) -> Result<String, String> {
    bounded_text(value, attr, MAX_URL_CHARS)
}

/// `event_types` as sent: `Some(None)` for null (every type), `None` when left out or
/// invalid (reported).
fn event_types(f: &mut Fields<'_, '_>) -> Option<Option<Vec<EventType>>> {
    if f.obj
        .and_then(|o| o.get("event_types"))
        .is_some_and(Value::is_null)
    {
        return Some(None);
    }
    let items = f.optional("event_types", |v, attr| array(v, attr, 1))?;
    f.each("event_types", items, |f, path, item| {
        let known = item.as_str().and_then(EventType::from_name);
        if known.is_none() {
            let names: Vec<&str> = EventType::ALL.iter().map(|t| t.name()).collect();
            f.errors.add(
                path,
                format!("The {path} field must be one of: {}.", names.join(", ")),
            );
        }
        known
    })
    .map(Some)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(result: Result<impl std::fmt::Debug, ValidationErrors>) -> Vec<String> {
        result.unwrap_err().into_map().into_keys().collect()
    }

    #[test]
    fn a_new_endpoint_needs_a_url_and_takes_chosen_types() {
        let every = parse_new_endpoint(&json!({"url": " https://p.example/hooks "})).unwrap();
        assert_eq!(every.url.as_deref(), Some("https://p.example/hooks"));
        assert_eq!(every.event_types, Some(None));
        let chosen = parse_new_endpoint(
            &json!({"url": "https://p.example/h", "event_types": ["case.activated"]}),
        )
        .unwrap();
        assert_eq!(
            chosen.event_types,
            Some(Some(vec![EventType::CaseActivated]))
        );
        assert_eq!(
            problems(parse_new_endpoint(&json!({"event_types": []}))),
            ["event_types", "url"]
        );
        assert_eq!(
            problems(parse_new_endpoint(
                &json!({"url": 5, "event_types": ["case.created", "case.deleted", 7], "enabled": true})
            )),
            ["enabled", "event_types.1", "event_types.2", "url"]
        );
        assert_eq!(problems(parse_new_endpoint(&json!([]))), ["body", "url"]);
        let long = format!("https://p.example/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(problems(parse_new_endpoint(&json!({"url": long}))), ["url"]);
        assert_eq!(
            problems(parse_new_endpoint(
                &json!({"url": "https://p.example/\u{0}"})
            )),
            ["url"]
        );
    }

    #[test]
    fn a_change_says_only_what_changes() {
        assert_eq!(
            parse_endpoint_change(&json!({})).unwrap(),
            EndpointRequest::default()
        );
        let change =
            parse_endpoint_change(&json!({"event_types": null, "enabled": false})).unwrap();
        assert_eq!(
            (change.url, change.event_types, change.enabled),
            (None, Some(None), Some(false))
        );
        assert_eq!(
            problems(parse_endpoint_change(
                &json!({"enabled": "no", "secret": "x"})
            )),
            ["enabled", "secret"]
        );
        assert_eq!(problems(parse_endpoint_change(&json!("x"))), ["body"]);
    }

    #[test]
    fn a_rotation_shortens_the_grace_at_most_to_nothing() {
        assert_eq!(
            parse_secret_rotation(&json!({})).unwrap(),
            MAX_SECRET_GRACE_SECS
        );
        assert_eq!(
            parse_secret_rotation(&json!({"grace_period_secs": 0})).unwrap(),
            0
        );
        for bad in [
            json!(86_401),
            json!(-1),
            json!(1.5),
            json!("60"),
            json!(u64::MAX),
        ] {
            assert_eq!(
                problems(parse_secret_rotation(&json!({"grace_period_secs": bad}))),
                ["grace_period_secs"]
            );
        }
    }
}
