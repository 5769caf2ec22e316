//! MIG devices (ABI 1.4): one per compute instance of a GPU instance of a MIG-enabled
//! GPU, decoded from the segment's MIG table. A MIG device's processes are its parent's
//! with the same GPU and compute instance ids ([`crate::Model::processes_in`]).

use gpupeek_shm::layout::mig_valid as mv;
use gpupeek_shm::MigRecord;

use crate::{Bytes, CentiPercent, Gpm, Gpu, GpuState, Memory, Text};

/// One MIG device.
#[derive(Debug, Clone, Copy)]
pub struct Mig<'a> {
    /// NVML index of the parent GPU.
    pub gpu_index: u32,
    /// The MIG device's index on its parent (`nvmlDeviceGetMigDeviceHandleByIndex`).
    pub mig_index: u32,
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
    /// Where its GPU instance sits on the parent.
    pub placement: Option<Placement>,
}

/// A GPU instance's profile id and memory slices (`nvmlGpuInstanceInfo_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The GPU-instance profile's id.
    pub profile_id: u32,
    /// The first memory slice.
    pub start: u32,
    /// Memory slices.
    pub size: u32,
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
            mig_index: m.mig_index,
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
            placement: has(mv::PLACEMENT).then_some(Placement {
                profile_id: m.gpu_instance_profile_id,
                start: m.placement_start,
                size: m.placement_size,
            }),
        }
    }
}

impl<'a> Mig<'a> {
    /// The profile of its GPU instance, as dcgm-exporter's `GPU_I_PROFILE` names it:
    /// `3g.40gb` also for a compute instance published as `1c.3g.40gb`.
    pub fn gpu_instance_profile(&self) -> Option<String> {
        let profile = self.profile?.decode();
        Some(match profile.split_once('.') {
            Some((head, rest)) if head.ends_with('c') && rest.contains('.') => rest.to_owned(),
            _ => profile,
        })
    }

    /// The instance seen as a GPU, for outputs that show one GPU's values (templates,
    /// status bars): the device-wide values of `parent` that every instance shares
    /// (temperature, power, clocks, clock event reasons, fan, PCIe link, ECC), as
    /// nvidia-smi and dcgm-exporter report them for a MIG device, with the instance's
    /// own memory, GPM, UUID and `processes`; no utilisation (NVML has none per
    /// instance), no reserved memory, PCIe or NVLink traffic (not split per instance)
    /// and no idle time.
    pub fn as_gpu(&self, parent: &Gpu<'a>, processes: u32) -> Gpu<'a> {
        let current = parent.is_current();
        Gpu {
            uuid: self.uuid,
            util_pct: None,
            util_mem_pct: None,
            util_enc_pct: None,
            util_dec_pct: None,
            memory: self.memory,
            mem_reserved: None,
            pcie_tx: None,
            pcie_rx: None,
            process_count: current.then_some(processes),
            gpm: self.gpm.map(|m| Gpm {
                sm_activity: m.sm_activity,
                sm_occupancy: m.sm_occupancy,
                tensor_activity: m.tensor_activity,
                dram_bw_util: m.dram_bw_util,
                pcie: None,
                nvlink: None,
                interval_ns: m.interval_ns,
            }),
            idle_ns: None,
            mig_mode: None,
            ..*parent
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

    #[test]
    fn the_gpu_instance_profile_drops_a_compute_instance_prefix() {
        let mut m = record();
        let mig = Mig::new(&m, GpuState::Ok);
        assert_eq!(mig.gpu_instance_profile().as_deref(), Some("3g.40gb"));
        m.profile = [0; 32];
        m.profile[..10].copy_from_slice(b"1c.3g.40gb");
        let mig = Mig::new(&m, GpuState::Ok);
        assert_eq!(mig.gpu_instance_profile().as_deref(), Some("3g.40gb"));
    }

    #[test]
    fn an_instance_as_a_gpu_has_its_own_memory_and_no_utilisation() {
        use gpupeek_shm::layout::gpu_valid as v;
        let parent = gpupeek_shm::GpuRecord {
            state: GpuState::Ok as u32,
            valid: v::UTILIZATION | v::MEMORY | v::TEMPERATURE,
            util_gpu_pct: 50,
            mem_total_bytes: 80 << 30,
            mem_used_bytes: 20 << 30,
            temp_gpu_c: 45,
            ..Default::default()
        };
        let parent = Gpu::new(&parent);
        let m = record();
        let g = Mig::new(&m, GpuState::Ok).as_gpu(&parent, 2);
        assert_eq!(g.util_pct, None);
        assert_eq!(g.memory.map(|m| m.total.0), Some(40 << 30));
        assert_eq!(g.temp_c, Some(45));
        assert_eq!(g.process_count, Some(2));
        assert_eq!(g.gpm.and_then(|m| m.sm_activity), Some(CentiPercent(4_250)));
    }
}
