//! The statements the service sends on its hot paths, as PostgreSQL gets them: the one text
//! an operator EXPLAINs and the benchmark runs in pgbench (`bench/run.sh`), so neither keeps
//! a copy that could drift from what the service sends.

use sea_orm::DbBackend;
use serde::Serialize;
use serde_json::Value;

use super::attach::{ATTACH, attach_lookup};
use super::steps::Steps;
use super::submit::SUBMIT;
use super::template::QueryTemplate;

/// A statement of the hot paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StatementName {
    /// An enquiry accepted: the case created or updated, the submission, the event.
    Submit,
    /// Attach's look-up of the customer's case among the partner's own.
    AttachLookup,
    /// A product attached: the redirect token, the case, the event.
    Attach,
}

/// One statement as PostgreSQL gets it.
#[derive(Debug, Serialize)]
pub struct HotStatement {
    /// Which.
    pub name: StatementName,
    /// Its text.
    pub sql: String,
    /// What is bound to `$1`, `$2`...: the name of a value of the request, or
    /// `{"value": ...}`, a value the statement always binds.
    pub parameters: Vec<Value>,
}

impl StatementName {
    /// Every statement of the hot paths.
    pub const ALL: [Self; 3] = [Self::Submit, Self::AttachLookup, Self::Attach];

    /// The statement itself.
    pub fn statement(self) -> HotStatement {
        let (sql, parameters) = match self {
            Self::Submit => of_steps(&SUBMIT),
            Self::Attach => of_steps(&ATTACH),
            Self::AttachLookup => {
                let lookup = QueryTemplate::new(DbBackend::Postgres, attach_lookup);
                let parameters = lookup.parameters(["email", "client_id"]);
                (lookup.sql().to_owned(), parameters)
            }
        };
        HotStatement {
            name: self,
            sql,
            parameters,
        }
    }
}

fn of_steps(write: &Steps) -> (String, Vec<Value>) {
    let names = write.parameters().iter().map(|&n| Value::from(n)).collect();
    (write.postgres().to_owned(), names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `sql` has the placeholder `$n` (not just one that starts with it).
    fn has_placeholder(sql: &str, n: usize) -> bool {
        let placeholder = format!("${n}");
        sql.match_indices(&placeholder)
            .any(|(at, _)| !sql[at + placeholder.len()..].starts_with(|c: char| c.is_ascii_digit()))
    }

    /// Each statement names one value for every `$n` it has, and none it lacks.
    #[test]
    fn every_placeholder_has_a_named_value() {
        for name in StatementName::ALL {
            let statement = name.statement();
            let count = statement.parameters.len();
            for n in 1..=count {
                assert!(has_placeholder(&statement.sql, n), "{name:?} has no ${n}");
            }
            assert!(!has_placeholder(&statement.sql, count + 1), "{name:?}");
            for (i, parameter) in statement.parameters.iter().enumerate() {
                assert!(
                    parameter.is_string() || parameter.get("value").is_some(),
                    "{name:?} ${}: {parameter}",
                    i + 1
                );
            }
        }
    }
}
