//! Exported batch and versioned getters: `nvmlDeviceGetFieldValues` and
//! `nvmlDeviceGetTemperatureV`.
//!
//! Field values answer per entry, as real drivers do: the call succeeds for a valid
//! handle and each `nvmlFieldValue_t` carries its own `nvmlReturn`, `NOT_SUPPORTED` for a
//! field the GPU does not have (its scenario value is absent, or it is listed in the
//! GPU's `unsupported_fields`). Known fields: ECC volatile totals (3, 4), total energy
//! (83), power average/instant (185, 186), current power limit (190), the PCIe
//! byte counters (197, 198), the memory temperature (82), the recovery action (230)
//! and the clock event reason counters (74, 76, and three more whose ids depend on the
//! driver: see [`Numbering`]). With `scopeId` 1
//! (`NVML_POWER_SCOPE_MODULE`) the power fields (185-190, 192) answer the module's power,
//! which only Grace superchips have, and on R610+ with `scopeId` 3 (the GPU base scope)
//! the four limits of [`GPU_BASE_SCOPE_FIELDS`] answer the GPU base's, both from a
//! [`crate::scenario::PowerScope`]; any other scope is not supported.

// Function, parameter and (bindgen-made) constant names are NVML's C names.
#![allow(non_snake_case, non_upper_case_globals)]

use std::os::raw::c_int;

use nvml_wrapper_sys::bindings::field_id::*;
use nvml_wrapper_sys::bindings::*;

use crate::codes::{ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS};
use crate::ffi::{device_call, put};
use crate::latency::{self, Profile, FIELD_VALUE_US};
use crate::scenario::Gpu;
use crate::state;

/// `NVML_FI_DEV_EDPP_MULTIPLIER` (NVML 13.1, R590+), which the bindings do not name yet.
pub const EDPP_MULTIPLIER: u32 = 274;

/// `NVML_POWER_SCOPE_GPU_BASE` (nvml.h of CUDA 13.3, R610+: `#define`d as 3U, though
/// the comment above `NVML_FI_DEV_POWER_AVERAGE` says "2 - GPU base scope").
pub const GPU_BASE_SCOPE: u32 = 3;

/// The power field values the GPU base scope answers: nvml.h's note on the scope says
/// it "only supports _MIN_LIMIT, _MAX_LIMIT, _DEFAULT_LIMIT, and _CURRENT_LIMIT".
pub const GPU_BASE_SCOPE_FIELDS: [u32; 4] = [
    NVML_FI_DEV_POWER_CURRENT_LIMIT,
    NVML_FI_DEV_POWER_DEFAULT_LIMIT,
    NVML_FI_DEV_POWER_MIN_LIMIT,
    NVML_FI_DEV_POWER_MAX_LIMIT,
];

/// `NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE` and `..._UNC_INACTIVE` (CUDA 13.2, R595+).
pub const REMAPPED_ROWS_INACTIVE: [u32; 2] = [301, 302];

/// How a driver numbers its field values after 250, which nvml.h has changed twice (the
/// headers NVIDIA ships, as go-nvml syncs them):
///
/// - **R570** (CUDA 12.8): power smoothing at 251–268; no slowdown counters.
/// - **R575 and R580** (CUDA 12.9, 13.0): the clock event reasons' slowdown counters at
///   251–253 (nvidia-smi 580 asks for these), power smoothing moved to 256–273;
///   `NVML_FI_MAX` is 274.
/// - **R590 and later** (CUDA 13.1+): power smoothing back at 251–268, the counters at
///   269–271, the EDPp multiplier at 274, delayed power smoothing at 275–288
///   ([`crate::smoothing`]).
/// - **R595** (CUDA 13.2) adds the inactive remapped rows (301, 302), **R610** (CUDA
///   13.3) state-of-charge power smoothing (300) and the GPU base power scope (3), with
///   R590's numbering otherwise.
///
/// A driver answers an id by its own numbering: the same id is a different value on
/// another branch. Older drivers (R560 and before) have no field past 250.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Numbering {
    Before570,
    R570,
    R575,
    R590,
    R595,
    R610,
}

impl Numbering {
    /// The numbering of the scenario's driver (`driver_version`'s major number).
    pub fn of(driver_version: Option<&str>) -> Numbering {
        let major = driver_version.and_then(|v| v.split('.').next()?.parse::<u32>().ok());
        match major.unwrap_or(0) {
            0..=569 => Numbering::Before570,
            570..=574 => Numbering::R570,
            575..=589 => Numbering::R575,
            590..=594 => Numbering::R590,
            595..=609 => Numbering::R595,
            _ => Numbering::R610,
        }
    }

    /// The ids of the SW thermal, HW thermal and HW power brake slowdown counters.
    fn slowdown_counters(self) -> Option<[u32; 3]> {
        match self {
            Numbering::Before570 | Numbering::R570 => None,
            Numbering::R575 => Some([251, 252, 253]),
            Numbering::R590 | Numbering::R595 | Numbering::R610 => Some([269, 270, 271]),
        }
    }

    /// The id of `NVML_FI_PWR_SMOOTHING_ENABLED`, the first of power smoothing's
    /// eighteen consecutive ids ([`crate::smoothing`]).
    pub fn power_smoothing(self) -> Option<u32> {
        match self {
            Numbering::Before570 => None,
            Numbering::R575 => Some(256),
            _ => Some(251),
        }
    }
}

/// A field's value as the scenario gives it.
pub enum Value {
    Uint(u32),
    Ulonglong(u64),
    Double(f64),
}

/// The value of field `id` on `g` for the scope `scope` (`NVML_POWER_SCOPE_*` for the
/// power fields: 0 the GPU, 1 the module of a Grace superchip, 3 the GPU base), if it
/// has one, on a driver that numbers its fields `numbering`.
fn field(g: &Gpu, id: u32, scope: u32, numbering: Numbering) -> Option<Value> {
    if g.unsupported_fields.contains(&id) {
        return None;
    }
    let power_scope = match scope {
        NVML_POWER_SCOPE_MODULE => Some(g.module_power),
        // Its scenario object has only the limits this scope answers (validated).
        GPU_BASE_SCOPE if numbering >= Numbering::R610 => Some(g.gpu_base_power),
        _ => None,
    };
    if let Some(power) = power_scope {
        return power?.get(id).map(Value::Uint);
    }
    if scope != NVML_POWER_SCOPE_GPU {
        return None;
    }
    let ull = |v: Option<u64>| v.map(Value::Ulonglong);
    let ui = |v: Option<u32>| v.map(Value::Uint);
    let named = [
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ];
    if let Some(at) = numbering
        .slowdown_counters()
        .and_then(|ids| ids.iter().position(|&i| i == id))
    {
        return ull(counter(g, named[at]));
    }
    match id {
        NVML_FI_DEV_ECC_SBE_VOL_TOTAL => ull(g.ecc_corrected_volatile),
        NVML_FI_DEV_ECC_DBE_VOL_TOTAL => ull(g.ecc_uncorrected_volatile),
        NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION => ull(g.energy_mj),
        NVML_FI_DEV_POWER_AVERAGE => ui(g.power_usage_mw),
        NVML_FI_DEV_POWER_INSTANT => ui(g.power_instant_mw.or(g.power_usage_mw)),
        NVML_FI_DEV_MEMORY_TEMP => ui(g.memory_temperature_c),
        NVML_FI_DEV_POWER_CURRENT_LIMIT => ui(g.power_limit_mw),
        NVML_FI_DEV_PCIE_COUNT_TX_BYTES => ull(g.pcie_tx_bytes),
        NVML_FI_DEV_PCIE_COUNT_RX_BYTES => ull(g.pcie_rx_bytes),
        NVML_FI_DEV_GET_GPU_RECOVERY_ACTION => ui(g.gpu_recovery_action),
        EDPP_MULTIPLIER if numbering >= Numbering::R590 => ui(g.edpp_multiplier_pct),
        NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP => ull(counter(g, "sw_power_cap")),
        NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST => ull(counter(g, "sync_boost")),
        301 => ui(g.remapped_rows_inactive.map(|r| r[0])),
        302 => ui(g.remapped_rows_inactive.map(|r| r[1])),
        _ => None,
    }
}

/// The clock event reason counter nvidia-smi calls `name`, if the GPU has it.
fn counter(g: &Gpu, name: &str) -> Option<u64> {
    g.clocks_event_reasons_counters.get(name).copied()
}

/// Fills one entry from `g` on a driver that numbers its fields `numbering`: value,
/// type, timestamp and its own return code.
fn answer(g: &Gpu, entry: &mut nvmlFieldValue_t, now_us: i64, numbering: Numbering) {
    entry.timestamp = now_us;
    entry.latencyUsec = 0;
    let value = match crate::smoothing::answer(g, entry.fieldId, entry.scopeId, numbering) {
        Some(answer) => answer,
        // A driver before R595 knows no id past its NVML_FI_MAX (303 from R595 on).
        None if REMAPPED_ROWS_INACTIVE.contains(&entry.fieldId) && numbering < Numbering::R595 => {
            Err(INVALID_ARGUMENT)
        }
        None => field(g, entry.fieldId, entry.scopeId, numbering).ok_or(NOT_SUPPORTED),
    };
    match value {
        Err(code) => entry.nvmlReturn = code,
        Ok(Value::Double(v)) => {
            entry.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE;
            entry.value.dVal = v;
            entry.nvmlReturn = SUCCESS;
        }
        Ok(Value::Uint(v)) => {
            entry.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
            entry.value.uiVal = v;
            entry.nvmlReturn = SUCCESS;
        }
        Ok(Value::Ulonglong(v)) => {
            entry.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            entry.value.ullVal = v;
            entry.nvmlReturn = SUCCESS;
        }
    }
}

/// `nvmlDeviceGetFieldValues(device, valuesCount, values)`: each entry's `fieldId` in,
/// its value and `nvmlReturn` out. In the realistic latency profile each field adds
/// [`FIELD_VALUE_US`] to the call.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    valuesCount: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetFieldValues", device, |g, _| {
        let Ok(count) = usize::try_from(valuesCount) else {
            return INVALID_ARGUMENT;
        };
        if values.is_null() || count == 0 {
            return INVALID_ARGUMENT;
        }
        let scenario = state::refresh().scenario;
        let numbering = Numbering::of(scenario.as_ref().and_then(|s| s.driver_version.as_deref()));
        if let Some(s) = scenario {
            let overridden = s
                .latency_us_by_function
                .contains_key("nvmlDeviceGetFieldValues");
            if s.latency_profile == Profile::Realistic && !overridden {
                latency::sleep_us(FIELD_VALUE_US * count as u64);
            }
        }
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        for i in 0..count {
            // SAFETY: the caller passes `valuesCount` valid, writable entries; each is
            // copied out, filled and written back (unaligned-safe).
            unsafe {
                let p = values.add(i);
                let mut entry = p.read_unaligned();
                crate::calls::record_field(entry.fieldId);
                answer(g, &mut entry, now_us, numbering);
                p.write_unaligned(entry);
            }
        }
        SUCCESS
    })
}

/// `nvmlTemperature_v1` from nvml.h: `NVML_STRUCT_VERSION(Temperature, 1)`.
pub const TEMPERATURE_V1_VERSION: u32 =
    (std::mem::size_of::<nvmlTemperature_v1_t>() as u32) | (1 << 24);

/// `nvmlDeviceGetTemperatureV(device, temperature)`: the GPU sensor only;
/// `temperature->version` must be `nvmlTemperature_v1`, else
/// `ARGUMENT_VERSION_MISMATCH` like real NVML.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureV(
    device: nvmlDevice_t,
    temperature: *mut nvmlTemperature_t,
) -> nvmlReturn_t {
    device_call("nvmlDeviceGetTemperatureV", device, |g, _| {
        if temperature.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: non-null, and the caller passes an `nvmlTemperature_t` it set up.
        let request = unsafe { temperature.read_unaligned() };
        if request.version != TEMPERATURE_V1_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        if request.sensorType != nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return INVALID_ARGUMENT;
        }
        let value = g.temperature_c.map(|t| nvmlTemperature_t {
            temperature: i32::try_from(t).unwrap_or(i32::MAX),
            ..request
        });
        // SAFETY: as above.
        unsafe { put(temperature, value) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn entry(id: u32) -> nvmlFieldValue_t {
        nvmlFieldValue_t {
            fieldId: id,
            scopeId: 0,
            timestamp: 0,
            latencyUsec: 0,
            valueType: 0,
            nvmlReturn: 0,
            value: nvmlValue_t { ullVal: 0 },
        }
    }

    #[test]
    fn each_field_answers_for_itself() {
        let s = Scenario::parse(
            r#"{"gpus": [{"energy_mj": 5, "power_usage_mw": 7, "pcie_tx_bytes": 9,
                          "unsupported_fields": [198]}]}"#,
        )
        .unwrap();
        let g = &s.gpus[0];
        let mut energy = entry(NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
        answer(g, &mut energy, 1, Numbering::Before570);
        assert_eq!(energy.nvmlReturn, SUCCESS);
        // SAFETY: the entry says it holds an unsigned long long.
        assert_eq!(unsafe { energy.value.ullVal }, 5);
        let mut power = entry(NVML_FI_DEV_POWER_AVERAGE);
        answer(g, &mut power, 1, Numbering::Before570);
        assert_eq!(
            power.valueType,
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT
        );
        // SAFETY: the entry says it holds an unsigned int.
        assert_eq!(unsafe { power.value.uiVal }, 7);
        for id in [
            NVML_FI_DEV_PCIE_COUNT_RX_BYTES,
            NVML_FI_DEV_ECC_SBE_VOL_TOTAL,
            9999,
        ] {
            let mut e = entry(id);
            answer(g, &mut e, 1, Numbering::Before570);
            assert_eq!(e.nvmlReturn, NOT_SUPPORTED, "field {id}");
        }
    }

    #[test]
    fn the_module_and_gpu_base_scopes_answer_their_own_power() {
        let s = Scenario::parse(
            r#"{"gpus": [{"power_usage_mw": 7, "power_limit_mw": 9,
                          "module_power": {"average_mw": 100, "requested_limit_mw": 200},
                          "gpu_base_power": {"current_limit_mw": 300, "max_limit_mw": 400}}]}"#,
        )
        .unwrap();
        let g = &s.gpus[0];
        let read = |id: u32, scope: u32, numbering: Numbering| {
            let mut e = nvmlFieldValue_t {
                scopeId: scope,
                ..entry(id)
            };
            answer(g, &mut e, 1, numbering);
            // SAFETY: any bits are a valid u32, and every power field that answers
            // answers an unsigned int (the value is kept only then).
            (e.nvmlReturn == SUCCESS).then_some(unsafe { e.value.uiVal })
        };
        let (gpu, module, base) = (
            NVML_POWER_SCOPE_GPU,
            NVML_POWER_SCOPE_MODULE,
            GPU_BASE_SCOPE,
        );
        let (average, current) = (NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_CURRENT_LIMIT);
        let (requested, max) = (
            NVML_FI_DEV_POWER_REQUESTED_LIMIT,
            NVML_FI_DEV_POWER_MAX_LIMIT,
        );
        let (r590, r595, r610) = (Numbering::R590, Numbering::R595, Numbering::R610);
        for (id, scope, numbering, want) in [
            (average, gpu, r610, Some(7)),
            (current, gpu, r610, Some(9)),
            (average, module, r590, Some(100)),
            (requested, module, r610, Some(200)),
            (current, module, r610, None),
            (current, base, r610, Some(300)),
            (max, base, r610, Some(400)),
            (average, base, r610, None),
            (current, base, r595, None),
            (current, 2, r610, None),
        ] {
            let got = read(id, scope, numbering);
            assert_eq!(got, want, "field {id}, scope {scope}, {numbering:?}");
        }
        // The GPU base scope has the four limits only: a scenario cannot give it more.
        for key in ["requested_limit_mw", "average_mw", "instant_mw"] {
            let text = format!(r#"{{"gpus": [{{"gpu_base_power": {{"{key}": 1}}}}]}}"#);
            let refused = Scenario::parse(&text).unwrap_err();
            let want = format!("gpus[0].gpu_base_power.{key}: ");
            assert!(refused.starts_with(&want), "{refused}");
        }
        assert!(Scenario::parse(r#"{"gpus": [{"gpu_base_power": {"typo_mw": 1}}]}"#).is_err());
    }

    #[test]
    fn the_fields_after_250_answer_by_the_drivers_numbering() {
        let s = Scenario::parse(
            r#"{"gpus": [{"clocks_event_reasons_counters": {"sw_thermal_slowdown": 11,
                            "hw_thermal_slowdown": 12, "hw_power_brake_slowdown": 13},
                          "power_smoothing": {"enabled": 1, "priv_level": 2, "imm_ramp_down": 1},
                          "edpp_multiplier_pct": 100}]}"#,
        )
        .unwrap();
        let g = &s.gpus[0];
        let read = |id: u32, numbering: Numbering| {
            let mut e = entry(id);
            answer(g, &mut e, 1, numbering);
            // SAFETY: read as the type the entry says it holds.
            (e.nvmlReturn == SUCCESS).then(|| unsafe {
                match e.valueType {
                    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => u64::from(e.value.uiVal),
                    _ => e.value.ullVal,
                }
            })
        };
        let at = |ids: [u32; 3], numbering| ids.map(|id| read(id, numbering));
        assert_eq!(at([251, 252, 253], Numbering::R575), [11, 12, 13].map(Some));
        assert_eq!(at([256, 257, 258], Numbering::R575), [1, 2, 1].map(Some));
        assert_eq!(at([251, 252, 253], Numbering::R590), [1, 2, 1].map(Some));
        assert_eq!(at([269, 270, 271], Numbering::R590), [11, 12, 13].map(Some));
        assert_eq!(at([251, 252, 253], Numbering::R570), [1, 2, 1].map(Some));
        assert_eq!(at([269, 270, 271], Numbering::R570), [None; 3]);
        assert_eq!(at([251, 252, 253], Numbering::Before570), [None; 3]);
        assert_eq!(read(EDPP_MULTIPLIER, Numbering::R590), Some(100));
        assert_eq!(read(EDPP_MULTIPLIER, Numbering::R575), None);
        assert_eq!(Numbering::of(Some("580.65.06")), Numbering::R575);
        assert_eq!(Numbering::of(Some("590.48.01")), Numbering::R590);
        assert_eq!(Numbering::of(Some("595.80")), Numbering::R595);
        assert_eq!(Numbering::of(Some("610.57.04")), Numbering::R610);
        assert_eq!(at([251, 252, 253], Numbering::R610), [1, 2, 1].map(Some));
        assert_eq!(at([269, 270, 271], Numbering::R610), [11, 12, 13].map(Some));
        assert_eq!(Numbering::of(Some("570.124.06")), Numbering::R570);
        assert_eq!(Numbering::of(Some("550.54.15")), Numbering::Before570);
    }
}
