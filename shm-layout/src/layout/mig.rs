//! The MIG instance table (ABI 1.4): one record per MIG device (a compute instance of a
//! GPU instance) of every MIG-enabled GPU, so a reader can show a MIG server's real
//! units of allocation: their profile, memory and activity, and the processes in each.
//!
//! The table is rewritten as a whole under one seqlock (its head's), so a reader sees
//! either the layout before a MIG reconfiguration or the one after, never a mix.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Head of the MIG table (ABI 1.4); its seqlock covers the head and every slot.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct MigTableHead {
    /// Seqlock sequence: odd while being written.
    pub seq: u64,
    /// Slots in use (`0..count`).
    pub count: u32,
    /// Instances that did not fit and were left out.
    pub overflow: u32,
    /// Zero; room for later minor versions.
    pub reserved: [u64; 14],
}

bit_set! {
    /// Validity bits of [`MigRecord::valid`].
    pub mod mig_valid: u64, in MigRecord.valid {
        /// `uuid`.
        UUID = 0 [uuid],
        /// `profile`.
        PROFILE = 1 [profile],
        /// `mem_total_bytes`, `mem_used_bytes`, `mem_free_bytes`.
        MEMORY = 2 [mem_total_bytes, mem_used_bytes, mem_free_bytes],
        /// `sm_count`.
        SM_COUNT = 3 [sm_count],
        /// `gpu_instance_slice_count` and `compute_instance_slice_count`.
        SLICES = 4 [gpu_instance_slice_count, compute_instance_slice_count],
        /// `gpm_interval_ns`: GPM metrics were computed for this instance. Each GPM value
        /// has its own bit as well.
        GPM = 5 [gpm_interval_ns],
        /// `gpm_sm_activity_centipct`.
        GPM_SM_ACTIVITY = 6 [gpm_sm_activity_centipct],
        /// `gpm_sm_occupancy_centipct`.
        GPM_SM_OCCUPANCY = 7 [gpm_sm_occupancy_centipct],
        /// `gpm_tensor_activity_centipct`.
        GPM_TENSOR_ACTIVITY = 8 [gpm_tensor_activity_centipct],
        /// `gpm_dram_bw_util_centipct`.
        GPM_DRAM_BW = 9 [gpm_dram_bw_util_centipct],
        /// `gpu_instance_profile_id`, `placement_start` and `placement_size` (ABI 1.12).
        PLACEMENT = 10 [gpu_instance_profile_id, placement_start, placement_size],
    }
}

/// One MIG device: a compute instance of a GPU instance of the GPU `gpu_index`
/// (ABI 1.4). Its processes are the process records of that GPU with the same
/// `gpu_instance_id` and `compute_instance_id`.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct MigRecord {
    /// NVML index of the parent GPU.
    pub gpu_index: u32,
    /// The MIG device's index on its parent (`nvmlDeviceGetMigDeviceHandleByIndex`).
    pub mig_index: u32,
    /// MIG GPU instance id.
    pub gpu_instance_id: u32,
    /// MIG compute instance id.
    pub compute_instance_id: u32,
    /// Bits from [`mig_valid`].
    pub valid: u64,
    /// The MIG device's UUID, e.g. "MIG-4f9c...".
    pub uuid: [u8; 96],
    /// Profile, as nvidia-smi names it: "3g.40gb" (a compute instance smaller than its
    /// GPU instance: "1c.3g.40gb").
    pub profile: [u8; 32],
    /// Memory of the instance, bytes.
    pub mem_total_bytes: u64,
    /// Memory in use in the instance, bytes.
    pub mem_used_bytes: u64,
    /// Free memory of the instance, bytes.
    pub mem_free_bytes: u64,
    /// Streaming multiprocessors of the instance.
    pub sm_count: u32,
    /// GPU slices of the GPU instance.
    pub gpu_instance_slice_count: u32,
    /// Compute slices of the compute instance.
    pub compute_instance_slice_count: u32,
    /// The GPU instance's profile id (`nvmlGpuInstanceInfo_t.profileId`) (ABI 1.12).
    pub gpu_instance_profile_id: u32,
    /// GPM: SM activity of the GPU instance over `gpm_interval_ns`, hundredths of a
    /// percent.
    pub gpm_sm_activity_centipct: u32,
    /// GPM: SM occupancy of the GPU instance, hundredths of a percent.
    pub gpm_sm_occupancy_centipct: u32,
    /// GPM: tensor-core activity of the GPU instance, hundredths of a percent.
    pub gpm_tensor_activity_centipct: u32,
    /// GPM: DRAM bandwidth use of the GPU instance, hundredths of a percent.
    pub gpm_dram_bw_util_centipct: u32,
    /// Length of the window the GPM values describe, ns.
    pub gpm_interval_ns: u64,
    /// `CLOCK_MONOTONIC` time the instance's values were sampled, ns.
    pub sample_mono_ns: u64,
    /// The first memory slice of the GPU instance (`nvmlGpuInstancePlacement_t.start`),
    /// which with the parent and the profile names a MIG device in NVIDIA's DRA driver
    /// (ABI 1.12).
    pub placement_start: u32,
    /// Memory slices of the GPU instance (`nvmlGpuInstancePlacement_t.size`) (ABI 1.12).
    pub placement_size: u32,
    /// Zero; room for later minor versions.
    pub reserved: [u64; 3],
}
