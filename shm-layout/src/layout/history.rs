//! The per-GPU history rings (ABI 1.1): a head and compact samples, so that any reader
//! can draw sparklines of the last minutes without having watched itself.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Head of one GPU's history ring (ABI 1.1); its seqlock covers the head and every
/// sample of the ring. Sample `i` of the ring (counting from the oldest) is in slot
/// `(written - kept + i) % history_slots` with `kept = min(written, history_slots)`.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct HistoryHead {
    /// Seqlock sequence: odd while being written.
    pub seq: u64,
    /// Samples appended since the daemon started (the next one goes to slot
    /// `written % history_slots`).
    pub written: u64,
    /// Time between two samples, ns: the sampling period, but at least one second.
    pub step_ns: u64,
    /// Zero; room for later minor versions.
    pub reserved: u64,
}

bit_set! {
    /// Validity bits of [`HistorySample::valid`]. A sample of a GPU that was asleep, lost or
    /// failing has every bit clear: a gap, not zeros.
    pub mod history_valid: u16, in HistorySample.valid {
        /// `util_gpu_pct`.
        UTILIZATION = 0 [util_gpu_pct],
        /// `mem_used_mib`.
        MEMORY = 1 [mem_used_mib],
        /// `power_draw_mw`.
        POWER_DRAW = 2 [power_draw_mw],
        /// `temp_gpu_c`.
        TEMPERATURE = 3 [temp_gpu_c],
        /// `util_mem_pct`.
        UTIL_MEM = 4 [util_mem_pct],
    }
}

/// One history sample of one GPU (ABI 1.1): compact, 24 bytes.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct HistorySample {
    /// `CLOCK_MONOTONIC` time the values were sampled, ns.
    pub sample_mono_ns: u64,
    /// Memory in use, MiB (rounded down).
    pub mem_used_mib: u32,
    /// Power draw, milliwatts.
    pub power_draw_mw: u32,
    /// GPU utilisation, percent.
    pub util_gpu_pct: u8,
    /// Memory controller utilisation, percent.
    pub util_mem_pct: u8,
    /// GPU core temperature, degrees Celsius.
    pub temp_gpu_c: i16,
    /// Bits from [`history_valid`].
    pub valid: u16,
    /// Zero.
    pub reserved: u16,
}
