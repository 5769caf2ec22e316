//! Tiered history (ABI 1.7): per GPU and per MIG instance, every sample of the last
//! minutes, 10-second buckets for hours and 1-minute buckets for days, plus running
//! integrals, all keyed by UUID and stamped with wall-clock time so that they survive a
//! daemon restart.
//!
//! The region is found through [`crate::layout::StaticHeader::tier_table_offset`]: a
//! static [`TierTableHead`] (written once, before `magic`, like the static header)
//! followed by `track_count` *tracks*. A track is one GPU's or one MIG instance's
//! history: a seqlocked [`TrackHead`] then three rings of [`TierBucket`]s (raw samples,
//! tier 1, tier 2). The track head's `seq` covers the head and all three rings.
//!
//! Ring `t` keeps `slots_t` buckets; `written_t` counts the buckets ever opened in it.
//! Bucket `i` (counting from the oldest kept) is in slot `(written_t - kept + i) %
//! slots_t` with `kept = min(written_t, slots_t)`. The newest bucket of a tier is still
//! open (its values are those of the samples so far); a bucket closes when a sample falls
//! past its end. A time span with no bucket at all (the daemon was down) and a bucket
//! whose `samples` is 0 (the GPU was asleep, lost or not responding) are both gaps,
//! never zeros. A raw "bucket" is one sample: `samples` 0 or 1, min = mean = max.
//!
//! Units: utilisation percent (mean in hundredths), memory used MiB, power mW,
//! temperature °C (mean in hundredths), SM clock MHz, GPM SM activity hundredths of a
//! percent. The integrals are, per metric, the sum of every sample's value (in the same
//! units as min/max, SM activity in hundredths) and the number of samples that had one,
//! since `integral_start_unix_ns`: the exact mean over a window is
//! `(sum2 - sum1) / (count2 - count1)` from two reads of the head.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Tracks a writer keeps by default (GPUs first, then MIG instances).
pub const DEFAULT_TIER_TRACKS: u32 = 16;
/// Raw samples a track keeps: ten minutes at the default 1 s step.
pub const DEFAULT_RAW_SLOTS: u32 = 600;
/// Tier-1 buckets a track keeps: six hours of 10 s buckets.
pub const DEFAULT_TIER1_SLOTS: u32 = 2160;
/// Tier-2 buckets a track keeps: seven days of 1 min buckets.
pub const DEFAULT_TIER2_SLOTS: u32 = 10080;
/// Most slots a reader accepts in one tier ring.
pub const MAX_TIER_SLOTS: u32 = 1 << 20;
/// Most tracks a reader accepts.
pub const MAX_TIER_TRACKS: u32 = 4096;

/// Describes the tier region (ABI 1.7); static, written before `magic`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct TierTableHead {
    /// Number of tracks.
    pub track_count: u32,
    /// Size of one track in bytes (head and three rings, a multiple of 128).
    pub track_size_bytes: u32,
    /// Offset of the first track.
    pub tracks_offset: u64,
    /// Size of a [`TrackHead`] in bytes; the raw ring starts right after it.
    pub track_head_size_bytes: u32,
    /// Size of a [`TierBucket`] in bytes.
    pub bucket_size_bytes: u32,
    /// Slots of the raw ring.
    pub raw_slots: u32,
    /// Slots of the tier-1 ring (right after the raw ring).
    pub tier1_slots: u32,
    /// Slots of the tier-2 ring (right after the tier-1 ring).
    pub tier2_slots: u32,
    /// Zero.
    pub reserved0: u32,
    /// Zero; room for later minor versions.
    pub reserved: [u64; 11],
}

state_enum! {
    /// What a track holds; [`TrackHead::kind`].
    pub enum TrackKind in TrackHead.kind {
        /// Unused.
        Free = 0 => "free",
        /// A whole GPU.
        Gpu = 1 => "gpu",
        /// A MIG instance.
        Mig = 2 => "mig",
    }
}

/// Head of one track (ABI 1.7); its seqlock covers the head and the track's three rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct TrackHead {
    /// Seqlock sequence: odd while being written.
    pub seq: u64,
    /// [`TrackKind`] as a raw value.
    pub kind: u32,
    /// NVML index of the GPU (the parent's for a MIG instance) at the last sample.
    pub gpu_index: u32,
    /// MIG GPU instance id (`u32::MAX` for a GPU).
    pub gpu_instance_id: u32,
    /// MIG compute instance id (`u32::MAX` for a GPU).
    pub compute_instance_id: u32,
    /// The UUID of the GPU or MIG device: the track's key.
    pub uuid: [u8; 96],
    /// Wall-clock time (Unix ns) the integrals started from.
    pub integral_start_unix_ns: u64,
    /// Wall-clock time (Unix ns) of the last sample.
    pub last_sample_unix_ns: u64,
    /// Raw samples ever written.
    pub raw_written: u64,
    /// Time between two raw samples, ns.
    pub raw_step_ns: u64,
    /// Tier-1 buckets ever opened.
    pub tier1_written: u64,
    /// Width of a tier-1 bucket, ns.
    pub tier1_width_ns: u64,
    /// Tier-2 buckets ever opened.
    pub tier2_written: u64,
    /// Width of a tier-2 bucket, ns.
    pub tier2_width_ns: u64,
    /// Integral: sum of utilisation, percent.
    pub sum_util_pct: u64,
    /// Integral: samples with a utilisation.
    pub count_util: u64,
    /// Integral: sum of memory used, MiB.
    pub sum_mem_used_mib: u64,
    /// Integral: samples with memory used.
    pub count_mem_used: u64,
    /// Integral: sum of power draw, mW.
    pub sum_power_mw: u64,
    /// Integral: samples with a power draw.
    pub count_power: u64,
    /// Integral: sum of temperature, °C.
    pub sum_temp_c: u64,
    /// Integral: samples with a temperature.
    pub count_temp: u64,
    /// Integral: sum of SM clock, MHz.
    pub sum_sm_clock_mhz: u64,
    /// Integral: samples with an SM clock.
    pub count_sm_clock: u64,
    /// Integral: sum of GPM SM activity, hundredths of a percent.
    pub sum_sm_active_centipct: u64,
    /// Integral: samples with a GPM SM activity.
    pub count_sm_active: u64,
    /// Zero; room for later minor versions.
    pub reserved: [u64; 13],
}

impl Default for TrackHead {
    fn default() -> Self {
        zerocopy::FromZeros::new_zeroed()
    }
}

bit_set! {
    /// Validity bits of [`TierBucket::valid`], bit `i` for metric `i` (utilisation,
    /// memory used, power, temperature, SM clock, SM activity). A bucket with no bit set
    /// is a gap.
    pub mod tier_valid: u8, in TierBucket.valid {
        /// `util_pct_min`, `util_centipct_mean`, `util_pct_max`.
        UTILIZATION = 0 [util_pct_min, util_centipct_mean, util_pct_max],
        /// `mem_used_mib_min`, `mem_used_mib_mean`, `mem_used_mib_max`.
        MEMORY = 1 [mem_used_mib_min, mem_used_mib_mean, mem_used_mib_max],
        /// `power_mw_min`, `power_mw_mean`, `power_mw_max`.
        POWER_DRAW = 2 [power_mw_min, power_mw_mean, power_mw_max],
        /// `temp_c_min`, `temp_centi_c_mean`, `temp_c_max`.
        TEMPERATURE = 3 [temp_c_min, temp_centi_c_mean, temp_c_max],
        /// `sm_clock_mhz_min`, `sm_clock_mhz_mean`, `sm_clock_mhz_max`.
        SM_CLOCK = 4 [sm_clock_mhz_min, sm_clock_mhz_mean, sm_clock_mhz_max],
        /// `sm_active_centipct_min`, `sm_active_centipct_mean`, `sm_active_centipct_max`.
        SM_ACTIVITY = 5 [sm_active_centipct_min, sm_active_centipct_mean, sm_active_centipct_max],
    }
}

/// One raw sample or one bucket of samples (ABI 1.7): 56 bytes.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct TierBucket {
    /// Wall-clock (Unix) start of the bucket, ns: the sample's time for a raw sample, a
    /// multiple of the width for a bucket. 0: never written.
    pub start_unix_ns: u64,
    /// Memory used, smallest, MiB.
    pub mem_used_mib_min: u32,
    /// Memory used, mean, MiB (rounded).
    pub mem_used_mib_mean: u32,
    /// Memory used, largest, MiB.
    pub mem_used_mib_max: u32,
    /// Power draw, smallest, mW.
    pub power_mw_min: u32,
    /// Power draw, mean, mW (rounded).
    pub power_mw_mean: u32,
    /// Power draw, largest, mW.
    pub power_mw_max: u32,
    /// Utilisation, mean, hundredths of a percent (rounded).
    pub util_centipct_mean: u16,
    /// GPM SM activity, smallest, hundredths of a percent.
    pub sm_active_centipct_min: u16,
    /// GPM SM activity, mean, hundredths of a percent (rounded).
    pub sm_active_centipct_mean: u16,
    /// GPM SM activity, largest, hundredths of a percent.
    pub sm_active_centipct_max: u16,
    /// SM clock, smallest, MHz.
    pub sm_clock_mhz_min: u16,
    /// SM clock, mean, MHz (rounded).
    pub sm_clock_mhz_mean: u16,
    /// SM clock, largest, MHz.
    pub sm_clock_mhz_max: u16,
    /// Temperature, mean, hundredths of a °C (rounded).
    pub temp_centi_c_mean: u16,
    /// Temperature, lowest, °C.
    pub temp_c_min: u8,
    /// Temperature, highest, °C.
    pub temp_c_max: u8,
    /// Utilisation, smallest, percent.
    pub util_pct_min: u8,
    /// Utilisation, largest, percent.
    pub util_pct_max: u8,
    /// Samples in the bucket that had any value (0: a gap).
    pub samples: u8,
    /// Bits from [`tier_valid`].
    pub valid: u8,
    /// Zero.
    pub reserved: u16,
}
