//! Queries built once and bound per request.
//!
//! Building a query through sea-query makes a tree of expressions and its SQL text anew each
//! time, a cost on the hot path (`bench/RESULTS.md`); a [`QueryTemplate`] builds the query
//! once, with the ORM, and each request only binds its values to the same SQL.

use sea_orm::{DbBackend, Statement, Value, Values};

/// One bound value of the built query: an argument of [`QueryTemplate::bind`], or a value
/// the query fixed itself (a `LIMIT`, a literal).
#[derive(Debug, Clone)]
enum Slot {
    Arg(usize),
    Fixed(Value),
}

/// A query built once for one database backend, with `N` string arguments bound per use.
#[derive(Debug, Clone)]
pub struct QueryTemplate<const N: usize> {
    backend: DbBackend,
    sql: String,
    slots: Vec<Slot>,
}

impl<const N: usize> QueryTemplate<N> {
    /// Builds the statement `build` makes of its `N` arguments, as SQL for `backend`.
    ///
    /// # Panics
    /// When an argument is not a bound value of the statement (it was written into the SQL
    /// text, or dropped): a query that cannot be reused is a mistake in the code that builds it.
    pub fn new(backend: DbBackend, build: impl FnOnce([&str; N], DbBackend) -> Statement) -> Self {
        // A NUL byte cannot be stored in PostgreSQL text, so no real argument looks like these.
        let markers: [String; N] = std::array::from_fn(|i| format!("\0argument {i}\0"));
        let statement = build(std::array::from_fn(|i| markers[i].as_str()), backend);
        assert!(
            !statement.sql.contains('\0'),
            "an argument was written into the SQL text"
        );
        let slots: Vec<Slot> = statement
            .values
            .map(|v| v.0)
            .unwrap_or_default()
            .into_iter()
            .map(|value| match &value {
                Value::String(Some(s)) => markers
                    .iter()
                    .position(|m| m == s)
                    .map_or(Slot::Fixed(value), Slot::Arg),
                _ => Slot::Fixed(value),
            })
            .collect();
        for i in 0..N {
            assert!(
                slots.iter().any(|s| matches!(s, Slot::Arg(a) if *a == i)),
                "argument {i} is not a bound value of the statement"
            );
        }
        Self {
            backend,
            sql: statement.sql,
            slots,
        }
    }

    /// The query's text.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// What the query binds to `$1`, `$2`...: the argument's name from `names`, or
    /// `{"value": ...}` for a value the query fixed.
    pub fn parameters(&self, names: [&str; N]) -> Vec<serde_json::Value> {
        self.slots
            .iter()
            .map(|slot| match slot {
                Slot::Arg(i) => serde_json::Value::from(names[*i]),
                Slot::Fixed(v) => {
                    serde_json::json!({"value": sea_orm::sea_query::value::sea_value_to_json_value(v)})
                }
            })
            .collect()
    }

    /// The statement with `args` in the arguments' places.
    pub fn bind(&self, args: [&str; N]) -> Statement {
        let values = self
            .slots
            .iter()
            .map(|slot| match slot {
                Slot::Arg(i) => Value::from(args[*i]),
                Slot::Fixed(v) => v.clone(),
            })
            .collect();
        Statement::from_sql_and_values(self.backend, self.sql.as_str(), Values(values))
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};

    use super::*;

    fn lookup(args: [&str; 2], backend: DbBackend) -> Statement {
        let [name, owner] = args;
        let query = Query::select()
            .column(Alias::new("id"))
            .from(Alias::new("things"))
            .and_where(Expr::col(Alias::new("name")).eq(name))
            .and_where(Expr::col(Alias::new("owner")).eq(owner))
            .and_where(Expr::col(Alias::new("kind")).eq("fixed"))
            .limit(1)
            .to_owned();
        backend.build(&query)
    }

    #[test]
    fn binding_gives_the_statement_built_from_the_same_arguments() {
        for backend in [DbBackend::Postgres, DbBackend::Sqlite] {
            let template = QueryTemplate::new(backend, lookup);
            let args = ["a name", "an owner"];
            assert_eq!(template.bind(args), lookup(args, backend));
            let other = ["another", "someone"];
            assert_eq!(template.bind(other), lookup(other, backend));
        }
    }

    #[test]
    #[should_panic(expected = "argument 1 is not a bound value")]
    fn an_argument_the_statement_drops_is_refused() {
        QueryTemplate::<2>::new(DbBackend::Postgres, |[name, _], backend| {
            lookup([name, "constant"], backend)
        });
    }
}
