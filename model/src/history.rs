//! One sample of a GPU's history ring, decoded.

use gpupeek_shm::layout::history_valid as hv;
use gpupeek_shm::HistorySample;

use crate::units::MilliWatts;

/// What the daemon kept of one tick of one GPU; `None` where it had no value (the GPU
/// was asleep, lost or did not report it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// `CLOCK_MONOTONIC` time of the sample, ns.
    pub at_mono_ns: u64,
    /// GPU utilisation, percent.
    pub util_pct: Option<u32>,
    /// Memory controller utilisation, percent.
    pub util_mem_pct: Option<u32>,
    /// Memory in use, MiB (rounded down by the daemon).
    pub mem_used_mib: Option<u32>,
    /// Power draw.
    pub power_draw: Option<MilliWatts>,
    /// Core temperature, degrees Celsius.
    pub temp_c: Option<i32>,
}

impl Sample {
    /// Decodes `s`.
    pub fn new(s: &HistorySample) -> Sample {
        let has = |bit: u16| s.valid & bit != 0;
        Sample {
            at_mono_ns: s.sample_mono_ns,
            util_pct: has(hv::UTILIZATION).then_some(u32::from(s.util_gpu_pct)),
            util_mem_pct: has(hv::UTIL_MEM).then_some(u32::from(s.util_mem_pct)),
            mem_used_mib: has(hv::MEMORY).then_some(s.mem_used_mib),
            power_draw: has(hv::POWER_DRAW).then_some(MilliWatts(s.power_draw_mw.into())),
            temp_c: has(hv::TEMPERATURE).then_some(i32::from(s.temp_gpu_c)),
        }
    }
}
