//! The field table's entries for nvidia-smi 590's fourteen `power_smoothing.*`
//! `--query-gpu` fields: delayed power smoothing (Blackwell, NVML field values 275 to
//! 288 of R590+ drivers; ABI 1.10's `valid3` bits 41 to 54), in nvidia-smi's order.
//!
//! Every capture (nvidia_gpu_exporter's `internal/captures`: an H100 and an H200 on
//! 590.48.01) prints `[N/A]` for all fourteen, and none has a GPU that answers them: the
//! way a value prints follows nvidia-smi's conventions for the rest and is not yet
//! checked against a Blackwell capture. `Yes`/`No` for the support (nvidia-smi's
//! `--help-query-gpu`: "Indicates whether delayed power smoothing is supported
//! (Yes/No)"), watts with two decimals like every other power value (`560.00 W`),
//! the window multiplier in milliseconds (`5 ms`, its CSV header says `[ms]`) and the
//! four window multipliers as plain numbers (their header has no unit). An admin
//! override nobody set has no value (`[N/A]`), as one the GPU does not support.

use super::table::{int, yes};
use super::Unit::{Count, MilliWatts, Milliseconds, Text};
use super::{field, Aggregate, Field, Value};
use crate::gpu::Gpu;
use gpupeek_shm::layout::gpu_valid3 as v3;

/// Value `i` of [`crate::details::Newer::power_smoothing`].
fn value(g: &Gpu, i: usize) -> Option<u32> {
    g.details.newer.power_smoothing[i]
}

/// Value `i`, a power published in milliwatts.
fn mw(g: &Gpu, i: usize) -> Option<Value<'static>> {
    int(value(g, i))
}

/// The entries, in the order nvidia-smi 590's `--help-query-gpu` lists them.
pub(super) const FIELDS: &[Field] = &[
    field("power_smoothing_supported", Text, Aggregate::Join, |g| {
        yes(value(g, 0).map(|x| x != 0))
    })
    .valid3(v3::POWER_SMOOTHING_DELAYED_SUPPORTED)
    .not_in_templates()
    .about("whether the GPU supports delayed power smoothing: Yes or No (Blackwell, R590+)")
    .smi(&[&["power_smoothing.delayed_power_smoothing_supported"]]),
    field(
        "power_smoothing_primary_floor",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 1),
    )
    .valid3(v3::POWER_SMOOTHING_PRIMARY_FLOOR)
    .not_in_templates()
    .about("the primary power floor of power smoothing now")
    .smi(&[&["power_smoothing.primary_power_floor"]]),
    field(
        "power_smoothing_secondary_floor",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 2),
    )
    .valid3(v3::POWER_SMOOTHING_SECONDARY_FLOOR)
    .not_in_templates()
    .about("the secondary power floor now, applied during active workload periods")
    .smi(&[&["power_smoothing.secondary_power_floor"]]),
    field(
        "power_smoothing_min_act_offset",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 3),
    )
    .valid3(v3::POWER_SMOOTHING_MIN_PRIMARY_ACT_OFFSET)
    .not_in_templates()
    .about("the smallest primary floor activation offset the driver accepts")
    .smi(&[&["power_smoothing.min_primary_floor_activation_offset"]]),
    field(
        "power_smoothing_min_act_point",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 4),
    )
    .valid3(v3::POWER_SMOOTHING_MIN_PRIMARY_ACT_POINT)
    .not_in_templates()
    .about("the lowest point at which the driver switches between the two power floors")
    .smi(&[&["power_smoothing.min_primary_floor_activation_point"]]),
    field(
        "power_smoothing_window_multiplier",
        Milliseconds,
        Aggregate::Max,
        |g| int(value(g, 5)),
    )
    .valid3(v3::POWER_SMOOTHING_WINDOW_MULTIPLIER)
    .not_in_templates()
    .about("the unit of power smoothing's window multipliers")
    .smi(&[&["power_smoothing.window_multiplier"]]),
    field(
        "power_smoothing_profile_secondary_floor",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 6),
    )
    .valid3(v3::POWER_SMOOTHING_PROFILE_SECONDARY_FLOOR)
    .not_in_templates()
    .about("the active preset profile's secondary power floor")
    .smi(&[&["power_smoothing.curr_profile.secondary_power_floor"]]),
    field(
        "power_smoothing_profile_act_window",
        Count,
        Aggregate::Join,
        |g| int(value(g, 7)),
    )
    .valid3(v3::POWER_SMOOTHING_PROFILE_ACT_WINDOW_MULT)
    .not_in_templates()
    .about("the active profile's primary floor activation window multiplier")
    .smi(&[&["power_smoothing.curr_profile.primary_floor_act_window_multiplier"]]),
    field(
        "power_smoothing_profile_tar_window",
        Count,
        Aggregate::Join,
        |g| int(value(g, 8)),
    )
    .valid3(v3::POWER_SMOOTHING_PROFILE_TAR_WINDOW_MULT)
    .not_in_templates()
    .about("the active profile's primary floor target window multiplier")
    .smi(&[&["power_smoothing.curr_profile.primary_floor_tar_window_multiplier"]]),
    field(
        "power_smoothing_profile_act_offset",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 9),
    )
    .valid3(v3::POWER_SMOOTHING_PROFILE_ACT_OFFSET)
    .not_in_templates()
    .about("the active profile's primary floor activation offset")
    .smi(&[&["power_smoothing.curr_profile.primary_floor_act_offset"]]),
    field(
        "power_smoothing_admin_secondary_floor",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 10),
    )
    .valid3(v3::POWER_SMOOTHING_ADMIN_SECONDARY_FLOOR)
    .not_in_templates()
    .about("the admin override of the secondary power floor, if set")
    .smi(&[&["power_smoothing.admin_override.secondary_power_floor"]]),
    field(
        "power_smoothing_admin_act_window",
        Count,
        Aggregate::Join,
        |g| int(value(g, 11)),
    )
    .valid3(v3::POWER_SMOOTHING_ADMIN_ACT_WINDOW_MULT)
    .not_in_templates()
    .about("the admin override of the activation window multiplier, if set")
    .smi(&[&["power_smoothing.admin_override.primary_floor_act_window_multiplier"]]),
    field(
        "power_smoothing_admin_tar_window",
        Count,
        Aggregate::Join,
        |g| int(value(g, 12)),
    )
    .valid3(v3::POWER_SMOOTHING_ADMIN_TAR_WINDOW_MULT)
    .not_in_templates()
    .about("the admin override of the target window multiplier, if set")
    .smi(&[&["power_smoothing.admin_override.primary_floor_tar_window_multiplier"]]),
    field(
        "power_smoothing_admin_act_offset",
        MilliWatts,
        Aggregate::Sum,
        |g| mw(g, 13),
    )
    .valid3(v3::POWER_SMOOTHING_ADMIN_ACT_OFFSET)
    .not_in_templates()
    .about("the admin override of the primary floor activation offset, if set")
    .smi(&[&["power_smoothing.admin_override.primary_floor_act_offset"]]),
];
