//! The deployment profile both services run under: the default one, or the FAPI 2.0
//! Security Profile's for the client-credentials grant (`AUTH_FAPI2`, `INTAKE_FAPI2`).
//! One type, so the two services cannot disagree on what the profile allows.

/// The signature algorithms FAPI 2.0 allows (Security Profile, section 5.4.1): for client
/// assertions and DPoP proofs alike. RS256 is not among them.
pub const FAPI2_ALGORITHMS: [&str; 3] = ["PS256", "ES256", "EdDSA"];

/// The algorithms client assertions and DPoP proofs may be signed with outside FAPI 2.0.
pub const STANDARD_ALGORITHMS: [&str; 4] = ["ES256", "PS256", "RS256", "EdDSA"];

/// What a deployment accepts from clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Secrets or private_key_jwt; bearer or DPoP-bound tokens; RS256 too.
    #[default]
    Standard,
    /// FAPI 2.0 for client credentials: private_key_jwt only, every token DPoP-bound, and
    /// only [`FAPI2_ALGORITHMS`].
    Fapi2,
}

impl Profile {
    /// The profile a deployment's on/off switch names.
    pub fn from_switch(fapi2: bool) -> Self {
        if fapi2 { Self::Fapi2 } else { Self::Standard }
    }

    /// Its name in `/healthz`, `/readyz` and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Fapi2 => "fapi2",
        }
    }

    /// Whether this is FAPI 2.0.
    pub fn is_fapi2(self) -> bool {
        self == Self::Fapi2
    }

    /// The algorithms client assertions and DPoP proofs may be signed with.
    pub fn algorithms(self) -> &'static [&'static str] {
        match self {
            Self::Standard => &STANDARD_ALGORITHMS,
            Self::Fapi2 => &FAPI2_ALGORITHMS,
        }
    }

    /// Whether clients may authenticate with a secret, and call with bearer tokens.
    pub fn allows_secrets_and_bearer(self) -> bool {
        self == Self::Standard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fapi2_allows_neither_rs256_nor_secrets() {
        let fapi = Profile::from_switch(true);
        assert!(!fapi.algorithms().contains(&"RS256"));
        assert!(!fapi.allows_secrets_and_bearer());
        let standard = Profile::from_switch(false);
        assert!(standard.algorithms().contains(&"RS256"));
        assert!(standard.allows_secrets_and_bearer());
        assert_eq!((fapi.name(), standard.name()), ("fapi2", "standard"));
    }
}
