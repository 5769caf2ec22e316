//! nvidia-smi 590's newer `--query-gpu` fields (ABI 1.6) on the real daemon and the fake
//! NVML, compared line for line with what nvidia-smi prints for the same hardware.
//!
//! The expected text is nvidia_gpu_exporter's `internal/captures`: an H100 80GB HBM3 on
//! 590.48.01 (`linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt`: `46`, `0x3`, `0x2`,
//! `Enabled`, `None`, `Disabled`, `valid`, the deprecated power management, `2560`
//! banks at full availability) and a GeForce RTX 4080 SUPER on 595.71.05
//! (`linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt`: no T.Limit, `0x0`,
//! `HMM`, no C2C mode and no row remapping, printed `[N/A]`).

use gpupeek_e2e::{profiles, stderr, stdout, Sandbox};
use gpupeek_shm::layout::gpu_valid3 as v3;
use serde_json::json;
use std::process::Command;

const DEPRECATED: &str = "[Requested functionality has been deprecated]";

/// The two GPUs of the captures, as the fake models them on a 590 driver. NVML answers
/// the power management mode, the display mode and the applications clocks; nvidia-smi
/// 590+ prints them as deprecated without asking (nvidia_gpu_exporter's trace-verified
/// NVML backend, `internal/nvmlnative/catalog.go`, checked against every capture).
fn scenario(driver: &str) -> serde_json::Value {
    json!({"driver_version": driver, "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100",
            "pci_bus_id": "00000000:00:09.0", "temperature_c": 41,
            "margin_temperature_c": 46, "pci_class": [3, 2], "gsp_firmware_mode": [1, 1],
            "addressing_mode": 0, "c2c_mode": 0, "inforom_valid": true,
            "power_management_mode": 1, "row_remapper_histogram": [2560, 0, 0, 0, 0],
            "fabric": {
                "state": 3, "status": 0, "clique_id": 5, "health_mask": 0x1aa,
                "health_summary": 1
            }
        },
        {
            "name": "NVIDIA GeForce RTX 4080 SUPER", "uuid": "GPU-4080",
            "pci_bus_id": "00000000:01:00.0", "temperature_c": 43,
            "pci_class": [3, 0], "gsp_firmware_mode": [1, 1], "addressing_mode": 1,
            "inforom_valid": true, "power_management_mode": 1,
            "display_mode": 1, "applications_clocks_mhz": {"graphics": 2235, "memory": 11501}
        }
    ]})
}

const FIELDS: &str = "--query-gpu=temperature.gpu.tlimit,pci.baseClass,pci.subClass,\
gsp.mode.current,gsp.mode.default,addressing_mode,c2c.mode,inforom.checksum_validation,\
power.management,remapped_rows.histogram.max,remapped_rows.histogram.high,\
remapped_rows.histogram.partial,remapped_rows.histogram.low,remapped_rows.histogram.none";

/// nvidia-smi 590's fourteen `power_smoothing.*` fields, in its order.
const POWER_SMOOTHING: &str = "--query-gpu=power_smoothing.delayed_power_smoothing_supported,\
power_smoothing.primary_power_floor,power_smoothing.secondary_power_floor,\
power_smoothing.min_primary_floor_activation_offset,\
power_smoothing.min_primary_floor_activation_point,power_smoothing.window_multiplier,\
power_smoothing.curr_profile.secondary_power_floor,\
power_smoothing.curr_profile.primary_floor_act_window_multiplier,\
power_smoothing.curr_profile.primary_floor_tar_window_multiplier,\
power_smoothing.curr_profile.primary_floor_act_offset,\
power_smoothing.admin_override.secondary_power_floor,\
power_smoothing.admin_override.primary_floor_act_window_multiplier,\
power_smoothing.admin_override.primary_floor_tar_window_multiplier,\
power_smoothing.admin_override.primary_floor_act_offset";

/// Their CSV header as the H100 capture on 590.48.01 prints it.
const POWER_SMOOTHING_HEADER: &str = "power_smoothing.delayed_power_smoothing_supported, \
power_smoothing.primary_power_floor [W], power_smoothing.secondary_power_floor [W], \
power_smoothing.min_primary_floor_activation_offset [W], \
power_smoothing.min_primary_floor_activation_point [W], power_smoothing.window_multiplier [ms], \
power_smoothing.curr_profile.secondary_power_floor [W], \
power_smoothing.curr_profile.primary_floor_act_window_multiplier, \
power_smoothing.curr_profile.primary_floor_tar_window_multiplier, \
power_smoothing.curr_profile.primary_floor_act_offset [W], \
power_smoothing.admin_override.secondary_power_floor [W], \
power_smoothing.admin_override.primary_floor_act_window_multiplier, \
power_smoothing.admin_override.primary_floor_tar_window_multiplier, \
power_smoothing.admin_override.primary_floor_act_offset [W]";

fn query(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(&gpupeek_e2e::bins().client);
    cmd.arg("query").arg("--shm").arg(&sandbox.shm).args(args);
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    (out.status.code(), stdout(&out), stderr(&out))
}

/// Starts the daemon on driver `profile` and waits for a slow tick (the T.Limit) and
/// the near-static tier (everything else) to be published.
fn start(tag: &str, profile: profiles::Profile) -> (Sandbox, gpupeek_e2e::Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.use_driver(profile);
    sandbox.write_scenario(&scenario(profile.driver_version));
    let daemon = sandbox.start_daemon_with("50ms", &["--process-interval", "50ms"]);
    sandbox.wait_live(&daemon);
    sandbox.snapshot_when(&daemon, "the 590 values are read", |s| {
        s.gpus[0].valid3 & v3::GSP_MODE != 0 && s.gpus[1].valid3 & v3::GSP_MODE != 0
    });
    sandbox.let_ticks_pass(&daemon, 3);
    (sandbox, daemon)
}

#[test]
fn newer_fields_print_as_nvidia_smi_590_prints_them() {
    let (sandbox, _daemon) = start("smi590", profiles::R590);
    let (code, out, err) = query(&sandbox, &[FIELDS, "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    let header = "temperature.gpu.tlimit, pci.baseClass, pci.subClass, gsp.mode.current, \
gsp.mode.default, addressing_mode, c2c.mode, inforom.checksum_validation, power.management, \
remapped_rows.histogram.max, remapped_rows.histogram.high, remapped_rows.histogram.partial, \
remapped_rows.histogram.low, remapped_rows.histogram.none\n";
    let h100 = format!(
        "46, 0x3, 0x2, Enabled, Enabled, None, Disabled, valid, {DEPRECATED}, 2560, 0, 0, 0, 0\n"
    );
    let geforce = format!(
        "[N/A], 0x3, 0x0, Enabled, Enabled, HMM, [N/A], valid, {DEPRECATED}, [N/A], [N/A], \
[N/A], [N/A], [N/A]\n"
    );
    assert_eq!(out, format!("{header}{h100}{geforce}"));
    let (_, out, _) = query(&sandbox, &[FIELDS, "--format=csv,noheader,nounits"]);
    assert_eq!(out, format!("{h100}{geforce}"));
    // Delayed power smoothing: Blackwell only, `[N/A]` on both (the H100 capture's
    // header and values, byte for byte).
    let (_, out, _) = query(&sandbox, &[POWER_SMOOTHING, "--format=csv"]);
    let na14 = ["[N/A]"; 14].join(", ");
    assert_eq!(out, format!("{POWER_SMOOTHING_HEADER}\n{na14}\n{na14}\n"));
    // The other fields nvidia-smi 590+ calls deprecated whatever NVML answers.
    let fields = "--query-gpu=display_mode,clocks.applications.graphics,\
clocks.applications.memory,clocks.default_applications.graphics,\
clocks.default_applications.memory,display_attached";
    let (_, out, _) = query(&sandbox, &[fields, "--format=csv,noheader"]);
    let five = [DEPRECATED; 5].join(", ");
    assert_eq!(out, format!("{five}, [N/A]\n{five}, Yes\n"));
    // nvidia-smi 595's kmd_version, the driver's version as driver_version is (the
    // L40S on 595.80 prints `595.80, 595.80`).
    let (code, out, err) = query(
        &sandbox,
        &[
            "--query-gpu=driver_version,kmd_version,index",
            "--format=csv",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "driver_version, kmd_version, index\n590.48.01, 590.48.01, 0\n590.48.01, 590.48.01, 1\n"
    );
}

/// On a 550 driver the thermal margin (R560) and the addressing mode (R580) have no
/// entry point, so they are `[N/A]` whatever the GPU, while the rest is read; and its
/// fabric info has no health summary (`nvmlGpuFabricInfo_v3` is R570's), so the health
/// is a bare `N/A` while the clique is known. The power management mode, which
/// nvidia-smi calls deprecated only from 590 on, prints its value.
#[test]
fn a_driver_without_the_newer_entry_points_leaves_those_values_unknown() {
    let (sandbox, _daemon) = start("smi590-r550", profiles::CURRENT);
    let fields = "--query-gpu=temperature.gpu.tlimit,addressing_mode,pci.subClass,c2c.mode,\
fabric.cliqueId,fabric.health.summary,power.management";
    let (code, out, err) = query(&sandbox, &[fields, "--format=csv,noheader"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "[N/A], [N/A], 0x2, Disabled, 5, N/A, Supported\n\
         [N/A], [N/A], 0x0, [N/A], N/A, N/A, Supported\n"
    );
}

/// A 590 driver gives the same GPU's fabric health summary.
#[test]
fn a_590_driver_gives_the_fabric_health_summary() {
    let (sandbox, _daemon) = start("smi590-health", profiles::R590);
    let fields = "--query-gpu=fabric.cliqueId,fabric.health.summary,fabric.health.bandwidth";
    let (code, out, err) = query(&sandbox, &[fields, "--format=csv,noheader"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "5, Healthy, Full\nN/A, N/A, N/A\n");
}

/// The fabric's clique and health, SRAM ECC, module power, protected memory and DRAM
/// encryption. GPUs 0 and 1 as in the captures: the H100 in a fabric without health
/// data (`0`, the zero cluster UUID, bare `N/A` health), SRAM counts `0` and `No`, no
/// module power, `0 MiB` of protected memory, no DRAM encryption; the RTX 4080 SUPER
/// outside any fabric (bare `N/A`). GPU 2, a GH200 with fabric health and module power,
/// has no capture: its words are nvidia-smi's `-q` ones (see the field table).
fn fabric_scenario() -> serde_json::Value {
    let zeros = [0u64; 12];
    json!({"driver_version": "590.48.01", "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100",
            "fabric": {"state": 3, "status": 0}, "sram_ecc_status": zeros,
            "protected_memory_bytes": [0, 0], "gsp_firmware_mode": [1, 1]
        },
        {
            "name": "NVIDIA GeForce RTX 4080 SUPER", "uuid": "GPU-4080",
            "sram_ecc_status": zeros, "protected_memory_bytes": [0, 0],
            "gsp_firmware_mode": [1, 1]
        },
        {
            "name": "NVIDIA GH200 480GB", "uuid": "GPU-gh200",
            "fabric": {
                "state": 3, "status": 0, "clique_id": 7,
                "cluster_uuid": [18, 52, 86, 120, 154, 188, 222, 240, 1, 2, 3, 4, 5, 6, 7, 8],
                "health_mask": 0x11aa, "health_summary": 1
            },
            "sram_ecc_status": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            "module_power": {
                "average_mw": 612_340, "instant_mw": 640_000, "requested_limit_mw": 1_000_000,
                "current_limit_mw": 900_000, "default_limit_mw": 1_000_000,
                "min_limit_mw": 450_000, "max_limit_mw": 1_000_000
            },
            "protected_memory_bytes": [34_359_738_368u64, 1_073_741_824u64],
            "dram_encryption": [0, 1], "gsp_firmware_mode": [1, 1]
        }
    ]})
}

#[test]
fn fabric_sram_module_power_and_protected_memory_print_as_nvidia_smi_prints_them() {
    let sandbox = Sandbox::new("smi590-fabric");
    sandbox.use_driver(profiles::R590);
    sandbox.write_scenario(&fabric_scenario());
    let daemon = sandbox.start_daemon_with("50ms", &["--process-interval", "50ms"]);
    sandbox.wait_live(&daemon);
    sandbox.snapshot_when(&daemon, "the 590 values are read", |s| {
        s.gpus.iter().all(|g| g.valid3 & v3::GSP_MODE != 0)
            && s.gpus[2].valid3 & v3::MODULE_POWER_DRAW_AVERAGE != 0
    });
    let fields = "--query-gpu=fabric.cliqueId,fabric.clusterUuid,fabric.health.summary,\
fabric.health.bandwidth,fabric.health.route_recovery_in_progress,\
fabric.health.route_unhealthy,fabric.health.access_timeout_recovery,\
fabric.health.incorrect_configuration,fabric.health.partition_assigned";
    let (code, out, err) = query(&sandbox, &[fields, "--format=csv,noheader"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "0, 00000000-0000-0000-0000-000000000000, N/A, N/A, N/A, N/A, N/A, N/A, N/A\n\
         N/A, N/A, N/A, N/A, N/A, N/A, N/A, N/A, N/A\n\
         7, 12345678-9abc-def0-0102-030405060708, Healthy, Full, False, False, False, None, \
         True\n"
    );
    let fields = "--query-gpu=ecc.errors.uncorrected.volatile.sram.parity,\
ecc.errors.uncorrected.volatile.sram.secded,ecc.errors.uncorrected.aggregate.sram.parity,\
ecc.errors.uncorrected.aggregate.sram.secded,\
ecc.errors.uncorrected.aggregate.sram.thresholdExceeded,ecc.errors.uncorrected.aggregate.sram.l2,\
ecc.errors.uncorrected.aggregate.sram.sm,ecc.errors.uncorrected.aggregate.sram.mcu,\
ecc.errors.uncorrected.aggregate.sram.pcie,ecc.errors.uncorrected.aggregate.sram.other";
    let (_, out, _) = query(&sandbox, &[fields, "--format=csv,noheader"]);
    assert_eq!(
        out,
        "0, 0, 0, 0, No, 0, 0, 0, 0, 0\n0, 0, 0, 0, No, 0, 0, 0, 0, 0\n\
         0, 0, 0, 0, Yes, 0, 0, 0, 0, 0\n"
    );
    let fields = "--query-gpu=module.power.draw.average,module.power.draw.instant,\
module.power.requested_limit,module.enforced.power.limit,module.power.default_limit,\
module.power.min_limit,module.power.max_limit,protected_memory.total,protected_memory.used,\
protected_memory.free,dramEncryption.mode.current,dramEncryption.mode.pending";
    let (_, out, _) = query(&sandbox, &[fields, "--format=csv"]);
    let na7 = "[N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]";
    assert_eq!(
        out,
        format!(
            "module.power.draw.average [W], module.power.draw.instant [W], \
module.power.limit [W], module.enforced.power.limit [W], module.power.default_limit [W], \
module.power.min_limit [W], module.power.max_limit [W], protected_memory.total [MiB], \
protected_memory.used [MiB], protected_memory.free [MiB], dramEncryption.mode.current, \
dramEncryption.mode.pending
{na7}, 0 MiB, 0 MiB, 0 MiB, [N/A], [N/A]
{na7}, 0 MiB, 0 MiB, 0 MiB, [N/A], [N/A]
612.34 W, 640.00 W, 1000.00 W, 900.00 W, 1000.00 W, 450.00 W, 1000.00 W, 32768 MiB, \
1024 MiB, 31744 MiB, Disabled, Enabled
"
        )
    );
}

/// `display_attached` (the display mode's call), the platform info and the EDPp
/// multiplier, as nvidia-smi 590.48.01 prints them for an H100 SXM (module 7) and
/// 595.71.05 for an RTX 4080 SUPER: an empty chassis serial, `0`, `0`, `1`,
/// `Direct Connected`, the module id, `0x0000000000000000`, and `100.00 %` or `[N/A]`.
#[test]
fn display_attached_platform_and_edpp_print_as_nvidia_smi_prints_them() {
    let sandbox = Sandbox::new("smi590-platform");
    sandbox.use_driver(profiles::R590);
    let platform = |module: u8| json!({"host_id": 1, "module_id": module});
    let vgpu_driver = json!([1, 0]);
    sandbox.write_scenario(&json!({"driver_version": "590.48.01",
        "vgpu_driver_capabilities": vgpu_driver, "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100", "display_mode": 1,
            // As on a vGPU host driver; the GeForce below, as on any other, has none.
            "vgpu_capabilities": [1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0],
            "platform": platform(7), "edpp_multiplier_pct": 100,
            "gsp_firmware_mode": [1, 1]
        },
        {
            "name": "NVIDIA GeForce RTX 4080 SUPER", "uuid": "GPU-4080", "display_mode": 1,
            "platform": platform(1), "gsp_firmware_mode": [1, 1]
        }
    ]}));
    let daemon = sandbox.start_daemon_with("50ms", &["--process-interval", "50ms"]);
    sandbox.wait_live(&daemon);
    sandbox.snapshot_when(&daemon, "the 590 values are read", |s| {
        s.gpus.iter().all(|g| g.valid3 & v3::GSP_MODE != 0)
    });
    let fields = "--query-gpu=display_attached,platform.chassis_serial_number,\
platform.slot_number,platform.tray_index,platform.host_id,platform.peer_type,\
platform.module_id,platform.gpu_fabric_guid,edpp_multiplier";
    let (code, out, err) = query(&sandbox, &[fields, "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "display_attached, platform.chassis_serial_number, platform.slot_number, \
platform.tray_index, platform.host_id, platform.peer_type, platform.module_id, \
platform.gpu_fabric_guid, edpp_multiplier [%]
Yes, , 0, 0, 1, Direct Connected, 7, 0x0000000000000000, 100.00 %
Yes, , 0, 0, 1, Direct Connected, 1, 0x0000000000000000, [N/A]
"
    );
    // Every bare-metal capture prints [N/A] for the vGPU capabilities; a vGPU host's
    // answers (no capture yet) print Yes/No, Enabled/Disabled for the mode.
    let fields = "--query-gpu=vgpu_driver_capability.heterogenous_multivGPU,\
vgpu_device_capability.fractional_multiVgpu,\
vgpu_device_capability.heterogeneous_timeSlice_profile,\
vgpu_device_capability.heterogeneous_timeSlice_sizes,\
vgpu_device_capability.homogeneous_placements,vgpu_device_capability.mig_timeSlicing,\
vgpu_device_capability.mig_timeSlicing_mode";
    let (_, out, _) = query(&sandbox, &[fields, "--format=csv,noheader"]);
    assert_eq!(
        out,
        "Yes, Yes, No, Yes, Yes, Yes, Disabled\n\
         Yes, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]\n"
    );
}

/// nvidia-smi 590's `hostname`: the hostname set on the GPU with `nvidia-smi
/// --set-hostname` (`nvmlDeviceGetHostname_v1`, R580+), not the machine's. NVML has it
/// for Blackwell and newer only: the H100 on 590.48.01 of nvidia_gpu_exporter's
/// captures prints `[N/A]` (`linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt`, the
/// last column), as does the RTX 4080 SUPER on 595.71.05. A driver before R580 has no
/// entry point, and prints `[N/A]` whatever the GPU.
#[test]
fn the_gpu_hostname_prints_where_the_driver_and_the_gpu_have_one() {
    let gpus = json!([
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100", "gsp_firmware_mode": [1, 1]},
        {
            "name": "NVIDIA GB200", "uuid": "GPU-gb200", "gsp_firmware_mode": [1, 1],
            "hostname": "gb200-nvl-01"
        }
    ]);
    for (profile, expected) in [
        (profiles::R590, "[N/A]\ngb200-nvl-01\n"),
        (profiles::CURRENT, "[N/A]\n[N/A]\n"),
    ] {
        let sandbox = Sandbox::new(&format!("smi590-hostname-{}", profile.name));
        sandbox.use_driver(profile);
        sandbox.write_scenario(&json!({"driver_version": profile.driver_version, "gpus": gpus}));
        let daemon = sandbox.start_daemon_with("50ms", &["--process-interval", "50ms"]);
        sandbox.wait_live(&daemon);
        sandbox.snapshot_when(&daemon, "the 590 values are read", |s| {
            s.gpus.iter().all(|g| g.valid3 & v3::GSP_MODE != 0)
        });
        let (code, out, err) = query(&sandbox, &["--query-gpu=hostname", "--format=csv"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out, format!("hostname\n{expected}"), "{}", profile.name);
    }
}

/// `NVML_POWER_SMOOTHING_ADMIN_OVERRIDE_NOT_SET`: an admin override nobody set.
const NOT_SET: u64 = 0xFFFF_FFFF;

/// Blackwell GPUs with delayed power smoothing (field values 275 to 288), each typing
/// the values one way NVML may (unsigned int, double, unsigned long long), and an H100,
/// which has none. No capture has a Blackwell value yet: the expected text follows
/// nvidia-smi's conventions (see the field table's `smoothing.rs`).
fn smoothing_scenario(driver: &str) -> serde_json::Value {
    json!({"driver_version": driver, "gpus": [
        {
            "name": "NVIDIA GB200", "uuid": "GPU-gb200", "gsp_firmware_mode": [1, 1],
            "power_smoothing": {
                "delayed_power_smoothing_supported": 1, "primary_power_floor": 560,
                "secondary_power_floor": 700, "min_primary_floor_activation_offset": 50,
                "min_primary_floor_activation_point": 600, "window_multiplier": 5,
                "curr_profile": {
                    "secondary_power_floor": 700, "primary_floor_act_window_multiplier": 30,
                    "primary_floor_tar_window_multiplier": 100, "primary_floor_act_offset": 80
                },
                "admin_override": {
                    "secondary_power_floor": NOT_SET, "primary_floor_act_window_multiplier": 20,
                    "primary_floor_tar_window_multiplier": 200, "primary_floor_act_offset": 90
                }
            }
        },
        {
            "name": "NVIDIA B200", "uuid": "GPU-b200", "gsp_firmware_mode": [1, 1],
            "power_smoothing": {
                "value_type": "double", "delayed_power_smoothing_supported": 1.0,
                "primary_power_floor": 562.5, "secondary_power_floor": 712.25,
                "min_primary_floor_activation_offset": 50.0,
                "min_primary_floor_activation_point": 600.0, "window_multiplier": 5.0,
                "curr_profile": {
                    "secondary_power_floor": 712.25, "primary_floor_act_window_multiplier": 0.0,
                    "primary_floor_tar_window_multiplier": 0.0, "primary_floor_act_offset": 0.0
                },
                "admin_override": {
                    "secondary_power_floor": NOT_SET, "primary_floor_act_window_multiplier": NOT_SET,
                    "primary_floor_tar_window_multiplier": NOT_SET, "primary_floor_act_offset": NOT_SET
                }
            }
        },
        {
            "name": "NVIDIA GB300", "uuid": "GPU-gb300", "gsp_firmware_mode": [1, 1],
            "power_smoothing": {
                "value_type": "ulonglong", "delayed_power_smoothing_supported": 0
            }
        },
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100", "gsp_firmware_mode": [1, 1]}
    ]})
}

/// Starts the daemon on a driver that reports `driver` and waits for the near-static
/// tier.
fn start_smoothing(tag: &str, driver: &str) -> (Sandbox, gpupeek_e2e::Daemon) {
    let sandbox = Sandbox::new(tag);
    // R580 exports every entry point the fake's R590 profile has: only the field ids
    // differ, and those follow the scenario's driver version.
    sandbox.use_driver(profiles::R590);
    sandbox.write_scenario(&smoothing_scenario(driver));
    let daemon = sandbox.start_daemon_with("50ms", &["--process-interval", "50ms"]);
    sandbox.wait_live(&daemon);
    sandbox.snapshot_when(&daemon, "the near-static values are read", |s| {
        s.gpus.iter().all(|g| g.valid3 & v3::GSP_MODE != 0)
    });
    (sandbox, daemon)
}

#[test]
fn power_smoothing_prints_a_blackwell_gpus_values_whatever_their_type() {
    let (sandbox, _daemon) = start_smoothing("smi590-smoothing", "590.48.01");
    let (code, out, err) = query(&sandbox, &[POWER_SMOOTHING, "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    let na4 = ["[N/A]"; 4].join(", ");
    let na13 = ["[N/A]"; 13].join(", ");
    let na14 = ["[N/A]"; 14].join(", ");
    assert_eq!(
        out,
        format!(
            "{POWER_SMOOTHING_HEADER}
Yes, 560.00 W, 700.00 W, 50.00 W, 600.00 W, 5 ms, 700.00 W, 30, 100, 80.00 W, [N/A], 20, 200, \
90.00 W
Yes, 562.50 W, 712.25 W, 50.00 W, 600.00 W, 5 ms, 712.25 W, 0, 0, 0.00 W, {na4}
No, {na13}
{na14}
"
        )
    );
    let (_, out, _) = query(
        &sandbox,
        &[POWER_SMOOTHING, "--format=csv,noheader,nounits"],
    );
    assert_eq!(
        out,
        format!(
            "Yes, 560.00, 700.00, 50.00, 600.00, 5, 700.00, 30, 100, 80.00, [N/A], 20, 200, 90.00
Yes, 562.50, 712.25, 50.00, 600.00, 5, 712.25, 0, 0, 0.00, {na4}
No, {na13}
{na14}
"
        )
    );
    // nvidia_gpu_exporter's names: watts, the [ms] window in seconds.
    let mut cmd = Command::new(&gpupeek_e2e::bins().client);
    cmd.args([
        "metrics",
        "--shm",
        &sandbox.shm,
        "--names",
        "nvidia_gpu_exporter",
    ]);
    let text = stdout(&gpupeek_e2e::run_with_watchdog(cmd));
    for line in [
        "nvidia_smi_power_smoothing_primary_power_floor_watts{uuid=\"gb200\"} 560",
        "nvidia_smi_power_smoothing_window_multiplier_seconds{uuid=\"gb200\"} 0.005",
        "nvidia_smi_power_smoothing_secondary_power_floor_watts{uuid=\"b200\"} 712.25",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    assert!(!text.contains("admin_override_secondary_power_floor_watts{uuid=\"gb200\"}"));
}

/// A driver before R590 knows none of the fourteen field ids (each entry answers
/// `INVALID_ARGUMENT`): every value is `[N/A]`, and no GPU carries an NVML error for it.
#[test]
fn power_smoothing_is_not_available_on_a_580_driver() {
    let (sandbox, daemon) = start_smoothing("smi590-smoothing-580", "580.95.05");
    sandbox.let_ticks_pass(&daemon, 3);
    let (code, out, err) = query(&sandbox, &[POWER_SMOOTHING, "--format=csv,noheader"]);
    assert_eq!(code, Some(0), "{err}");
    let na14 = ["[N/A]"; 14].join(", ");
    assert_eq!(out, format!("{na14}\n").repeat(4));
    let snap = sandbox.segment().snapshot().unwrap();
    for g in &snap.gpus {
        assert_eq!(g.nvml_error_code, 0, "GPU {}", g.index);
        assert_eq!(g.state, gpupeek_shm::GpuState::Ok as u32, "GPU {}", g.index);
    }
}
