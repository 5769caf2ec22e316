//! The field table's entries for the `--query-gpu` fields nvidia-smi 595 and 610 added
//! (ABI 1.11's `valid4` bits), after nvidia-smi 590's: the inactive remapped rows
//! (595), the base GPU power limits (`gpu.base.*`), power smoothing's state, active
//! profile and admin overrides, and the GPU's run time from its black box (610).
//!
//! The captures (nvidia_gpu_exporter's `internal/captures`) print `0` for the inactive
//! remapped rows on an L40S with 595.80 and `[N/A]` for everything else here (GeForce
//! RTX 2080 SUPER on 610.57.04 and, for `bbx.time_run`, `[Function Not Found]` on
//! Windows 610.62, whose library lacks the entry point: on Linux a missing entry point
//! is `[N/A]`, as for every other field). No capture has a value for the `gpu.base.*`,
//! `power_smoothing.*` or `bbx.time_run` fields, so how a value prints follows
//! nvidia-smi's conventions for its unit and is NOT yet checked against a capture:
//! watts with two decimals (`560.00 W`), ramp rates in W/s with two decimals
//! (`100.00 W/s`, as nvidia_gpu_exporter's integration test feeds its parser),
//! percentages and milliseconds as integers (`80 %`, `5 ms`), `bbx.time_run` as whole
//! seconds (`3600 seconds`, its CSV header says `[seconds]`), `Yes`/`No` for
//! `power_smoothing.enabled` and `Enabled`/`Disabled` for the state-of-charge and
//! immediate ramp down settings (their `--help-query-gpu` texts say so).

use super::table::{enabled, int, yes};
use super::Unit::{Count, MilliWatts, MilliWattsPerSec, Milliseconds, Percent, Seconds, Text};
use super::{field, Aggregate, Field, Value};
use crate::gpu::Gpu;
use gpupeek_shm::layout::gpu_valid4 as v4;

/// The value behind `valid4` bit `bit`.
fn value(g: &Gpu, bit: u64) -> Option<u32> {
    g.details.newer.v4[bit.trailing_zeros() as usize]
}

fn number(g: &Gpu, bit: u64) -> Option<Value<'static>> {
    int(value(g, bit))
}

/// `remapped_rows.correctable_inactive` and `.uncorrectable_inactive` (595), which
/// nvidia-smi lists after `remapped_rows.correctable` and `.uncorrectable` respectively.
pub(super) const REMAPPED_INACTIVE: &[Field] = &[
    field(
        "remapped_rows_correctable_inactive",
        Count,
        Aggregate::Sum,
        |g| number(g, v4::REMAPPED_ROWS_CORRECTABLE_INACTIVE),
    )
    .valid4(v4::REMAPPED_ROWS_CORRECTABLE_INACTIVE)
    .not_in_templates()
    .about("rows remapped for correctable ECC errors that are inactive (R595+)")
    .smi(&[&["remapped_rows.correctable_inactive"]]),
    field(
        "remapped_rows_uncorrectable_inactive",
        Count,
        Aggregate::Sum,
        |g| number(g, v4::REMAPPED_ROWS_UNCORRECTABLE_INACTIVE),
    )
    .valid4(v4::REMAPPED_ROWS_UNCORRECTABLE_INACTIVE)
    .not_in_templates()
    .about("rows remapped for uncorrectable ECC errors that are inactive (R595+)")
    .smi(&[&["remapped_rows.uncorrectable_inactive"]]),
];

/// `gpu.base.*` (610), which nvidia-smi lists after `module.power.*`.
pub(super) const GPU_BASE: &[Field] = &[
    field("gpu_base_current", MilliWatts, Aggregate::Sum, |g| {
        number(g, v4::GPU_BASE_CURRENT)
    })
    .valid4(v4::GPU_BASE_CURRENT)
    .not_in_templates()
    .about("the base GPU power limit enforced now (NVML's current limit with the GPU base scope, R610+)")
    .smi(&[&["gpu.base.current"]]),
    field("gpu_base_requested", MilliWatts, Aggregate::Sum, |g| {
        number(g, v4::GPU_BASE_REQUESTED)
    })
    .valid4(v4::GPU_BASE_REQUESTED)
    .not_in_templates()
    .about("the base GPU power limit software requested (R610+)")
    .smi(&[&["gpu.base.requested"]]),
    field("gpu_base_default", MilliWatts, Aggregate::Sum, |g| {
        number(g, v4::GPU_BASE_DEFAULT)
    })
    .valid4(v4::GPU_BASE_DEFAULT)
    .not_in_templates()
    .about("the default base GPU power limit (R610+)")
    .smi(&[&["gpu.base.default"]]),
    field("gpu_base_min", MilliWatts, Aggregate::Sum, |g| {
        number(g, v4::GPU_BASE_MIN)
    })
    .valid4(v4::GPU_BASE_MIN)
    .not_in_templates()
    .about("the lowest base GPU power limit that can be set (R610+)")
    .smi(&[&["gpu.base.min"]]),
    field("gpu_base_max", MilliWatts, Aggregate::Sum, |g| {
        number(g, v4::GPU_BASE_MAX)
    })
    .valid4(v4::GPU_BASE_MAX)
    .not_in_templates()
    .about("the highest base GPU power limit that can be set (R610+)")
    .smi(&[&["gpu.base.max"]]),
];

/// The nineteen `power_smoothing.*` (610) besides delayed power smoothing's, in
/// nvidia-smi 610's order (the field table interleaves the two: see `fields::ALL`).
pub(super) const POWER_SMOOTHING: &[Field] = &[
    field(
        "power_smoothing_tmp_floor",
        MilliWatts,
        Aggregate::Sum,
        |g| number(g, v4::POWER_SMOOTHING_TMP_FLOOR),
    )
    .valid4(v4::POWER_SMOOTHING_TMP_FLOOR)
    .not_in_templates()
    .about("power smoothing's applied TMP floor")
    .smi(&[&["power_smoothing.tmp_floor"]]),
    field(
        "power_smoothing_tmp_ceil",
        MilliWatts,
        Aggregate::Sum,
        |g| number(g, v4::POWER_SMOOTHING_TMP_CEIL),
    )
    .valid4(v4::POWER_SMOOTHING_TMP_CEIL)
    .not_in_templates()
    .about("power smoothing's applied TMP ceiling")
    .smi(&[&["power_smoothing.tmp_ceil"]]),
    field(
        "power_smoothing_hw_lifetime",
        Percent,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_HW_LIFETIME),
    )
    .valid4(v4::POWER_SMOOTHING_HW_LIFETIME)
    .not_in_templates()
    .about("remaining lifetime of the power smoothing circuitry")
    .smi(&[&["power_smoothing.hw_lifetime_remaining_percent"]]),
    field("power_smoothing_enabled", Text, Aggregate::Join, |g| {
        yes(value(g, v4::POWER_SMOOTHING_ENABLED).map(|x| x != 0))
    })
    .valid4(v4::POWER_SMOOTHING_ENABLED)
    .not_in_templates()
    .about("whether power smoothing is enabled: Yes or No")
    .smi(&[&["power_smoothing.enabled"]]),
    field("power_smoothing_soc_enabled", Text, Aggregate::Join, |g| {
        enabled(value(g, v4::POWER_SMOOTHING_SOC_ENABLED).map(|x| x != 0))
    })
    .valid4(v4::POWER_SMOOTHING_SOC_ENABLED)
    .not_in_templates()
    .about("state-of-charge power smoothing: Enabled or Disabled (R610+)")
    .smi(&[&["power_smoothing.soc_power_smoothing_enabled"]]),
    field("power_smoothing_priv_level", Count, Aggregate::Join, |g| {
        number(g, v4::POWER_SMOOTHING_PRIV_LEVEL)
    })
    .valid4(v4::POWER_SMOOTHING_PRIV_LEVEL)
    .not_in_templates()
    .about("power smoothing's privilege level")
    .smi(&[&["power_smoothing.priv_level"]]),
    field(
        "power_smoothing_imm_ramp_down",
        Text,
        Aggregate::Join,
        |g| enabled(value(g, v4::POWER_SMOOTHING_IMM_RAMP_DOWN).map(|x| x != 0)),
    )
    .valid4(v4::POWER_SMOOTHING_IMM_RAMP_DOWN)
    .not_in_templates()
    .about("immediate ramp down: Enabled or Disabled")
    .smi(&[&["power_smoothing.imm_ramp_down"]]),
    field(
        "power_smoothing_max_pct_tmp_floor",
        Percent,
        Aggregate::Max,
        |g| number(g, v4::POWER_SMOOTHING_MAX_PCT_TMP_FLOOR),
    )
    .valid4(v4::POWER_SMOOTHING_MAX_PCT_TMP_FLOOR)
    .not_in_templates()
    .about("the highest percent TMP floor allowed")
    .smi(&[&["power_smoothing.max_percent_tmp_floor"]]),
    field(
        "power_smoothing_min_pct_tmp_floor",
        Percent,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_MIN_PCT_TMP_FLOOR),
    )
    .valid4(v4::POWER_SMOOTHING_MIN_PCT_TMP_FLOOR)
    .not_in_templates()
    .about("the lowest percent TMP floor allowed")
    .smi(&[&["power_smoothing.min_percent_tmp_floor"]]),
    field(
        "power_smoothing_num_profiles",
        Count,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_NUM_PRESET_PROFILES),
    )
    .valid4(v4::POWER_SMOOTHING_NUM_PRESET_PROFILES)
    .not_in_templates()
    .about("the number of preset power smoothing profiles")
    .smi(&[&["power_smoothing.num_preset_profiles"]]),
    field(
        "power_smoothing_profile_pct_tmp_floor",
        Percent,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_PROFILE_PCT_TMP_FLOOR),
    )
    .valid4(v4::POWER_SMOOTHING_PROFILE_PCT_TMP_FLOOR)
    .not_in_templates()
    .about("the active preset profile's percent TMP floor")
    .smi(&[&["power_smoothing.curr_profile.percent_tmp_floor"]]),
    field(
        "power_smoothing_profile_ramp_up",
        MilliWattsPerSec,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_PROFILE_RAMP_UP),
    )
    .valid4(v4::POWER_SMOOTHING_PROFILE_RAMP_UP)
    .not_in_templates()
    .about("the active profile's ramp up rate")
    .smi(&[&["power_smoothing.curr_profile.ramp_up_rate"]]),
    field(
        "power_smoothing_profile_ramp_down",
        MilliWattsPerSec,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN),
    )
    .valid4(v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN)
    .not_in_templates()
    .about("the active profile's ramp down rate")
    .smi(&[&["power_smoothing.curr_profile.ramp_down_rate"]]),
    field(
        "power_smoothing_profile_ramp_down_hyst",
        Milliseconds,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN_HYST),
    )
    .valid4(v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN_HYST)
    .not_in_templates()
    .about("the active profile's ramp down hysteresis")
    .smi(&[&["power_smoothing.curr_profile.ramp_down_hysteresis"]]),
    field(
        "power_smoothing_active_profile",
        Count,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_ACTIVE_PROFILE),
    )
    .valid4(v4::POWER_SMOOTHING_ACTIVE_PROFILE)
    .not_in_templates()
    .about("the active preset profile's number")
    .smi(&[&["power_smoothing.active_profile"]]),
    field(
        "power_smoothing_admin_pct_tmp_floor",
        Percent,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_ADMIN_PCT_TMP_FLOOR),
    )
    .valid4(v4::POWER_SMOOTHING_ADMIN_PCT_TMP_FLOOR)
    .not_in_templates()
    .about("the admin override of the percent TMP floor, [N/A] when not set")
    .smi(&[&["power_smoothing.admin_override.percent_tmp_floor"]]),
    field(
        "power_smoothing_admin_ramp_up",
        MilliWattsPerSec,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_ADMIN_RAMP_UP),
    )
    .valid4(v4::POWER_SMOOTHING_ADMIN_RAMP_UP)
    .not_in_templates()
    .about("the admin override of the ramp up rate, [N/A] when not set")
    .smi(&[&["power_smoothing.admin_override.ramp_up_rate"]]),
    field(
        "power_smoothing_admin_ramp_down",
        MilliWattsPerSec,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN),
    )
    .valid4(v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN)
    .not_in_templates()
    .about("the admin override of the ramp down rate, [N/A] when not set")
    .smi(&[&["power_smoothing.admin_override.ramp_down_rate"]]),
    field(
        "power_smoothing_admin_ramp_down_hyst",
        Milliseconds,
        Aggregate::Join,
        |g| number(g, v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN_HYST),
    )
    .valid4(v4::POWER_SMOOTHING_ADMIN_RAMP_DOWN_HYST)
    .not_in_templates()
    .about("the admin override of the ramp down hysteresis, [N/A] when not set")
    .smi(&[&["power_smoothing.admin_override.ramp_down_hysteresis"]]),
];

/// `bbx.time_run` (610), nvidia-smi's last field.
pub(super) const BBX: &[Field] = &[field("bbx_time_run", Seconds, Aggregate::Max, |g| {
    number(g, v4::BBX_TIME_RUN)
})
.valid4(v4::BBX_TIME_RUN)
.not_in_templates()
.about("seconds the GPU has had the driver loaded, over its life, from its black box (R610+)")
.smi(&[&["bbx.time_run"]])];
