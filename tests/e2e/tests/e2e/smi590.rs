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

/// The two GPUs of the captures, as the fake models them on a 590 driver.
fn scenario(driver: &str) -> serde_json::Value {
    let deprecated = json!({"nvmlDeviceGetPowerManagementMode": "DEPRECATED"});
    json!({"driver_version": driver, "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-h100",
            "pci_bus_id": "00000000:00:09.0", "temperature_c": 41,
            "margin_temperature_c": 46, "pci_class": [3, 2], "gsp_firmware_mode": [1, 1],
            "addressing_mode": 0, "c2c_mode": 0, "inforom_valid": true,
            "power_management_mode": 1, "row_remapper_histogram": [2560, 0, 0, 0, 0],
            "errors": deprecated
        },
        {
            "name": "NVIDIA GeForce RTX 4080 SUPER", "uuid": "GPU-4080",
            "pci_bus_id": "00000000:01:00.0", "temperature_c": 43,
            "pci_class": [3, 0], "gsp_firmware_mode": [1, 1], "addressing_mode": 1,
            "inforom_valid": true, "power_management_mode": 1, "errors": deprecated
        }
    ]})
}

const FIELDS: &str = "--query-gpu=temperature.gpu.tlimit,pci.baseClass,pci.subClass,\
gsp.mode.current,gsp.mode.default,addressing_mode,c2c.mode,inforom.checksum_validation,\
power.management,remapped_rows.histogram.max,remapped_rows.histogram.high,\
remapped_rows.histogram.partial,remapped_rows.histogram.low,remapped_rows.histogram.none";

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
}

/// On a 550 driver the thermal margin (R560) and the addressing mode (R580) have no
/// entry point, so they are `[N/A]` whatever the GPU, while the rest is read.
#[test]
fn a_driver_without_the_newer_entry_points_leaves_those_values_unknown() {
    let (sandbox, _daemon) = start("smi590-r550", profiles::CURRENT);
    let fields = "--query-gpu=temperature.gpu.tlimit,addressing_mode,pci.subClass,c2c.mode";
    let (code, out, err) = query(&sandbox, &[fields, "--format=csv,noheader"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "[N/A], [N/A], 0x2, Disabled\n[N/A], [N/A], 0x0, [N/A]\n"
    );
}
