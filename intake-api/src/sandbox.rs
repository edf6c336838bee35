//! The sandbox: what being a sandbox client changes, decided here and consulted by the routes,
//! the store and the workers through one value, the [`World`] a request or a case lives in.
//! A sandbox client's cases live apart from real ones (a world of their own in the cases'
//! unique key, and in operators' views), activate soon, are counted apart and expire; and a
//! sandbox client can make happen on purpose the failures the contract tells partners to
//! handle, each by an e-mail address, so a partner tests its fallbacks before a customer
//! meets them. For a real client these are ordinary addresses.

use std::collections::HashSet;
use std::sync::Mutex;

/// Where a client's requests, and the cases they make, live: the real world, or the sandbox
/// apart from it. Stored as a case's `sandbox` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum World {
    /// Real partners' real customers.
    #[default]
    Real,
    /// A sandbox client's practice cases.
    Sandbox,
}

impl World {
    /// The world of a sandbox client, or of a real one.
    pub fn of(sandbox: bool) -> Self {
        if sandbox { Self::Sandbox } else { Self::Real }
    }

    /// Whether it is the sandbox: the flag a case is stored with.
    pub fn is_sandbox(self) -> bool {
        self == Self::Sandbox
    }

    /// The failure a sandbox client asks for by its customer's address; none in the real
    /// world, whose addresses are only addresses.
    pub fn trigger(self, email: &str) -> Option<Trigger> {
        match self {
            Self::Sandbox => Trigger::of(email),
            Self::Real => None,
        }
    }

    /// The counter of `count` that counts this world's traffic.
    pub fn counter(self, count: Counted) -> &'static str {
        match self {
            Self::Real => count.real,
            Self::Sandbox => count.sandbox,
        }
    }
}

/// The domain of the trigger addresses: reserved for examples (RFC 2606), so no customer
/// has one.
pub const DOMAIN: &str = "sandbox.example";

/// A count a sandbox client's traffic is kept out of: it has a sandbox twin, so the
/// production counts (and the alerts and reports read from them) see only real partners.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    real: &'static str,
    sandbox: &'static str,
}

impl Counted {
    /// Both counters' names, the real one first.
    pub fn names(self) -> [&'static str; 2] {
        [self.real, self.sandbox]
    }
}

/// Enquiries accepted.
pub const CASES: Counted = Counted {
    real: "intake_cases_total",
    sandbox: "intake_sandbox_cases_total",
};

/// Referrals accepted.
pub const REFERRALS: Counted = Counted {
    real: "intake_referrals_total",
    sandbox: "intake_sandbox_referrals_total",
};

/// Products attached.
pub const PRODUCTS_ATTACHED: Counted = Counted {
    real: "intake_products_attached_total",
    sandbox: "intake_sandbox_products_attached_total",
};

/// Cases activated.
pub const CASES_ACTIVATED: Counted = Counted {
    real: "intake_cases_activated_total",
    sandbox: "intake_sandbox_cases_activated_total",
};

/// A failure a sandbox client asks for by its customer's e-mail address: `LOCAL@DOMAIN`, or
/// `LOCAL+anything@DOMAIN` for as many cases of each as a partner needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Attach answers 404, as for a customer with no case (spec: fall back to the form).
    AttachNotFound,
    /// Attach answers 500 `Failed to generate redirect link` (spec: fall back to the
    /// customer dashboard).
    AttachFails,
    /// A submission answers 503 with `Retry-After` before storing anything: its retry is
    /// then processed (on the replica that answered 503).
    UnavailableBeforeStoring,
    /// A submission that creates its case stores it, then answers 503 with `Retry-After`,
    /// as a timeout between partner and service would: a retry with the same
    /// `Idempotency-Key` gets the stored answer, one without updates the case.
    UnavailableAfterStoring,
    /// Each webhook event of the case fails its first [`WEBHOOK_FAILURES`] tries on our
    /// side (without reaching the partner), then is sent as usual.
    WebhookFails,
}

/// Tries of a [`Trigger::WebhookFails`] case's events that fail before one is sent.
pub const WEBHOOK_FAILURES: i32 = 3;

impl Trigger {
    /// Every trigger, by the local part of its address.
    pub const ALL: [(&'static str, Trigger); 5] = [
        ("attach-not-found", Trigger::AttachNotFound),
        ("attach-fails", Trigger::AttachFails),
        (
            "unavailable-before-storing",
            Trigger::UnavailableBeforeStoring,
        ),
        (
            "unavailable-after-storing",
            Trigger::UnavailableAfterStoring,
        ),
        ("webhook-fails", Trigger::WebhookFails),
    ];

    /// The local part of the trigger's address, which names it in metrics.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, trigger)| *trigger == self)
            .map_or("", |(name, _)| name)
    }

    /// The trigger an address (as stored: trimmed, lower case) asks for, if any.
    pub fn of(email: &str) -> Option<Self> {
        let (local, domain) = email.rsplit_once('@')?;
        if domain != DOMAIN {
            return None;
        }
        let name = local.split_once('+').map_or(local, |(name, _)| name);
        Self::ALL
            .iter()
            .find(|(local, _)| *local == name)
            .map(|(_, trigger)| *trigger)
    }
}

/// Most (client, address) pairs remembered as having had their first failure: past this the
/// memory starts again, which at worst fails one more first try.
const REMEMBERED: usize = 10_000;

/// Which sandbox submissions have had the failure [`Trigger::UnavailableBeforeStoring`]
/// makes, so that their retry goes through: kept in memory, per replica, since nothing is
/// stored for them.
#[derive(Debug, Default)]
pub struct FirstTries(Mutex<HashSet<(String, String)>>);

impl FirstTries {
    /// Whether this is the first try of `client_id`'s submission for `email` (a try after
    /// it is not, and the one after that is a first again).
    pub fn first(&self, client_id: &str, email: &str) -> bool {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (client_id.to_owned(), email.to_owned());
        if seen.remove(&key) {
            return false;
        }
        if seen.len() >= REMEMBERED {
            seen.clear();
        }
        seen.insert(key);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_are_their_addresses_and_no_others() {
        assert_eq!(
            Trigger::of("attach-fails@sandbox.example"),
            Some(Trigger::AttachFails)
        );
        assert_eq!(
            Trigger::of("webhook-fails+run-7@sandbox.example"),
            Some(Trigger::WebhookFails)
        );
        for (local, trigger) in Trigger::ALL {
            assert_eq!(Trigger::of(&format!("{local}@{DOMAIN}")), Some(trigger));
        }
        for ordinary in [
            "attach-fails@example.com",
            "attach-fails@sub.sandbox.example",
            "jane@sandbox.example",
            "attach-failsx@sandbox.example",
            "sandbox.example",
        ] {
            assert_eq!(Trigger::of(ordinary), None, "{ordinary}");
        }
    }

    #[test]
    fn only_the_sandbox_has_triggers_and_counts_apart() {
        let address = "attach-fails@sandbox.example";
        assert_eq!(World::Sandbox.trigger(address), Some(Trigger::AttachFails));
        assert_eq!(World::Real.trigger(address), None);
        assert_eq!(World::Real.counter(CASES), "intake_cases_total");
        assert_eq!(World::Sandbox.counter(CASES), "intake_sandbox_cases_total");
        assert!(World::of(true).is_sandbox() && !World::of(false).is_sandbox());
    }

    #[test]
    fn a_first_try_alternates_with_its_retry() {
        let tries = FirstTries::default();
        assert!(tries.first("c", "a@sandbox.example"));
        assert!(tries.first("d", "a@sandbox.example"));
        assert!(!tries.first("c", "a@sandbox.example"));
        assert!(tries.first("c", "a@sandbox.example"));
    }
}
