//! Delayed power smoothing (Blackwell): field values 275 to 288
//! (`NVML_FI_PWR_SMOOTHING_*`, nvml.h of NVML 13.1, R590+), answered from a GPU's
//! scenario object `power_smoothing` ([`PowerSmoothing`]).
//!
//! As real drivers: a GPU without the object (every GPU before Blackwell, the H100 and
//! H200 of nvidia_gpu_exporter's 590.48.01 captures) answers each of the fourteen
//! `NOT_SUPPORTED`; a driver before R590 (see [`Numbering`]), whose `NVML_FI_MAX` is at
//! or below 275, knows no such field and answers each entry `INVALID_ARGUMENT` whatever
//! the GPU (nvidia-smi prints `[N/A]` either way). An admin override nobody set reads
//! `NVML_POWER_SMOOTHING_ADMIN_OVERRIDE_NOT_SET` (0xFFFFFFFF), which a scenario writes
//! as 4294967295.

use serde::Deserialize;

use crate::codes::{INVALID_ARGUMENT, NOT_SUPPORTED};
use crate::fields::{Numbering, Value};
use crate::scenario::Gpu;

/// The first power smoothing field id of R590 (`NVML_FI_PWR_SMOOTHING_PRIMARY_POWER_FLOOR`).
pub const FIRST: u32 = 275;
/// The last (`NVML_FI_PWR_SMOOTHING_ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_OFFSET`).
pub const LAST: u32 = 288;

/// How the driver types the values (`nvmlValueType_t`); nvml.h does not say, so a
/// scenario can have any of the three a reader must take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueType {
    /// `NVML_VALUE_TYPE_UNSIGNED_INT`.
    #[default]
    Uint,
    /// `NVML_VALUE_TYPE_UNSIGNED_LONG_LONG`.
    Ulonglong,
    /// `NVML_VALUE_TYPE_DOUBLE`.
    Double,
}

/// A preset profile's or the admin override's four values; an absent one is not
/// supported.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Secondary power floor, watts.
    pub secondary_power_floor: Option<f64>,
    /// Primary floor activation window multiplier.
    pub primary_floor_act_window_multiplier: Option<f64>,
    /// Primary floor target window multiplier.
    pub primary_floor_tar_window_multiplier: Option<f64>,
    /// Primary floor activation offset, watts.
    pub primary_floor_act_offset: Option<f64>,
}

/// A Blackwell GPU's delayed power smoothing, by nvidia-smi's names; an absent value is
/// not supported.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerSmoothing {
    /// How every value is typed.
    #[serde(default)]
    pub value_type: ValueType,
    /// 280: 1 supported, 0 not.
    pub delayed_power_smoothing_supported: Option<f64>,
    /// 275: watts.
    pub primary_power_floor: Option<f64>,
    /// 276: watts.
    pub secondary_power_floor: Option<f64>,
    /// 277: watts.
    pub min_primary_floor_activation_offset: Option<f64>,
    /// 278: watts.
    pub min_primary_floor_activation_point: Option<f64>,
    /// 279: milliseconds.
    pub window_multiplier: Option<f64>,
    /// 281 to 284: the active preset profile's.
    #[serde(default)]
    pub curr_profile: Profile,
    /// 285 to 288: the admin override's.
    #[serde(default)]
    pub admin_override: Profile,
}

impl PowerSmoothing {
    /// The scenario's value of field `id` (275 to 288).
    fn get(&self, id: u32) -> Option<f64> {
        let (p, a) = (&self.curr_profile, &self.admin_override);
        match id {
            275 => self.primary_power_floor,
            276 => self.secondary_power_floor,
            277 => self.min_primary_floor_activation_offset,
            278 => self.min_primary_floor_activation_point,
            279 => self.window_multiplier,
            280 => self.delayed_power_smoothing_supported,
            281 => p.secondary_power_floor,
            282 => p.primary_floor_act_window_multiplier,
            283 => p.primary_floor_tar_window_multiplier,
            284 => p.primary_floor_act_offset,
            285 => a.secondary_power_floor,
            286 => a.primary_floor_act_window_multiplier,
            287 => a.primary_floor_tar_window_multiplier,
            288 => a.primary_floor_act_offset,
            _ => None,
        }
    }
}

/// The answer to field `id` on `g` on a driver that numbers its fields `numbering`, if
/// `id` is one of the fourteen: its value, or the entry's error code.
pub fn answer(g: &Gpu, id: u32, numbering: Numbering) -> Option<Result<Value, u32>> {
    if !(FIRST..=LAST).contains(&id) {
        return None;
    }
    if numbering != Numbering::R590 {
        return Some(Err(INVALID_ARGUMENT));
    }
    let found = g
        .power_smoothing
        .filter(|_| !g.unsupported_fields.contains(&id))
        .and_then(|s| Some((s.value_type, s.get(id)?)));
    let Some((ty, x)) = found else {
        return Some(Err(NOT_SUPPORTED));
    };
    Some(Ok(match ty {
        ValueType::Uint => Value::Uint(x as u32),
        ValueType::Ulonglong => Value::Ulonglong(x as u64),
        ValueType::Double => Value::Double(x),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn gpu(json: &str) -> Gpu {
        Scenario::parse(json).unwrap().gpus[0].clone()
    }

    #[test]
    fn a_590_driver_answers_a_blackwell_gpu_and_not_supported_for_others() {
        let b = gpu(r#"{"gpus": [{"power_smoothing": {"value_type": "double",
            "primary_power_floor": 560.5, "admin_override": {"secondary_power_floor": 4294967295}}}]}"#);
        assert!(
            matches!(answer(&b, 275, Numbering::R590), Some(Ok(Value::Double(x))) if x == 560.5)
        );
        assert!(
            matches!(answer(&b, 285, Numbering::R590), Some(Ok(Value::Double(x))) if x == 4294967295.0)
        );
        assert!(matches!(
            answer(&b, 276, Numbering::R590),
            Some(Err(NOT_SUPPORTED))
        ));
        assert!(answer(&b, 274, Numbering::R590).is_none());
        let h100 = gpu(r#"{"gpus": [{}]}"#);
        for id in FIRST..=LAST {
            assert!(matches!(
                answer(&h100, id, Numbering::R590),
                Some(Err(NOT_SUPPORTED))
            ));
        }
    }

    #[test]
    fn a_driver_before_590_knows_no_such_field() {
        let b = gpu(r#"{"gpus": [{"power_smoothing": {"primary_power_floor": 560}}]}"#);
        assert!(matches!(
            answer(&b, 275, Numbering::R575),
            Some(Err(INVALID_ARGUMENT))
        ));
        assert!(matches!(
            answer(&b, 275, Numbering::R590),
            Some(Ok(Value::Uint(560)))
        ));
    }
}
