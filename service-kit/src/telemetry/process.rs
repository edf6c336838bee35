//! The process's own metrics: the standard `process_*` families every Prometheus client
//! library exports, read from the operating system when `/metrics` is scraped.

use std::fmt::Write;

/// One family's value: counters and most gauges are whole numbers, CPU time is not.
enum Value {
    Float(f64),
    Whole(u64),
}

/// Appends the `process_*` families, as they stand now, to a scrape in the text format.
/// The operating system is read here rather than through the recorder because the
/// `metrics` crate's counters hold whole numbers: CPU seconds would move in steps of a
/// second, and a process using a tenth of a core would look idle or busy by turns.
pub(super) fn render(out: &mut String) {
    let m = metrics_process::collector::collect();
    let families = [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time the process has used, in seconds.",
            m.cpu_seconds_total.map(Value::Float),
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size, in bytes.",
            m.resident_memory_bytes.map(Value::Whole),
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size, in bytes.",
            m.virtual_memory_bytes.map(Value::Whole),
        ),
        (
            "process_virtual_memory_max_bytes",
            "gauge",
            "Limit of the virtual memory size, in bytes (0: unlimited).",
            m.virtual_memory_max_bytes.map(Value::Whole),
        ),
        (
            "process_open_fds",
            "gauge",
            "Open file descriptors (sockets included).",
            m.open_fds.map(Value::Whole),
        ),
        (
            "process_max_fds",
            "gauge",
            "Limit of open file descriptors (0: unlimited).",
            m.max_fds.map(Value::Whole),
        ),
        (
            "process_threads",
            "gauge",
            "Operating-system threads in the process.",
            m.threads.map(Value::Whole),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "When the process started, in seconds since the Unix epoch.",
            m.start_time_seconds.map(Value::Whole),
        ),
    ];
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for (name, kind, help, value) in families {
        // A value the platform cannot give is left out, family and all, rather than shown as 0.
        let Some(value) = value else { continue };
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        let _ = match value {
            Value::Float(v) => writeln!(out, "{name} {v}\n"),
            Value::Whole(v) => writeln!(out, "{name} {v}\n"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn every_process_family_has_help_a_type_and_one_sample() {
        let mut text = String::from("# HELP up_total x\n# TYPE up_total counter\nup_total 1");
        render(&mut text);
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_threads",
            "process_start_time_seconds",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}: {text}");
            let sample = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} sample: {text}"));
            let value: f64 = sample.parse().expect("a number");
            assert!(value >= 0.0, "{name} {value}");
        }
        assert!(
            text.starts_with("# HELP up_total x\n# TYPE up_total counter\nup_total 1\n# HELP"),
            "the scrape before was changed: {text}"
        );
    }
}
