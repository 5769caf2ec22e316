//! Delayed power smoothing (Blackwell): the fourteen values behind nvidia-smi 590's
//! `power_smoothing.*` query fields, NVML field values 275 to 288 (nvml.h of NVML 13.1,
//! R590+), which nvml-wrapper-sys does not name yet. Read on the near-static tier
//! ([`crate::tiers::STATIC`]) in one `nvmlDeviceGetFieldValues` call for all fourteen,
//! never on the fast tick.
//!
//! Units as nvml.h gives them: the floors and offsets in watts (published in milliwatts,
//! as every power in the segment), the window multiplier in milliseconds, the four
//! window multipliers as counts of it, the support 0 or 1. A value may come as an
//! unsigned int, an unsigned long long or a double ([`crate::fields::numbers`]).
//! "Not supported" (every GPU before Blackwell) and an id the driver does not know
//! (drivers before R590) leave a value unknown, as does an admin override nobody set
//! ([`ADMIN_OVERRIDE_NOT_SET`]).

use nvml_wrapper::{Device, Nvml};

use gpupeek_shm::layout::gpu_valid3 as v3;
use gpupeek_shm::GpuRecord;

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

/// Reads the fourteen values in one field-value call; each answered value sets its bit.
pub fn sample(nvml: &Nvml, d: &Device, f: &mut Fill) {
    let ids = FIELDS.map(|(_, id, _)| id);
    let Some(answers) = f.call(|| crate::fields::numbers(nvml, d, ids)) else {
        return;
    };
    for ((bit, _, kind), answer) in FIELDS.iter().zip(answers) {
        // Per entry, "not supported" (GPUs before Blackwell) and "invalid argument" (an id
        // past the driver's NVML_FI_MAX) alike leave the value unknown.
        let Some(v) = answer.ok().and_then(|x| publish(*kind, x)) else {
            continue;
        };
        if let Some(slot) = slot(f.rec, *bit) {
            *slot = v;
            f.rec.valid3 |= bit;
        }
    }
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
