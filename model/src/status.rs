//! The daemon's status record, decoded: its state and the versions it knows.

use gpupeek_shm::layout::{status_valid as sv, DaemonState};
use gpupeek_shm::StatusRecord;

use crate::text::Text;

/// What the daemon says about itself and the driver.
#[derive(Debug, Clone, Copy)]
pub struct Status<'a> {
    /// The daemon's state (`None`: a value this reader does not know).
    pub state: Option<DaemonState>,
    /// Driver version, e.g. "550.54.15".
    pub driver_version: Option<Text<'a>>,
    /// NVML library version.
    pub nvml_version: Option<Text<'a>>,
    /// CUDA driver version as NVML reports it (12040 for 12.4).
    pub cuda_driver_version: Option<i32>,
    /// Wall-clock time of the publish, ns since the Unix epoch.
    pub published_unix_ns: u64,
    /// `CLOCK_MONOTONIC` time of the last publish, ns.
    pub heartbeat_mono_ns: u64,
    /// Sampling period, ns.
    pub period_ns: u64,
    /// GPU slots in use.
    pub gpu_count: u32,
}

impl<'a> Status<'a> {
    /// Decodes `s`.
    pub fn new(s: &'a StatusRecord) -> Status<'a> {
        let has = |bit: u64| s.valid & bit != 0;
        Status {
            state: DaemonState::from_raw(s.state),
            driver_version: has(sv::DRIVER_VERSION).then(|| Text::new(&s.driver_version)),
            nvml_version: has(sv::NVML_VERSION).then(|| Text::new(&s.nvml_version)),
            cuda_driver_version: has(sv::CUDA_DRIVER_VERSION).then_some(s.cuda_driver_version),
            published_unix_ns: s.published_unix_ns,
            heartbeat_mono_ns: s.heartbeat_mono_ns,
            period_ns: s.period_ns,
            gpu_count: s.gpu_count,
        }
    }

    /// The CUDA version as `MAJOR.MINOR` (`12.4`), when known.
    pub fn cuda_version(&self) -> Option<String> {
        self.cuda_driver_version
            .map(|v| format!("{}.{}", v / 1000, v % 1000 / 10))
    }
}
