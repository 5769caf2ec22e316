//! Power smoothing (Blackwell), answered from a GPU's scenario object
//! `power_smoothing` ([`PowerSmoothing`]), by nvidia-smi's names:
//!
//! - the state, active preset profile, per-profile values and admin overrides
//!   (`NVML_FI_PWR_SMOOTHING_ENABLED` to `..._ADMIN_OVERRIDE_RAMP_DOWN_HYST_VAL`), at the
//!   eighteen ids the driver's numbering puts them ([`Numbering::power_smoothing`]:
//!   251–268 on R570 and R590+, 256–273 on R575/R580);
//! - state-of-charge power smoothing (300, R610+);
//! - delayed power smoothing: field values 275 to 288 (nvml.h of NVML 13.1, R590+).
//!
//! The `PROFILE_*` values are "for a given profile" (nvml.h): with a `profiles` list
//! they answer the profile the entry's `scopeId` names (`NOT_SUPPORTED` past the list),
//! else `curr_profile`'s whatever the scope.
//!
//! As real drivers: a GPU without the object (every GPU before Blackwell, the H100 and
//! H200 of nvidia_gpu_exporter's 590.48.01 captures) answers each `NOT_SUPPORTED`; a
//! driver that does not have an id (275–288 before R590, 300 before R610: past its
//! `NVML_FI_MAX` or not defined) answers each entry `INVALID_ARGUMENT` whatever the GPU
//! (nvidia-smi prints `[N/A]` either way). An admin override nobody set reads
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

/// A preset profile's or the admin override's values; an absent one is not supported.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Percent TMP floor.
    pub percent_tmp_floor: Option<f64>,
    /// Ramp up rate, mW/s.
    pub ramp_up_rate: Option<f64>,
    /// Ramp down rate, mW/s.
    pub ramp_down_rate: Option<f64>,
    /// Ramp down hysteresis, ms.
    pub ramp_down_hysteresis: Option<f64>,
    /// Secondary power floor, watts.
    pub secondary_power_floor: Option<f64>,
    /// Primary floor activation window multiplier.
    pub primary_floor_act_window_multiplier: Option<f64>,
    /// Primary floor target window multiplier.
    pub primary_floor_tar_window_multiplier: Option<f64>,
    /// Primary floor activation offset, watts.
    pub primary_floor_act_offset: Option<f64>,
}

/// A Blackwell GPU's power smoothing, by nvidia-smi's names; an absent value is not
/// supported.
#[derive(Debug, Clone, Default, Deserialize)]
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
    /// ENABLED: 1 or 0.
    pub enabled: Option<f64>,
    /// PRIV_LVL.
    pub priv_level: Option<f64>,
    /// IMM_RAMP_DOWN_ENABLED: 1 or 0.
    pub imm_ramp_down: Option<f64>,
    /// APPLIED_TMP_CEIL, watts.
    pub tmp_ceil: Option<f64>,
    /// APPLIED_TMP_FLOOR, watts.
    pub tmp_floor: Option<f64>,
    /// MAX_PERCENT_TMP_FLOOR_SETTING.
    pub max_percent_tmp_floor: Option<f64>,
    /// MIN_PERCENT_TMP_FLOOR_SETTING.
    pub min_percent_tmp_floor: Option<f64>,
    /// HW_CIRCUITRY_PERCENT_LIFETIME_REMAINING.
    pub hw_lifetime_remaining_percent: Option<f64>,
    /// MAX_NUM_PRESET_PROFILES.
    pub num_preset_profiles: Option<f64>,
    /// ACTIVE_PRESET_PROFILE.
    pub active_profile: Option<f64>,
    /// 300 (R610+): 1 or 0.
    pub soc_power_smoothing_enabled: Option<f64>,
    /// The preset profiles, by number: the `PROFILE_*` values of the profile an entry's
    /// `scopeId` names. Empty: `curr_profile` answers for every scope.
    #[serde(default)]
    pub profiles: Vec<Profile>,
    /// The `PROFILE_*` values without `profiles` (281 to 284 in main's scenarios).
    #[serde(default)]
    pub curr_profile: Profile,
    /// 285 to 288 and the renumbered `ADMIN_OVERRIDE_*`: the admin override's.
    #[serde(default)]
    pub admin_override: Profile,
}

impl PowerSmoothing {
    /// The profile `scope` names.
    fn profile(&self, scope: u32) -> Option<&Profile> {
        if self.profiles.is_empty() {
            return Some(&self.curr_profile);
        }
        self.profiles.get(scope as usize)
    }

    /// The scenario's value of delayed power smoothing field `id` (275 to 288) for
    /// `scopeId` `scope`.
    fn get(&self, id: u32, scope: u32) -> Option<f64> {
        let a = &self.admin_override;
        match id {
            275 => self.primary_power_floor,
            276 => self.secondary_power_floor,
            277 => self.min_primary_floor_activation_offset,
            278 => self.min_primary_floor_activation_point,
            279 => self.window_multiplier,
            280 => self.delayed_power_smoothing_supported,
            281 => self.profile(scope)?.secondary_power_floor,
            282 => self.profile(scope)?.primary_floor_act_window_multiplier,
            283 => self.profile(scope)?.primary_floor_tar_window_multiplier,
            284 => self.profile(scope)?.primary_floor_act_offset,
            285 => a.secondary_power_floor,
            286 => a.primary_floor_act_window_multiplier,
            287 => a.primary_floor_tar_window_multiplier,
            288 => a.primary_floor_act_offset,
            _ => None,
        }
    }

    /// The value `offset` ids after `NVML_FI_PWR_SMOOTHING_ENABLED`, for `scope`.
    fn renumbered(&self, offset: u32, scope: u32) -> Option<f64> {
        let a = &self.admin_override;
        match offset {
            0 => self.enabled,
            1 => self.priv_level,
            2 => self.imm_ramp_down,
            3 => self.tmp_ceil,
            4 => self.tmp_floor,
            5 => self.max_percent_tmp_floor,
            6 => self.min_percent_tmp_floor,
            7 => self.hw_lifetime_remaining_percent,
            8 => self.num_preset_profiles,
            9 => self.profile(scope)?.percent_tmp_floor,
            10 => self.profile(scope)?.ramp_up_rate,
            11 => self.profile(scope)?.ramp_down_rate,
            12 => self.profile(scope)?.ramp_down_hysteresis,
            13 => self.active_profile,
            14 => a.percent_tmp_floor,
            15 => a.ramp_up_rate,
            16 => a.ramp_down_rate,
            17 => a.ramp_down_hysteresis,
            _ => None,
        }
    }
}

/// `NVML_FI_PWR_SMOOTHING_SOC_POWER_SMOOTHING_ENABLED` (CUDA 13.3, R610+).
pub const SOC_ENABLED: u32 = 300;

/// The answer to field `id` with `scopeId` `scope` on `g` on a driver that numbers its
/// fields `numbering`, if `id` is a power smoothing field there: its value, or the
/// entry's error code.
pub fn answer(g: &Gpu, id: u32, scope: u32, numbering: Numbering) -> Option<Result<Value, u32>> {
    let renumbered = numbering
        .power_smoothing()
        .filter(|first| (*first..first + 18).contains(&id))
        .map(|first| id - first);
    let delayed = (FIRST..=LAST).contains(&id);
    if !delayed && renumbered.is_none() && id != SOC_ENABLED {
        return None;
    }
    if (delayed && numbering < Numbering::R590)
        || (id == SOC_ENABLED && numbering < Numbering::R610)
    {
        return Some(Err(INVALID_ARGUMENT));
    }
    let found = g
        .power_smoothing
        .as_ref()
        .filter(|_| !g.unsupported_fields.contains(&id))
        .and_then(|s| {
            let x = match renumbered {
                Some(offset) => s.renumbered(offset, scope),
                None if id == SOC_ENABLED => s.soc_power_smoothing_enabled,
                None => s.get(id, scope),
            };
            Some((s.value_type, x?))
        });
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
            matches!(answer(&b, 275, 0, Numbering::R590), Some(Ok(Value::Double(x))) if x == 560.5)
        );
        assert!(
            matches!(answer(&b, 285, 0, Numbering::R590), Some(Ok(Value::Double(x))) if x == 4294967295.0)
        );
        assert!(matches!(
            answer(&b, 276, 0, Numbering::R590),
            Some(Err(NOT_SUPPORTED))
        ));
        assert!(answer(&b, 274, 0, Numbering::R590).is_none());
        let h100 = gpu(r#"{"gpus": [{}]}"#);
        for id in FIRST..=LAST {
            assert!(matches!(
                answer(&h100, id, 0, Numbering::R590),
                Some(Err(NOT_SUPPORTED))
            ));
        }
    }

    #[test]
    fn the_renumbered_values_and_the_profiles_answer_by_numbering_and_scope() {
        let b = gpu(
            r#"{"gpus": [{"power_smoothing": {"enabled": 1, "active_profile": 1,
            "soc_power_smoothing_enabled": 0,
            "profiles": [{"ramp_up_rate": 1000}, {"ramp_up_rate": 2000,
                          "secondary_power_floor": 700}]}}]}"#,
        );
        let uint = |r: Option<Result<Value, u32>>| match r {
            Some(Ok(Value::Uint(x))) => Some(x),
            _ => None,
        };
        assert_eq!(uint(answer(&b, 251, 0, Numbering::R610)), Some(1));
        assert_eq!(uint(answer(&b, 256, 0, Numbering::R575)), Some(1));
        assert_eq!(uint(answer(&b, 264, 0, Numbering::R590)), Some(1));
        assert_eq!(uint(answer(&b, 269, 0, Numbering::R575)), Some(1));
        assert_eq!(uint(answer(&b, 261, 1, Numbering::R590)), Some(2000));
        assert_eq!(uint(answer(&b, 261, 0, Numbering::R590)), Some(1000));
        assert_eq!(uint(answer(&b, 266, 1, Numbering::R575)), Some(2000));
        assert_eq!(uint(answer(&b, 281, 1, Numbering::R590)), Some(700));
        assert!(matches!(
            answer(&b, 261, 5, Numbering::R590),
            Some(Err(NOT_SUPPORTED))
        ));
        assert_eq!(uint(answer(&b, 300, 0, Numbering::R610)), Some(0));
        assert!(matches!(
            answer(&b, 300, 0, Numbering::R595),
            Some(Err(INVALID_ARGUMENT))
        ));
        assert!(answer(&b, 251, 0, Numbering::Before570).is_none());
        assert!(answer(&b, 269, 0, Numbering::R590).is_none());
    }

    #[test]
    fn a_driver_before_590_knows_no_such_field() {
        let b = gpu(r#"{"gpus": [{"power_smoothing": {"primary_power_floor": 560}}]}"#);
        assert!(matches!(
            answer(&b, 275, 0, Numbering::R575),
            Some(Err(INVALID_ARGUMENT))
        ));
        assert!(matches!(
            answer(&b, 275, 0, Numbering::R590),
            Some(Ok(Value::Uint(560)))
        ));
    }
}
