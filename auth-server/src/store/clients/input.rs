//! What an operator gives for a client, checked before anything is written: names, ids,
//! scopes, brands, credentials, a declaration, and a JWKS file.

use anyhow::{anyhow, bail};
use service_kit::Secret;

use super::{AuthMethod, Difference, Ensured, EnsuredClient, Found};
use crate::client_keys::{ClientKeys, KeySummary};
use crate::secrets;

/// How a new client is to authenticate, with what it needs for that.
#[derive(Debug, Clone)]
pub enum NewCredentials {
    /// A secret, generated and shown once.
    Secret,
    /// Assertions signed by one of these keys; the client has no secret.
    Keys(RegisteredKeys),
}

/// Where a `private_key_jwt` client's keys come from, as an operator registers them.
#[derive(Debug, Clone)]
pub enum RegisteredKeys {
    /// A JWKS the operator gave, stored.
    Inline(ClientKeys),
    /// The URL the servers fetch the client's JWKS from, with the keys it served when the
    /// operator registered it (checked, shown, audited; never stored: the URL decides).
    Uri {
        /// The URL.
        url: url::Url,
        /// What it served at registration.
        fetched: ClientKeys,
    },
}

impl RegisteredKeys {
    /// The `jwks` and `jwks_uri` columns: exactly one is set.
    pub(super) fn columns(&self) -> (Option<String>, Option<String>) {
        match self {
            Self::Inline(keys) => (Some(keys.stored().to_owned()), None),
            Self::Uri { url, .. } => (None, Some(url.to_string())),
        }
    }

    /// The keys as operators see them.
    pub(super) fn summary(&self) -> Vec<KeySummary> {
        match self {
            Self::Inline(keys) | Self::Uri { fetched: keys, .. } => keys.summary(),
        }
    }
}

/// Splits and checks a comma-separated brand list (`--brands`): each a well-formed brand
/// identifier, in the order given, without repeats. The auth-server does not know which
/// brands the intake-api is configured with: the intake-api reports a token naming one it
/// does not know.
pub fn parse_brands(brands: &str) -> anyhow::Result<Vec<String>> {
    use shared::claims::brands::{MAX_CHARS, MAX_PER_CLIENT, is_well_formed};
    let mut out: Vec<String> = Vec::new();
    for b in brands.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        if !is_well_formed(b) {
            bail!(
                "brand {b:?} must be as INTAKE_BRANDS names it: lower-case letters, digits, '_' \
                 or '-', at most {MAX_CHARS} characters"
            );
        }
        if !out.iter().any(|o| o == b) {
            out.push(b.to_owned());
        }
    }
    if out.is_empty() {
        bail!("--brands needs at least one brand, comma-separated (brand_a,brand_b)");
    }
    if out.len() > MAX_PER_CLIENT {
        bail!("a client may be bound to at most {MAX_PER_CLIENT} brands");
    }
    Ok(out)
}

/// The brands of a client with `scopes`, from `--brands`: a customer-portal client must be
/// bound to at least one (a portal of no brand would redeem nothing), and no other client
/// may be.
pub(super) fn brands_for(
    scopes: &[String],
    brands: Option<&str>,
) -> anyhow::Result<Option<Vec<String>>> {
    let portal = shared::claims::scopes::PORTAL_REDIRECT_REDEEM;
    let is_portal = scopes.iter().any(|s| s == portal);
    match (is_portal, brands) {
        (true, Some(brands)) => Ok(Some(parse_brands(brands)?)),
        (true, None) => bail!(
            "a client with the {portal} scope redeems the links of the brands it is bound to: \
             name them with --brands (brand_a or brand_a,brand_b)"
        ),
        (false, Some(_)) => bail!("only a client with the {portal} scope is bound to brands"),
        (false, None) => Ok(None),
    }
}

/// Refuses a sandbox client any scope but a partner's: a customer portal redeems real
/// customers' links, and a resource server reads the list of disabled clients; neither
/// has anything to practise.
pub(super) fn check_sandbox(scopes: &[String], sandbox: bool) -> anyhow::Result<()> {
    use shared::claims::scopes::{PORTAL_REDIRECT_REDEEM, REVOCATIONS_READ};
    if !sandbox {
        return Ok(());
    }
    if let Some(s) = scopes
        .iter()
        .find(|s| [PORTAL_REDIRECT_REDEEM, REVOCATIONS_READ].contains(&s.as_str()))
    {
        bail!("a sandbox client is a partner practising: it may not have the {s} scope");
    }
    Ok(())
}

/// Splits and checks a space-separated scope list: every scope must be a known one.
pub fn parse_scopes(scopes: &str) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for s in scopes.split_whitespace() {
        if !shared::claims::scopes::is_known(s) {
            bail!(
                "unknown scope {s:?}; known scopes: {}",
                shared::claims::scopes::ALL.join(" ")
            );
        }
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    if out.is_empty() {
        bail!("a client needs at least one scope");
    }
    Ok(out)
}

/// A client's name as given, trimmed; there must be one.
pub(super) fn parse_name(name: &str) -> anyhow::Result<String> {
    let name = name.trim();
    if name.is_empty() {
        bail!("a client needs a name");
    }
    // PostgreSQL refuses a NUL in text that SQLite keeps; a name is shown on terminals too.
    if name.chars().any(char::is_control) {
        bail!("a client name must not hold control characters: {name:?}");
    }
    Ok(name.to_owned())
}

/// The longest client id an operator may choose: room for any naming scheme, and for the
/// UUIDs `client create` makes (36).
pub const MAX_CLIENT_ID_CHARS: usize = 64;

/// Checks a client id an operator chooses (`client ensure --id`): 1 to
/// [`MAX_CLIENT_ID_CHARS`] ASCII letters, digits, `-`, `_` or `.`, so that it travels as it
/// is in a Basic header (no `:`), a form, a log line and a metric label.
pub fn parse_client_id(id: &str) -> anyhow::Result<String> {
    if id.chars().any(char::is_control) {
        bail!("a client id must not hold control characters: {id:?}");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if id.is_empty() || id.len() > MAX_CLIENT_ID_CHARS || !id.chars().all(allowed) {
        let shown: String = id.chars().take(MAX_CLIENT_ID_CHARS).collect();
        bail!(
            "client id {shown:?}{} is refused: a client id is 1 to {MAX_CLIENT_ID_CHARS} ASCII \
             letters, digits, '-', '_' or '.'",
            if shown.len() < id.len() { "..." } else { "" }
        );
    }
    Ok(id.to_owned())
}

/// How a client declared to `client ensure` authenticates.
#[derive(Debug)]
pub enum DeclaredCredentials {
    /// With this secret, which the operator generated and keeps with the deployment's
    /// other secrets.
    Secret(Secret<String>),
    /// With assertions signed by one of these keys.
    Keys(ClientKeys),
}

/// A client as `client ensure` declares it, before it is checked.
#[derive(Debug)]
pub struct DeclaredClient {
    /// The id the operator chose.
    pub client_id: String,
    /// Partner name, unique whatever its case.
    pub name: String,
    /// Space-separated scopes.
    pub scopes: String,
    /// Comma-separated brands, for a portal client.
    pub brands: Option<String>,
    /// What it authenticates with.
    pub credentials: DeclaredCredentials,
}

/// A declaration, checked.
pub(super) struct Wanted {
    pub(super) client_id: String,
    pub(super) name: String,
    pub(super) scopes: Vec<String>,
    pub(super) brands: Option<Vec<String>>,
    pub(super) credentials: DeclaredCredentials,
}

impl Wanted {
    pub(super) fn parse(declared: DeclaredClient) -> anyhow::Result<Self> {
        let scopes = parse_scopes(&declared.scopes)?;
        let brands = brands_for(&scopes, declared.brands.as_deref())?;
        Ok(Self {
            client_id: parse_client_id(&declared.client_id)?,
            name: parse_name(&declared.name)?,
            scopes,
            brands,
            credentials: declared.credentials,
        })
    }

    pub(super) fn method(&self) -> AuthMethod {
        match self.credentials {
            DeclaredCredentials::Secret(_) => AuthMethod::ClientSecret,
            DeclaredCredentials::Keys(_) => AuthMethod::PrivateKeyJwt,
        }
    }

    /// What of `found` differs from this declaration. Refuses what `ensure` must not
    /// decide for an operator: bringing back a disabled client, changing how a client
    /// authenticates, or turning a sandbox client into a real one.
    pub(super) fn differences(&self, found: &Found) -> anyhow::Result<Vec<Difference>> {
        let (c, id) = (&found.client, &self.client_id);
        if let Some(since) = c.disabled_at {
            bail!(
                "client {id} is disabled, since {}: `client ensure` does not enable a client \
                 an operator disabled; `auth-server client enable {id}` first, if it is to \
                 work again",
                since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
        if c.sandbox {
            bail!("client {id} is a sandbox client: `client ensure` declares real clients only");
        }
        if AuthMethod::parse(&c.auth_method) != Some(self.method()) {
            bail!(
                "client {id} authenticates with {}, not {}: `client ensure` does not change \
                 how a client authenticates; register a client with another id for that",
                c.auth_method,
                self.method().as_str()
            );
        }
        let mut differences = Vec::new();
        if c.name != self.name {
            differences.push(Difference::Name);
        }
        if !same_set(&split_scopes(&c.scopes), &self.scopes) {
            differences.push(Difference::Scopes);
        }
        let brands = self.brands.clone().unwrap_or_default();
        if !same_set(&split_brands(c.brands.as_deref()), &brands) {
            differences.push(Difference::Brands);
        }
        match &self.credentials {
            DeclaredCredentials::Secret(secret) => {
                let presented = secrets::hash_secret(secret.expose());
                // Only a current secret will do: one in its grace after a rotation stops
                // working soon, so declaring it makes it current again.
                let current = found
                    .secrets
                    .iter()
                    .filter(|s| s.expires_at.is_none())
                    .filter_map(|s| secrets::decode_hash(&s.secret_hash))
                    .fold(false, |m, h| m | secrets::hashes_match(&h, &presented));
                if !current {
                    differences.push(Difference::Secret);
                }
            }
            DeclaredCredentials::Keys(keys) => {
                if c.jwks_uri.is_some() || c.jwks.as_deref() != Some(keys.stored()) {
                    differences.push(Difference::Keys);
                }
            }
        }
        Ok(differences)
    }

    pub(super) fn report(self, outcome: Ensured, changes: Vec<Difference>) -> EnsuredClient {
        let auth_method = self.method();
        EnsuredClient {
            client_id: self.client_id,
            outcome,
            changed: outcome != Ensured::Unchanged,
            changes,
            name: self.name,
            scopes: self.scopes,
            brands: self.brands.unwrap_or_default(),
            auth_method,
            keys: match &self.credentials {
                DeclaredCredentials::Secret(_) => Vec::new(),
                DeclaredCredentials::Keys(keys) => keys.summary(),
            },
        }
    }
}

/// Whether two lists hold the same items, whatever their order.
fn same_set(a: &[String], b: &[String]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    a == b
}

/// The scopes stored for a client, as a list.
pub fn split_scopes(stored: &str) -> Vec<String> {
    stored.split(' ').map(str::to_owned).collect()
}

/// The brands stored for a client, as a list.
pub fn split_brands(stored: Option<&str>) -> Vec<String> {
    stored
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Reads a JWKS file an operator registers, no larger than [`crate::client_keys::MAX_JWKS_BYTES`].
pub fn read_jwks_file(path: &std::path::Path) -> anyhow::Result<ClientKeys> {
    use std::io::Read;
    let limit = crate::client_keys::MAX_JWKS_BYTES;
    let file = std::fs::File::open(path)
        .map_err(|e| anyhow!("cannot read the JWKS file {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(limit as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| anyhow!("cannot read the JWKS file {}: {e}", path.display()))?;
    if text.len() > limit {
        bail!(
            "the JWKS file {} is larger than {limit} bytes",
            path.display()
        );
    }
    ClientKeys::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chosen_client_id_is_refused_for_each_rule_it_breaks() {
        let longest = "a".repeat(MAX_CLIENT_ID_CHARS);
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("a name", "intake-api", None),
            (
                "letters, digits, dot, dash, underscore",
                "Intake_API-2.prod",
                None,
            ),
            (
                "a uuid as client create makes",
                "0b9f3c9e-6d1e-4c62-9a57-0d3c1f7e2b11",
                None,
            ),
            ("the longest taken", &longest, None),
            ("empty", "", Some("1 to 64")),
            ("one too long", &format!("{longest}a"), Some("1 to 64")),
            ("a NUL", "intake\0api", Some("control characters")),
            ("a newline", "intake-api\n", Some("control characters")),
            (
                "a colon, which splits Basic credentials",
                "intake:api",
                Some("1 to 64"),
            ),
            ("a space", "intake api", Some("1 to 64")),
            ("a slash", "intake/api", Some("1 to 64")),
            ("not ASCII", "intäke", Some("1 to 64")),
        ];
        for (rule, id, refused) in cases {
            match (refused, parse_client_id(id)) {
                (None, Ok(parsed)) => assert_eq!(parsed, *id, "{rule}"),
                (Some(why), Err(e)) => {
                    let message = e.to_string();
                    assert!(message.contains(why), "{rule}: {message}");
                    assert!(!message.contains('\0'), "{rule}: the NUL is escaped");
                }
                (_, outcome) => panic!("{rule}: {outcome:?}"),
            }
        }
    }

    #[test]
    fn scopes_and_brands_compare_whatever_their_order() {
        let list = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(same_set(&list("a b"), &list("b a")));
        assert!(!same_set(&list("a b"), &list("a")));
        assert!(!same_set(&list("a"), &list("b")));
    }
}
