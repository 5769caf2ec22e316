//! The `--query-gpu` fields nvidia-smi 595 and 610 added (ABI 1.11's `valid4`) on the
//! real daemon and the fake NVML, compared with what nvidia-smi prints for the same
//! hardware: nvidia_gpu_exporter's `internal/captures`, a GeForce RTX 2080 SUPER on
//! 610.57.04 (`linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt`: `[N/A]` for
//! every one of them) and an L40S on 595.80 (`linux-x86_64__nvidia-l40s__595.80.txt`:
//! `0` inactive remapped rows). No capture has a value for `gpu.base.*`,
//! `power_smoothing.*` or `bbx.time_run`: the expected text there follows nvidia-smi's
//! conventions for the unit (see the field table's `smi610.rs`).

use gpupeek_e2e::{profiles, stderr, stdout, Sandbox};
use gpupeek_shm::layout::gpu_valid3 as v3;
use serde_json::json;
use std::process::Command;

/// The names in the "query-gpu field list" section of the captures on 590.48.01 (H100
/// 80GB HBM3), 595.80 (L40S) and 610.57.04 (GeForce RTX 2080 SUPER), as nvidia-smi
/// lists them, one a line.
const FIELD_LISTS: [(&str, &str); 3] = [
    ("590.48.01", include_str!("smi_fields/590.48.01.txt")),
    ("595.80", include_str!("smi_fields/595.80.txt")),
    ("610.57.04", include_str!("smi_fields/610.57.04.txt")),
];

/// What no public NVML call answers: nvidia-smi's `pcie.link.gen.hostmax`.
const NOT_ANSWERED: [&str; 1] = ["pcie.link.gen.hostmax"];

/// The new fields, in nvidia-smi 610's order.
const NEW: &str = "remapped_rows.correctable_inactive,remapped_rows.uncorrectable_inactive,\
gpu.base.current,gpu.base.requested,gpu.base.default,gpu.base.min,gpu.base.max,\
power_smoothing.tmp_floor,power_smoothing.tmp_ceil,\
power_smoothing.hw_lifetime_remaining_percent,power_smoothing.enabled,\
power_smoothing.soc_power_smoothing_enabled,power_smoothing.priv_level,\
power_smoothing.imm_ramp_down,power_smoothing.max_percent_tmp_floor,\
power_smoothing.min_percent_tmp_floor,power_smoothing.num_preset_profiles,\
power_smoothing.curr_profile.percent_tmp_floor,power_smoothing.curr_profile.ramp_up_rate,\
power_smoothing.curr_profile.ramp_down_rate,power_smoothing.curr_profile.ramp_down_hysteresis,\
power_smoothing.active_profile,power_smoothing.admin_override.percent_tmp_floor,\
power_smoothing.admin_override.ramp_up_rate,power_smoothing.admin_override.ramp_down_rate,\
power_smoothing.admin_override.ramp_down_hysteresis,bbx.time_run";

/// Their CSV header, as the 610.57.04 capture prints it.
const NEW_HEADER: &str = "remapped_rows.correctable_inactive, \
remapped_rows.uncorrectable_inactive, gpu.base.current [W], gpu.base.requested [W], \
gpu.base.default [W], gpu.base.min [W], gpu.base.max [W], power_smoothing.tmp_floor [W], \
power_smoothing.tmp_ceil [W], power_smoothing.hw_lifetime_remaining_percent [%], \
power_smoothing.enabled, power_smoothing.soc_power_smoothing_enabled, \
power_smoothing.priv_level, power_smoothing.imm_ramp_down, \
power_smoothing.max_percent_tmp_floor [%], power_smoothing.min_percent_tmp_floor [%], \
power_smoothing.num_preset_profiles, power_smoothing.curr_profile.percent_tmp_floor [%], \
power_smoothing.curr_profile.ramp_up_rate [W/s], \
power_smoothing.curr_profile.ramp_down_rate [W/s], \
power_smoothing.curr_profile.ramp_down_hysteresis [ms], power_smoothing.active_profile, \
power_smoothing.admin_override.percent_tmp_floor [%], \
power_smoothing.admin_override.ramp_up_rate [W/s], \
power_smoothing.admin_override.ramp_down_rate [W/s], \
power_smoothing.admin_override.ramp_down_hysteresis [ms], bbx.time_run [seconds]";

/// `NVML_POWER_SMOOTHING_ADMIN_OVERRIDE_NOT_SET`.
const NOT_SET: u64 = 0xFFFF_FFFF;

fn query(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(&gpupeek_e2e::bins().client);
    cmd.arg("query").arg("--shm").arg(&sandbox.shm).args(args);
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    (out.status.code(), stdout(&out), stderr(&out))
}

/// Starts the daemon on library `profile` with `scenario` and waits for the near-static
/// tier of every GPU.
fn start(
    tag: &str,
    profile: profiles::Profile,
    scenario: &serde_json::Value,
) -> (Sandbox, gpupeek_e2e::Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.use_driver(profile);
    sandbox.write_scenario(scenario);
    let daemon = sandbox.start_daemon_with("50ms", &["--process-interval", "50ms"]);
    sandbox.wait_live(&daemon);
    sandbox.snapshot_when(&daemon, "the near-static values are read", |s| {
        s.gpus.iter().all(|g| g.valid3 & v3::GSP_MODE != 0)
    });
    (sandbox, daemon)
}

/// The capture's GeForce RTX 2080 SUPER: none of the new values.
fn geforce() -> serde_json::Value {
    json!({
        "name": "NVIDIA GeForce RTX 2080 SUPER", "uuid": "GPU-2080",
        "pci_bus_id": "00000000:01:00.0", "gsp_firmware_mode": [0, 0]
    })
}

/// A Blackwell with power smoothing (five preset profiles, the second active, two
/// admin overrides set), base GPU power limits, a black box and inactive remapped rows;
/// and slowdown counters, so that a value read from another branch's id shows.
fn blackwell() -> serde_json::Value {
    json!({
        "name": "NVIDIA GB200", "uuid": "GPU-gb200", "pci_bus_id": "00000000:02:00.0",
        "gsp_firmware_mode": [1, 1], "remapped_rows_inactive": [3, 7],
        "gpu_base_power": {
            "current_limit_mw": 800000, "default_limit_mw": 900000,
            "min_limit_mw": 200000, "max_limit_mw": 1000000
        },
        "bbx_time_run_s": 3600,
        "clocks_event_reasons_counters": {
            "sw_power_cap": 1, "sync_boost": 2, "sw_thermal_slowdown": 31,
            "hw_thermal_slowdown": 32, "hw_power_brake_slowdown": 33
        },
        "power_smoothing": {
            "enabled": 1, "priv_level": 2, "imm_ramp_down": 0, "tmp_ceil": 1000,
            "tmp_floor": 560, "max_percent_tmp_floor": 90, "min_percent_tmp_floor": 0,
            "hw_lifetime_remaining_percent": 97, "num_preset_profiles": 5,
            "active_profile": 1, "soc_power_smoothing_enabled": 1,
            "profiles": [
                {"percent_tmp_floor": 50, "ramp_up_rate": 100000, "ramp_down_rate": 50000,
                 "ramp_down_hysteresis": 1000},
                {"percent_tmp_floor": 65, "ramp_up_rate": 250500, "ramp_down_rate": 125000,
                 "ramp_down_hysteresis": 2000}
            ],
            "admin_override": {
                "percent_tmp_floor": NOT_SET, "ramp_up_rate": 300000,
                "ramp_down_rate": NOT_SET, "ramp_down_hysteresis": 500
            }
        }
    })
}

#[test]
fn every_field_nvidia_smi_590_595_and_610_list_is_accepted() {
    let (sandbox, _daemon) = start(
        "smi610-names",
        profiles::R610,
        &json!({"driver_version": "610.57.04", "gpus": [geforce()]}),
    );
    let mut names: Vec<&str> = FIELD_LISTS
        .iter()
        .flat_map(|(_, list)| list.lines())
        .map(str::trim)
        .filter(|n| !n.is_empty() && !NOT_ANSWERED.contains(n))
        .collect();
    names.sort_unstable();
    names.dedup();
    // Every name of the 590 and 595 lists is in 610's.
    assert_eq!(names.len(), 240);
    // One query per name, four at a time.
    let chunks: Vec<&[&str]> = names.chunks(names.len().div_ceil(4)).collect();
    std::thread::scope(|scope| {
        for chunk in chunks {
            let shm = sandbox.shm.as_str();
            scope.spawn(move || {
                for name in chunk {
                    let mut cmd = Command::new(&gpupeek_e2e::bins().client);
                    cmd.args(["query", "--shm", shm, "--format=csv"]);
                    cmd.arg(format!("--query-gpu={name}"));
                    let out = gpupeek_e2e::run_with_watchdog(cmd);
                    let (code, err) = (out.status.code(), stderr(&out));
                    assert_eq!(code, Some(0), "{name}: {err}");
                }
            });
        }
    });
    let (code, _, err) = query(&sandbox, &["--query-gpu=pcie.link.gen.hostmax"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn the_610_capture_prints_na_for_every_new_field() {
    let (sandbox, _daemon) = start(
        "smi610-geforce",
        profiles::R610,
        &json!({"driver_version": "610.57.04", "gpus": [geforce()]}),
    );
    let arg = format!("--query-gpu={NEW}");
    let (code, out, err) = query(&sandbox, &[&arg, "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    let na = ["[N/A]"; 27].join(", ");
    assert_eq!(out, format!("{NEW_HEADER}\n{na}\n"));
}

#[test]
fn the_l40s_on_595_prints_its_inactive_remapped_rows() {
    let l40s = json!({
        "name": "NVIDIA L40S", "uuid": "GPU-l40s", "pci_bus_id": "00000000:03:00.0",
        "gsp_firmware_mode": [1, 1], "remapped_rows_inactive": [0, 0]
    });
    let arg = "--query-gpu=remapped_rows.correctable_inactive,\
remapped_rows.uncorrectable_inactive";
    // 595 exports what the fake's R590 profile has; a 590 driver has no field 301.
    for (driver, expected) in [("595.80", "0, 0"), ("590.48.01", "[N/A], [N/A]")] {
        let (sandbox, _daemon) = start(
            &format!("smi610-l40s-{driver}"),
            profiles::R590,
            &json!({"driver_version": driver, "gpus": [l40s.clone(), geforce()]}),
        );
        let (code, out, err) = query(&sandbox, &[arg, "--format=csv"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            out,
            format!(
                "remapped_rows.correctable_inactive, remapped_rows.uncorrectable_inactive\n\
                 {expected}\n[N/A], [N/A]\n"
            ),
            "{driver}"
        );
    }
}

#[test]
fn a_blackwell_prints_its_values_by_each_drivers_numbering() {
    let arg = format!("--query-gpu={NEW}");
    let smoothing = "560.00 W, 1000.00 W, 97 %, Yes";
    let profile = "2, Disabled, 90 %, 0 %, 5, 65 %, 250.50 W/s, 125.00 W/s, 2000 ms, 1, \
[N/A], 300.00 W/s, [N/A], 500 ms";
    let na = |n: usize| ["[N/A]"; 27][..n].join(", ");
    // 610: everything; 595: no base scope, no SOC smoothing, no black box; 580: power
    // smoothing at 256-273 (a read of 251-268 would print the slowdown counters), no
    // inactive remapped rows; 565: no power smoothing field at all.
    let cases = [
        (
            profiles::R610,
            "610.57.04",
            format!(
                "3, 7, 800.00 W, [N/A], 900.00 W, 200.00 W, 1000.00 W, {smoothing}, Enabled, \
{profile}, 3600 seconds"
            ),
        ),
        (
            profiles::R590,
            "595.80",
            format!("3, 7, {}, {smoothing}, [N/A], {profile}, [N/A]", na(5)),
        ),
        (
            profiles::R590,
            "580.95.05",
            format!("{}, {smoothing}, [N/A], {profile}, [N/A]", na(7)),
        ),
        (profiles::R590, "565.57.01", na(27)),
    ];
    for (profile, driver, expected) in cases {
        let (sandbox, daemon) = start(
            &format!("smi610-blackwell-{driver}"),
            profile,
            &json!({"driver_version": driver, "gpus": [blackwell(), geforce()]}),
        );
        let (code, out, err) = query(&sandbox, &[&arg, "--format=csv"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            out,
            format!("{NEW_HEADER}\n{expected}\n{}\n", na(27)),
            "{driver}"
        );
        sandbox.let_ticks_pass(&daemon, 2);
        let snap = sandbox.segment().snapshot().unwrap();
        for g in &snap.gpus {
            assert_eq!(g.nvml_error_code, 0, "{driver}: GPU {}", g.index);
        }
    }
}

#[test]
fn without_the_entry_point_bbx_time_run_is_na() {
    let (sandbox, _daemon) = start(
        "smi610-bbx-590",
        profiles::R590,
        &json!({"driver_version": "590.48.01", "gpus": [blackwell()]}),
    );
    let (code, out, err) = query(&sandbox, &["--query-gpu=bbx.time_run", "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "bbx.time_run [seconds]\n[N/A]\n");
    let (_, out, _) = query(
        &sandbox,
        &["--query-gpu=bbx.time_run", "--format=csv,noheader,nounits"],
    );
    assert_eq!(out, "[N/A]\n");
}
