//! The SoftHSM2 token the tests keep signing keys in: made on first use (`softhsm2-util`,
//! Debian's `softhsm2`), then shared by every test, each key under a label of its own.
//! Without SoftHSM2 the tests that need it fail, saying what to install.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use auth_server::config::{KeyStoreArgs, KeyStoreKind};

/// The token's label.
pub const TOKEN_LABEL: &str = "partner-intake-tests";
/// Its user PIN.
pub const PIN: &str = "20261205";
const SO_PIN: &str = "so-20261205";

/// The PKCS#11 library: `TEST_PKCS11_MODULE`, else Debian's SoftHSM2.
pub fn module() -> PathBuf {
    std::env::var_os("TEST_PKCS11_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/softhsm/libsofthsm2.so"))
}

/// Settings that keep the signing keys in the test token, made first if need be.
pub fn key_store() -> KeyStoreArgs {
    ensure_tokens();
    key_store_in(TOKEN_LABEL)
}

/// Makes both test tokens, once per process, before either is used. SoftHSM2 reads its
/// tokens when a process first loads the library: a token made by `softhsm2-util` after
/// that stays unseen by the process, so making each on its first use failed every test of
/// the second on a machine that had neither yet.
fn ensure_tokens() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        ensure_token(TOKEN_LABEL);
        ensure_token(SHARED_TOKEN_LABEL);
    });
}

/// The label of a second token, for tests whose commands, processes of their own, write
/// to it while the test process holds it: SoftHSM2 keeps a token in files, which another
/// process rewriting can make it answer errors for a moment, so such tests keep away from
/// the token the other tests sign with.
pub const SHARED_TOKEN_LABEL: &str = "partner-intake-shared-tests";

/// Settings that keep the signing keys in the token labelled [`SHARED_TOKEN_LABEL`].
pub fn shared_key_store() -> KeyStoreArgs {
    ensure_tokens();
    key_store_in(SHARED_TOKEN_LABEL)
}

fn key_store_in(label: &str) -> KeyStoreArgs {
    KeyStoreArgs {
        key_store: KeyStoreKind::Pkcs11,
        pkcs11_module: Some(module()),
        pkcs11_token_label: Some(label.to_owned()),
        pkcs11_pin: Some(PIN.parse().expect("infallible")),
        pkcs11_pin_file: None,
        pkcs11_sessions: 4,
    }
}

/// Initialises the token `label` unless a token of that label exists; a lock on a file
/// keeps two test processes from making two.
fn ensure_token(label: &str) {
    let module = module();
    assert!(
        module.is_file(),
        "the PKCS#11 tests need SoftHSM2 ({} is missing): apt-get install softhsm2, or set \
         TEST_PKCS11_MODULE",
        module.display()
    );
    let lock_path = std::env::temp_dir().join("partner-intake-softhsm.lock");
    let lock = std::fs::File::create(&lock_path).expect("the SoftHSM2 lock file");
    lock.lock().expect("the SoftHSM2 lock");
    let util = |args: &[&str]| {
        Command::new("softhsm2-util")
            .args(args)
            .output()
            .expect("softhsm2-util runs (apt-get install softhsm2)")
    };
    let listed = util(&["--show-slots"]);
    let slots = String::from_utf8_lossy(&listed.stdout);
    let exists = slots
        .lines()
        .any(|l| l.trim().strip_prefix("Label:").map(str::trim) == Some(label));
    if !exists {
        let made = util(&[
            "--init-token",
            "--free",
            "--label",
            label,
            "--so-pin",
            SO_PIN,
            "--pin",
            PIN,
        ]);
        assert!(
            made.status.success(),
            "softhsm2-util could not make the test token: {}",
            String::from_utf8_lossy(&made.stderr)
        );
    }
    drop(lock);
}

/// A token in a token directory of its own, for a server run as a process of its own (its
/// `SOFTHSM2_CONF` is [`Self::conf`]): a test may take it away and bring it back, as an HSM
/// goes out of reach and returns, without touching the tokens other tests sign with.
pub struct IsolatedToken {
    root: PathBuf,
    /// Its label.
    pub label: String,
}

impl IsolatedToken {
    /// Makes the token, labelled `label`, with the user PIN [`PIN`].
    pub fn new(label: &str) -> Self {
        let module = module();
        assert!(
            module.is_file(),
            "the PKCS#11 tests need SoftHSM2 ({} is missing): apt-get install softhsm2",
            module.display()
        );
        let root = std::env::temp_dir().join(format!(
            "partner-intake-token-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(root.join("tokens")).expect("the token directory");
        std::fs::write(
            root.join("softhsm2.conf"),
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                root.join("tokens").display()
            ),
        )
        .expect("the SoftHSM2 configuration");
        let made = Command::new("softhsm2-util")
            .env("SOFTHSM2_CONF", root.join("softhsm2.conf"))
            .args([
                "--init-token",
                "--free",
                "--label",
                label,
                "--so-pin",
                SO_PIN,
                "--pin",
                PIN,
            ])
            .output()
            .expect("softhsm2-util runs (apt-get install softhsm2)");
        assert!(
            made.status.success(),
            "softhsm2-util could not make the token: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        Self {
            root,
            label: label.to_owned(),
        }
    }

    /// The `SOFTHSM2_CONF` that names it.
    pub fn conf(&self) -> PathBuf {
        self.root.join("softhsm2.conf")
    }

    /// The directory SoftHSM2 keeps the token's objects in.
    fn token_dir(&self) -> PathBuf {
        let mut dirs = std::fs::read_dir(self.root.join("tokens"))
            .expect("the token directory")
            .map(|entry| entry.expect("an entry").path());
        dirs.next().expect("the token's directory")
    }

    /// Makes the token unreachable: its files are moved where SoftHSM2 does not look.
    pub fn take_away(&self) {
        let dir = self.token_dir();
        let name = dir.file_name().expect("a name").to_owned();
        std::fs::create_dir_all(self.root.join("away")).expect("a place for the token");
        std::fs::rename(&dir, self.root.join("away").join(name)).expect("the token moved away");
    }

    /// Brings the token back where it was.
    pub fn bring_back(&self) {
        let away = std::fs::read_dir(self.root.join("away"))
            .expect("the token is away")
            .next()
            .expect("the token is away")
            .expect("an entry")
            .path();
        let name = away.file_name().expect("a name").to_owned();
        std::fs::rename(&away, self.root.join("tokens").join(name))
            .expect("the token brought back");
    }
}

impl Drop for IsolatedToken {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine with no test token yet (a SoftHSM2 configuration of its own, in this
    /// test's process alone), the first use of one token, then the library loaded, then the
    /// other token: both are there for the process.
    #[test]
    fn both_tokens_are_seen_whichever_is_used_first_on_a_new_machine() {
        let root = std::env::temp_dir().join(format!(
            "partner-intake-new-machine-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(root.join("tokens")).expect("the token directory");
        let conf = root.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                root.join("tokens").display()
            ),
        )
        .expect("the SoftHSM2 configuration");
        // SAFETY: the only test of this binary that touches the environment or SoftHSM2,
        // before anything else of the process reads either.
        unsafe { std::env::set_var("SOFTHSM2_CONF", &conf) };
        let _ = shared_key_store();
        let library = auth_server::key_store::pkcs11::library(&module()).expect("SoftHSM2");
        let _ = key_store();
        for label in [SHARED_TOKEN_LABEL, TOKEN_LABEL] {
            auth_server::key_store::pkcs11::find_token(&library, label)
                .unwrap_or_else(|e| panic!("{label}: {e:#}"));
        }
        let _ = std::fs::remove_dir_all(root);
    }
}
