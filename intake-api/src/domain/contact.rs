//! The applicant's contact details, each with the only constructor that checks and normalises it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest deliverable e-mail address (RFC 5321 path limit).
pub const MAX_EMAIL: usize = 254;

/// An e-mail address, trimmed and lower-cased because together with the brand it identifies a case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct Email(String);

/// Why a string is not accepted as an e-mail address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a plausible e-mail address")]
pub struct InvalidEmail;

impl Email {
    /// The only constructor, so every `Email` in the system is plausible and normalised alike.
    pub fn parse(raw: &str) -> Result<Self, InvalidEmail> {
        let email = raw.trim().to_lowercase();
        // Deliberately loose: only delivery proves an address, and a rejected enquiry is a lost
        // customer, so refuse just what cannot be an address.
        let plausible = email.chars().count() <= MAX_EMAIL
            && !email.chars().any(|c| c.is_whitespace() || c.is_control())
            && email.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && domain.split('.').all(|label| !label.is_empty())
            });
        if plausible {
            Ok(Self(email))
        } else {
            Err(InvalidEmail)
        }
    }

    /// The normalised address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Email {
    type Error = InvalidEmail;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(&raw)
    }
}

impl AsRef<str> for Email {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Longest mobile number accepted as sent, separators included: room for any formatting of
/// 15 digits, not for padding.
pub const MAX_MOBILE_CHARS: usize = 32;

/// [`MobileNumber::parse`]'s rule as a regular expression, for the document: separators
/// anywhere, an optional leading `+`, and 7 to 15 digits.
pub const MOBILE_PATTERN: &str = r"^[ ()-]*\+?(?:[ ()-]*[0-9]){7,15}[ ()-]*$";

/// A mobile number reduced to an optional leading `+` and its digits, so formatting never matters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct MobileNumber(String);

/// Why a string is not accepted as a mobile number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a plausible phone number")]
pub struct InvalidMobileNumber;

impl MobileNumber {
    /// The only constructor: 7 to 15 digits (E.164 allows 15) once separators are removed.
    pub fn parse(raw: &str) -> Result<Self, InvalidMobileNumber> {
        if raw.chars().count() > MAX_MOBILE_CHARS {
            return Err(InvalidMobileNumber);
        }
        let compact: String = raw
            .chars()
            .filter(|c| !matches!(c, ' ' | '-' | '(' | ')'))
            .collect();
        let digits = compact.strip_prefix('+').unwrap_or(&compact);
        if (7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) {
            Ok(Self(compact))
        } else {
            Err(InvalidMobileNumber)
        }
    }

    /// The compact number.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MobileNumber {
    type Error = InvalidMobileNumber;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(&raw)
    }
}
