//! Test hooks: environment variables that only a build with the `test-hooks` feature
//! reads (the end-to-end tests build gpupeekd so). A production build ignores them, so
//! nothing in a root daemon's environment can freeze it, change its refresh periods or
//! its idea of the host's pid namespace.

use std::str::FromStr;

/// `N`: the daemon stops itself (SIGSTOP) in the middle of its N-th GPU record write
/// (counting from 0), leaving that record mid-write as a daemon killed there would.
pub const FREEZE_MID_WRITE: &str = "GPUPEEKD_TEST_FREEZE_MID_WRITE";

/// `MS`: process details are read again every `MS` milliseconds instead of every
/// [`crate::procfs::DETAILS_REFRESH_NS`], so that a test sees many refreshes in a short
/// run. Logged at start.
pub const DETAILS_REFRESH_MS: &str = "GPUPEEKD_TEST_DETAILS_REFRESH_MS";

/// The inode of the pid namespace whose pids NVML reports, instead of the kernel's
/// initial one (the fake NVML lists the pids of the tests' namespace, which may not be
/// the initial one under CI).
pub const HOST_PID_NS: &str = "GPUPEEKD_TEST_HOST_PID_NS";

/// `MS`: the tiered history's unit (see [`crate::timeline`]) is `MS` milliseconds
/// instead of 1 s: raw samples every `max(period, unit)`, buckets of 10 and 60 units, so
/// that a test fills several buckets of each tier in seconds, through the same code.
/// Logged at start.
pub const HISTORY_UNIT_MS: &str = "GPUPEEKD_TEST_HISTORY_UNIT_MS";

/// The value of hook `name`, when this build reads hooks and it is set and parses.
#[cfg(feature = "test-hooks")]
pub fn get<T: FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Without the `test-hooks` feature: never a value.
#[cfg(not(feature = "test-hooks"))]
pub fn get<T: FromStr>(_name: &str) -> Option<T> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo test -p gpupeekd` builds without the feature, as production does.
    #[cfg(not(feature = "test-hooks"))]
    #[test]
    fn a_build_without_the_feature_reads_no_hook() {
        // Only this test touches these variables in this process.
        std::env::set_var(FREEZE_MID_WRITE, "3");
        std::env::set_var(HOST_PID_NS, "4026531836");
        assert_eq!(get::<u64>(FREEZE_MID_WRITE), None);
        assert_eq!(get::<u64>(HOST_PID_NS), None);
    }
}
