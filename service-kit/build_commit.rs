// The build script of each service binary (included by auth-server/build.rs and
// intake-api/build.rs): sets BUILD_COMMIT, the short git commit the `build_info` metric
// names. A BUILD_COMMIT in the environment wins, since image builds have no .git; without
// either it is `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=BUILD_COMMIT");
    let given = std::env::var("BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    let commit = given.or_else(|| {
        // Built again when HEAD moves: a new commit, a checkout, or a branch's ref updated.
        for path in ["HEAD", "packed-refs"]
            .into_iter()
            .map(str::to_owned)
            .chain(git(&["symbolic-ref", "-q", "HEAD"]))
            .filter_map(|name| git(&["rev-parse", "--git-path", &name]))
            .map(PathBuf::from)
            .filter(|p| p.exists())
        {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        git(&["rev-parse", "--short", "HEAD"])
    });
    let commit = commit.unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=BUILD_COMMIT={commit}");
}

/// What `git args` prints, trimmed; `None` when git is missing, fails or prints nothing.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}
