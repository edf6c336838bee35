//! Reading one JSON object field by field, recording each problem at the field's path.

use std::fmt::{self, Write as _};

use chrono::NaiveDate;
use serde::de::value::StrDeserializer;
use serde::de::{DeserializeOwned, IntoDeserializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use poem_openapi::types::Type;

use crate::domain::contact::{Email, MAX_EMAIL};
use crate::domain::errors::ValidationErrors;
use shared::intake::wire_names;

/// Longest accepted name or address line, the column size partners were used to.
const MAX_TEXT: usize = 255;
/// Cap on array fields, so one body cannot make us build thousands of rows or messages.
pub const MAX_ITEMS: usize = 20;

/// One JSON object being read, with the path prefix its problems are recorded under.
pub(super) struct Fields<'v, 'e> {
    /// `None` when the body is not an object: then every field is simply missing.
    pub(super) obj: Option<&'v Map<String, Value>>,
    pub(super) prefix: String,
    pub(super) errors: &'e mut ValidationErrors,
}

impl<'v> Fields<'v, '_> {
    pub(super) fn root<'e>(body: &'v Value, errors: &'e mut ValidationErrors) -> Fields<'v, 'e> {
        Fields {
            obj: body.as_object(),
            prefix: String::new(),
            errors,
        }
    }

    pub(super) fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    pub(super) fn attr<'a>(&'a self, key: &'a str) -> Attr<'a> {
        Attr {
            prefix: &self.prefix,
            key,
        }
    }

    /// The field's value; null counts as not sent.
    fn value(&self, key: &str) -> Option<&'v Value> {
        self.obj?.get(key).filter(|v| !v.is_null())
    }

    /// The field's value for text and required fields: null and blank strings count as not
    /// sent, as partners' forms send them for fields left empty. A blank string where a
    /// date, number, UUID or choice belongs is reported as such (the document types it).
    fn get(&self, key: &str) -> Option<&'v Value> {
        let blank = |v: &Value| match v {
            Value::Null => true,
            Value::String(s) => s.trim().is_empty(),
            _ => false,
        };
        self.obj?.get(key).filter(|v| !blank(v))
    }

    /// Whether the field was sent (null is not).
    pub(super) fn sent(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// Parses a value that was sent, recording the parser's message at the field's path.
    pub(super) fn check<T>(
        &mut self,
        key: &str,
        value: &'v Value,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        match parse(value, self.attr(key)) {
            Ok(parsed) => Some(parsed),
            Err(message) => {
                let path = self.path(key);
                self.errors.add(path, message);
                None
            }
        }
    }

    pub(super) fn optional<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.value(key)?;
        self.check(key, value, parse)
    }

    /// A field that is not text: anything but null is parsed, a blank string too (refused
    /// by a parser that takes no text), so only what the schema allows passes.
    pub(super) fn optional_value<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.obj?.get(key).filter(|v| !v.is_null())?;
        self.check(key, value, parse)
    }

    /// An optional text field: blank counts as not sent, unless it is longer than a text
    /// may be (the document refuses it then).
    pub(super) fn optional_text(&mut self, key: &str) -> Option<String> {
        self.optional_text_within(key, MAX_TEXT)
    }

    /// [`Self::optional_text`] of at most `max` characters.
    pub(super) fn optional_text_within(&mut self, key: &str, max: usize) -> Option<String> {
        self.optional_within(key, max, string)
    }

    /// [`Self::optional_text_within`] for free text, which may run over several lines.
    pub(super) fn optional_lines_within(&mut self, key: &str, max: usize) -> Option<String> {
        self.optional_within(key, max, lines)
    }

    fn optional_within(
        &mut self,
        key: &str,
        max: usize,
        read: for<'a> fn(&'a Value, Attr<'_>) -> Result<&'a str, String>,
    ) -> Option<String> {
        let Some(value) = self.get(key) else {
            let sent = self.value(key)?;
            self.check(key, sent, |v, attr| within(v, attr, max));
            return None;
        };
        self.check(key, value, |v, attr| {
            within(v, attr, max)?;
            Ok(read(v, attr)?.to_owned())
        })
    }

    pub(super) fn required<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        self.demand(key, None, parse)
    }

    /// Like `required`, for a field whose condition (`other` has `value`) is known to hold.
    pub(super) fn required_if<T>(
        &mut self,
        key: &str,
        condition: (&str, &str),
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        self.demand(key, Some(condition), parse)
    }

    fn demand<T>(
        &mut self,
        key: &str,
        condition: Option<(&str, &str)>,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        if let Some(value) = self.get(key) {
            return self.check(key, value, parse);
        }
        let attr = self.attr(key);
        let message = match condition {
            None => format!("The {attr} field is required."),
            Some((other, value)) => format!(
                "The {attr} field is required when {} is {value}.",
                Attr::top(other)
            ),
        };
        self.errors.add(self.path(key), message);
        None
    }

    /// Parses every element at its own path (`key.N`), so one bad element hides no other.
    pub(super) fn each<T>(
        &mut self,
        key: &str,
        items: &'v [Value],
        mut parse: impl FnMut(&mut Self, &str, &'v Value) -> Option<T>,
    ) -> Option<Vec<T>> {
        let parsed: Vec<Option<T>> = items
            .iter()
            .enumerate()
            .map(|(index, item)| parse(self, &format!("{key}.{index}"), item))
            .collect();
        parsed.into_iter().collect()
    }
}

/// A field's name in a message: a field of the body as Laravel writes it (underscores become
/// spaces: "first name"), a nested one by its whole path as the `errors` object keys it
/// (`addresses.1.date_moved_out`), so it is never half of each. Written only into a message:
/// most fields are valid, and a name built for each would be allocations wasted.
#[derive(Clone, Copy)]
pub(super) struct Attr<'a> {
    prefix: &'a str,
    key: &'a str,
}

impl<'a> Attr<'a> {
    /// A field of the body itself.
    fn top(key: &'a str) -> Self {
        Self { prefix: "", key }
    }
}

impl fmt::Display for Attr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.prefix.is_empty() || self.key.contains('.') {
            return write!(f, "{}{}", self.prefix, self.key);
        }
        for (i, piece) in self.key.split('_').enumerate() {
            if i > 0 {
                f.write_char(' ')?;
            }
            f.write_str(piece)?;
        }
        Ok(())
    }
}

pub(super) fn finish<T>(value: Option<T>, errors: ValidationErrors) -> Result<T, ValidationErrors> {
    match value {
        Some(value) if errors.is_empty() => Ok(value),
        _ => Err(errors),
    }
}

/// Reads a conditional field: `Some(None)` when its condition is false, `None` when the
/// condition's own field is invalid (already reported) or the field itself is.
pub(super) fn when<T>(
    condition: Option<bool>,
    read: impl FnOnce() -> Option<T>,
) -> Option<Option<T>> {
    match condition? {
        true => read().map(Some),
        false => Some(None),
    }
}

/// `when`, for a condition that a choice field has one particular value.
pub(super) fn when_is<C: PartialEq, T>(
    choice: Option<C>,
    expected: C,
    read: impl FnOnce() -> Option<T>,
) -> Option<Option<T>> {
    when(choice.map(|choice| choice == expected), read)
}

/// A string, trimmed, without control characters (C0, DEL or C1): refused at the edge so
/// both databases keep the same values (PostgreSQL cannot store U+0000 at all, SQLite would).
pub(super) fn string<'v>(value: &'v Value, attr: Attr<'_>) -> Result<&'v str, String> {
    text_without(value, attr, char::is_control)
}

/// [`string`] for free text, which may also hold line breaks and tabs.
pub(super) fn lines<'v>(value: &'v Value, attr: Attr<'_>) -> Result<&'v str, String> {
    text_without(value, attr, |c| {
        c.is_control() && !matches!(c, '\n' | '\r' | '\t')
    })
}

fn text_without<'v>(
    value: &'v Value,
    attr: Attr<'_>,
    refused: impl Fn(char) -> bool,
) -> Result<&'v str, String> {
    let text = value
        .as_str()
        .map(str::trim)
        .ok_or_else(|| format!("The {attr} field must be a string."))?;
    if text.chars().any(refused) {
        return Err(control_characters(attr));
    }
    Ok(text)
}

fn control_characters(attr: Attr<'_>) -> String {
    format!("The {attr} field must not contain control characters.")
}

pub(super) fn too_long(attr: Attr<'_>, max: usize) -> String {
    format!("The {attr} field must not be greater than {max} characters.")
}

/// Refuses a string of more than `max` characters as sent: the document's `maxLength` is of
/// the value as sent, so what the service trims away still counts, as it does for the schema.
pub(super) fn within(value: &Value, attr: Attr<'_>, max: usize) -> Result<(), String> {
    match value.as_str() {
        Some(sent) if sent.chars().count() > max => Err(too_long(attr, max)),
        _ => Ok(()),
    }
}

pub(super) fn bounded_text(value: &Value, attr: Attr<'_>, max: usize) -> Result<String, String> {
    within(value, attr, max)?;
    Ok(string(value, attr)?.to_owned())
}

pub(super) fn text(value: &Value, attr: Attr<'_>) -> Result<String, String> {
    bounded_text(value, attr, MAX_TEXT)
}

pub(super) fn email(value: &Value, attr: Attr<'_>) -> Result<Email, String> {
    let invalid = || format!("The {attr} field must be a valid email address.");
    // Over the document's length as sent, padding included; refused as any address too
    // long to deliver is.
    within(value, attr, MAX_EMAIL).map_err(|_| invalid())?;
    Email::parse(string(value, attr)?).map_err(|_| invalid())
}

pub(super) fn hyphenated_uuid(value: &Value, attr: Attr<'_>) -> Result<Uuid, String> {
    let raw = string(value, attr)?;
    // Only the hyphenated form: the braced, URN and bare forms `Uuid` also takes are not UUID
    // strings as partners' validators (and ours, in the OpenAPI document) understand them.
    Some(raw)
        .filter(|raw| raw.len() == 36)
        .and_then(|raw| Uuid::try_parse(raw).ok())
        .ok_or_else(|| format!("The {attr} field must be a valid UUID."))
}

pub(super) fn flag(value: &Value, attr: Attr<'_>) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("The {attr} field must be true or false."))
}

pub(super) fn amount(value: &Value, attr: Attr<'_>) -> Result<f64, String> {
    let amount = value
        .as_f64()
        .filter(|amount| amount.is_finite())
        .ok_or_else(|| format!("The {attr} field must be a number."))?;
    if amount < 0.0 {
        return Err(format!("The {attr} field must be at least 0."));
    }
    Ok(amount)
}

/// The message for a value not in `allowed`, which it lists so the partner can pick one.
pub(super) fn invalid_choice<S: AsRef<str>>(attr: Attr<'_>, allowed: &[S]) -> String {
    let mut message = format!("The selected {attr} is invalid; allowed values: ");
    for (i, name) in allowed.iter().enumerate() {
        if i > 0 {
            message.push_str(", ");
        }
        message.push_str(name.as_ref());
    }
    message.push('.');
    message
}

/// One of an enum's wire names; the serde names are the single source of them.
pub(super) fn choice<T: DeserializeOwned + Type>(
    value: &Value,
    attr: Attr<'_>,
) -> Result<T, String> {
    let raw: StrDeserializer<'_, serde::de::value::Error> =
        string(value, attr)?.into_deserializer();
    T::deserialize(raw).map_err(|_| invalid_choice(attr, &wire_names::<T>()))
}

/// Strictly `YYYY-MM-DD`: chrono alone would also take unpadded or signed years.
pub(super) fn date(value: &Value, attr: Attr<'_>) -> Result<NaiveDate, String> {
    let raw = string(value, attr)?;
    let shaped = raw.len() == 10
        && raw.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    // Shaped, the parts are plain digits: read directly, as chrono's format-string parser
    // is many times dearer.
    let part = |at: std::ops::Range<usize>| raw[at].parse::<u32>().ok();
    shaped
        .then(|| NaiveDate::from_ymd_opt(part(0..4)? as i32, part(5..7)?, part(8..10)?))
        .flatten()
        .ok_or_else(|| format!("The {attr} field must be a valid date in the format YYYY-MM-DD."))
}

pub(super) fn array<'v>(
    value: &'v Value,
    attr: Attr<'_>,
    min: usize,
) -> Result<&'v [Value], String> {
    let items = value
        .as_array()
        .ok_or_else(|| format!("The {attr} field must be an array."))?;
    if items.len() < min {
        let noun = if min == 1 { "item" } else { "items" };
        return Err(format!("The {attr} field must have at least {min} {noun}."));
    }
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "The {attr} field must not have more than {MAX_ITEMS} items."
        ));
    }
    Ok(items)
}
