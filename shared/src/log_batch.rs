//! Log lines written out in batches rather than one system call each.
//!
//! Under load every request's log line was its own `write(2)`, a sizeable part of a
//! request's kernel time. Lines now wait in memory and go out together: when the buffer
//! fills, at the latest after the flush interval, and at once for warnings and errors (with
//! every line before them, so the order is kept). Dropping the [`FlushOnDrop`] guard at the
//! end of `main`, or a panic, writes out what is waiting.

use std::io::{self, BufWriter, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// How much the buffer holds before it is written out without waiting for the interval.
pub const BUFFER_BYTES: usize = 64 * 1024;

/// A log destination that batches its lines; cheap to clone, every clone shares one buffer.
pub struct BatchedWriter<W: Write> {
    buffer: Arc<Mutex<BufWriter<W>>>,
}

impl<W: Write> Clone for BatchedWriter<W> {
    fn clone(&self) -> Self {
        Self {
            buffer: Arc::clone(&self.buffer),
        }
    }
}

impl<W: Write + Send + 'static> BatchedWriter<W> {
    /// Wraps `inner`; a thread writes out what is waiting every `interval`, and stops once
    /// every clone is dropped.
    pub fn new(inner: W, interval: Duration) -> Self {
        let writer = Self {
            buffer: Arc::new(Mutex::new(BufWriter::with_capacity(BUFFER_BYTES, inner))),
        };
        let buffer = Arc::downgrade(&writer.buffer);
        let started = std::thread::Builder::new()
            .name("log-flush".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(interval);
                    let Some(buffer) = buffer.upgrade() else {
                        return;
                    };
                    let _ = lock(&buffer).flush();
                }
            });
        if let Err(e) = started {
            // Without the thread, lines still go out when the buffer fills or a warning comes.
            eprintln!("could not start the log flush thread: {e}");
        }
        writer
    }

    /// Writes out every waiting line now.
    pub fn flush(&self) {
        let _ = lock(&self.buffer).flush();
    }

    /// A line's writer, holding the buffer; an urgent line is written out when it ends.
    fn line(&self, urgent: bool) -> LogLine<'_, W> {
        LogLine {
            buffer: lock(&self.buffer),
            urgent,
        }
    }

    /// Writes out every waiting line unless another thread holds the buffer: for a panic
    /// hook, which may run while this very thread is in the middle of writing a line.
    pub fn try_flush(&self) {
        match self.buffer.try_lock() {
            Ok(mut b) => {
                let _ = b.flush();
            }
            Err(TryLockError::Poisoned(p)) => {
                let _ = p.into_inner().flush();
            }
            Err(TryLockError::WouldBlock) => {}
        }
    }
}

fn lock<W: Write>(buffer: &Mutex<BufWriter<W>>) -> MutexGuard<'_, BufWriter<W>> {
    // A panic while a line was being copied in leaves at worst a partial line: keep logging.
    buffer.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'a, W: Write + Send + 'static> MakeWriter<'a> for BatchedWriter<W> {
    type Writer = LogLine<'a, W>;

    fn make_writer(&'a self) -> Self::Writer {
        self.line(false)
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        // In tracing's order, less verbose levels compare lower: this is WARN and ERROR.
        self.line(*meta.level() <= Level::WARN)
    }
}

/// One event's output: the formatter writes the whole line through it, under the lock.
pub struct LogLine<'a, W: Write> {
    buffer: MutexGuard<'a, BufWriter<W>>,
    urgent: bool,
}

impl<W: Write> Write for LogLine<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buffer.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.buffer.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.buffer.flush()
    }
}

impl<W: Write> Drop for LogLine<'_, W> {
    fn drop(&mut self) {
        if self.urgent {
            let _ = self.buffer.flush();
        }
    }
}

/// Writes out the waiting lines when dropped: held by `main` for the life of the process.
#[must_use = "the waiting log lines are written out when this is dropped"]
pub struct FlushOnDrop(pub(crate) &'static BatchedWriter<io::Stderr>);

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        self.0.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An inner writer that records each write it is given, as one string.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(buf).into_owned());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Recorder {
        fn writes(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    const LONG: Duration = Duration::from_secs(3600);

    fn subscriber(writer: BatchedWriter<Recorder>) -> impl tracing::Subscriber {
        tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .finish()
    }

    #[test]
    fn info_lines_wait_and_go_out_together_in_one_write() {
        let inner = Recorder::default();
        let writer = BatchedWriter::new(inner.clone(), LONG);
        tracing::subscriber::with_default(subscriber(writer.clone()), || {
            tracing::info!("first");
            tracing::info!("second");
        });
        assert!(inner.writes().is_empty(), "{:?}", inner.writes());
        writer.flush();
        let writes = inner.writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert!(writes[0].contains("first") && writes[0].contains("second"));
        assert!(writes[0].find("first") < writes[0].find("second"));
    }

    #[test]
    fn a_warning_goes_out_at_once_after_the_lines_before_it() {
        let inner = Recorder::default();
        let writer = BatchedWriter::new(inner.clone(), LONG);
        tracing::subscriber::with_default(subscriber(writer.clone()), || {
            tracing::info!("before");
            tracing::warn!("trouble");
            tracing::error!("worse");
        });
        let all = inner.writes().concat();
        let (before, trouble, worse) = (
            all.find("before").expect("the info line is out"),
            all.find("trouble").expect("the warning is out"),
            all.find("worse").expect("the error is out"),
        );
        assert!(before < trouble && trouble < worse, "{all}");
    }

    #[test]
    fn waiting_lines_go_out_within_the_interval() {
        let inner = Recorder::default();
        let writer = BatchedWriter::new(inner.clone(), Duration::from_millis(20));
        tracing::subscriber::with_default(subscriber(writer.clone()), || {
            tracing::info!("eventually");
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while inner.writes().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(inner.writes().concat().contains("eventually"));
    }

    #[test]
    fn a_full_buffer_is_written_without_waiting() {
        let inner = Recorder::default();
        let writer = BatchedWriter::new(inner.clone(), LONG);
        let line = "x".repeat(1000);
        tracing::subscriber::with_default(subscriber(writer.clone()), || {
            for _ in 0..(2 * BUFFER_BYTES / 1000) {
                tracing::info!("{line}");
            }
        });
        let writes = inner.writes();
        assert!(!writes.is_empty());
        assert!(writes.iter().all(|w| w.len() <= BUFFER_BYTES));
    }

    #[test]
    fn try_flush_skips_a_held_buffer_and_flushes_a_free_one() {
        let inner = Recorder::default();
        let writer = BatchedWriter::new(inner.clone(), LONG);
        {
            let mut line = writer.make_writer();
            line.write_all(b"held\n").unwrap();
            writer.try_flush();
        }
        assert!(inner.writes().is_empty());
        writer.try_flush();
        assert_eq!(inner.writes().concat(), "held\n");
    }
}
