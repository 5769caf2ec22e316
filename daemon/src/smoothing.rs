//! Power smoothing: the values behind nvidia-smi's `power_smoothing.*` query fields.
//! Delayed power smoothing (Blackwell), nvidia-smi 590's fourteen: NVML field values 275
//! to 288 (nvml.h of NVML 13.1, R590+), published in `valid3` (ABI 1.10); and the
//! nineteen nvidia-smi 610 lists besides: the state, the active preset profile's values
//! and the admin overrides (`NVML_FI_PWR_SMOOTHING_*`, whose ids nvml.h renumbered
//! between branches: [`Numbering`]) and state-of-charge smoothing (300, R610+),
//! published in `valid4` (ABI 1.11). nvml-wrapper-sys names none of the ids it needs.
//! Read on the near-static tier ([`crate::tiers::STATIC`]) in two
//! `nvmlDeviceGetFieldValues` calls ([`sample4`]), one on a GPU without power smoothing,
//! never on the fast tick.
//!
//! Units as nvml.h gives them: the floors, ceiling and offsets in watts (published in
//! milliwatts, as every power in the segment), the window multiplier and hysteresis in
//! milliseconds, the ramp rates in mW/s, the percentages, multipliers and counts as
//! they are, the flags 0 or 1. A value may come as an unsigned int, an unsigned long
//! long or a double ([`crate::fields::numbers_scoped`]). "Not supported" (a GPU without
//! power smoothing) and an id the driver does not know leave a value unknown, as does
//! an admin override nobody set ([`ADMIN_OVERRIDE_NOT_SET`]).

use nvml_wrapper::{Device, Nvml};

use nvml_wrapper::error::NvmlError;

use gpupeek_shm::layout::{gpu_valid3 as v3, gpu_valid4 as v4};
use gpupeek_shm::GpuRecord;

use crate::numbering::Numbering;
use crate::reads::Fill;

/// What a value is, and so how it is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// 0 or 1.
    Flag,
    /// Watts, published as milliwatts.
    Watts,
    /// Milliseconds, or a count: published as it is.
    Plain,
    /// An admin override: watts, or [`ADMIN_OVERRIDE_NOT_SET`].
    OverrideWatts,
    /// An admin override: a count, or [`ADMIN_OVERRIDE_NOT_SET`].
    OverridePlain,
}

/// `NVML_POWER_SMOOTHING_ADMIN_OVERRIDE_NOT_SET`: an admin override nobody set.
pub const ADMIN_OVERRIDE_NOT_SET: u32 = 0xFFFF_FFFF;

/// Each value: its `valid3` bit, its field id (`NVML_FI_PWR_SMOOTHING_*`) and kind, in
/// nvidia-smi 590's order.
const FIELDS: [(u64, u32, Kind); 14] = [
    // DELAYED_PWR_SMOOTHING_SUPPORTED
    (v3::POWER_SMOOTHING_DELAYED_SUPPORTED, 280, Kind::Flag),
    // PRIMARY_POWER_FLOOR
    (v3::POWER_SMOOTHING_PRIMARY_FLOOR, 275, Kind::Watts),
    // SECONDARY_POWER_FLOOR
    (v3::POWER_SMOOTHING_SECONDARY_FLOOR, 276, Kind::Watts),
    // MIN_PRIMARY_FLOOR_ACT_OFFSET
    (v3::POWER_SMOOTHING_MIN_PRIMARY_ACT_OFFSET, 277, Kind::Watts),
    // MIN_PRIMARY_FLOOR_ACT_POINT
    (v3::POWER_SMOOTHING_MIN_PRIMARY_ACT_POINT, 278, Kind::Watts),
    // WINDOW_MULTIPLIER (ms)
    (v3::POWER_SMOOTHING_WINDOW_MULTIPLIER, 279, Kind::Plain),
    // PROFILE_SECONDARY_POWER_FLOOR
    (
        v3::POWER_SMOOTHING_PROFILE_SECONDARY_FLOOR,
        281,
        Kind::Watts,
    ),
    // PROFILE_PRIMARY_FLOOR_ACT_WIN_MULT
    (
        v3::POWER_SMOOTHING_PROFILE_ACT_WINDOW_MULT,
        282,
        Kind::Plain,
    ),
    // PROFILE_PRIMARY_FLOOR_TAR_WIN_MULT
    (
        v3::POWER_SMOOTHING_PROFILE_TAR_WINDOW_MULT,
        283,
        Kind::Plain,
    ),
    // PROFILE_PRIMARY_FLOOR_ACT_OFFSET
    (v3::POWER_SMOOTHING_PROFILE_ACT_OFFSET, 284, Kind::Watts),
    // ADMIN_OVERRIDE_SECONDARY_POWER_FLOOR
    (
        v3::POWER_SMOOTHING_ADMIN_SECONDARY_FLOOR,
        285,
        Kind::OverrideWatts,
    ),
    // ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_WIN_MULT
    (
        v3::POWER_SMOOTHING_ADMIN_ACT_WINDOW_MULT,
        286,
        Kind::OverridePlain,
    ),
    // ADMIN_OVERRIDE_PRIMARY_FLOOR_TAR_WIN_MULT
    (
        v3::POWER_SMOOTHING_ADMIN_TAR_WINDOW_MULT,
        287,
        Kind::OverridePlain,
    ),
    // ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_OFFSET
    (
        v3::POWER_SMOOTHING_ADMIN_ACT_OFFSET,
        288,
        Kind::OverrideWatts,
    ),
];

/// Every power smoothing bit.
pub const BITS: u64 = {
    let mut bits = 0;
    let mut i = 0;
    while i < FIELDS.len() {
        bits |= FIELDS[i].0;
        i += 1;
    }
    bits
};

/// The number published for `x` as NVML gave it, or `None` for no value (an admin
/// override not set). Rounded to the nearest unit; at most `u32::MAX`.
fn publish(kind: Kind, x: f64) -> Option<u32> {
    let round = |x: f64| x.round().min(f64::from(u32::MAX)) as u32;
    match kind {
        Kind::OverrideWatts | Kind::OverridePlain if x == f64::from(ADMIN_OVERRIDE_NOT_SET) => None,
        Kind::Flag => Some(u32::from(x != 0.0)),
        Kind::Watts | Kind::OverrideWatts => Some(round(x * 1000.0)),
        Kind::Plain | Kind::OverridePlain => Some(round(x)),
    }
}

/// `slot(r, bit)`, the record's field for `bit`, and `value(r, bit)`, its value, from
/// one list.
macro_rules! slots {
    ($($bit:ident => $field:ident,)+) => {
        /// The record's field for `bit`.
        fn slot(r: &mut GpuRecord, bit: u64) -> Option<&mut u32> {
            match bit {
                $(v3::$bit => Some(&mut r.$field),)+
                _ => None,
            }
        }

        /// The record's value for `bit`.
        fn value(r: &GpuRecord, bit: u64) -> Option<u32> {
            match bit {
                $(v3::$bit => Some(r.$field),)+
                _ => None,
            }
        }
    };
}

slots! {
    POWER_SMOOTHING_DELAYED_SUPPORTED => power_smoothing_delayed_supported,
    POWER_SMOOTHING_PRIMARY_FLOOR => power_smoothing_primary_floor_mw,
    POWER_SMOOTHING_SECONDARY_FLOOR => power_smoothing_secondary_floor_mw,
    POWER_SMOOTHING_MIN_PRIMARY_ACT_OFFSET => power_smoothing_min_primary_act_offset_mw,
    POWER_SMOOTHING_MIN_PRIMARY_ACT_POINT => power_smoothing_min_primary_act_point_mw,
    POWER_SMOOTHING_WINDOW_MULTIPLIER => power_smoothing_window_multiplier_ms,
    POWER_SMOOTHING_PROFILE_SECONDARY_FLOOR => power_smoothing_profile_secondary_floor_mw,
    POWER_SMOOTHING_PROFILE_ACT_WINDOW_MULT => power_smoothing_profile_act_window_mult,
    POWER_SMOOTHING_PROFILE_TAR_WINDOW_MULT => power_smoothing_profile_tar_window_mult,
    POWER_SMOOTHING_PROFILE_ACT_OFFSET => power_smoothing_profile_act_offset_mw,
    POWER_SMOOTHING_ADMIN_SECONDARY_FLOOR => power_smoothing_admin_secondary_floor_mw,
    POWER_SMOOTHING_ADMIN_ACT_WINDOW_MULT => power_smoothing_admin_act_window_mult,
    POWER_SMOOTHING_ADMIN_TAR_WINDOW_MULT => power_smoothing_admin_tar_window_mult,
    POWER_SMOOTHING_ADMIN_ACT_OFFSET => power_smoothing_admin_act_offset_mw,
}

/// Where a value of [`FIELDS4`] has its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Id {
    /// `NVML_FI_PWR_SMOOTHING_ENABLED` plus this: the ids nvml.h renumbered
    /// ([`Numbering::power_smoothing`]).
    Renumbered(u32),
    /// `NVML_FI_PWR_SMOOTHING_SOC_POWER_SMOOTHING_ENABLED` ([`Numbering::soc_power_smoothing`]).
    Soc,
}

/// nvidia-smi 610's power smoothing values that predate delayed power smoothing (and
/// state-of-charge smoothing): each `valid4` bit, its id, its kind and whether it is one
/// of the active profile's (`NVML_FI_PWR_SMOOTHING_PROFILE_*`, "for a given profile").
/// Percentages, the privilege level, the profile count and number, and the
/// hysteresis (ms) are published as they are, the ramp rates in mW/s as NVML gives
/// them, the TMP floor and ceiling (watts) in milliwatts.
const FIELDS4: [(u64, Id, Kind, bool); 19] = [
    // APPLIED_TMP_FLOOR
    (
        v4::POWER_SMOOTHING_TMP_FLOOR,
        Id::Renumbered(4),
        Kind::Watts,
        false,
    ),
    // APPLIED_TMP_CEIL
    (
        v4::POWER_SMOOTHING_TMP_CEIL,
        Id::Renumbered(3),
        Kind::Watts,
        false,
    ),
    // HW_CIRCUITRY_PERCENT_LIFETIME_REMAINING
    (
        v4::POWER_SMOOTHING_HW_LIFETIME,
        Id::Renumbered(7),
        Kind::Plain,
        false,
    ),
    // ENABLED
    (
        v4::POWER_SMOOTHING_ENABLED,
        Id::Renumbered(0),
        Kind::Flag,
        false,
    ),
    // SOC_POWER_SMOOTHING_ENABLED
    (v4::POWER_SMOOTHING_SOC_ENABLED, Id::Soc, Kind::Flag, false),
    // PRIV_LVL
    (
        v4::POWER_SMOOTHING_PRIV_LEVEL,
        Id::Renumbered(1),
        Kind::Plain,
        false,
    ),
    // IMM_RAMP_DOWN_ENABLED
    (
        v4::POWER_SMOOTHING_IMM_RAMP_DOWN,
        Id::Renumbered(2),
        Kind::Flag,
        false,
    ),
    // MAX_PERCENT_TMP_FLOOR_SETTING
    (
        v4::POWER_SMOOTHING_MAX_PCT_TMP_FLOOR,
        Id::Renumbered(5),
        Kind::Plain,
        false,
    ),
    // MIN_PERCENT_TMP_FLOOR_SETTING
    (
        v4::POWER_SMOOTHING_MIN_PCT_TMP_FLOOR,
        Id::Renumbered(6),
        Kind::Plain,
        false,
    ),
    // MAX_NUM_PRESET_PROFILES
    (
        v4::POWER_SMOOTHING_NUM_PRESET_PROFILES,
        Id::Renumbered(8),
        Kind::Plain,
        false,
    ),
    // PROFILE_PERCENT_TMP_FLOOR
    (
        v4::POWER_SMOOTHING_PROFILE_PCT_TMP_FLOOR,
        Id::Renumbered(9),
        Kind::Plain,
        true,
    ),
    // PROFILE_RAMP_UP_RATE (mW/s)
    (
        v4::POWER_SMOOTHING_PROFILE_RAMP_UP,
        Id::Renumbered(10),
        Kind::Plain,
        true,
    ),
    // PROFILE_RAMP_DOWN_RATE (mW/s)
    (
        v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN,
        Id::Renumbered(11),
        Kind::Plain,
        true,
    ),
    // PROFILE_RAMP_DOWN_HYST_VAL (ms)
    (
        v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN_HYST,
        Id::Renumbered(12),
        Kind::Plain,
        true,
    ),
    // ACTIVE_PRESET_PROFILE
    (
        v4::POWER_SMOOTHING_ACTIVE_PROFILE,
        Id::Renumbered(13),
        Kind::Plain,
        false,
    ),
    // ADMIN_OVERRIDE_PERCENT_TMP_FLOOR
    (
        v4::POWER_SMOOTHING_ADMIN_PCT_TMP_FLOOR,
        Id::Renumbered(14),
        Kind::OverridePlain,
        false,
    ),
    // ADMIN_OVERRIDE_RAMP_UP_RATE (mW/s)
    (
        v4::POWER_SMOOTHING_ADMIN_RAMP_UP,
        Id::Renumbered(15),
        Kind::OverridePlain,
        false,
    ),
    // ADMIN_OVERRIDE_RAMP_DOWN_RATE (mW/s)
    (
        v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN,
        Id::Renumbered(16),
        Kind::OverridePlain,
        false,
    ),
    // ADMIN_OVERRIDE_RAMP_DOWN_HYST_VAL (ms)
    (
        v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN_HYST,
        Id::Renumbered(17),
        Kind::OverridePlain,
        false,
    ),
];

/// Ids of [`FIELDS`] that are the active profile's (`PROFILE_*`, 281 to 284).
const fn is_profile(id: u32) -> bool {
    matches!(id, 281..=284)
}

/// Where an answer goes: a `valid3` bit of [`FIELDS`] or a `valid4` bit of [`FIELDS4`].
#[derive(Debug, Clone, Copy)]
enum Target {
    V3(u64),
    V4(u64),
}

/// One field-value call of [`sample4`]: the ids asked, and where each answer goes and
/// as what, in the same order.
#[derive(Debug, Default)]
struct Plan {
    ids: Vec<u32>,
    targets: Vec<(Target, Kind)>,
}

impl Plan {
    /// The first call (`profile` false: the state, the delayed values and the admin
    /// overrides) or the second (the active profile's values), for a driver numbered
    /// `numbering`.
    fn of(numbering: Numbering, profile: bool) -> Plan {
        let mut plan = Plan::default();
        let mut ask = |id, target, kind| {
            plan.ids.push(id);
            plan.targets.push((target, kind));
        };
        for &(bit, id, kind, of_profile) in &FIELDS4 {
            let id = match id {
                Id::Renumbered(offset) => numbering.power_smoothing().map(|first| first + offset),
                Id::Soc => numbering.soc_power_smoothing(),
            };
            if let (Some(id), true) = (id, of_profile == profile) {
                ask(id, Target::V4(bit), kind);
            }
        }
        for &(bit, id, kind) in &FIELDS {
            if is_profile(id) == profile {
                ask(id, Target::V3(bit), kind);
            }
        }
        plan
    }
}

/// The two calls of [`sample4`] for one driver (the second only where the first says
/// the GPU has power smoothing): they depend on its [`Numbering`] only, so they are
/// planned once per NVML session (`sampler::Held`).
#[derive(Debug)]
pub struct Plans {
    /// The state, the delayed values, the active profile's number and the admin
    /// overrides.
    first: Plan,
    /// The active profile's `PROFILE_*` values.
    profile: Plan,
}

impl Plans {
    /// The calls for a driver numbered `numbering`.
    pub fn of(numbering: Numbering) -> Plans {
        Plans {
            first: Plan::of(numbering, false),
            profile: Plan::of(numbering, true),
        }
    }
}

/// Reads every power smoothing value on the near-static tier in at most two field-value
/// calls (`plans`, the session's): the state, the delayed power smoothing values, the
/// active preset profile's number and the admin overrides first, then the `PROFILE_*`
/// values with `scopeId` the active profile (nvml.h: "for a given profile"; nvidia-smi's
/// `curr_profile.*`), or 0 where the driver does not say which is active. The second
/// call is made only where the first answered one of its entries: a GPU without power
/// smoothing (every one before Blackwell) answers each of them "not supported", and a
/// driver before R590 "invalid argument" for the delayed ids it does not have, while the
/// call itself succeeds. Each answered value sets its bit.
pub fn sample4(nvml: &Nvml, plans: &Plans, d: &Device, f: &mut Fill) {
    let first = &plans.first;
    let Some(answers) = f.call(|| crate::fields::numbers_scoped(nvml, d, &first.ids, 0)) else {
        return;
    };
    // Per entry, as real drivers answer: the call succeeded, and no entry did where the
    // GPU has no power smoothing.
    let has_smoothing = answers.iter().any(Result::is_ok);
    store(f, &first.targets, answers);
    if !has_smoothing {
        return;
    }
    let active = if f.rec.valid4 & v4::POWER_SMOOTHING_ACTIVE_PROFILE != 0 {
        f.rec.power_smoothing_active_profile
    } else {
        0
    };
    let second = &plans.profile;
    if let Some(answers) = f.call(|| crate::fields::numbers_scoped(nvml, d, &second.ids, active)) {
        store(f, &second.targets, answers);
    }
}

/// Stores `answers` as `asked` says; each answered value sets its bit.
fn store(f: &mut Fill, asked: &[(Target, Kind)], answers: Vec<Result<f64, NvmlError>>) {
    for (&(target, kind), answer) in asked.iter().zip(answers) {
        // Per entry, "not supported" (GPUs without power smoothing) and "invalid
        // argument" (an id past the driver's NVML_FI_MAX) alike leave the value unknown.
        let Some(v) = answer.ok().and_then(|x| publish(kind, x)) else {
            continue;
        };
        match target {
            Target::V3(bit) => {
                if let Some(slot) = slot(f.rec, bit) {
                    *slot = v;
                    f.rec.valid3 |= bit;
                }
            }
            Target::V4(bit) => {
                if let Some(slot) = slot4(f.rec, bit) {
                    *slot = v;
                    f.rec.valid4 |= bit;
                }
            }
        }
    }
}

/// The record's field for `valid4` bit `bit`.
fn slot4(r: &mut GpuRecord, bit: u64) -> Option<&mut u32> {
    Some(match bit {
        v4::POWER_SMOOTHING_TMP_FLOOR => &mut r.power_smoothing_tmp_floor_mw,
        v4::POWER_SMOOTHING_TMP_CEIL => &mut r.power_smoothing_tmp_ceil_mw,
        v4::POWER_SMOOTHING_HW_LIFETIME => &mut r.power_smoothing_hw_lifetime_pct,
        v4::POWER_SMOOTHING_ENABLED => &mut r.power_smoothing_enabled,
        v4::POWER_SMOOTHING_SOC_ENABLED => &mut r.power_smoothing_soc_enabled,
        v4::POWER_SMOOTHING_PRIV_LEVEL => &mut r.power_smoothing_priv_level,
        v4::POWER_SMOOTHING_IMM_RAMP_DOWN => &mut r.power_smoothing_imm_ramp_down,
        v4::POWER_SMOOTHING_MAX_PCT_TMP_FLOOR => &mut r.power_smoothing_max_pct_tmp_floor,
        v4::POWER_SMOOTHING_MIN_PCT_TMP_FLOOR => &mut r.power_smoothing_min_pct_tmp_floor,
        v4::POWER_SMOOTHING_NUM_PRESET_PROFILES => &mut r.power_smoothing_num_preset_profiles,
        v4::POWER_SMOOTHING_PROFILE_PCT_TMP_FLOOR => &mut r.power_smoothing_profile_pct_tmp_floor,
        v4::POWER_SMOOTHING_PROFILE_RAMP_UP => &mut r.power_smoothing_profile_ramp_up_mw_s,
        v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN => &mut r.power_smoothing_profile_ramp_down_mw_s,
        v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN_HYST => {
            &mut r.power_smoothing_profile_ramp_down_hyst_ms
        }
        v4::POWER_SMOOTHING_ACTIVE_PROFILE => &mut r.power_smoothing_active_profile,
        v4::POWER_SMOOTHING_ADMIN_PCT_TMP_FLOOR => &mut r.power_smoothing_admin_pct_tmp_floor,
        v4::POWER_SMOOTHING_ADMIN_RAMP_UP => &mut r.power_smoothing_admin_ramp_up_mw_s,
        v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN => &mut r.power_smoothing_admin_ramp_down_mw_s,
        v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN_HYST => &mut r.power_smoothing_admin_ramp_down_hyst_ms,
        _ => return None,
    })
}

/// Copies the values behind `bits` (and only those) from `from` into `to`; the caller
/// copies the validity bits.
pub fn copy(from: &GpuRecord, to: &mut GpuRecord, bits: u64) {
    for (bit, _, _) in FIELDS {
        if let (true, Some(v), Some(slot)) = (bits & bit != 0, value(from, bit), slot(to, bit)) {
            *slot = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watts_become_milliwatts_and_an_unset_override_no_value() {
        assert_eq!(publish(Kind::Watts, 560.0), Some(560_000));
        assert_eq!(publish(Kind::Watts, 562.25), Some(562_250));
        assert_eq!(publish(Kind::Plain, 5.0), Some(5));
        assert_eq!(publish(Kind::Flag, 1.0), Some(1));
        assert_eq!(publish(Kind::Flag, 0.0), Some(0));
        assert_eq!(publish(Kind::OverrideWatts, 4_294_967_295.0), None);
        assert_eq!(publish(Kind::OverridePlain, 4_294_967_295.0), None);
        assert_eq!(publish(Kind::OverridePlain, 30.0), Some(30));
        assert_eq!(publish(Kind::Watts, 4_294_967_295.0), Some(u32::MAX));
    }

    #[test]
    fn each_driver_is_asked_its_own_ids_and_the_profile_values_apart() {
        let ids = |v: &str, profile: bool| -> Vec<u32> {
            let mut ids = Plan::of(Numbering::of(Some(v)), profile).ids;
            ids.sort_unstable();
            ids
        };
        let delayed: Vec<u32> = (275..=280).chain(285..=288).collect();
        let with = |mut a: Vec<u32>, b: &[u32]| {
            a.extend_from_slice(b);
            a.sort_unstable();
            a
        };
        let state = |first: u32| -> Vec<u32> {
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 14, 15, 16, 17]
                .iter()
                .map(|o| first + o)
                .collect()
        };
        assert_eq!(
            ids("610.57.04", false),
            with(with(state(251), &delayed), &[300])
        );
        assert_eq!(ids("590.48.01", false), with(state(251), &delayed));
        assert_eq!(ids("580.95.05", false), with(state(256), &delayed));
        assert_eq!(ids("560.35.03", false), delayed);
        assert_eq!(
            ids("610.57.04", true),
            vec![260, 261, 262, 263, 281, 282, 283, 284]
        );
        assert_eq!(
            ids("580.95.05", true),
            vec![265, 266, 267, 268, 281, 282, 283, 284]
        );
        let mut r = GpuRecord::default();
        for (i, (bit, ..)) in FIELDS4.iter().enumerate() {
            *slot4(&mut r, *bit).unwrap() = i as u32 + 1;
        }
        let bits: u64 = FIELDS4.iter().map(|f| f.0).fold(0, |a, b| a | b);
        assert_eq!(bits.count_ones(), 19);
        assert_eq!(r.power_smoothing_admin_ramp_down_hyst_ms, 19);
    }

    #[test]
    fn each_bit_has_its_own_id_and_field() {
        assert_eq!(BITS.count_ones(), 14);
        let mut ids: Vec<u32> = FIELDS.iter().map(|f| f.1).collect();
        ids.sort_unstable();
        assert_eq!(ids, (275..=288).collect::<Vec<_>>());
        let mut r = GpuRecord::default();
        for (i, (bit, _, _)) in FIELDS.iter().enumerate() {
            *slot(&mut r, *bit).unwrap() = i as u32 + 1;
        }
        let mut to = GpuRecord::default();
        copy(&r, &mut to, BITS & !v3::POWER_SMOOTHING_ADMIN_ACT_OFFSET);
        let mut seen: Vec<u32> = FIELDS.iter().filter_map(|f| value(&to, f.0)).collect();
        seen.sort_unstable();
        assert_eq!(seen, [0].into_iter().chain(1..=13).collect::<Vec<_>>());
    }
}
