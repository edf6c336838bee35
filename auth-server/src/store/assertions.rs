//! Client assertions already spent: what makes each one usable once, at every replica.

use service_kit::replay::Ledger;

/// Where spent assertions are kept when the replay store is the database: by client and
/// `jti`, until the assertion expires. The table is the one 0.2.0 already kept them in, so
/// replicas of both releases refuse each other's spent assertions during an upgrade.
pub const CLIENT_ASSERTIONS: Ledger = Ledger {
    table: "client_assertions",
    owner: "client_id",
    id: "jti",
};
