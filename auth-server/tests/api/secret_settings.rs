//! The PKCS#11 PIN and the key-encryption key are read from the environment or a file,
//! never taken as flags, which every user of the machine sees in `ps`: a flag giving one is
//! refused, naming where it is read from, never echoing the value.

use std::process::Command;

use test_support::{on_both_backends, softhsm};

use crate::helpers::{Backend, INTAKE, Run, TestDb};

/// The binary with `args` and exactly `env` of the settings (nothing else of the test's
/// environment that names a key).
fn bare(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_auth-server"))
        .args(args)
        .env_remove("AUTH_KEY_ENCRYPTION_KEY")
        .env_remove("AUTH_KEY_ENCRYPTION_KEY_FILE")
        .env_remove("AUTH_PKCS11_PIN")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("auth-server runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

const GIVEN: &str = "c2VjcmV0LWdpdmVuLWFzLWEtZmxhZy0wMTIzNDU2Nzg=";

#[test]
fn a_secret_given_as_a_flag_is_refused_naming_its_variable_and_never_echoed() {
    let kek = format!("--key-encryption-key={GIVEN}");
    let pin = format!("--pkcs11-pin={GIVEN}");
    let lines: &[(&[&str], &str)] = &[
        (
            &["serve", "--key-encryption-key", GIVEN],
            "AUTH_KEY_ENCRYPTION_KEY",
        ),
        (&["serve", &kek], "AUTH_KEY_ENCRYPTION_KEY"),
        (&["serve", "--pkcs11-pin", GIVEN], "AUTH_PKCS11_PIN"),
        (&["key", "rotate", &pin], "AUTH_PKCS11_PIN"),
        (
            &["key", "rotate", "--key-encryption-key", GIVEN],
            "AUTH_KEY_ENCRYPTION_KEY",
        ),
        (
            &["key", "revoke", "KID", "--pkcs11-pin", GIVEN],
            "AUTH_PKCS11_PIN",
        ),
        (
            &["apply", "-f", "clients.yaml", &kek],
            "AUTH_KEY_ENCRYPTION_KEY",
        ),
        (
            &[
                "client", "create", "--name", "Acme", "--scopes", INTAKE, &kek,
            ],
            "AUTH_KEY_ENCRYPTION_KEY",
        ),
        (
            &["audit", "verify", "--key-encryption-key", GIVEN],
            "AUTH_KEY_ENCRYPTION_KEY",
        ),
    ];
    for (args, variable) in lines {
        let refused = bare(args, &[]);
        assert_eq!(refused.code, Some(2), "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("is not taken on the command line")
                && refused.stderr.contains(&format!("set {variable}"))
                && refused.stderr.contains(&format!("{variable}_FILE")),
            "{args:?}: {}",
            refused.stderr
        );
        assert!(
            !refused.stderr.contains(GIVEN),
            "{args:?}: {}",
            refused.stderr
        );
        assert!(!refused.stdout.contains(GIVEN), "{args:?}");
    }
}

/// A directory removed afterwards.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("auth-secrets-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn the_key_encryption_key_and_the_pin_are_read_from_small_regular_files(backend: Backend) {
    let db = TestDb::auth(backend).await;
    let dir = Dir::new();
    let kek_file = dir.write(
        "kek",
        &format!("{}\n", test_support::TEST_KEY_ENCRYPTION_KEY),
    );
    let pin_file = dir.write("pin", &format!("{}\n", softhsm::PIN));
    let with_file = [
        ("AUTH_DATABASE_URL", db.url.as_str()),
        ("AUTH_KEY_ENCRYPTION_KEY_FILE", kek_file.as_str()),
    ];
    let migrated = bare(&["migrate"], &with_file);
    assert_eq!(migrated.code, Some(0), "{}", migrated.stderr);
    let made = bare(
        &[
            "client", "create", "--name", "Acme", "--scopes", INTAKE, "-o", "json",
        ],
        &with_file,
    );
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    let verified = bare(&["audit", "verify", "-o", "json"], &with_file);
    assert_eq!(verified.code, Some(0), "{}", verified.stderr);

    // Neither from a device nor from a file that is no secret's.
    let large = dir.write("large", &"A".repeat(64 * 1024));
    for (file, said) in [
        ("/dev/zero", "is not a regular file"),
        (large.as_str(), "is larger than 4096 bytes"),
    ] {
        let refused = bare(
            &["client", "create", "--name", "Beta", "--scopes", INTAKE],
            &[
                ("AUTH_DATABASE_URL", db.url.as_str()),
                ("AUTH_KEY_ENCRYPTION_KEY_FILE", file),
            ],
        );
        assert_eq!(refused.code, Some(1), "{file}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("AUTH_KEY_ENCRYPTION_KEY_FILE")
                && refused.stderr.contains(said),
            "{file}: {}",
            refused.stderr
        );
    }

    // The token's PIN, from its file; and never from a device.
    softhsm::shared_key_store();
    let module = softhsm::module().display().to_string();
    let token = |pin_file: &str| {
        bare(
            &["key", "rotate", "-o", "json"],
            &[
                ("AUTH_DATABASE_URL", db.url.as_str()),
                ("AUTH_KEY_ENCRYPTION_KEY_FILE", kek_file.as_str()),
                ("AUTH_KEY_STORE", "pkcs11"),
                ("AUTH_PKCS11_MODULE", module.as_str()),
                ("AUTH_PKCS11_TOKEN_LABEL", softhsm::SHARED_TOKEN_LABEL),
                ("AUTH_PKCS11_PIN_FILE", pin_file),
            ],
        )
    };
    let refused = token("/dev/zero");
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("AUTH_PKCS11_PIN_FILE")
            && refused.stderr.contains("not a regular file"),
        "{}",
        refused.stderr
    );
    let rotated = token(&pin_file);
    assert_eq!(rotated.code, Some(0), "{}", rotated.stderr);
    assert!(!rotated.stderr.contains(softhsm::PIN), "{}", rotated.stderr);
}

on_both_backends!(the_key_encryption_key_and_the_pin_are_read_from_small_regular_files);
