//! A wrapper that keeps secrets out of logs, errors and panics, and the one way a secret is
//! read from a file.

use std::fmt;
use std::io::Read;
use std::path::Path;

/// A secret value whose `Debug` and `Display` print a placeholder, never the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a secret value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret itself; call only where it is used, never to log it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

impl std::str::FromStr for Secret<String> {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

/// The most a secret file may hold: a PIN, a key or a client's secret is a line, and a
/// larger file is the wrong one.
pub const MAX_SECRET_FILE_BYTES: u64 = 4096;

/// The secret in the file at `path`, without its trailing line break. Only a regular file
/// of at most [`MAX_SECRET_FILE_BYTES`] is read: a pipe with no writer would never end, and
/// a device such as `/dev/zero` never stops growing. Errors name the file, never its content.
pub fn read_secret_file(path: &Path) -> Result<Secret<String>, String> {
    let shown = path.display();
    let unreadable = |e: std::io::Error| format!("cannot read {shown}: {e}");
    // Looked at before it is opened: opening a FIFO waits for a writer.
    if !std::fs::metadata(path).map_err(unreadable)?.is_file() {
        return Err(format!(
            "{shown} is not a regular file (a pipe or a device is never read as a secret)"
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_SECRET_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(format!(
            "{shown} is larger than {MAX_SECRET_FILE_BYTES} bytes: not a secret file"
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))?;
    Ok(Secret::new(text.trim_end_matches(['\r', '\n']).to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_file_is_read_only_when_a_small_regular_file() {
        let dir = std::env::temp_dir().join(format!("secret-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good");
        std::fs::write(&good, "hunter2-hunter2\r\n").unwrap();
        assert_eq!(read_secret_file(&good).unwrap().expose(), "hunter2-hunter2");
        let large = dir.join("large");
        std::fs::write(&large, "x".repeat(MAX_SECRET_FILE_BYTES as usize + 1)).unwrap();
        let refused = read_secret_file(&large).unwrap_err();
        assert!(refused.contains("larger than 4096 bytes"), "{refused}");
        assert!(!refused.contains("xxxx"), "{refused}");
        let device = read_secret_file(Path::new("/dev/zero")).unwrap_err();
        assert!(device.contains("not a regular file"), "{device}");
        let directory = read_secret_file(&dir).unwrap_err();
        assert!(directory.contains("not a regular file"), "{directory}");
        let missing = read_secret_file(&dir.join("missing")).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("hunter2".to_string());
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(!format!("{s}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }
}
