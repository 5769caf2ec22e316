//! The JSON scenario model: what the fake driver reports.
//!
//! Every field is optional. System-level strings and numbers default to
//! plausible values (an explicit `null` makes the getter return
//! `NVML_ERROR_NOT_SUPPORTED`); a per-GPU value field that is absent makes its
//! getter return `NVML_ERROR_NOT_SUPPORTED`.

use std::collections::BTreeMap;

use serde::Deserialize;

use nvml_wrapper_sys::bindings::field_id::{
    NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_CURRENT_LIMIT, NVML_FI_DEV_POWER_DEFAULT_LIMIT,
    NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_MAX_LIMIT, NVML_FI_DEV_POWER_MIN_LIMIT,
    NVML_FI_DEV_POWER_REQUESTED_LIMIT,
};

use crate::codes::ErrorCode;
use crate::fields::GPU_BASE_SCOPE_FIELDS;
use crate::EXPORTED;

/// The whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Error `nvmlInit_v2`/`nvmlInitWithFlags` return instead of succeeding.
    #[serde(default)]
    pub init_error: Option<ErrorCode>,
    /// `nvmlSystemGetDriverVersion`; `null` means not supported.
    #[serde(default = "default_driver_version")]
    pub driver_version: Option<String>,
    /// `nvmlSystemGetNVMLVersion`; `null` means not supported.
    #[serde(default = "default_nvml_version")]
    pub nvml_version: Option<String>,
    /// `nvmlGetVgpuDriverCapabilities` by capability (`NVML_VGPU_DRIVER_CAP_*`): a vGPU
    /// host driver answers; absent (any other driver): not supported.
    #[serde(default)]
    pub vgpu_driver_capabilities: Option<Vec<u32>>,
    /// `nvmlSystemGetCudaDriverVersion{,_v2}`; `null` means not supported.
    #[serde(default = "default_cuda_driver_version")]
    pub cuda_driver_version: Option<i32>,
    /// Sleep this many microseconds in every call (unless a profile is on).
    #[serde(default)]
    pub latency_us: u64,
    /// A per-function latency table (see [`crate::latency`]); replaces `latency_us`.
    #[serde(default)]
    pub latency_profile: crate::latency::Profile,
    /// Per-function sleep in microseconds; replaces `latency_us` and the profile for
    /// that function.
    #[serde(default)]
    pub latency_us_by_function: BTreeMap<String, u64>,
    /// Forced errors by exported function name.
    #[serde(default)]
    pub errors: BTreeMap<String, ErrorCode>,
    /// Functions that hang (a driver stuck in D state): a call blocks for as long as
    /// the scenario in force lists it, so a test releases it by rewriting the file.
    #[serde(default)]
    pub hang: Vec<String>,
    /// The GPUs, in index order.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// Values that change on a schedule (see [`Schedule`]).
    #[serde(default)]
    pub schedule: Option<Schedule>,
    /// The scenario of each phase of the schedule, built by [`Scenario::parse`].
    #[serde(skip)]
    pub phases: Vec<std::sync::Arc<Scenario>>,
}

/// Values that change with the wall clock, as a real GPU's do: phase
/// `(unix time in ms / step_ms) % phases.len()` is in force. Each phase is an object
/// like the scenario's own whose `gpus[i]` keys replace those of the scenario's
/// `gpus[i]` (e.g. `{"gpus": [{"utilization_gpu_pct": 80}]}`, or
/// `{"gpus": [{"errors": {"*": "GPU_IS_LOST"}}]}` for a GPU that falls off the bus).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Length of a phase, ms.
    pub step_ms: u64,
    /// The phases, in order; the list repeats.
    pub phases: Vec<serde_json::Value>,
}

fn default_driver_version() -> Option<String> {
    Some("550.54.15".to_owned())
}

fn default_nvml_version() -> Option<String> {
    Some("12.550.54.15".to_owned())
}

fn default_cuda_driver_version() -> Option<i32> {
    Some(12040)
}

/// One GPU. Absent value fields make their getters return `NOT_SUPPORTED`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub name: Option<String>,
    pub uuid: Option<String>,
    /// `DDDDDDDD:BB:DD.F` (the domain may be 4 or 8 hex digits).
    pub pci_bus_id: Option<String>,
    /// `nvmlPciInfo_t.pciDeviceId` (defaults to 0 when `pci_bus_id` is set).
    pub pci_device_id: Option<u32>,
    /// `nvmlPciInfo_t.pciSubSystemId` (defaults to 0 when `pci_bus_id` is set).
    pub pci_subsystem_id: Option<u32>,
    /// `nvmlDeviceGetMinorNumber`: N of `/dev/nvidiaN`; the GPU's index when absent.
    /// The kernel numbers GPUs in probe order and NVML by PCI bus id, and a machine
    /// with a GPU excluded from the driver (`NVreg_ExcludedGpus`) has gaps, so the two
    /// can differ.
    pub minor_number: Option<u32>,
    /// Required for the memory getters; the other three are derived from it.
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    pub memory_reserved_bytes: Option<u64>,
    pub utilization_gpu_pct: Option<u32>,
    pub utilization_memory_pct: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_usage_mw: Option<u32>,
    pub power_limit_mw: Option<u32>,
    /// `nvmlDeviceGetPersistenceMode`: 0 or 1.
    pub persistence_mode: Option<u32>,
    /// `nvmlDeviceGetComputeMode`: 0 default, 2 prohibited, 3 exclusive process.
    pub compute_mode: Option<u32>,
    /// `nvmlDeviceGetDisplayActive`: 0 or 1.
    pub display_active: Option<u32>,
    pub energy_mj: Option<u64>,
    pub fan_speed_pct: Option<u32>,
    pub clocks_mhz: Option<Clocks>,
    pub max_clocks_mhz: Option<Clocks>,
    pub pstate: Option<u32>,
    pub clock_event_reasons: Option<u64>,
    pub encoder_utilization_pct: Option<u32>,
    pub decoder_utilization_pct: Option<u32>,
    /// `nvmlDeviceGetJpgUtilization` (R535+); absent, or MIG on: not supported.
    pub jpeg_utilization_pct: Option<u32>,
    /// `nvmlDeviceGetOfaUtilization` (R535+); absent, or MIG on: not supported.
    pub ofa_utilization_pct: Option<u32>,
    /// Sampling period reported with the codec utilizations (default 167000).
    pub codec_sampling_period_us: Option<u32>,
    pub pcie_tx_kbps: Option<u32>,
    pub pcie_rx_kbps: Option<u32>,
    /// Cumulative PCIe bytes sent and received (field values 197 and 198).
    pub pcie_tx_bytes: Option<u64>,
    pub pcie_rx_bytes: Option<u64>,
    pub pcie_link_gen: Option<u32>,
    pub pcie_link_width: Option<u32>,
    pub ecc_corrected_volatile: Option<u64>,
    pub ecc_uncorrected_volatile: Option<u64>,
    /// Aggregate (lifetime) ECC counts; absent: the volatile ones.
    pub ecc_corrected_aggregate: Option<u64>,
    pub ecc_uncorrected_aggregate: Option<u64>,
    pub serial: Option<String>,
    pub vbios_version: Option<String>,
    /// `[major, minor]`.
    pub compute_capability: Option<[i32; 2]>,
    pub max_pcie_link_gen: Option<u32>,
    /// `nvmlDeviceGetGpuMaxPcieLinkGeneration` (R510+): the GPU's own maximum, whatever
    /// the slot; absent: not supported.
    pub gpu_max_pcie_link_gen: Option<u32>,
    pub max_pcie_link_width: Option<u32>,
    pub power_default_limit_mw: Option<u32>,
    /// `[min, max]` settable power limit, mW.
    pub power_limit_range_mw: Option<[u32; 2]>,
    /// Field value 186; absent: `power_usage_mw`.
    pub power_instant_mw: Option<u32>,
    /// Field value 82 (`NVML_FI_DEV_MEMORY_TEMP`): HBM GPUs only.
    pub memory_temperature_c: Option<u32>,
    pub supported_clock_event_reasons: Option<u64>,
    /// `nvmlDeviceGetDisplayMode`: 0 or 1.
    pub display_mode: Option<u32>,
    /// `[current, pending]`, 0 or 1 each.
    pub ecc_mode: Option<[u32; 2]>,
    pub accounting_mode: Option<u32>,
    pub accounting_buffer_size: Option<u32>,
    /// Pages retired `[for single-bit errors, for a double-bit error]`.
    pub retired_pages: Option<[u32; 2]>,
    pub retired_pages_pending: Option<u32>,
    /// `[correctable, uncorrectable, pending, failure]`.
    pub remapped_rows: Option<[u32; 4]>,
    pub applications_clocks_mhz: Option<Clocks>,
    pub default_applications_clocks_mhz: Option<Clocks>,
    /// `[sessions, average fps, average latency us]`.
    pub encoder_stats: Option<[u32; 3]>,
    /// `nvmlDeviceGetMemoryErrorCounter` by nvidia-smi's name of the count, e.g.
    /// `"corrected.volatile.l1_cache"`, `"uncorrected.aggregate.device_memory"`; an
    /// absent one is not supported.
    #[serde(default)]
    pub ecc_by_location: BTreeMap<String, u64>,
    /// infoROM versions (`nvmlDeviceGetInforomImageVersion`, `nvmlDeviceGetInforomVersion`);
    /// an absent one is not supported.
    #[serde(default)]
    pub inforom: Inforom,
    /// `nvmlDeviceGetGpuOperationMode` `[current, pending]` (0 all on, 1 compute, 2 low
    /// double precision): GK110 Teslas and some GeForces; absent: not supported.
    pub gpu_operation_mode: Option<[u32; 2]>,
    /// `nvmlDeviceGetGpuFabricInfo` (R525+): NVSwitch systems only; absent: not
    /// supported.
    pub fabric: Option<Fabric>,
    /// `nvmlDeviceGetMarginTemperature` (R560+): degrees below the nearest slowdown
    /// threshold, nvidia-smi's T.Limit; absent: not supported (GeForce, as real ones).
    pub margin_temperature_c: Option<i32>,
    /// `nvmlDeviceGetPciInfoExt` (R550+) `[base class, sub class]`.
    pub pci_class: Option<[u32; 2]>,
    /// `nvmlDeviceGetGspFirmwareMode` (R510+) `[enabled, default]`, 0 or 1.
    pub gsp_firmware_mode: Option<[u32; 2]>,
    /// `nvmlDeviceGetAddressingMode` (R580+): 0 none, 1 HMM, 2 ATS.
    pub addressing_mode: Option<u32>,
    /// `nvmlDeviceGetC2cModeInfoV` (R550+): 0 or 1; Hopper and newer data-centre GPUs
    /// answer (0 but on Grace Hopper), others do not support it.
    pub c2c_mode: Option<u32>,
    /// `nvmlDeviceValidateInforom`: true succeeds, false answers `CORRUPTED_INFOROM`;
    /// absent: not supported.
    pub inforom_valid: Option<bool>,
    /// `nvmlDeviceGetPowerManagementMode`: 0 or 1 (a driver that answers `DEPRECATED`
    /// instead is set through `errors`; nvidia-smi 590+ prints it as deprecated either
    /// way).
    pub power_management_mode: Option<u32>,
    /// `nvmlDeviceGetRowRemapperHistogram` (R520+) `[max, high, partial, low, none]`:
    /// GPUs with row remapping (A100 and newer data-centre GPUs) only.
    pub row_remapper_histogram: Option<[u32; 5]>,
    /// `nvmlDeviceGetSramEccErrorStatus` in `nvmlEccSramErrorStatus_v1`'s order:
    /// aggregate uncorrectable parity, aggregate uncorrectable SEC-DED, aggregate
    /// correctable, volatile uncorrectable parity, volatile uncorrectable SEC-DED, volatile
    /// correctable, aggregate uncorrectable by bucket (L2, SM, PCIe, MCU, other), and the
    /// threshold-exceeded flag; absent: not supported (GPUs before Ampere, as real ones).
    pub sram_ecc_status: Option<[u64; 12]>,
    /// Module power by field value with `scopeId` `NVML_POWER_SCOPE_MODULE` (Grace
    /// superchips only: GH200, GB200); absent: every module field is not supported.
    pub module_power: Option<PowerScope>,
    /// `nvmlDeviceGetConfComputeProtectedMemoryUsage` (R535+) `[total, used]` bytes.
    pub protected_memory_bytes: Option<[u64; 2]>,
    /// `nvmlDeviceGetVgpuCapabilities` by capability (`NVML_DEVICE_VGPU_CAP_*`, 0 to
    /// 11): a GPU on a vGPU host driver answers; absent: not supported.
    pub vgpu_capabilities: Option<Vec<u32>>,
    /// `nvmlDeviceGetPlatformInfo` (R550+, `nvmlPlatformInfo_v2`).
    pub platform: Option<Platform>,
    /// `nvmlDeviceGetHostname_v1` (R580+): the hostname set on the GPU. NVML documents
    /// it for Blackwell and newer; absent: not supported (older GPUs). A Blackwell GPU
    /// nobody set one on answers success with an empty string (`""`), as NVIDIA's own
    /// NVML mock (go-nvml's `engine.GetHostname`) models it.
    pub hostname: Option<String>,
    /// Field value 274 (`NVML_FI_DEV_EDPP_MULTIPLIER`, R580+): percent; Hopper and
    /// newer data-centre GPUs.
    pub edpp_multiplier_pct: Option<u32>,
    /// Delayed power smoothing, field values 275 to 288 (R590+, Blackwell; see
    /// [`crate::smoothing`]); absent: each of them is not supported (GPUs before Blackwell).
    pub power_smoothing: Option<crate::smoothing::PowerSmoothing>,
    /// `nvmlDeviceGetDramEncryptionMode` (R570+) `[current, pending]`, 0 or 1 (Blackwell).
    pub dram_encryption: Option<[u32; 2]>,
    /// Field value 230 (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`, newer drivers): 0 none, 1 GPU
    /// reset, 2 node reboot, 3 drain P2P, 4 drain and reset; absent: not supported.
    pub gpu_recovery_action: Option<u32>,
    /// The clock event reason counters by nvidia-smi's name (`sw_power_cap`,
    /// `sync_boost`, `sw_thermal_slowdown`, `hw_thermal_slowdown`,
    /// `hw_power_brake_slowdown`): field values 74 and 76, and for the three slowdowns
    /// 251–253 on R575–R580 drivers, 269–271 on R590+, none before R575
    /// ([`crate::fields::Numbering`]); the number nvidia-smi prints as microseconds; an
    /// absent one is not supported.
    #[serde(default)]
    pub clocks_event_reasons_counters: BTreeMap<String, u64>,
    /// `[correctable, uncorrectable]` inactive remapped rows: field values 301 and 302
    /// (R595+); absent: not supported.
    pub remapped_rows_inactive: Option<[u32; 2]>,
    /// The base GPU power limits: the power field values with the GPU base scope
    /// (R610+): the current, default, min and max limits only (nvml.h), any other key
    /// is refused; absent: not supported.
    pub gpu_base_power: Option<PowerScope>,
    /// `nvmlDeviceGetBBXTimeData_v1`'s `timeRun`, seconds (R610+); absent: not
    /// supported.
    pub bbx_time_run_s: Option<u32>,
    /// GPM metrics; absent means the GPU has no GPM (`nvmlGpmQueryDeviceSupport` says
    /// unsupported, `nvmlGpmSampleGet` returns `NOT_SUPPORTED`).
    pub gpm: Option<Gpm>,
    /// MIG (see [`crate::mig`]); absent: the GPU cannot do MIG.
    #[serde(default)]
    pub mig: Option<crate::mig::Mig>,
    /// Field ids `nvmlDeviceGetFieldValues` answers `NOT_SUPPORTED` for on this GPU,
    /// whatever the values above say (drivers differ per GPU).
    #[serde(default)]
    pub unsupported_fields: Vec<u32>,
    /// Running processes; absent means none.
    #[serde(default)]
    pub processes: Vec<Process>,
    /// `nvmlDeviceGetSupportedEventTypes`: the `nvmlEventType*` mask (e.g. 15: ECC,
    /// P-state and Xid events); absent: events are not supported on this GPU, and
    /// `nvmlDeviceRegisterEvents` answers `NOT_SUPPORTED` (see [`crate::events`]).
    pub supported_event_types: Option<u64>,
    /// The GPU's Xid history, oldest first: appending one makes it happen (see
    /// [`crate::events`]).
    #[serde(default)]
    pub xids: Vec<crate::events::Xid>,
    /// Forced errors by exported function name; `"*"` covers every function
    /// that takes this GPU's handle.
    #[serde(default)]
    pub errors: BTreeMap<String, ErrorCode>,
    /// Functions that hang on this GPU (a GPU after an Xid), `"*"` for all that take
    /// its handle; released like the scenario's own `hang`.
    #[serde(default)]
    pub hang: Vec<String>,
    /// `nvmlDeviceGetProcessUtilization` adds junk to the real samples: a pid that is
    /// not running, values over 100, timestamps not newer than asked for.
    #[serde(default)]
    pub junk_process_samples: bool,
}

/// `base` (a scenario without its schedule) with `overlay`'s keys: its `gpus[i]` keys
/// replace those of `base`'s `gpus[i]`, its other keys those of `base`.
fn overlaid(base: &serde_json::Value, overlay: &serde_json::Value) -> serde_json::Value {
    let mut out = base.clone();
    let Some(obj) = out.as_object_mut() else {
        return out;
    };
    obj.remove("schedule");
    for (key, value) in overlay.as_object().into_iter().flatten() {
        match (key.as_str(), obj.get_mut(key), value.as_array()) {
            ("gpus", Some(serde_json::Value::Array(gpus)), Some(over)) => {
                for (gpu, over) in gpus.iter_mut().zip(over) {
                    if let (Some(gpu), Some(over)) = (gpu.as_object_mut(), over.as_object()) {
                        gpu.extend(over.clone());
                    }
                }
            }
            _ => {
                obj.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// Default `samplingPeriodUs` for encoder/decoder utilization.
pub const DEFAULT_CODEC_SAMPLING_PERIOD_US: u32 = 167_000;

/// Clock speeds in MHz by domain; an absent domain is not supported.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clocks {
    pub graphics: Option<u32>,
    pub sm: Option<u32>,
    pub memory: Option<u32>,
    pub video: Option<u32>,
}

/// GPM metric values `nvmlGpmMetricsGet` reports (percent, or MiB/s for rates); an
/// absent one is that metric's `NOT_SUPPORTED`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpm {
    /// `NVML_GPM_METRIC_SM_UTIL`.
    pub sm_activity_pct: Option<f64>,
    /// `NVML_GPM_METRIC_SM_OCCUPANCY`.
    pub sm_occupancy_pct: Option<f64>,
    /// `NVML_GPM_METRIC_ANY_TENSOR_UTIL`.
    pub tensor_activity_pct: Option<f64>,
    /// `NVML_GPM_METRIC_DRAM_BW_UTIL`.
    pub dram_bw_util_pct: Option<f64>,
    /// `NVML_GPM_METRIC_PCIE_TX_PER_SEC`.
    pub pcie_tx_mib_per_s: Option<f64>,
    /// `NVML_GPM_METRIC_PCIE_RX_PER_SEC`.
    pub pcie_rx_mib_per_s: Option<f64>,
    /// `NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC`.
    pub nvlink_tx_mib_per_s: Option<f64>,
    /// `NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC`.
    pub nvlink_rx_mib_per_s: Option<f64>,
}

/// Which of the two process-list calls report a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessType {
    #[default]
    Compute,
    Graphics,
    Both,
}

/// One process using a GPU.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    /// `null`/absent reports `NVML_VALUE_NOT_AVAILABLE`.
    #[serde(default)]
    pub used_gpu_memory_bytes: Option<u64>,
    /// Defaults to `"compute"`.
    #[serde(default, rename = "type")]
    pub kind: ProcessType,
    /// `null`/absent reports `0xFFFFFFFF` (no MIG instance).
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    /// `null`/absent reports `0xFFFFFFFF` (no MIG instance).
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
    /// SM, memory, encoder and decoder utilisation reported by
    /// `nvmlDeviceGetProcessUtilization`; absent or all zero: no sample (as the driver
    /// lists only processes that were active).
    #[serde(default)]
    pub utilization_pct: Option<[u32; 4]>,
}

/// Memory figures as the memory getters report them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub reserved: u64,
    pub free: u64,
    pub used: u64,
}

/// A parsed PCI bus id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl Gpu {
    /// Moves the processes a scenario lists under its MIG instances into the GPU's list,
    /// with the instance's ids (what the driver's lists on the parent hold).
    fn adopt_instance_processes(&mut self) {
        let Some(mig) = &mut self.mig else {
            return;
        };
        for m in &mut mig.instances {
            for mut p in std::mem::take(&mut m.processes) {
                p.gpu_instance_id = Some(m.gpu_instance_id);
                p.compute_instance_id = Some(m.compute_instance_id);
                self.processes.push(p);
            }
        }
    }

    /// MIG mode is on: the parent's utilisation is not supported.
    pub fn mig_on(&self) -> bool {
        self.mig.as_ref().is_some_and(|m| m.enabled)
    }

    /// Memory info, or `None` when `memory_total_bytes` is absent. A missing
    /// `reserved` is 0; a missing `used`/`free` is derived from the others.
    pub fn memory(&self) -> Option<Memory> {
        let total = self.memory_total_bytes?;
        let reserved = self.memory_reserved_bytes.unwrap_or(0);
        let rest = total.saturating_sub(reserved);
        let (used, free) = match (self.memory_used_bytes, self.memory_free_bytes) {
            (Some(u), Some(f)) => (u, f),
            (Some(u), None) => (u, rest.saturating_sub(u)),
            (None, Some(f)) => (rest.saturating_sub(f), f),
            (None, None) => (0, rest),
        };
        Some(Memory {
            total,
            reserved,
            free,
            used,
        })
    }

    /// The parsed PCI bus id, if one is set (validated at load time).
    pub fn pci_address(&self) -> Option<PciAddress> {
        self.pci_bus_id.as_deref().and_then(parse_pci_bus_id)
    }
}

/// Parses `DOMAIN:BUS:DEVICE.FUNCTION` in hex.
pub fn parse_pci_bus_id(s: &str) -> Option<PciAddress> {
    let (domain, rest) = s.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |p: &str, max_len: usize| {
        if p.is_empty() || p.len() > max_len {
            return None;
        }
        u32::from_str_radix(p, 16).ok()
    };
    Some(PciAddress {
        domain: hex(domain, 8)?,
        bus: hex(bus, 2)?,
        device: hex(device, 2)?,
        function: hex(function, 1)?,
    })
}

impl Scenario {
    /// Whether a call of `name` (on GPU `gpu`, for a function taking a handle) hangs.
    pub fn hangs(&self, name: &str, gpu: Option<u32>) -> bool {
        let on_gpu = gpu
            .and_then(|i| self.gpus.get(usize::try_from(i).ok()?))
            .is_some_and(|g| g.hang.iter().any(|h| h == name || h == "*"));
        on_gpu || self.hang.iter().any(|h| h == name)
    }

    /// Parses and validates scenario text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut scenario: Scenario = serde_json::from_str(text).map_err(|e| e.to_string())?;
        scenario.validate()?;
        for gpu in &mut scenario.gpus {
            gpu.adopt_instance_processes();
        }
        if let Some(schedule) = &scenario.schedule {
            if schedule.step_ms == 0 || schedule.phases.is_empty() {
                return Err("schedule: step_ms and phases must not be empty".into());
            }
            let base: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
            for (i, overlay) in schedule.phases.iter().enumerate() {
                let phase = Self::parse(&overlaid(&base, overlay).to_string())
                    .map_err(|e| format!("schedule phase {i}: {e}"))?;
                scenario.phases.push(std::sync::Arc::new(phase));
            }
        }
        Ok(scenario)
    }

    /// The scenario in force now: the phase of the schedule, if there is one.
    pub fn current(self: &std::sync::Arc<Self>) -> std::sync::Arc<Self> {
        let Some(schedule) = &self.schedule else {
            return std::sync::Arc::clone(self);
        };
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let phase = (ms / schedule.step_ms) as usize % self.phases.len();
        std::sync::Arc::clone(&self.phases[phase])
    }

    /// Rejects what serde cannot: unknown function names, strings NVML could
    /// not return, malformed PCI ids.
    fn validate(&self) -> Result<(), String> {
        let check_fn = |what: &str, name: &str, star_ok: bool| {
            if EXPORTED.contains(&name) || (star_ok && name == "*") {
                Ok(())
            } else {
                Err(format!(
                    "{what}: {name:?} is not a function fake-nvml exports"
                ))
            }
        };
        for name in self.errors.keys() {
            check_fn("errors", name, false)?;
        }
        for name in self.latency_us_by_function.keys() {
            check_fn("latency_us_by_function", name, false)?;
        }
        for name in &self.hang {
            check_fn("hang", name, false)?;
        }
        let strings = [
            ("driver_version", &self.driver_version),
            ("nvml_version", &self.nvml_version),
        ];
        for (field, value) in strings {
            check_c_string(field, value.as_deref())?;
        }
        for (i, gpu) in self.gpus.iter().enumerate() {
            for name in gpu.errors.keys() {
                check_fn(&format!("gpus[{i}].errors"), name, true)?;
            }
            for name in &gpu.hang {
                check_fn(&format!("gpus[{i}].hang"), name, true)?;
            }
            check_c_string(&format!("gpus[{i}].name"), gpu.name.as_deref())?;
            check_c_string(&format!("gpus[{i}].uuid"), gpu.uuid.as_deref())?;
            if let Some(mig) = &gpu.mig {
                let mut seen = std::collections::BTreeSet::new();
                let mut indices = std::collections::BTreeSet::new();
                for (j, m) in (0u32..).zip(&mig.instances) {
                    let at = format!("gpus[{i}].mig.instances[{j}]");
                    let index = m.mig_index.unwrap_or(j);
                    if index >= mig.max_devices || !indices.insert(index) {
                        return Err(format!(
                            "{at}: MIG device index {index} is taken or not below max_devices"
                        ));
                    }
                    if m.gi_profile(mig).is_none() {
                        return Err(format!(
                            "{at}: no profile with id {:?} or name {:?}",
                            m.profile_id, m.profile
                        ));
                    }
                    if !seen.insert((m.gpu_instance_id, m.compute_instance_id)) {
                        return Err(format!("{at}: its instance ids are taken"));
                    }
                    check_c_string(&format!("{at}.uuid"), m.uuid.as_deref())?;
                }
            }
            for (id, key) in PowerScope::FIELDS {
                let set = gpu.gpu_base_power.is_some_and(|b| b.get(id).is_some());
                if set && !GPU_BASE_SCOPE_FIELDS.contains(&id) {
                    return Err(format!(
                        "gpus[{i}].gpu_base_power.{key}: the GPU base power scope has only the \
                         current, default, min and max limits"
                    ));
                }
            }
            if let Some(id) = &gpu.pci_bus_id {
                if id.len() >= 32 || parse_pci_bus_id(id).is_none() {
                    return Err(format!(
                        "gpus[{i}].pci_bus_id: {id:?} is not DOMAIN:BUS:DEVICE.FUNCTION"
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_c_string(field: &str, value: Option<&str>) -> Result<(), String> {
    match value {
        Some(v) if v.contains('\0') => Err(format!("{field}: contains a NUL byte")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_gives_defaults() {
        let s = Scenario::parse("{}").unwrap();
        assert_eq!(s.init_error, None);
        assert_eq!(s.driver_version.as_deref(), Some("550.54.15"));
        assert_eq!(s.nvml_version.as_deref(), Some("12.550.54.15"));
        assert_eq!(s.cuda_driver_version, Some(12040));
        assert_eq!(s.latency_us, 0);
        assert!(s.gpus.is_empty());
    }

    #[test]
    fn explicit_null_means_not_supported() {
        let s =
            Scenario::parse(r#"{"driver_version": null, "cuda_driver_version": null}"#).unwrap();
        assert_eq!(s.driver_version, None);
        assert_eq!(s.cuda_driver_version, None);
    }

    #[test]
    fn full_gpu_parses() {
        let text = r#"{
            "init_error": "NVML_ERROR_DRIVER_NOT_LOADED",
            "latency_us_by_function": {"nvmlDeviceGetComputeRunningProcesses_v3": 5000},
            "errors": {"nvmlSystemGetCudaDriverVersion_v2": "NOT_SUPPORTED"},
            "gpus": [{
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1",
                "pci_bus_id": "00000000:18:00.0",
                "memory_total_bytes": 100, "memory_used_bytes": 30, "memory_reserved_bytes": 10,
                "clocks_mhz": {"graphics": 1980, "memory": 2619},
                "processes": [
                    {"pid": 1234, "used_gpu_memory_bytes": null, "type": "both",
                     "gpu_instance_id": null, "compute_instance_id": 3}
                ],
                "errors": {"nvmlDeviceGetFanSpeed_v2": "NOT_SUPPORTED", "*": 15}
            }]
        }"#;
        let s = Scenario::parse(text).unwrap();
        assert_eq!(s.init_error, Some(ErrorCode(9)));
        assert_eq!(s.errors["nvmlSystemGetCudaDriverVersion_v2"], ErrorCode(3));
        let g = &s.gpus[0];
        assert_eq!(
            g.memory(),
            Some(Memory {
                total: 100,
                reserved: 10,
                free: 60,
                used: 30
            })
        );
        assert_eq!(
            g.pci_address(),
            Some(PciAddress {
                domain: 0,
                bus: 0x18,
                device: 0,
                function: 0
            })
        );
        let c = g.clocks_mhz.as_ref().unwrap();
        assert_eq!((c.graphics, c.sm), (Some(1980), None));
        assert_eq!(g.processes[0].kind, ProcessType::Both);
        assert_eq!(g.processes[0].used_gpu_memory_bytes, None);
        assert_eq!(g.errors["*"], ErrorCode(15));
        assert_eq!(g.fan_speed_pct, None);
        assert!(g.gpm.is_none());
    }

    #[test]
    fn gpm_values_parse_and_unknown_metrics_are_rejected() {
        let s = Scenario::parse(r#"{"gpus": [{"gpm": {"sm_activity_pct": 12.5}}]}"#).unwrap();
        let gpm = s.gpus[0].gpm.as_ref().unwrap();
        assert_eq!(gpm.sm_activity_pct, Some(12.5));
        assert_eq!(gpm.dram_bw_util_pct, None);
        assert!(Scenario::parse(r#"{"gpus": [{"gpm": {"sm_util": 1}}]}"#).is_err());
    }

    #[test]
    fn a_mig_instance_names_a_profile_of_its_gpu_by_id_or_name() {
        let ok = r#"{"gpus": [{"mig": {"instances": [
            {"gpu_instance_id": 1, "profile_id": 9}, {"gpu_instance_id": 2, "profile": "2g.20gb"}
        ]}}]}"#;
        let s = Scenario::parse(ok).unwrap();
        let mig = s.gpus[0].mig.as_ref().unwrap();
        assert_eq!(mig.instances[1].gi_profile(mig).unwrap().id, 14);
        for bad in [
            r#"{"gpus": [{"mig": {"instances": [{"gpu_instance_id": 1, "profile_id": 77}]}}]}"#,
            r#"{"gpus": [{"mig": {"instances": [{"gpu_instance_id": 1, "profile": "9g.1gb"}]}}]}"#,
            r#"{"gpus": [{"mig": {"instances": [{"gpu_instance_id": 1}]}}]}"#,
            r#"{"gpus": [{"mig": {"instances": [{"gpu_instance_id": 1, "profile_id": 9},
                                                {"gpu_instance_id": 1, "profile_id": 19}]}}]}"#,
        ] {
            assert!(Scenario::parse(bad).is_err(), "accepted {bad}");
        }
    }

    #[test]
    fn processes_listed_under_a_mig_instance_are_the_gpus_with_its_ids() {
        let s = Scenario::parse(
            r#"{"gpus": [{"processes": [{"pid": 1}],
                "mig": {"instances": [{"gpu_instance_id": 5, "compute_instance_id": 1,
                    "profile": "2g.20gb", "processes": [{"pid": 2, "used_gpu_memory_bytes": 3}]}]}}]}"#,
        )
        .unwrap();
        let g = &s.gpus[0];
        assert!(g.mig.as_ref().unwrap().instances[0].processes.is_empty());
        let p = &g.processes[1];
        assert_eq!(
            (p.pid, p.gpu_instance_id, p.compute_instance_id),
            (2, Some(5), Some(1))
        );
        assert_eq!(g.processes[0].gpu_instance_id, None);
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [
            r#"{"bogus": 1}"#,
            r#"{"gpus": [{"nmae": "x"}]}"#,
            r#"{"errors": {"nvmlDeviceGetFoo": "GPU_IS_LOST"}}"#,
            r#"{"errors": {"*": "GPU_IS_LOST"}}"#,
            r#"{"gpus": [{"errors": {"nvmlDeviceGetName": "NOT_A_CODE"}}]}"#,
            r#"{"gpus": [{"pci_bus_id": "18:00"}]}"#,
            r#"{"gpus": [{"processes": [{"pid": 1, "type": "video"}]}]}"#,
            r#"{"latency_us_by_function": {"nope": 1}}"#,
            r#"{"hang": ["nvmlNope"]}"#,
            r#"{"hang": ["*"]}"#,
            r#"{"gpus": [{"hang": ["nvmlNope"]}]}"#,
            "{",
        ] {
            assert!(Scenario::parse(bad).is_err(), "accepted {bad}");
        }
    }
}

/// A GPU's infoROM versions; an absent one is `NOT_SUPPORTED`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inforom {
    /// The image version, e.g. `"G520.0200.00.05"`.
    pub img: Option<String>,
    /// The OEM object's version, e.g. `"2.1"`.
    pub oem: Option<String>,
    /// The ECC object's version (GPUs with ECC), e.g. `"7.16"`.
    pub ecc: Option<String>,
    /// The power management object's version (none on current boards).
    pub pwr: Option<String>,
}

/// `nvmlGpuFabricInfo_t`'s state and status.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// `NVML_GPU_FABRIC_STATE_*`: 0 not supported, 1 not started, 2 in progress,
    /// 3 completed.
    pub state: u8,
    /// An `nvmlReturn_t`, meaningful once completed.
    #[serde(default)]
    pub status: u32,
    /// The clique id (0 on a single-node NVSwitch system).
    #[serde(default)]
    pub clique_id: u32,
    /// The cluster UUID's 16 bytes (zero on a single-node NVSwitch system).
    #[serde(default)]
    pub cluster_uuid: [u8; 16],
    /// `nvmlGpuFabricInfo_v2`'s health mask (0: every condition not supported, as on
    /// Hopper).
    #[serde(default)]
    pub health_mask: u32,
    /// `nvmlGpuFabricInfo_v3`'s health summary (0: not supported, as on Hopper).
    #[serde(default)]
    pub health_summary: u8,
}

/// `nvmlPlatformInfo_v2`: where the GPU sits in a rack. Real 590 drivers answer it on
/// every GPU, with zeros (and host id 1) outside an NVL rack.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// The InfiniBand GUID's 16 bytes.
    #[serde(default)]
    pub ib_guid: [u8; 16],
    /// The chassis serial number (at most 15 bytes).
    #[serde(default)]
    pub chassis_serial: String,
    #[serde(default)]
    pub slot_number: u8,
    #[serde(default)]
    pub tray_index: u8,
    #[serde(default)]
    pub host_id: u8,
    #[serde(default)]
    pub peer_type: u8,
    #[serde(default)]
    pub module_id: u8,
}

/// The power field values of one power scope (`scopeId`), milliwatts: the module's
/// (`module_power`, `NVML_POWER_SCOPE_MODULE`) or the GPU base's (`gpu_base_power`,
/// `NVML_POWER_SCOPE_GPU_BASE`, which has the four limits of
/// [`crate::fields::GPU_BASE_SCOPE_FIELDS`] only); an absent value is not supported.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerScope {
    /// `NVML_FI_DEV_POWER_AVERAGE` (185).
    pub average_mw: Option<u32>,
    /// `NVML_FI_DEV_POWER_INSTANT` (186).
    pub instant_mw: Option<u32>,
    /// `NVML_FI_DEV_POWER_REQUESTED_LIMIT` (192).
    pub requested_limit_mw: Option<u32>,
    /// `NVML_FI_DEV_POWER_CURRENT_LIMIT` (190).
    pub current_limit_mw: Option<u32>,
    /// `NVML_FI_DEV_POWER_DEFAULT_LIMIT` (189).
    pub default_limit_mw: Option<u32>,
    /// `NVML_FI_DEV_POWER_MIN_LIMIT` (187).
    pub min_limit_mw: Option<u32>,
    /// `NVML_FI_DEV_POWER_MAX_LIMIT` (188).
    pub max_limit_mw: Option<u32>,
}

impl PowerScope {
    /// Each value's field id and key.
    pub const FIELDS: [(u32, &'static str); 7] = [
        (NVML_FI_DEV_POWER_AVERAGE, "average_mw"),
        (NVML_FI_DEV_POWER_INSTANT, "instant_mw"),
        (NVML_FI_DEV_POWER_REQUESTED_LIMIT, "requested_limit_mw"),
        (NVML_FI_DEV_POWER_CURRENT_LIMIT, "current_limit_mw"),
        (NVML_FI_DEV_POWER_DEFAULT_LIMIT, "default_limit_mw"),
        (NVML_FI_DEV_POWER_MIN_LIMIT, "min_limit_mw"),
        (NVML_FI_DEV_POWER_MAX_LIMIT, "max_limit_mw"),
    ];

    /// The value of power field `id` in this scope, if the scenario gives one.
    pub fn get(&self, id: u32) -> Option<u32> {
        match id {
            NVML_FI_DEV_POWER_AVERAGE => self.average_mw,
            NVML_FI_DEV_POWER_INSTANT => self.instant_mw,
            NVML_FI_DEV_POWER_REQUESTED_LIMIT => self.requested_limit_mw,
            NVML_FI_DEV_POWER_CURRENT_LIMIT => self.current_limit_mw,
            NVML_FI_DEV_POWER_DEFAULT_LIMIT => self.default_limit_mw,
            NVML_FI_DEV_POWER_MIN_LIMIT => self.min_limit_mw,
            NVML_FI_DEV_POWER_MAX_LIMIT => self.max_limit_mw,
            _ => None,
        }
    }
}
