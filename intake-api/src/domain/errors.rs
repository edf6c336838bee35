//! The problems found in a rejected request body, keyed by the path of the field at fault.

use std::collections::BTreeMap;

use serde::Serialize;

/// Every problem in one request body, so a partner can fix them all in a single round trip.
///
/// Paths use Laravel's dotted form (`first_name`, `credit_issues.0`, `addresses.1.postcode`)
/// because partners migrating from the original service already parse that `errors` object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(transparent)]
#[error("the request body has {} invalid field(s)", .0.len())]
pub struct ValidationErrors(BTreeMap<String, Vec<String>>);

impl ValidationErrors {
    /// Records one message; a path may collect several.
    pub fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.entry(path.into()).or_default().push(message.into());
    }

    /// Whether nothing was found wrong.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The messages by path, to inspect without taking ownership.
    pub fn as_map(&self) -> &BTreeMap<String, Vec<String>> {
        &self.0
    }

    /// The messages by path, to build the `errors` object of a 422 body.
    pub fn into_map(self) -> BTreeMap<String, Vec<String>> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_for_one_path_accumulate_and_serialize_as_a_plain_map() {
        let mut errors = ValidationErrors::default();
        assert!(errors.is_empty());
        errors.add("email", "first");
        errors.add("addresses.1.postcode", "second");
        errors.add("email", "third");

        assert!(!errors.is_empty());
        assert_eq!(
            serde_json::to_value(&errors).ok(),
            Some(json!({"addresses.1.postcode": ["second"], "email": ["first", "third"]}))
        );
        assert_eq!(
            errors.to_string(),
            "the request body has 2 invalid field(s)"
        );
        assert_eq!(errors.into_map().len(), 2);
    }
}
