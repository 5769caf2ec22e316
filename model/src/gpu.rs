//! One GPU, decoded from its record: identity, health and every value as an `Option`
//! in a typed unit.
//!
//! The rule for what a GPU shows lives here and nowhere else: values are current only
//! for a GPU sampled normally this tick ([`GpuState::Ok`]). A GPU that is asleep
//! (runtime-suspended, or idle and released by the daemon), whose driver is not
//! responding, that is lost or that failed keeps only its identity (name, UUID, PCI bus
//! id, maximum clocks: what the daemon reads once per NVML session and carries over),
//! whatever else its record holds; every other value is `None`. The one exception is the
//! Xid counts ([`crate::xid`]), which gpupeekd keeps for its life and publishes in every
//! state.

use gpupeek_shm::layout::{clock_event_reason as reason, gpu_valid as v, GpuState};
use gpupeek_shm::GpuRecord;

use crate::details::{Details, Setting};
use crate::text::Text;
use crate::units::*;

/// Validity bits a GPU keeps in every state (the daemon's identity set).
const IDENTITY: u64 =
    v::NAME | v::UUID | v::PCI_BUS_ID | v::CLOCK_GRAPHICS_MAX | v::CLOCK_SM_MAX | v::CLOCK_MEM_MAX;

/// One GPU of a snapshot.
#[derive(Debug, Clone, Copy)]
pub struct Gpu<'a> {
    /// NVML index.
    pub index: u32,
    /// Health; an unknown raw state reads as [`GpuState::Error`].
    pub state: GpuState,
    /// Product name.
    pub name: Option<Text<'a>>,
    /// UUID.
    pub uuid: Option<Text<'a>>,
    /// PCI bus id.
    pub pci_bus_id: Option<Text<'a>>,
    /// Minor number: N of `/dev/nvidiaN` (identity: kept in every state).
    pub minor_number: Option<u32>,
    /// Maximum clocks (identity: kept in every state).
    pub clock_max: Clocks,
    /// GPU utilisation, percent.
    pub util_pct: Option<u32>,
    /// Memory controller utilisation, percent.
    pub util_mem_pct: Option<u32>,
    /// Encoder utilisation, percent.
    pub util_enc_pct: Option<u32>,
    /// Decoder utilisation, percent.
    pub util_dec_pct: Option<u32>,
    /// Device memory.
    pub memory: Option<Memory>,
    /// Memory reserved by the driver.
    pub mem_reserved: Option<Bytes>,
    /// Core temperature, degrees Celsius.
    pub temp_c: Option<i32>,
    /// Fan 0 speed, percent.
    pub fan_pct: Option<u32>,
    /// Power draw.
    pub power_draw: Option<MilliWatts>,
    /// Enforced power limit.
    pub power_limit: Option<MilliWatts>,
    /// Energy since the driver was loaded (kept monotonic by the daemon).
    pub energy: Option<MilliJoules>,
    /// Current clocks.
    pub clock: Clocks,
    /// Performance state.
    pub pstate: Option<PState>,
    /// Clock event (throttle) reasons in force.
    pub clock_event_reasons: Option<ClockEventReasons>,
    /// PCIe transmit throughput.
    pub pcie_tx: Option<KiloBytesPerSec>,
    /// PCIe receive throughput.
    pub pcie_rx: Option<KiloBytesPerSec>,
    /// Current PCIe link generation.
    pub pcie_link_gen: Option<u32>,
    /// Current PCIe link width, lanes.
    pub pcie_link_width: Option<u32>,
    /// Corrected volatile ECC errors.
    pub ecc_corrected: Option<u64>,
    /// Uncorrected volatile ECC errors.
    pub ecc_uncorrected: Option<u64>,
    /// Processes NVML listed (`None`: the process list was not readable); the
    /// snapshot's process table holds those that fitted.
    pub process_count: Option<u32>,
    /// GPM metrics, when the GPU has GPM and the daemon computed them.
    pub gpm: Option<Gpm>,
    /// How long utilisation has been 0 % at the time of the sample, ns (`None` while
    /// busy or unknown).
    pub idle_ns: Option<u64>,
    /// MIG mode, now and after the next GPU reset (`None` for a GPU that cannot do MIG;
    /// ABI 1.4).
    pub mig_mode: Option<Setting>,
    /// The values nvidia-smi's `--query-gpu` names beyond these (ABI 1.4).
    pub details: Details<'a>,
    /// Xid errors since gpupeekd started, in every state (`None`: NVML delivers no
    /// events for this GPU; ABI 1.9).
    pub xid: Option<crate::xid::Xids>,
}

/// Graphics, SM and memory clocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clocks {
    /// Graphics clock.
    pub graphics: Option<MegaHertz>,
    /// SM clock.
    pub sm: Option<MegaHertz>,
    /// Memory clock.
    pub mem: Option<MegaHertz>,
}

/// Device memory: all three are known together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Visible to the driver.
    pub total: Bytes,
    /// In use.
    pub used: Bytes,
    /// Free.
    pub free: Bytes,
}

impl Memory {
    /// Used as a percentage of total (0 of a total of 0).
    pub fn used_pct(&self) -> f64 {
        100.0 * self.used.f64() / self.total.0.max(1) as f64
    }
}

/// GPM metrics of one GPU over the daemon's last GPM window; each value is known
/// separately, since a GPU may support only some.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gpm {
    /// SM activity.
    pub sm_activity: Option<CentiPercent>,
    /// SM occupancy.
    pub sm_occupancy: Option<CentiPercent>,
    /// Tensor-core activity.
    pub tensor_activity: Option<CentiPercent>,
    /// DRAM bandwidth utilisation.
    pub dram_bw_util: Option<CentiPercent>,
    /// PCIe traffic.
    pub pcie: Option<TxRx>,
    /// NVLink traffic, all links.
    pub nvlink: Option<TxRx>,
    /// Length of the window, ns.
    pub interval_ns: u64,
}

/// NVML's clock event (throttle) reason bits, with nvidia-smi's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockEventReasons(pub u64);

impl ClockEventReasons {
    /// Thermal slowdown, software or hardware.
    pub const THERMAL: ClockEventReasons =
        ClockEventReasons(reason::SW_THERMAL_SLOWDOWN | reason::HW_THERMAL_SLOWDOWN);
    /// Power capping: the software cap or the hardware power brake.
    pub const POWER: ClockEventReasons =
        ClockEventReasons(reason::SW_POWER_CAP | reason::HW_POWER_BRAKE_SLOWDOWN);
    /// Hardware slowdown.
    pub const HW_SLOWDOWN: ClockEventReasons = ClockEventReasons(reason::HW_SLOWDOWN);

    /// True when any reason of `other` is in force.
    pub fn any(self, other: ClockEventReasons) -> bool {
        self.0 & other.0 != 0
    }
    /// Every reason nvidia-smi names, in bit order, with whether it is in force.
    pub fn each(self) -> impl Iterator<Item = (&'static str, bool)> {
        reason::NAMES
            .iter()
            .map(move |&(bit, name)| (name, self.0 & bit != 0))
    }
    /// nvidia-smi's names of the reasons in force.
    pub fn names(self) -> Vec<&'static str> {
        self.each().filter(|&(_, on)| on).map(|(n, _)| n).collect()
    }
}

impl<'a> Gpu<'a> {
    /// Decodes `g`.
    pub fn new(g: &'a GpuRecord) -> Gpu<'a> {
        let state = GpuState::from_raw(g.state).unwrap_or(GpuState::Error);
        let valid = if state == GpuState::Ok {
            g.valid
        } else {
            g.valid & IDENTITY
        };
        let has = |bit: u64| valid & bit != 0;
        let opt = |bit: u64, x: u32| has(bit).then_some(x);
        let text = |bit: u64, field: &'a [u8]| has(bit).then(|| Text::new(field));
        let mhz = |bit: u64, x: u32| has(bit).then_some(MegaHertz(x.into()));
        let centi = |bit: u64, x: u32| has(bit).then_some(CentiPercent(x));
        Gpu {
            index: g.index,
            state,
            name: text(v::NAME, &g.name),
            uuid: text(v::UUID, &g.uuid),
            pci_bus_id: text(v::PCI_BUS_ID, &g.pci_bus_id),
            minor_number: (g.valid4 & gpupeek_shm::layout::gpu_valid4::MINOR_NUMBER != 0)
                .then_some(g.minor_number),
            clock_max: Clocks {
                graphics: mhz(v::CLOCK_GRAPHICS_MAX, g.clock_graphics_max_mhz),
                sm: mhz(v::CLOCK_SM_MAX, g.clock_sm_max_mhz),
                mem: mhz(v::CLOCK_MEM_MAX, g.clock_mem_max_mhz),
            },
            util_pct: opt(v::UTILIZATION, g.util_gpu_pct),
            util_mem_pct: opt(v::UTILIZATION, g.util_mem_pct),
            util_enc_pct: opt(v::UTIL_ENC, g.util_enc_pct),
            util_dec_pct: opt(v::UTIL_DEC, g.util_dec_pct),
            memory: has(v::MEMORY).then_some(Memory {
                total: Bytes(g.mem_total_bytes),
                used: Bytes(g.mem_used_bytes),
                free: Bytes(g.mem_free_bytes),
            }),
            mem_reserved: has(v::MEM_RESERVED).then_some(Bytes(g.mem_reserved_bytes)),
            temp_c: has(v::TEMPERATURE).then_some(g.temp_gpu_c),
            fan_pct: opt(v::FAN_SPEED, g.fan_speed_pct),
            power_draw: has(v::POWER_DRAW).then_some(MilliWatts(g.power_draw_mw.into())),
            power_limit: has(v::POWER_LIMIT).then_some(MilliWatts(g.power_limit_mw.into())),
            energy: has(v::ENERGY).then_some(MilliJoules(g.energy_mj)),
            clock: Clocks {
                graphics: mhz(v::CLOCK_GRAPHICS, g.clock_graphics_mhz),
                sm: mhz(v::CLOCK_SM, g.clock_sm_mhz),
                mem: mhz(v::CLOCK_MEM, g.clock_mem_mhz),
            },
            pstate: has(v::PSTATE).then_some(PState(g.pstate)),
            clock_event_reasons: has(v::CLOCK_EVENT_REASONS)
                .then_some(ClockEventReasons(g.clock_event_reasons)),
            pcie_tx: has(v::PCIE_TX).then_some(KiloBytesPerSec(g.pcie_tx_kbytes_per_s.into())),
            pcie_rx: has(v::PCIE_RX).then_some(KiloBytesPerSec(g.pcie_rx_kbytes_per_s.into())),
            pcie_link_gen: opt(v::PCIE_LINK_GEN, g.pcie_link_gen),
            pcie_link_width: opt(v::PCIE_LINK_WIDTH, g.pcie_link_width),
            ecc_corrected: has(v::ECC_CORRECTED).then_some(g.ecc_corrected_volatile_count),
            ecc_uncorrected: has(v::ECC_UNCORRECTED).then_some(g.ecc_uncorrected_volatile_count),
            process_count: opt(v::PROCESSES, g.process_count),
            gpm: has(v::GPM).then_some(Gpm {
                sm_activity: centi(v::GPM_SM_ACTIVITY, g.gpm_sm_activity_centipct),
                sm_occupancy: centi(v::GPM_SM_OCCUPANCY, g.gpm_sm_occupancy_centipct),
                tensor_activity: centi(v::GPM_TENSOR_ACTIVITY, g.gpm_tensor_activity_centipct),
                dram_bw_util: centi(v::GPM_DRAM_BW, g.gpm_dram_bw_util_centipct),
                pcie: has(v::GPM_PCIE).then_some(TxRx {
                    tx: g.gpm_pcie_tx_bytes_per_s,
                    rx: g.gpm_pcie_rx_bytes_per_s,
                }),
                nvlink: has(v::GPM_NVLINK).then_some(TxRx {
                    tx: g.gpm_nvlink_tx_bytes_per_s,
                    rx: g.gpm_nvlink_rx_bytes_per_s,
                }),
                interval_ns: g.gpm_interval_ns,
            }),
            idle_ns: has(v::IDLE_SINCE)
                .then(|| g.sample_mono_ns.saturating_sub(g.idle_since_mono_ns)),
            mig_mode: has(v::MIG_MODE).then_some(Setting {
                current: g.mig_mode_current != 0,
                pending: g.mig_mode_pending != 0,
            }),
            details: Details::new(g, state == GpuState::Ok),
            xid: crate::xid::Xids::new(g),
        }
    }

    /// True when the values are current: the GPU was sampled normally.
    pub fn is_current(&self) -> bool {
        self.state == GpuState::Ok
    }

    /// True when the daemon lets the GPU sleep (suspended, or idle and released) and
    /// does not query it.
    pub fn asleep(&self) -> bool {
        matches!(self.state, GpuState::Suspended | GpuState::Idle)
    }

    /// True when the driver has not answered the daemon for this GPU within its NVML
    /// timeout.
    pub fn not_responding(&self) -> bool {
        self.state == GpuState::NotResponding
    }

    /// Power draw as a percentage of the limit, when both are known and the limit is
    /// not 0.
    pub fn power_pct(&self) -> Option<f64> {
        let limit = self.power_limit.filter(|l| l.0 > 0)?;
        Some(100.0 * self.power_draw?.0 as f64 / limit.0 as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: GpuState) -> GpuRecord {
        let mut g = GpuRecord {
            index: 3,
            state: state as u32,
            valid: v::NAME | v::CLOCK_SM_MAX | v::UTILIZATION | v::MEMORY | v::PROCESSES,
            clock_sm_max_mhz: 1980,
            util_gpu_pct: 40,
            mem_used_bytes: 3 << 30,
            mem_total_bytes: 80 << 30,
            process_count: 2,
            ..GpuRecord::default()
        };
        gpupeek_shm::text::encode(&mut g.name, "H100");
        g
    }

    #[test]
    fn a_gpu_sampled_normally_shows_what_its_record_says_is_valid() {
        let r = record(GpuState::Ok);
        let g = Gpu::new(&r);
        assert_eq!(g.util_pct, Some(40));
        assert_eq!(g.memory.map(|m| m.used.mib()), Some(3072));
        assert_eq!(g.process_count, Some(2));
        assert_eq!(g.temp_c, None, "its bit is clear");
    }

    #[test]
    fn a_gpu_not_sampled_now_keeps_only_its_identity() {
        for state in [
            GpuState::Suspended,
            GpuState::Idle,
            GpuState::NotResponding,
            GpuState::Lost,
            GpuState::Error,
        ] {
            let r = record(state);
            let g = Gpu::new(&r);
            assert_eq!(g.name.map(Text::decode).as_deref(), Some("H100"));
            assert_eq!(g.clock_max.sm, Some(MegaHertz(1980)));
            assert_eq!((g.util_pct, g.memory, g.process_count), (None, None, None));
        }
    }

    #[test]
    fn an_unknown_state_reads_as_error() {
        let mut r = record(GpuState::Ok);
        r.state = 99;
        assert_eq!(Gpu::new(&r).state, GpuState::Error);
    }

    #[test]
    fn reasons_are_named_as_nvidia_smi_names_them() {
        let r = ClockEventReasons(reason::SW_POWER_CAP | reason::GPU_IDLE);
        assert_eq!(r.names(), ["gpu_idle", "sw_power_cap"]);
        assert!(r.any(ClockEventReasons::POWER));
        assert!(!r.any(ClockEventReasons::THERMAL));
    }
}
