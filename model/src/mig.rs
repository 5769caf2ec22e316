//! MIG devices (ABI 1.4): one per compute instance of a GPU instance of a MIG-enabled
//! GPU, decoded from the segment's MIG table. A MIG device's processes are its parent's
//! with the same GPU and compute instance ids ([`crate::Model::processes_in`]).

use gpupeek_shm::layout::mig_valid as mv;
use gpupeek_shm::MigRecord;

use crate::{Bytes, CentiPercent, GpuState, Memory, Text};

/// One MIG device.
#[derive(Debug, Clone, Copy)]
pub struct Mig<'a> {
    /// NVML index of the parent GPU.
    pub gpu_index: u32,
    /// MIG GPU instance id.
    pub gpu_instance_id: u32,
    /// MIG compute instance id.
    pub compute_instance_id: u32,
    /// The MIG device's UUID (`MIG-...`).
    pub uuid: Option<Text<'a>>,
    /// Profile as nvidia-smi names it: `3g.40gb`, or `1c.3g.40gb` for a compute instance
    /// smaller than its GPU instance.
    pub profile: Option<Text<'a>>,
    /// The instance's memory.
    pub memory: Option<Memory>,
    /// Streaming multiprocessors.
    pub sm_count: Option<u32>,
    /// GPU slices of the GPU instance and compute slices of the compute instance.
    pub slices: Option<(u32, u32)>,
    /// GPM metrics of the GPU instance, when the GPU has GPM and the daemon computed them.
    pub gpm: Option<MigGpm>,
}

/// GPM metrics of one GPU instance over the daemon's last GPM window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MigGpm {
    /// SM activity.
    pub sm_activity: Option<CentiPercent>,
    /// SM occupancy.
    pub sm_occupancy: Option<CentiPercent>,
    /// Tensor-core activity.
    pub tensor_activity: Option<CentiPercent>,
    /// DRAM bandwidth use.
    pub dram_bw_util: Option<CentiPercent>,
    /// Length of the window, ns.
    pub interval_ns: u64,
}

impl<'a> Mig<'a> {
    /// Decodes `m`, whose parent GPU is in `parent` state: the instance of a GPU that is
    /// not sampled now (asleep, lost, not responding) keeps only its identity, as its
    /// parent does ([`crate::Gpu::new`]).
    pub fn new(m: &'a MigRecord, parent: GpuState) -> Mig<'a> {
        let current = parent == GpuState::Ok;
        let has = |bit: u64| m.valid & bit != 0;
        let live = |bit: u64| current && has(bit);
        let pct = |bit, centi| live(bit).then_some(CentiPercent(centi));
        Mig {
            gpu_index: m.gpu_index,
            gpu_instance_id: m.gpu_instance_id,
            compute_instance_id: m.compute_instance_id,
            uuid: has(mv::UUID).then(|| Text::new(&m.uuid)),
            profile: has(mv::PROFILE).then(|| Text::new(&m.profile)),
            memory: live(mv::MEMORY).then_some(Memory {
                total: Bytes(m.mem_total_bytes),
                used: Bytes(m.mem_used_bytes),
                free: Bytes(m.mem_free_bytes),
            }),
            sm_count: has(mv::SM_COUNT).then_some(m.sm_count),
            slices: has(mv::SLICES)
                .then_some((m.gpu_instance_slice_count, m.compute_instance_slice_count)),
            gpm: live(mv::GPM).then_some(MigGpm {
                sm_activity: pct(mv::GPM_SM_ACTIVITY, m.gpm_sm_activity_centipct),
                sm_occupancy: pct(mv::GPM_SM_OCCUPANCY, m.gpm_sm_occupancy_centipct),
                tensor_activity: pct(mv::GPM_TENSOR_ACTIVITY, m.gpm_tensor_activity_centipct),
                dram_bw_util: pct(mv::GPM_DRAM_BW, m.gpm_dram_bw_util_centipct),
                interval_ns: m.gpm_interval_ns,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> MigRecord {
        let mut m = MigRecord {
            gpu_index: 0,
            gpu_instance_id: 1,
            compute_instance_id: 0,
            valid: mv::PROFILE | mv::MEMORY | mv::SM_COUNT | mv::GPM | mv::GPM_SM_ACTIVITY,
            mem_total_bytes: 40 << 30,
            mem_used_bytes: 10 << 30,
            mem_free_bytes: 30 << 30,
            sm_count: 60,
            gpm_sm_activity_centipct: 4_250,
            ..MigRecord::new_zeroed()
        };
        m.profile[..7].copy_from_slice(b"3g.40gb");
        m
    }

    use zerocopy::FromZeros;

    #[test]
    fn each_value_is_there_exactly_when_its_bit_is() {
        let m = record();
        let mig = Mig::new(&m, GpuState::Ok);
        assert_eq!(mig.profile.map(Text::decode).as_deref(), Some("3g.40gb"));
        assert_eq!(mig.memory.map(|m| m.used.mib()), Some(10 * 1024));
        assert_eq!(mig.sm_count, Some(60));
        assert_eq!(mig.uuid.map(Text::decode), None);
        assert_eq!(mig.slices, None);
        let gpm = mig.gpm.unwrap();
        assert_eq!(gpm.sm_activity.map(CentiPercent::pct), Some(42.5));
        assert_eq!(gpm.tensor_activity, None);
    }

    #[test]
    fn an_instance_of_a_gpu_not_sampled_now_keeps_only_its_identity() {
        let m = record();
        for state in [GpuState::Suspended, GpuState::Lost, GpuState::NotResponding] {
            let mig = Mig::new(&m, state);
            assert!(mig.profile.is_some() && mig.sm_count.is_some(), "{state:?}");
            assert!(mig.memory.is_none() && mig.gpm.is_none(), "{state:?}");
        }
    }
}
