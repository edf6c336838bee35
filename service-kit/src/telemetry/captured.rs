//! A log writer the tests read back what was logged from.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::EnvFilter;

use super::logs::json_subscriber;

/// Every byte logged through it, shared by its clones.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Logs this thread's lines here, through the subscriber `LOG_FORMAT=json` installs,
    /// until the guard drops.
    pub(crate) fn json(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        tracing::subscriber::set_default(json_subscriber(EnvFilter::new("info"), move || {
            writer.clone()
        }))
    }

    /// Everything logged, as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// Each line parsed, which fails the test unless every line is one JSON object.
    pub(crate) fn lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}
