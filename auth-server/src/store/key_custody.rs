//! Where the deployment's signing keys live, as the database records it: whatever makes a
//! key (`key rotate`, `key revoke`, the schedule, a server's first start) makes it there or
//! not at all, so a missing setting never moves the keys out of their token unsaid. Moving
//! them is `key rotate --move-key-store`, recorded with an audit entry.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use serde_json::json;
use service_kit::command_line::operator::Refused;

use crate::audit;
use crate::entity::{key_custody, signing_key};
use crate::key_store::{self, KeyHome};

/// Where the database says its keys live.
#[derive(Debug, Clone)]
pub struct Custody {
    /// The store (and token) new keys are made in.
    pub home: KeyHome,
    /// When it was recorded; none when the database records nothing yet and this is read
    /// from the newest key (keys made before this release).
    pub recorded_at: Option<DateTime<Utc>>,
}

/// The custody `db` records, else what its newest live key says; none for a database
/// with no key yet.
pub async fn custody<C: ConnectionTrait>(db: &C) -> anyhow::Result<Option<Custody>> {
    if let Some(row) = key_custody::Entity::find_by_id(1).one(db).await? {
        return Ok(Some(Custody {
            home: KeyHome {
                store: row.store,
                token_label: row.token_label,
                token_serial: row.token_serial,
            },
            recorded_at: Some(row.recorded_at),
        }));
    }
    let newest = signing_key::Entity::find()
        .filter(signing_key::Column::RevokedAt.is_null())
        .all(db)
        .await?
        .into_iter()
        .max_by_key(|k| k.created_at);
    Ok(newest.map(|key| Custody {
        home: KeyHome {
            store: key_store::store_of(&key.private_key).to_owned(),
            token_label: None,
            token_serial: None,
        },
        recorded_at: None,
    }))
}

/// What making keys at a store does to the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The keys live there already, as recorded.
    Keep,
    /// Nothing (or not all of it) is recorded yet: the store is written down.
    Record,
    /// The keys move there from `from`, as the operator asked.
    Move {
        /// Where they lived.
        from: KeyHome,
    },
}

/// Whether a process whose keys are made at `mine` may make keys, with the record as
/// `custody` says; `moving` when the operator asked to move the keys there. Refused, saying
/// what the database expects and what was given, when the stores differ and no move was
/// asked.
pub fn verdict(
    custody: Option<&Custody>,
    mine: &KeyHome,
    moving: bool,
) -> Result<Verdict, Refused> {
    let Some(custody) = custody else {
        return Ok(Verdict::Record);
    };
    if custody.home.takes_keys_of(mine) {
        return Ok(match custody.recorded_at {
            Some(_) => Verdict::Keep,
            None => Verdict::Record,
        });
    }
    if moving {
        return Ok(Verdict::Move {
            from: custody.home.clone(),
        });
    }
    Err(Refused(format!(
        "the signing keys of this database live in {}, and this was given {} ({}): it makes \
         no key there. Give it the servers' key store settings, {}; or, to move the keys on \
         purpose, run `auth-server key rotate --move-key-store` with the new store's settings",
        custody.home,
        mine,
        mine.settings(),
        custody.home.settings(),
    )))
}

/// Writes what `verdict` says of keys made at `mine` in `txn`, the transaction that stores
/// them: a move is audited as `key.move_store`, by `actor`.
pub async fn record<C: ConnectionTrait>(
    txn: &C,
    mine: &KeyHome,
    verdict: &Verdict,
    actor: &audit::Author,
) -> anyhow::Result<()> {
    if *verdict == Verdict::Keep {
        return Ok(());
    }
    let row = key_custody::ActiveModel {
        id: Set(1),
        store: Set(mine.store.clone()),
        token_label: Set(mine.token_label.clone()),
        token_serial: Set(mine.token_serial.clone()),
        recorded_at: Set(Utc::now()),
    };
    if key_custody::Entity::find_by_id(1).one(txn).await?.is_some() {
        row.update(txn).await?;
    } else {
        row.insert(txn).await?;
    }
    if let Verdict::Move { from } = verdict {
        let detail = json!({"key_store": mine, "previous_key_store": from});
        audit::append(txn, actor, "key.move_store", &mine.store, detail).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(home: KeyHome) -> Option<Custody> {
        Some(Custody {
            home,
            recorded_at: Some(Utc::now()),
        })
    }

    fn inferred(store: &str) -> Option<Custody> {
        Some(Custody {
            home: KeyHome {
                store: store.to_owned(),
                token_label: None,
                token_serial: None,
            },
            recorded_at: None,
        })
    }

    #[test]
    fn keys_are_made_only_where_the_database_says_they_live() {
        let database = KeyHome::database();
        let token = KeyHome::token("hsm", Some("1".into()));
        let other_member = KeyHome::token("hsm", Some("2".into()));
        let other_token = KeyHome::token("test-token", None);
        // The case, the record, the store a process was given, whether it asks to move,
        // and the verdict (none: refused).
        type Case<'h> = (
            &'static str,
            Option<Custody>,
            &'h KeyHome,
            bool,
            Option<Verdict>,
        );
        let cases: &[Case] = &[
            (
                "a new database records",
                None,
                &token,
                false,
                Some(Verdict::Record),
            ),
            (
                "the same store keeps",
                recorded(database.clone()),
                &database,
                false,
                Some(Verdict::Keep),
            ),
            (
                "the same token keeps",
                recorded(token.clone()),
                &token,
                false,
                Some(Verdict::Keep),
            ),
            (
                "another member of the cluster keeps",
                recorded(token.clone()),
                &other_member,
                false,
                Some(Verdict::Keep),
            ),
            (
                "the database for a token's keys is refused",
                recorded(token.clone()),
                &database,
                false,
                None,
            ),
            (
                "a token for the database's keys is refused",
                recorded(database.clone()),
                &token,
                false,
                None,
            ),
            (
                "another token is refused",
                recorded(token.clone()),
                &other_token,
                false,
                None,
            ),
            (
                "keys made before the record was kept: their store is recorded",
                inferred("pkcs11"),
                &token,
                false,
                Some(Verdict::Record),
            ),
            (
                "keys made before the record was kept: another store is refused",
                inferred("pkcs11"),
                &database,
                false,
                None,
            ),
            (
                "a move asked for moves",
                recorded(token.clone()),
                &database,
                true,
                Some(Verdict::Move {
                    from: token.clone(),
                }),
            ),
            (
                "a move to where they are keeps",
                recorded(token.clone()),
                &token,
                true,
                Some(Verdict::Keep),
            ),
        ];
        for (case, custody, mine, moving, expected) in cases {
            let got = verdict(custody.as_ref(), mine, *moving).ok();
            assert_eq!(&got, expected, "{case}");
        }
    }

    #[test]
    fn a_refusal_names_both_stores_and_how_to_move() {
        let token = KeyHome::token("hsm", Some("42".into()));
        let refused = verdict(recorded(token).as_ref(), &KeyHome::database(), false)
            .unwrap_err()
            .to_string();
        for said in [
            "the pkcs11 token \"hsm\" (serial 42)",
            "was given the database",
            "AUTH_KEY_STORE=pkcs11 with AUTH_PKCS11_TOKEN_LABEL=hsm",
            "--move-key-store",
        ] {
            assert!(refused.contains(said), "{said}: {refused}");
        }
    }
}
