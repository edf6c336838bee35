//! Names the git commit this binary is built from, for its `build_info` metric.

include!("../service-kit/build_commit.rs");
