//! How both services' operator commands print: aligned columns for people, JSON for
//! scripts.

use std::io::{IsTerminal, Write};

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, ValueEnum};
use serde_json::Value;

/// How a command prints what it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns, for people.
    Table,
    /// One JSON document, for scripts: its fields stay as they are from one version to the
    /// next.
    Json,
}

impl OutputFormat {
    /// The format asked for, else a table when stdout is a terminal and JSON when it is a
    /// pipe or a file, so scripts get JSON without asking.
    pub fn or_default(asked: Option<Self>) -> Self {
        asked.unwrap_or_else(|| {
            if std::io::stdout().is_terminal() {
                Self::Table
            } else {
                Self::Json
            }
        })
    }
}

/// Whether a command may print a secret it makes: on a terminal, where a person reads it;
/// into a pipe or a file, which can end up in a CI log, only when asked (`--show-secret`).
pub fn may_print_secrets(show_secret: bool) -> bool {
    show_secret || std::io::stdout().is_terminal()
}

/// `-o`: taken by every command that prints.
#[derive(Debug, Clone, Copy, Args)]
pub struct OutputArg {
    /// Output format [default: table on a terminal, json otherwise].
    #[arg(short = 'o', long = "output", value_enum, value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
}

/// How a command's JSON reads as a table.
#[derive(Debug, Clone, Copy)]
pub enum View {
    /// A list: one row per element, with these of its fields as columns; when it is empty,
    /// `empty` is said on stderr instead.
    List {
        /// The fields shown, in order.
        columns: &'static [&'static str],
        /// What to say when there are none, e.g. "No clients."
        empty: &'static str,
    },
    /// One record: a line per field, then a table for each list of records in it.
    Record,
}

/// What an operator command did: the JSON it prints, how that reads as a table, and remarks
/// for the operator on stderr: a note always, a hint only beside a table (a person reading
/// it; a script reading JSON has no use for it).
#[derive(Debug)]
pub struct Report {
    /// What the command prints.
    pub json: Value,
    /// How that reads as a table.
    pub view: View,
    /// Said on stderr before the output, whatever its format.
    pub note: Option<String>,
    /// Said on stderr after a table.
    pub hint: Option<&'static str>,
}

impl Report {
    /// One record.
    pub fn record(json: Value) -> Self {
        Self {
            json,
            view: View::Record,
            note: None,
            hint: None,
        }
    }

    /// A list, as `columns`; `empty` is said when it has no element.
    pub fn list(json: Value, columns: &'static [&'static str], empty: &'static str) -> Self {
        Self {
            json,
            view: View::List { columns, empty },
            note: None,
            hint: None,
        }
    }

    /// Prints the report in `format` (see [`OutputFormat::or_default`]), with its remarks.
    pub fn print(&self, format: Option<OutputFormat>) -> anyhow::Result<()> {
        let format = OutputFormat::or_default(format);
        if let Some(note) = &self.note {
            eprintln!("{note}");
        }
        print(&self.json, Some(format), self.view)?;
        if let (Some(hint), OutputFormat::Table) = (self.hint, format) {
            eprintln!("{hint}");
        }
        Ok(())
    }
}

/// Prints `value` on stdout in `format` (see [`OutputFormat::or_default`]), with every
/// time in it to the second. A closed pipe (`| head`) is not an error.
pub fn print(value: &Value, format: Option<OutputFormat>, view: View) -> anyhow::Result<()> {
    let mut value = value.clone();
    times_to_seconds(&mut value);
    let text = match OutputFormat::or_default(format) {
        OutputFormat::Json => serde_json::to_string_pretty(&value)? + "\n",
        OutputFormat::Table => {
            if let (View::List { empty, .. }, Some([])) =
                (view, value.as_array().map(Vec::as_slice))
            {
                eprintln!("{empty}");
            }
            render(&value, view)
        }
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Rewrites every RFC 3339 time in `value` to whole seconds, in UTC.
pub fn times_to_seconds(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Ok(at) = DateTime::parse_from_rfc3339(text) {
                *text = at
                    .with_timezone(&Utc)
                    .to_rfc3339_opts(SecondsFormat::Secs, true);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(times_to_seconds),
        Value::Object(fields) => fields.values_mut().for_each(times_to_seconds),
        _ => {}
    }
}

/// `value` as text: a table for a list, a line per field for a record.
pub fn render(value: &Value, view: View) -> String {
    match (view, value) {
        (View::List { columns, .. }, Value::Array(rows)) => list(rows, columns, ""),
        (_, Value::Object(fields)) => record(fields),
        (_, other) => format!("{}\n", cell(other)),
    }
}

fn list(rows: &[Value], columns: &[&str], indent: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut table = Table::new(columns.iter().map(|c| heading(c)).collect());
    for row in rows {
        table.push(columns.iter().map(|c| cell(&row[*c])).collect());
    }
    table.render(indent)
}

fn record(fields: &serde_json::Map<String, Value>) -> String {
    let nested = |v: &Value| {
        v.as_array()
            .is_some_and(|a| a.first().is_some_and(Value::is_object))
    };
    let mut table = Table::new(Vec::new());
    for (name, value) in fields.iter().filter(|(_, v)| !nested(v)) {
        table.push(vec![format!("{name}:"), cell(value)]);
    }
    let mut out = table.render("");
    for (name, value) in fields.iter().filter(|(_, v)| nested(v)) {
        let rows = value.as_array().map(Vec::as_slice).unwrap_or_default();
        // Every field any of them has, in the order they first appear.
        let mut columns: Vec<&str> = Vec::new();
        for key in rows
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|o| o.keys())
        {
            if !columns.contains(&key.as_str()) {
                columns.push(key);
            }
        }
        out.push_str(&format!("\n{name}:\n"));
        out.push_str(&list(rows, &columns, "  "));
    }
    out
}

/// `client_id` as a column heading: `CLIENT ID`.
fn heading(field: &str) -> String {
    field.replace('_', " ").to_uppercase()
}

/// One value as a table cell: nothing is `-`, a list of values is comma-separated, a list
/// of records is counted.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.is_empty() => "-".to_owned(),
        // A line break would split the row, an escape sequence reach the terminal.
        Value::String(s) => s.replace(char::is_control, " "),
        Value::Array(items) if items.is_empty() => "-".to_owned(),
        Value::Array(items) if items.iter().any(Value::is_object) => items.len().to_string(),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Rows of cells written as aligned columns, two spaces apart.
#[derive(Debug, Default)]
pub struct Table {
    heading: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with this heading row (none when empty).
    pub fn new(heading: Vec<String>) -> Self {
        Self {
            heading,
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The table, each line starting with `indent` and ending without trailing spaces.
    pub fn render(&self, indent: &str) -> String {
        let lines: Vec<&Vec<String>> = std::iter::once(&self.heading)
            .filter(|h| !h.is_empty())
            .chain(&self.rows)
            .collect();
        let mut widths: Vec<usize> = Vec::new();
        for line in &lines {
            for (i, text) in line.iter().enumerate() {
                let width = text.chars().count();
                match widths.get_mut(i) {
                    Some(w) => *w = (*w).max(width),
                    None => widths.push(width),
                }
            }
        }
        let mut out = String::new();
        for line in lines {
            let mut text = indent.to_owned();
            for (i, value) in line.iter().enumerate() {
                text.push_str(value);
                let pad = widths[i] - value.chars().count() + 2;
                text.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_list_is_aligned_columns_under_headings() {
        let rows = json!([
            {"client_id": "a1", "name": "Acme Mortgages", "scopes": ["x", "y"], "disabled_at": null},
            {"client_id": "b22222", "name": "B\u{1b}[2Jé\n", "scopes": [], "disabled_at": "2026-11-26T10:00:00Z"},
        ]);
        let view = View::List {
            columns: &["client_id", "name", "scopes", "disabled_at"],
            empty: "No clients.",
        };
        assert_eq!(
            render(&rows, view),
            "CLIENT ID  NAME            SCOPES  DISABLED AT\n\
             a1         Acme Mortgages  x,y     -\n\
             b22222     B [2Jé          -       2026-11-26T10:00:00Z\n"
        );
    }

    #[test]
    fn a_record_is_a_line_per_field_then_a_table_per_list_of_records() {
        let record = json!({
            "reference": "1234",
            "submissions": 2,
            "events": [
                {"kind": "created", "at": "2026-11-26T10:00:00Z", "client_id": "c1"},
                {"kind": "activated", "at": "2026-11-26T10:15:00Z", "client_id": null},
            ],
            "product_uuid": null,
        });
        assert_eq!(
            render(&record, View::Record),
            "reference:     1234\n\
             submissions:   2\n\
             product_uuid:  -\n\
             \n\
             events:\n\
             \x20 KIND       AT                    CLIENT ID\n\
             \x20 created    2026-11-26T10:00:00Z  c1\n\
             \x20 activated  2026-11-26T10:15:00Z  -\n"
        );
    }

    #[test]
    fn an_empty_list_renders_nothing() {
        let view = View::List {
            columns: &["a"],
            empty: "None.",
        };
        assert_eq!(render(&json!([]), view), "");
    }

    #[test]
    fn times_are_cut_to_the_second_in_utc_and_nothing_else_changes() {
        let mut value = json!({
            "at": "2026-11-27T05:35:55.017629334Z",
            "nested": [{"until": "2026-11-27T07:35:55.9+02:00"}],
            "reference": "20261127",
            "name": "2026",
        });
        times_to_seconds(&mut value);
        assert_eq!(
            value,
            json!({
                "at": "2026-11-27T05:35:55Z",
                "nested": [{"until": "2026-11-27T05:35:55Z"}],
                "reference": "20261127",
                "name": "2026",
            })
        );
    }
}
