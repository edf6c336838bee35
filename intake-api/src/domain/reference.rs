//! Case references as partners send them back to us.

/// How many digits a case reference has.
pub const REFERENCE_DIGITS: usize = 12;

/// A case reference of the shape ours have: exactly twelve ASCII digits. Anything else names
/// no case, so it answers 404 without a query, and no byte a database might refuse (U+0000,
/// say) ever reaches one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseReference(String);

impl CaseReference {
    /// The only constructor: `None` for anything but twelve ASCII digits.
    pub fn parse(raw: &str) -> Option<Self> {
        (raw.len() == REFERENCE_DIGITS && raw.bytes().all(|b| b.is_ascii_digit()))
            .then(|| Self(raw.to_owned()))
    }

    /// The reference.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_twelve_ascii_digits_are_a_reference() {
        assert_eq!(
            CaseReference::parse("123456789012").map(|r| r.as_str().to_owned()),
            Some("123456789012".to_owned())
        );
        for raw in [
            "",
            "12345678901",
            "1234567890123",
            "1%00",
            "12345678901\u{0}",
            "12345678901a",
            "１２３４５６７８９０１２",
            " 23456789012",
            "../intake",
        ] {
            assert_eq!(CaseReference::parse(raw), None, "{raw:?}");
        }
    }
}
