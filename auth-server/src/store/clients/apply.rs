//! Clients kept as code (`auth-server apply`): a declared list of clients, by name, compared
//! with the stored ones, and the difference made in one transaction, one audit entry a
//! change. Clients the list no longer names may be disabled (never deleted).
//!
//! `apply` owns only the clients a file made or adopted (`managed_by` = [`MANAGED_BY`]): it
//! never changes a client made by hand (`client create`, `client ensure`, such as the
//! intake-api's own) unless told to adopt it, and `--prune` never reaches one. What a file
//! leaves unsaid is left as it is: a client disabled outside the file (an incident) stays
//! disabled unless its entry says `disabled: false`.

use std::collections::HashMap;

use anyhow::bail;
use chrono::Utc;
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, Set};
use serde::Serialize;
use serde_json::{Value, json};
use service_kit::Secret;

use super::input::{
    RegisteredKeys, brands_for, check_sandbox, parse_name, parse_scopes, split_brands, split_scopes,
};
use super::{
    AuthMethod, Registration, changes, check_name_free, expire_secrets, insert_client,
    insert_secret, stored_keys,
};
use crate::client_keys::ClientKeys;
use crate::entity::{client, client_secret};
use crate::store::begin_change;
use crate::{audit, secrets};

/// How a declared client authenticates.
#[derive(Debug, Clone)]
pub enum DeclaredAuth {
    /// With a secret: the one given (from an environment variable or a file the declaration
    /// names), or none, when a new client gets one made and printed once and an existing
    /// one keeps its own.
    Secret(Option<Secret<String>>),
    /// With assertions signed by these keys, stored.
    Keys(ClientKeys),
    /// With assertions signed by the keys this URL serves.
    Uri(url::Url),
}

/// One client as the file declares it, before it is checked.
#[derive(Debug, Clone)]
pub struct Declaration {
    /// Partner name: what the file knows the client by.
    pub name: String,
    /// Scopes it may be granted.
    pub scopes: Vec<String>,
    /// Brands, for a portal client.
    pub brands: Vec<String>,
    /// How it authenticates.
    pub auth: DeclaredAuth,
    /// Whether it is a sandbox client.
    pub sandbox: bool,
    /// Whether it gets only DPoP-bound tokens.
    pub dpop_required: bool,
    /// Whether it is disabled; none leaves it as it is (enabled, for a client made).
    pub disabled: Option<bool>,
}

/// What `managed_by` says of a client a clients file made or adopted.
pub const MANAGED_BY: &str = "apply";

/// The field of an entry a problem is about, as the file names it.
pub type Field = &'static str;

/// A declaration, checked as `client create` checks what it is given.
#[derive(Debug, Clone)]
pub struct Declared {
    name: String,
    scopes: Vec<String>,
    brands: Option<Vec<String>>,
    auth: DeclaredAuth,
    sandbox: bool,
    dpop_required: bool,
    disabled: Option<bool>,
}

impl Declaration {
    /// Checks it: every problem, each in a sentence, with the field it is about.
    pub fn check(self) -> Result<Declared, Vec<(Field, String)>> {
        let mut problems = Vec::new();
        let name = parse_name(&self.name).map_err(|e| problems.push(("name", e.to_string())));
        let scopes = parse_scopes(&self.scopes.join(" "))
            .map_err(|e| problems.push(("scopes", e.to_string())))
            .ok();
        let mut brands = None;
        if let Some(scopes) = &scopes {
            let listed = (!self.brands.is_empty()).then(|| self.brands.join(","));
            let at = if listed.is_some() { "brands" } else { "scopes" };
            match brands_for(scopes, listed.as_deref()) {
                Ok(b) => brands = b,
                Err(e) => problems.push((at, e.to_string())),
            }
            if let Err(e) = check_sandbox(scopes, self.sandbox) {
                problems.push(("sandbox", e.to_string()));
            }
        }
        match (name, scopes) {
            (Ok(name), Some(scopes)) if problems.is_empty() => Ok(Declared {
                name,
                scopes,
                brands,
                auth: self.auth,
                sandbox: self.sandbox,
                dpop_required: self.dpop_required,
                disabled: self.disabled,
            }),
            _ => Err(problems),
        }
    }
}

impl Declared {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn method(&self) -> AuthMethod {
        match self.auth {
            DeclaredAuth::Secret(_) => AuthMethod::ClientSecret,
            DeclaredAuth::Keys(_) | DeclaredAuth::Uri(_) => AuthMethod::PrivateKeyJwt,
        }
    }
}

/// What one change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A client the file names and the database has not: made.
    Create,
    /// Its scopes.
    SetScopes,
    /// The brands a portal client is bound to.
    SetBrands,
    /// Its secret: the declared one replaces every other at once.
    SetSecret,
    /// Its public keys, or the URL they come from.
    SetKeys,
    /// Whether it gets only DPoP-bound tokens.
    SetDpop,
    /// Disabled: declared so, or (with `--prune`) no longer in the file.
    Disable,
    /// Enabled again, as declared (`disabled: false`).
    Enable,
    /// A client made by hand, taken over by the file (`--adopt`): from now on the file's.
    Adopt,
}

/// One difference between the file and the database, as `--dry-run` shows it and the
/// audit trail records it.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The client's name.
    pub client: String,
    /// Its id; none for a client still to make.
    pub client_id: Option<String>,
    /// What changes.
    pub change: ChangeKind,
    /// What it is now.
    pub from: Value,
    /// What it becomes.
    pub to: Value,
}

/// Why an apply was refused: what the file asks that a change of the stored clients must
/// not do.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct Refusals(pub Vec<String>);

/// Which stored clients an apply may reach besides those the file made.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reach {
    /// Disable the file's enabled clients it no longer names.
    pub prune: bool,
    /// Take over the clients made by hand that the file names.
    pub adopt: bool,
}

/// A client the file names and leaves disabled: disabled outside the file (or pruned), and
/// its entry does not say `disabled`.
#[derive(Debug, Clone, Serialize)]
pub struct KeptDisabled {
    /// The client's name.
    pub client: String,
    /// Its id.
    pub client_id: String,
    /// Since when it is disabled.
    pub disabled_at: chrono::DateTime<Utc>,
}

/// What an apply would do: the changes, and the disabled clients it leaves so.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Every change, in order.
    pub changes: Vec<Change>,
    /// The disabled clients the file names without saying `disabled`.
    pub kept_disabled: Vec<KeptDisabled>,
}

/// A stored client with its secrets.
struct Stored {
    client: client::Model,
    secrets: Vec<client_secret::Model>,
}

async fn stored<C: ConnectionTrait>(db: &C) -> anyhow::Result<Vec<Stored>> {
    let clients = client::Entity::find().all(db).await?;
    let mut secrets: HashMap<String, Vec<client_secret::Model>> = HashMap::new();
    for s in client_secret::Entity::find().all(db).await? {
        secrets.entry(s.client_id.clone()).or_default().push(s);
    }
    Ok(clients
        .into_iter()
        .map(|client| Stored {
            secrets: secrets.remove(&client.client_id).unwrap_or_default(),
            client,
        })
        .collect())
}

/// The changes that bring `db` to `declared` (and, as `reach` says, disable the file's
/// enabled clients it does not name, or adopt the clients made by hand it names), without
/// making them.
pub async fn plan(
    db: &DatabaseConnection,
    declared: &[Declared],
    reach: Reach,
) -> anyhow::Result<Plan> {
    Ok(differences(&stored(db).await?, declared, reach)?)
}

/// Whether a file manages `c`.
fn managed(c: &client::Model) -> bool {
    c.managed_by.as_deref() == Some(MANAGED_BY)
}

/// Whether `c`'s current secrets include `secret`. One in its grace after a rotation does
/// not count: it stops working soon.
fn has_secret(c: &Stored, secret: &Secret<String>) -> bool {
    let presented = secrets::hash_secret(secret.expose());
    c.secrets
        .iter()
        .filter(|s| s.expires_at.is_none())
        .filter_map(|s| secrets::decode_hash(&s.secret_hash))
        .fold(false, |m, h| m | secrets::hashes_match(&h, &presented))
}

/// What differs between the stored clients and the declared ones, or what of the file
/// must be refused.
fn differences(stored: &[Stored], declared: &[Declared], reach: Reach) -> Result<Plan, Refusals> {
    let by_name: HashMap<String, &Stored> = stored
        .iter()
        .map(|s| (s.client.name.to_lowercase(), s))
        .collect();
    let mut changes = Vec::new();
    let mut kept_disabled = Vec::new();
    let mut refusals = Vec::new();
    for d in declared {
        let Some(s) = by_name.get(&d.name.to_lowercase()) else {
            let made = json!({
                "scopes": d.scopes,
                "brands": d.brands,
                "auth_method": d.method(),
                "sandbox": d.sandbox,
            });
            changes.push(change(d, None, ChangeKind::Create, Value::Null, made));
            if d.dpop_required {
                changes.push(change(
                    d,
                    None,
                    ChangeKind::SetDpop,
                    json!(false),
                    json!(true),
                ));
            }
            if d.disabled == Some(true) {
                changes.push(change(
                    d,
                    None,
                    ChangeKind::Disable,
                    json!(false),
                    json!(true),
                ));
            }
            continue;
        };
        let c = &s.client;
        let id = Some(c.client_id.as_str());
        if !managed(c) {
            if !reach.adopt {
                refusals.push(format!(
                    "client {:?} ({}) was made by hand (`client create` or `client ensure`), \
                     not by a clients file, and apply changes only the clients a file made: \
                     give --adopt to manage it from this file from now on (--dry-run shows \
                     what that changes), or name another client",
                    d.name, c.client_id
                ));
                continue;
            }
            let (from, to) = (json!(c.managed_by), json!(MANAGED_BY));
            changes.push(change(d, id, ChangeKind::Adopt, from, to));
        }
        if c.sandbox != d.sandbox {
            refusals.push(format!(
                "client {:?} ({}) is {}a sandbox client: a client does not move between the \
                 sandbox and the real world; declare another client",
                d.name,
                c.client_id,
                if c.sandbox { "" } else { "not " }
            ));
            continue;
        }
        if AuthMethod::parse(&c.auth_method) != Some(d.method()) {
            refusals.push(format!(
                "client {:?} ({}) authenticates with {}, not {}: a client does not change how \
                 it authenticates; declare another client",
                d.name,
                c.client_id,
                c.auth_method,
                d.method().as_str()
            ));
            continue;
        }
        let scopes = split_scopes(&c.scopes);
        if !same_set(&scopes, &d.scopes) {
            changes.push(change(
                d,
                id,
                ChangeKind::SetScopes,
                json!(scopes),
                json!(d.scopes),
            ));
        }
        let brands = split_brands(c.brands.as_deref());
        let wanted = d.brands.clone().unwrap_or_default();
        if !same_set(&brands, &wanted) {
            changes.push(change(
                d,
                id,
                ChangeKind::SetBrands,
                json!(brands),
                json!(wanted),
            ));
        }
        match &d.auth {
            DeclaredAuth::Secret(Some(secret)) if !has_secret(s, secret) => {
                let (from, to) = (json!("another secret"), json!("the declared secret"));
                changes.push(change(d, id, ChangeKind::SetSecret, from, to));
            }
            DeclaredAuth::Secret(_) => {}
            DeclaredAuth::Keys(keys) => {
                if c.jwks_uri.is_some() || c.jwks.as_deref() != Some(keys.stored()) {
                    let from = keys_now(c);
                    changes.push(change(
                        d,
                        id,
                        ChangeKind::SetKeys,
                        from,
                        json!(keys.summary()),
                    ));
                }
            }
            DeclaredAuth::Uri(url) => {
                if c.jwks_uri.as_deref() != Some(url.as_str()) {
                    let from = keys_now(c);
                    changes.push(change(
                        d,
                        id,
                        ChangeKind::SetKeys,
                        from,
                        json!(url.as_str()),
                    ));
                }
            }
        }
        if c.dpop_required != d.dpop_required {
            let (from, to) = (json!(c.dpop_required), json!(d.dpop_required));
            changes.push(change(d, id, ChangeKind::SetDpop, from, to));
        }
        match (c.disabled_at, d.disabled) {
            (None, Some(true)) => changes.push(change(
                d,
                id,
                ChangeKind::Disable,
                json!(false),
                json!(true),
            )),
            (Some(_), Some(false)) => {
                changes.push(change(d, id, ChangeKind::Enable, json!(true), json!(false)))
            }
            // Disabled outside the file (an incident, or a prune): unsaid, it stays so.
            (Some(at), None) => kept_disabled.push(KeptDisabled {
                client: d.name.clone(),
                client_id: c.client_id.clone(),
                disabled_at: at,
            }),
            _ => {}
        }
    }
    if reach.prune {
        let named: std::collections::HashSet<String> =
            declared.iter().map(|d| d.name.to_lowercase()).collect();
        for s in stored {
            let c = &s.client;
            // Only a file's own clients: never one made by hand, such as the intake-api's.
            if managed(c) && c.disabled_at.is_none() && !named.contains(&c.name.to_lowercase()) {
                changes.push(Change {
                    client: c.name.clone(),
                    client_id: Some(c.client_id.clone()),
                    change: ChangeKind::Disable,
                    from: json!(false),
                    to: json!(true),
                });
            }
        }
    }
    if refusals.is_empty() {
        Ok(Plan {
            changes,
            kept_disabled,
        })
    } else {
        Err(Refusals(refusals))
    }
}

fn change(d: &Declared, id: Option<&str>, kind: ChangeKind, from: Value, to: Value) -> Change {
    Change {
        client: d.name.clone(),
        client_id: id.map(str::to_owned),
        change: kind,
        from,
        to,
    }
}

/// A stored client's keys as `--dry-run` shows them: its URL, or its keys.
fn keys_now(c: &client::Model) -> Value {
    match &c.jwks_uri {
        Some(uri) => json!(uri),
        None => json!(stored_keys(c.jwks.as_deref())),
    }
}

/// Whether two lists hold the same items, whatever their order.
fn same_set(a: &[String], b: &[String]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    a == b
}

/// A client `apply` made.
#[derive(Debug)]
pub struct Made {
    /// Its name.
    pub name: String,
    /// Its id.
    pub client_id: String,
    /// The secret made for it, shown this once; none when the file named where its secret
    /// is, or for a `private_key_jwt` client.
    pub made_secret: Option<Secret<String>>,
}

/// What `apply` did.
#[derive(Debug)]
pub struct Applied {
    /// Every change made, in order.
    pub changes: Vec<Change>,
    /// The clients made.
    pub made: Vec<Made>,
    /// The disabled clients the file names without saying `disabled`, left so.
    pub kept_disabled: Vec<KeptDisabled>,
}

/// Makes the changes that bring `db` to `declared` (and, as `reach` says, disables the
/// file's enabled clients it does not name, or adopts the clients made by hand it names) in
/// one transaction, one audit entry each, as `actor`; `fetched` holds what each declared
/// JWKS URL that a change registers serves now. Nothing is written when nothing differs.
/// The changes are worked out again inside the transaction, so what is applied is the
/// difference from what the database holds then.
pub async fn apply(
    db: &DatabaseConnection,
    declared: &[Declared],
    reach: Reach,
    fetched: &HashMap<url::Url, ClientKeys>,
    actor: &audit::Author,
) -> anyhow::Result<Applied> {
    let unchanged = |kept_disabled| Applied {
        changes: Vec::new(),
        made: Vec::new(),
        kept_disabled,
    };
    let plan = differences(&stored(db).await?, declared, reach)?;
    if plan.changes.is_empty() {
        return Ok(unchanged(plan.kept_disabled));
    }
    let txn = begin_change(db).await?;
    let Plan {
        changes,
        kept_disabled,
    } = differences(&stored(&txn).await?, declared, reach)?;
    if changes.is_empty() {
        // Another apply got there first; dropping the transaction undoes the revision bump.
        return Ok(unchanged(kept_disabled));
    }
    let by_name: HashMap<String, &Declared> = declared
        .iter()
        .map(|d| (d.name.to_lowercase(), d))
        .collect();
    let mut made = Vec::new();
    let mut ids: HashMap<String, String> = HashMap::new();
    for change in &changes {
        let declaration = by_name.get(&change.client.to_lowercase()).copied();
        let id = match &change.client_id {
            Some(id) => id.clone(),
            None => ids.get(&change.client).cloned().unwrap_or_default(),
        };
        match (change.change, declaration) {
            (ChangeKind::Create, Some(d)) => {
                let new = create(&txn, d, fetched, actor).await?;
                ids.insert(d.name.clone(), new.client_id.clone());
                made.push(new);
            }
            (ChangeKind::SetScopes, Some(d)) => {
                let found = super::find_client(&txn, &id).await?;
                let detail =
                    json!({"scopes": d.scopes, "previous_scopes": split_scopes(&found.scopes)});
                changes::save(&txn, found, |a| a.scopes = Set(d.scopes.join(" "))).await?;
                audit::append(&txn, actor, "client.set_scopes", &id, detail).await?;
            }
            (ChangeKind::SetBrands, Some(d)) => {
                let found = super::find_client(&txn, &id).await?;
                changes::write_brands(&txn, actor, found, d.brands.clone()).await?;
            }
            (
                ChangeKind::SetSecret,
                Some(Declared {
                    auth: DeclaredAuth::Secret(Some(secret)),
                    ..
                }),
            ) => {
                let now = Utc::now();
                expire_secrets(&txn, &id, now).await?;
                insert_secret(&txn, &id, secret, now).await?;
                let detail = json!({"previous_secrets_valid_until": now});
                audit::append(&txn, actor, "client.rotate_secret", &id, detail).await?;
            }
            (ChangeKind::SetKeys, Some(d)) => {
                let found = super::find_client(&txn, &id).await?;
                changes::write_keys(&txn, actor, found, &registered(d, fetched)?).await?;
            }
            (ChangeKind::SetDpop, Some(d)) => {
                let found = super::find_client(&txn, &id).await?;
                changes::write_dpop(&txn, actor, found, d.dpop_required).await?;
            }
            (ChangeKind::Disable | ChangeKind::Enable, _) => {
                let disable = change.change == ChangeKind::Disable;
                let found = super::find_client(&txn, &id).await?;
                changes::write_disabled(&txn, actor, found, disable).await?;
            }
            (ChangeKind::Adopt, Some(_)) => {
                let found = super::find_client(&txn, &id).await?;
                let detail =
                    json!({"managed_by": MANAGED_BY, "previous_managed_by": found.managed_by});
                changes::save(&txn, found, |a| {
                    a.managed_by = Set(Some(MANAGED_BY.to_owned()))
                })
                .await?;
                audit::append(&txn, actor, "client.adopt", &id, detail).await?;
            }
            (kind, _) => bail!(
                "no declaration of {:?} to make its {kind:?} from",
                change.client
            ),
        }
    }
    txn.commit().await?;
    Ok(Applied {
        changes,
        made,
        kept_disabled,
    })
}

/// The keys a declaration registers: its own, or those its URL served.
fn registered(
    d: &Declared,
    fetched: &HashMap<url::Url, ClientKeys>,
) -> anyhow::Result<RegisteredKeys> {
    match &d.auth {
        DeclaredAuth::Keys(keys) => Ok(RegisteredKeys::Inline(keys.clone())),
        DeclaredAuth::Uri(url) => match fetched.get(url) {
            Some(keys) => Ok(RegisteredKeys::Uri {
                url: url.clone(),
                fetched: keys.clone(),
            }),
            None => bail!("the keys at {url} were not fetched"),
        },
        DeclaredAuth::Secret(_) => bail!("client {:?} has a secret, not keys", d.name),
    }
}

/// Makes client `d` with its `client.create` entry.
async fn create(
    txn: &DatabaseTransaction,
    d: &Declared,
    fetched: &HashMap<url::Url, ClientKeys>,
    actor: &audit::Author,
) -> anyhow::Result<Made> {
    check_name_free(txn, &d.name, None).await?;
    let (secret, made_secret, keys) = match &d.auth {
        DeclaredAuth::Secret(Some(given)) => (Some(given.clone()), None, None),
        DeclaredAuth::Secret(None) => {
            let made = secrets::generate_secret()?;
            (Some(made.clone()), Some(made), None)
        }
        DeclaredAuth::Keys(_) | DeclaredAuth::Uri(_) => (None, None, Some(registered(d, fetched)?)),
    };
    let registration = Registration {
        client_id: uuid::Uuid::new_v4().to_string(),
        name: d.name.clone(),
        scopes: d.scopes.clone(),
        brands: d.brands.clone(),
        secret,
        keys,
        sandbox: d.sandbox,
        managed_by: Some(MANAGED_BY),
    };
    if insert_client(txn, &registration, actor).await?.is_none() {
        bail!(
            "client {:?} could not be made: its name was taken meanwhile",
            d.name
        );
    }
    Ok(Made {
        name: d.name.clone(),
        client_id: registration.client_id,
        made_secret,
    })
}

/// The names of the clients the changes make with a secret made for them, which `apply`
/// prints once.
pub fn secrets_made(changes: &[Change], declared: &[Declared]) -> Vec<String> {
    changes
        .iter()
        .filter(|c| c.change == ChangeKind::Create)
        .filter(|c| {
            declared.iter().any(|d| {
                d.name.to_lowercase() == c.client.to_lowercase()
                    && matches!(d.auth, DeclaredAuth::Secret(None))
            })
        })
        .map(|c| c.client.clone())
        .collect()
}

/// The declared JWKS URLs that the changes register, to fetch before applying them.
pub fn urls_to_fetch(changes: &[Change], declared: &[Declared]) -> Vec<url::Url> {
    let mut urls = Vec::new();
    for c in changes {
        if !matches!(c.change, ChangeKind::Create | ChangeKind::SetKeys) {
            continue;
        }
        if let Some(Declared {
            auth: DeclaredAuth::Uri(url),
            ..
        }) = declared
            .iter()
            .find(|d| d.name.to_lowercase() == c.client.to_lowercase())
            && !urls.contains(url)
        {
            urls.push(url.clone());
        }
    }
    urls
}
