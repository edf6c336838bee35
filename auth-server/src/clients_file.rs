//! The file `auth-server apply` reads: the clients a deployment should have, by name, kept
//! in version control and reviewed like code. Secrets are never in it: a client's secret is
//! read from the environment variable or the file its entry names, or made and printed once.
//! What an entry leaves out is left as it is: without `disabled`, a client disabled outside
//! the file stays disabled (`disabled: false` enables it).
//!
//! ```yaml
//! clients:
//!   - name: Acme Mortgages
//!     scopes: [enquiry:case:intake:create, enquiry:referral:create]
//!   - name: Beta Brokers
//!     scopes: [enquiry:case:intake:create]
//!     auth: private_key_jwt
//!     jwks_uri: https://beta.example/jwks.json
//!     dpop_required: true
//!   - name: Brand A portal
//!     scopes: [portal:redirect:redeem]
//!     brands: [brand_a]
//!     secret_env: PORTAL_A_SECRET
//! ```

use std::path::{Path, PathBuf};

use marked_yaml::Node;
use serde::Deserialize;
use service_kit::Secret;

use crate::secrets;
use crate::store::clients::apply::{Declaration, Declared, DeclaredAuth, Field};
use crate::store::clients::input::read_jwks_file;
use crate::token_request::MAX_PARAM_CHARS;

/// How an entry's client authenticates.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Method {
    /// A secret (the default).
    #[default]
    Secret,
    /// Assertions signed with the client's own key.
    PrivateKeyJwt,
}

/// One entry, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    auth: Method,
    secret_env: Option<String>,
    secret_file: Option<PathBuf>,
    jwks_file: Option<PathBuf>,
    jwks_uri: Option<String>,
    #[serde(default)]
    brands: Vec<String>,
    #[serde(default)]
    sandbox: bool,
    #[serde(default)]
    dpop_required: bool,
    /// Unsaid, the client is left as it is.
    disabled: Option<bool>,
    /// Never taken: named so that a secret written here is refused with the reason.
    secret: Option<serde::de::IgnoredAny>,
    /// Likewise.
    client_secret: Option<serde::de::IgnoredAny>,
}

/// A problem with the file, at a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The line (from 1); 0 for the file as a whole.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Every problem of a file that cannot be applied as written.
#[derive(Debug)]
pub struct BadFile {
    /// Where the file came from, as the operator named it.
    pub file: String,
    /// Its problems, in the order of their lines.
    pub problems: Vec<Problem>,
}

impl std::fmt::Display for BadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.problems.len();
        let plural = if count == 1 { "" } else { "s" };
        write!(f, "{} has {count} problem{plural}:", self.file)?;
        for p in &self.problems {
            match p.line {
                0 => write!(f, "\n  {}", p.message)?,
                line => write!(f, "\n  line {line}: {}", p.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for BadFile {}

/// What the file is read with: where it came from, the directory its relative paths start
/// in, and whether the servers run FAPI 2.0 (which takes no secret client).
pub struct Reading<'a> {
    /// How the operator named the file (`-` for standard input).
    pub source: &'a str,
    /// The directory relative `jwks_file` and `secret_file` paths are read from.
    pub dir: &'a Path,
    /// Whether the servers run the FAPI 2.0 profile.
    pub fapi2: bool,
}

/// The clients `text` declares, each checked, with secrets and key files read; or every
/// problem found, with its line.
pub fn read(text: &str, reading: &Reading<'_>) -> Result<Vec<Declared>, BadFile> {
    let mut problems = Vec::new();
    let mut declared = Vec::new();
    let fail = |problems: Vec<Problem>| BadFile {
        file: reading.source.to_owned(),
        problems,
    };
    let root = match marked_yaml::parse_yaml(0, text) {
        Ok(root) => root,
        Err(e) => {
            return Err(fail(vec![Problem {
                line: 0,
                message: format!("not YAML: {e}"),
            }]));
        }
    };
    let Some(top) = root.as_mapping() else {
        return Err(fail(vec![Problem {
            line: 0,
            message: "the file is a mapping with one key, `clients`".into(),
        }]));
    };
    for (key, value) in top.iter() {
        if key.as_str() != "clients" {
            problems.push(Problem {
                line: line_of(value),
                message: format!(
                    "unknown key {:?}: the file has one key, `clients`",
                    key.as_str()
                ),
            });
        }
    }
    let entries = match top.get_node("clients") {
        None => {
            problems.push(Problem {
                line: 0,
                message: "no `clients` list".into(),
            });
            return Err(fail(problems));
        }
        Some(Node::Sequence(entries)) => entries.iter().collect::<Vec<_>>(),
        Some(other) => {
            problems.push(Problem {
                line: line_of(other),
                message: "`clients` is a list of clients".into(),
            });
            return Err(fail(problems));
        }
    };
    let mut names: Vec<(String, usize)> = Vec::new();
    for node in entries {
        let line = line_of(node);
        // A problem is reported at the line of the field it is about, else of the entry.
        let at = |field: Field| field_line(node, field).unwrap_or(line);
        let entry: Entry = match marked_yaml::from_node(node) {
            Ok(entry) => entry,
            Err(e) => {
                let at = e.start_mark().map_or(line, |m| m.line());
                problems.push(Problem {
                    line: at,
                    message: e.to_string(),
                });
                continue;
            }
        };
        let folded = entry.name.trim().to_lowercase();
        if let Some((_, first)) = names.iter().find(|(n, _)| *n == folded) {
            problems.push(Problem {
                line: at("name"),
                message: format!(
                    "client {:?} is listed twice (first at line {first}): names differ in more \
                     than case",
                    entry.name
                ),
            });
            continue;
        }
        names.push((folded, at("name")));
        let found = match declaration(entry, reading) {
            Ok(d) => match d.check() {
                Ok(d) => {
                    declared.push(d);
                    continue;
                }
                Err(found) => found,
            },
            Err(found) => found,
        };
        problems.extend(found.into_iter().map(|(field, message)| Problem {
            line: at(field),
            message,
        }));
    }
    if problems.is_empty() {
        Ok(declared)
    } else {
        problems.sort_by_key(|p| p.line);
        Err(fail(problems))
    }
}

/// The line a node starts on.
fn line_of(node: &Node) -> usize {
    node.span().start().map_or(0, |m| m.line())
}

/// The line of `field` in the entry `node`, when the entry has it.
fn field_line(node: &Node, field: Field) -> Option<usize> {
    node.as_mapping()?
        .iter()
        .find(|(key, _)| key.as_str() == field)
        .and_then(|(key, _)| key.span().start())
        .map(|m| m.line())
}

/// An entry's declaration: its credentials read, every problem with them found, with the
/// field it is about.
fn declaration(entry: Entry, reading: &Reading<'_>) -> Result<Declaration, Vec<(Field, String)>> {
    let mut problems: Vec<(Field, String)> = Vec::new();
    let name = entry.name.trim().to_owned();
    for (field, given) in [
        ("secret", entry.secret.is_some()),
        ("client_secret", entry.client_secret.is_some()),
    ] {
        if given {
            problems.push((
                field,
                format!(
                    "client {name:?}: a secret is never written in the file; name the \
                     environment variable (`secret_env`) or the file (`secret_file`) that holds \
                     it, or leave both out for one made and printed once"
                ),
            ));
        }
    }
    let auth = match entry.auth {
        Method::Secret => {
            for (field, given) in [
                ("jwks_file", entry.jwks_file.is_some()),
                ("jwks_uri", entry.jwks_uri.is_some()),
            ] {
                if given {
                    problems.push((
                        field,
                        format!(
                            "client {name:?}: `jwks_file` and `jwks_uri` are for `auth: \
                             private_key_jwt`"
                        ),
                    ));
                }
            }
            if reading.fapi2 {
                problems.push((
                    "auth",
                    format!(
                        "client {name:?}: AUTH_FAPI2 is on, and under FAPI 2.0 clients \
                         authenticate with private_key_jwt only"
                    ),
                ));
            }
            match (&entry.secret_env, &entry.secret_file) {
                (Some(_), Some(_)) => {
                    problems.push((
                        "secret_file",
                        format!("client {name:?}: give `secret_env` or `secret_file`, not both"),
                    ));
                    None
                }
                (Some(var), None) => secret_from_env(&name, var)
                    .map_err(|p| problems.push(("secret_env", p)))
                    .ok()
                    .map(|s| DeclaredAuth::Secret(Some(s))),
                (None, Some(path)) => secret_from_file(&name, &reading.dir.join(path))
                    .map_err(|p| problems.push(("secret_file", p)))
                    .ok()
                    .map(|s| DeclaredAuth::Secret(Some(s))),
                (None, None) => Some(DeclaredAuth::Secret(None)),
            }
        }
        Method::PrivateKeyJwt => {
            for (field, given) in [
                ("secret_env", entry.secret_env.is_some()),
                ("secret_file", entry.secret_file.is_some()),
            ] {
                if given {
                    problems.push((
                        field,
                        format!(
                            "client {name:?}: a private_key_jwt client has no secret \
                             (`secret_env`, `secret_file`)"
                        ),
                    ));
                }
            }
            match (&entry.jwks_file, &entry.jwks_uri) {
                (Some(path), None) => read_jwks_file(&reading.dir.join(path))
                    .map_err(|e| problems.push(("jwks_file", format!("client {name:?}: {e}"))))
                    .ok()
                    .map(DeclaredAuth::Keys),
                (None, Some(uri)) => url::Url::parse(uri)
                    .map_err(|e| {
                        problems.push((
                            "jwks_uri",
                            format!("client {name:?}: `jwks_uri` {uri:?} is not a URL: {e}"),
                        ))
                    })
                    .ok()
                    .map(DeclaredAuth::Uri),
                (jwks_file, _) => {
                    let at = if jwks_file.is_some() {
                        "jwks_uri"
                    } else {
                        "auth"
                    };
                    problems.push((
                        at,
                        format!(
                            "client {name:?}: `auth: private_key_jwt` needs its public keys, \
                             `jwks_file` or `jwks_uri` (one of the two)"
                        ),
                    ));
                    None
                }
            }
        }
    };
    match auth {
        Some(auth) if problems.is_empty() => Ok(Declaration {
            name: entry.name,
            scopes: entry.scopes,
            brands: entry.brands,
            auth,
            sandbox: entry.sandbox,
            dpop_required: entry.dpop_required,
            disabled: entry.disabled,
        }),
        _ => Err(problems),
    }
}

/// The secret in environment variable `var`, checked; never quoted in a problem.
fn secret_from_env(name: &str, var: &str) -> Result<Secret<String>, String> {
    secrets::chosen_from_env(var, MAX_PARAM_CHARS)
        .map_err(|problem| format!("client {name:?}: the secret in {var} is refused: {problem}"))?
        .ok_or_else(|| format!("client {name:?}: `secret_env` names {var}, which is not set"))
}

/// The secret in the file at `path` (a trailing line break dropped), checked: a small
/// regular file only, never a pipe or a device, which could hang or fill memory.
fn secret_from_file(name: &str, path: &Path) -> Result<Secret<String>, String> {
    let value = service_kit::secret::read_secret_file(path)
        .map_err(|problem| format!("client {name:?}: `secret_file`: {problem}"))?;
    checked(
        name,
        &format!("the secret in {}", path.display()),
        value.expose().clone(),
    )
}

fn checked(name: &str, what: &str, value: String) -> Result<Secret<String>, String> {
    match secrets::refuse_chosen(&value, MAX_PARAM_CHARS) {
        Some(problem) => Err(format!("client {name:?}: {what} is refused: {problem}")),
        None => Ok(Secret::new(value)),
    }
}
