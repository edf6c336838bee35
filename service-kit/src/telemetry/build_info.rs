//! What a service binary was built from, for the `build_info` metric.

/// What a service binary was built from, for the `build_info` metric.
#[derive(Debug, Clone, Copy)]
pub struct BuildInfo {
    /// The crate version.
    pub version: &'static str,
    /// The short git commit, or `unknown`.
    pub commit: &'static str,
}

/// The [`BuildInfo`] of the crate it is written in: its version, and the commit its build
/// script found (`BUILD_COMMIT`).
#[macro_export]
macro_rules! build_info {
    () => {
        $crate::telemetry::build_info::BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("BUILD_COMMIT"),
        }
    };
}
