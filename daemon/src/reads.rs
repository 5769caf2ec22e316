//! What each tier reads of a GPU, and how an NVML answer lands in its record.
//!
//! [`Fill`] applies one call's result: a value sets its validity bit; "not supported"
//! (or a function the driver does not have) leaves the bit clear, never a zero;
//! `GPU_IS_LOST` stops further calls on the GPU this tick; any other failure is kept
//! as the record's `nvml_error_code` and the other fields carry on. The tiers
//! ([`crate::tiers`]) decide which of the readers here run on a tick: [`sample_fast`]
//! every tick, [`sample_slow`] on slow ticks, [`sample_static`] on its own cadence,
//! [`sample_pcie_throughput`] where no cheaper source of PCIe throughput exists, and
//! the identity once per session.

use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, PerformanceState,
};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings;

use gpupeek_shm::layout::{gpu_valid as v, gpu_valid2 as v2};
use gpupeek_shm::{text, GpuRecord};

use crate::details::Details;
use crate::fallback;
use crate::fields::Fields;
use crate::tiers;

/// An NVML failure as it is published: return code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// NVML return code (12 when the library itself could not be loaded).
    pub code: i32,
    /// What went wrong, for people.
    pub message: String,
}

impl From<NvmlError> for Failure {
    fn from(e: NvmlError) -> Self {
        let message = e.to_string();
        Failure {
            code: code(e),
            message,
        }
    }
}

/// The NVML return code of an error (library and symbol loading map to NVML's own
/// LIBRARY_NOT_FOUND and FUNCTION_NOT_FOUND).
pub fn code(e: NvmlError) -> i32 {
    match e {
        NvmlError::LibloadingError(_) => {
            bindings::nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND as i32
        }
        NvmlError::FailedToLoadSymbol(_) => {
            bindings::nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND as i32
        }
        other => bindings::nvmlReturn_t::from(other) as i32,
    }
}

/// A GPU's identity, read once per session and kept for when it fails.
#[derive(Debug, Default, Clone)]
pub struct Identity {
    name: Option<String>,
    uuid: Option<String>,
    pci_bus_id: Option<String>,
    /// N of `/dev/nvidiaN`, which GKE's device plugin and NVIDIA's DRA driver name GPUs by.
    minor_number: Option<u32>,
    max_clocks_mhz: [Option<u32>; 3],
    details: Details,
}

/// Applies NVML results to a record, tracking validity bits and errors.
pub struct Fill<'a> {
    /// The record being filled.
    pub rec: &'a mut GpuRecord,
    /// The GPU answered `GPU_IS_LOST`: no further call this tick.
    pub lost: bool,
}

impl Fill<'_> {
    /// Calls `get` unless the GPU is already lost; on success stores the value with
    /// `set` and sets `bit`. Returns whether a value was stored.
    pub fn field<T>(
        &mut self,
        bit: u64,
        get: impl FnOnce() -> Result<T, NvmlError>,
        set: impl FnOnce(&mut GpuRecord, T),
    ) -> bool {
        match self.call(get) {
            Some(value) => {
                set(self.rec, value);
                self.rec.valid |= bit;
                true
            }
            None => false,
        }
    }

    /// The value `get` returns, unless the GPU is already lost or it fails: "not
    /// supported" is no value, "lost" marks the GPU lost, any other error is kept.
    pub fn call<T>(&mut self, get: impl FnOnce() -> Result<T, NvmlError>) -> Option<T> {
        if self.lost {
            return None;
        }
        match get() {
            Ok(value) => Some(value),
            Err(
                NvmlError::NotSupported
                | NvmlError::FunctionNotFound
                | NvmlError::FailedToLoadSymbol(_),
            ) => None,
            Err(NvmlError::GpuLost) => {
                self.lost = true;
                None
            }
            Err(e) => {
                if self.rec.nvml_error_code == 0 {
                    self.rec.nvml_error_code = code(e);
                }
                None
            }
        }
    }
}

pub fn read_identity(device: &Device, fill: &mut Fill) -> Identity {
    let name = fill.call(|| device.name());
    let uuid = fill.call(|| device.uuid());
    let pci = fill.call(|| device.pci_info());
    let minor_number = fill.call(|| device.minor_number());
    let max_clocks_mhz = [Clock::Graphics, Clock::SM, Clock::Memory]
        .map(|clock| fill.call(|| device.max_clock_info(clock)));
    let details = Details::read(device, fill, pci.as_ref());
    Identity {
        name,
        uuid,
        pci_bus_id: pci.map(|p| p.bus_id),
        minor_number,
        max_clocks_mhz,
        details,
    }
}

pub fn put_identity(rec: &mut GpuRecord, id: &Identity) {
    let strings = [
        (&id.name, &mut rec.name[..], v::NAME),
        (&id.uuid, &mut rec.uuid[..], v::UUID),
        (&id.pci_bus_id, &mut rec.pci_bus_id[..], v::PCI_BUS_ID),
    ];
    let mut valid = 0;
    for (value, field, bit) in strings {
        if let Some(value) = value {
            text::encode(field, value);
            valid |= bit;
        }
    }
    let clocks = [
        (&mut rec.clock_graphics_max_mhz, v::CLOCK_GRAPHICS_MAX),
        (&mut rec.clock_sm_max_mhz, v::CLOCK_SM_MAX),
        (&mut rec.clock_mem_max_mhz, v::CLOCK_MEM_MAX),
    ];
    for ((field, bit), value) in clocks.into_iter().zip(id.max_clocks_mhz) {
        if let Some(mhz) = value {
            *field = mhz;
            valid |= bit;
        }
    }
    rec.valid |= valid;
    if let Some(minor) = id.minor_number {
        rec.minor_number = minor;
        rec.valid4 |= crate::details4::IDENTITY4;
    }
    id.details.put(rec);
}

/// The every-tick values: at most six calls (memory, utilisation, temperature, the
/// field-value batch, two clocks), plus a getter for each field the GPU's batch lacks.
/// With `mig` (MIG mode on) utilisation is not asked for: NVML reports none under MIG.
pub fn sample_fast(
    nvml: &Nvml,
    d: &Device,
    f: &mut Fill,
    fields: &mut Fields,
    (legacy, mig): (&mut bool, bool),
) {
    f.field(
        v::MEMORY,
        || fallback::memory(nvml, d),
        |r, m| {
            r.mem_total_bytes = m.total;
            r.mem_used_bytes = m.used;
            r.mem_free_bytes = m.free;
            if let Some(reserved) = m.reserved {
                r.mem_reserved_bytes = reserved;
                r.valid |= v::MEM_RESERVED;
            }
        },
    );
    if !mig {
        f.field(
            v::UTILIZATION,
            || d.utilization_rates(),
            |r, u| {
                r.util_gpu_pct = u.gpu;
                r.util_mem_pct = u.memory;
            },
        );
    }
    f.field(
        v::TEMPERATURE,
        || fallback::temperature(nvml, d, legacy),
        |r, t| r.temp_gpu_c = t,
    );
    if let Some(answers) = f.call(|| fields.read(nvml, d)) {
        let power =
            |r: &mut GpuRecord, p: u64| r.power_draw_mw = u32::try_from(p).unwrap_or(u32::MAX);
        if let Some((tx, rx)) = fields.pcie_rate(&answers) {
            f.rec.pcie_tx_kbytes_per_s = tx;
            f.rec.pcie_rx_kbytes_per_s = rx;
            f.rec.valid |= tiers::PCIE;
        }
        let [power_answer, energy_answer, _, _, instant, memory_temp] = answers;
        if let Some(p) = instant {
            f.field2(
                v2::POWER_DRAW_INSTANT,
                || p,
                |r, p| {
                    r.power_draw_instant_mw = u32::try_from(p).unwrap_or(u32::MAX);
                },
            );
        }
        if let Some(t) = memory_temp {
            f.field2(
                v2::TEMP_MEMORY,
                || t,
                |r, t| {
                    r.temp_memory_c = i32::try_from(t).unwrap_or(i32::MAX);
                },
            );
        }
        match power_answer {
            Some(p) => f.field(v::POWER_DRAW, || p, power),
            None => f.field(v::POWER_DRAW, || d.power_usage().map(u64::from), power),
        };
        match energy_answer {
            Some(e) => f.field(v::ENERGY, || e, |r, e| r.energy_mj = e),
            None => f.field(
                v::ENERGY,
                || d.total_energy_consumption(),
                |r, e| r.energy_mj = e,
            ),
        };
    }
    f.field(
        v::CLOCK_GRAPHICS,
        || d.clock_info(Clock::Graphics),
        |r, c| r.clock_graphics_mhz = c,
    );
    f.field(
        v::CLOCK_SM,
        || d.clock_info(Clock::SM),
        |r, c| r.clock_sm_mhz = c,
    );
}

/// The slow tier's per-GPU values (besides processes): see [`tiers::SLOW`].
pub fn sample_slow(nvml: &Nvml, d: &Device, f: &mut Fill) {
    f.field(
        v::CLOCK_MEM,
        || d.clock_info(Clock::Memory),
        |r, c| r.clock_mem_mhz = c,
    );
    // NVML_PSTATE_UNKNOWN (32) is no value, not a P-state.
    let pstate = f
        .call(|| d.performance_state())
        .filter(|p| *p != PerformanceState::Unknown);
    if let Some(p) = pstate {
        f.rec.pstate = p as u32;
        f.rec.valid |= v::PSTATE;
    }
    f.field(
        v::CLOCK_EVENT_REASONS,
        || fallback::clock_event_reasons(nvml, d),
        |r, c| r.clock_event_reasons = c,
    );
    f.field(
        v::FAN_SPEED,
        || fallback::fan_speed(nvml, d),
        |r, s| r.fan_speed_pct = s,
    );
    f.field(
        v::UTIL_ENC,
        || d.encoder_utilization(),
        |r, u| r.util_enc_pct = u.utilization,
    );
    f.field(
        v::UTIL_DEC,
        || d.decoder_utilization(),
        |r, u| r.util_dec_pct = u.utilization,
    );
    f.field(
        v::ECC_CORRECTED,
        || d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile),
        |r, n| r.ecc_corrected_volatile_count = n,
    );
    f.field(
        v::ECC_UNCORRECTED,
        || d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
        |r, n| r.ecc_uncorrected_volatile_count = n,
    );
}

/// The near-static values: see [`tiers::STATIC`].
pub fn sample_static(d: &Device, f: &mut Fill) {
    f.field(
        v::POWER_LIMIT,
        || d.enforced_power_limit(),
        |r, p| r.power_limit_mw = p,
    );
    f.field(
        v::PCIE_LINK_GEN,
        || d.current_pcie_link_gen(),
        |r, g| r.pcie_link_gen = g,
    );
    f.field(
        v::PCIE_LINK_WIDTH,
        || d.current_pcie_link_width(),
        |r, w| r.pcie_link_width = w,
    );
}

/// PCIe throughput the slow way (20 ms per direction), for GPUs with no other source:
/// the directions of `bits` ([`crate::tiers::PCIE`]'s).
pub fn sample_pcie_throughput(d: &Device, f: &mut Fill, bits: u64) {
    if bits & v::PCIE_TX != 0 {
        f.field(
            v::PCIE_TX,
            || d.pcie_throughput(PcieUtilCounter::Send),
            |r, t| r.pcie_tx_kbytes_per_s = t,
        );
    }
    if bits & v::PCIE_RX != 0 {
        f.field(
            v::PCIE_RX,
            || d.pcie_throughput(PcieUtilCounter::Receive),
            |r, t| r.pcie_rx_kbytes_per_s = t,
        );
    }
}
