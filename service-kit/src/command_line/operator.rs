//! What both services' operator commands share besides their output: who they say made a
//! change, their logs, how they read `--since`, and the error for a line they cannot carry
//! out.

use std::io::IsTerminal;

use chrono::{DateTime, Utc};
use tracing_subscriber::EnvFilter;

/// Who is making a change, for the record it leaves: the configured name, else the
/// operating-system user, else `unknown`.
pub fn actor(configured: Option<&str>) -> String {
    configured
        .map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Logs for an operator command: warnings and errors only (unless `RUST_LOG` says
/// otherwise), on stderr, so that stdout holds nothing but what the command prints.
pub fn init_logs() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Parses `--since`: an RFC 3339 time (`2026-11-26T00:00:00Z`), or a span back from now
/// in seconds, minutes, hours or days (`90s`, `30m`, `24h`, `7d`).
pub fn parse_since(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let bad = || {
        format!(
            "{text:?} is neither an RFC 3339 time (2026-11-26T00:00:00Z) nor a span back from \
             now such as 30m, 24h or 7d"
        )
    };
    let split = text.char_indices().last().map_or(0, |(i, _)| i);
    let (count, unit) = text.split_at(split);
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let count: i64 = count.parse::<u32>().map_err(|_| bad())?.into();
    chrono::Duration::try_seconds(count * unit_secs)
        .and_then(|span| Utc::now().checked_sub_signed(span))
        .ok_or_else(bad)
}

/// A command line that parses but cannot be carried out as given (a flag it needs for
/// this case is missing); the binaries exit with status 2 for it, as for any usage error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A change a command was asked for and refuses to make, as against what is stored (say, a
/// client moved out of the sandbox): exit status 3, which tells a pipeline the input was
/// read and understood, and not applied.
#[derive(Debug, thiserror::Error)]
#[error("refused: {0}")]
pub struct Refused(pub String);

/// The process exit code for a command that failed with `e`: 3 when its database is not
/// there or not ready, or it refused what it was asked; 2 for a command line (or a file it
/// reads) that cannot be carried out as given (clap's usage errors exit 2 by themselves);
/// 1 otherwise.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<crate::db::DatabaseNotReady>().is_some()
        || e.downcast_ref::<Refused>().is_some()
    {
        3
    } else if e.downcast_ref::<UsageError>().is_some() {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_a_span_back_from_now() {
        assert_eq!(
            parse_since("2026-11-26T00:00:00Z").unwrap(),
            DateTime::parse_from_rfc3339("2026-11-26T00:00:00Z").unwrap()
        );
        let day_ago = parse_since("1d").unwrap();
        let expected = Utc::now() - chrono::Duration::days(1);
        assert!((day_ago - expected).num_seconds().abs() < 5);
        assert_eq!(
            (parse_since("90s").unwrap() - parse_since("1m").unwrap()).num_seconds(),
            -30
        );
        for bad in ["", "d", "7", "7y", "-", "yesterday", "1é"] {
            assert!(parse_since(bad).is_err(), "{bad:?}");
        }
    }
}
