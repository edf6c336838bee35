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
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(ensure_token);
    KeyStoreArgs {
        key_store: KeyStoreKind::Pkcs11,
        pkcs11_module: Some(module()),
        pkcs11_token_label: Some(TOKEN_LABEL.to_owned()),
        pkcs11_pin: Some(PIN.parse().expect("infallible")),
        pkcs11_pin_file: None,
        pkcs11_sessions: 4,
    }
}

/// Initialises the token unless a token of that label exists; a lock on a file keeps two
/// test processes from making two.
fn ensure_token() {
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
        .any(|l| l.trim().strip_prefix("Label:").map(str::trim) == Some(TOKEN_LABEL));
    if !exists {
        let made = util(&[
            "--init-token",
            "--free",
            "--label",
            TOKEN_LABEL,
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
