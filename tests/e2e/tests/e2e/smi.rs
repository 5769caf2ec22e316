//! nvidia-smi's scripting interface beyond the core `--query-gpu` fields, on the real
//! daemon and the fake NVML: ABI 1.4's values (identity, modes, limits, counters) as
//! nvidia-smi prints them, `[N/A]` where the GPU does not support one and nvidia-smi's
//! "deprecated" text where the driver says so; `--query-compute-apps`; `-L`; and the
//! `-l`/`-lms` loop, one block per daemon update past the interval.
//!
//! The expected text follows real nvidia-smi 590/595 output (nvidia_gpu_exporter's
//! `internal/captures`, e.g. `linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use gpupeek_e2e::{stderr, stdout, Daemon, Sandbox};
use serde_json::json;

const MIB: u64 = 1 << 20;

/// A child process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GPU 0 an H100 with every value; GPU 1 a GeForce that supports none of the extra
/// values and whose driver calls the display mode and applications clocks deprecated.
fn two_gpus(sleeper: u32) -> serde_json::Value {
    let mut h100 = json!({
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "pci_bus_id": "00000000:00:09.0", "pci_device_id": 0x2330_10DE_u32,
        "pci_subsystem_id": 0x16C1_10DE_u32,
        "memory_total_bytes": 85520809984u64, "memory_used_bytes": 3u64 << 30,
        "utilization_gpu_pct": 0, "temperature_c": 41, "power_usage_mw": 69850,
        "power_instant_mw": 69620, "power_limit_mw": 700000,
        "clocks_mhz": {"graphics": 345, "sm": 345, "memory": 2619, "video": 765},
        "clock_event_reasons": 1, "supported_clock_event_reasons": 0x1FF
    });
    let details = json!({
        "serial": "1654922000000", "vbios_version": "96.00.A5.00.01",
        "compute_capability": [9, 0], "max_pcie_link_gen": 5, "max_pcie_link_width": 16,
        "power_default_limit_mw": 700000, "power_limit_range_mw": [200000, 700000],
        "memory_temperature_c": 48, "persistence_mode": 1, "compute_mode": 0,
        "display_mode": 0, "display_active": 0, "ecc_mode": [1, 1],
        "accounting_mode": 0, "accounting_buffer_size": 4000,
        "remapped_rows": [0, 0, 0, 0], "encoder_stats": [0, 0, 0],
        "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
        "ecc_corrected_aggregate": 2, "ecc_uncorrected_aggregate": 0,
        "applications_clocks_mhz": {"graphics": 1755, "memory": 2619},
        "default_applications_clocks_mhz": {"graphics": 1755, "memory": 2619},
        "ecc_by_location": {
            "corrected.volatile.device_memory": 4, "corrected.volatile.sram": 1,
            "uncorrected.aggregate.device_memory": 0
        },
        "inforom": {"img": "G520.0200.00.05", "oem": "2.1", "ecc": "7.16"},
        "fabric": {"state": 3, "status": 0}, "gpu_recovery_action": 0,
        "gpu_max_pcie_link_gen": 5, "jpeg_utilization_pct": 0, "ofa_utilization_pct": 0,
        "clocks_event_reasons_counters": {
            "sw_power_cap": 212553937u64, "sync_boost": 0, "sw_thermal_slowdown": 0,
            "hw_thermal_slowdown": 0, "hw_power_brake_slowdown": 0
        },
        "processes": [
            {"pid": sleeper, "used_gpu_memory_bytes": 2566 * MIB},
            {"pid": std::process::id(), "used_gpu_memory_bytes": MIB, "type": "graphics"}
        ]
    });
    for (k, v) in details.as_object().unwrap() {
        h100[k] = v.clone();
    }
    let geforce = json!({
        "name": "NVIDIA GeForce RTX 4080 SUPER",
        "uuid": "GPU-77777777-2222-3333-4444-555555555555",
        "pci_bus_id": "00000000:01:00.0", "memory_total_bytes": 17171480576u64,
        "utilization_gpu_pct": 3, "temperature_c": 43, "power_usage_mw": 26200,
        "display_active": 1, "compute_mode": 3,
        "inforom": {"img": "G002.0000.00.03", "oem": "2.0"},
        "errors": {
            "nvmlDeviceGetDisplayMode": "DEPRECATED",
            "nvmlDeviceGetApplicationsClock": "DEPRECATED"
        }
    });
    json!({"gpus": [h100, geforce]})
}

fn sleeper() -> Proc {
    Proc(
        Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("sleep starts"),
    )
}

fn start(tag: &str, sleeper: &Proc) -> (Sandbox, Daemon) {
    start_with(tag, sleeper, two_gpus(sleeper.0.id()))
}

fn start_with(tag: &str, sleeper: &Proc, scenario: serde_json::Value) -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(&scenario);
    let daemon = sandbox.start_daemon("100ms");
    sandbox.wait_live(&daemon);
    // The process table comes with the first slow tick; wait for the sleeper in it.
    sandbox.snapshot_when(&daemon, "the sleeper is listed", |s| {
        s.processes.iter().any(|p| p.pid == sleeper.0.id())
    });
    (sandbox, daemon)
}

fn query(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(&gpupeek_e2e::bins().client);
    cmd.arg("query").arg("--shm").arg(&sandbox.shm).args(args);
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    (out.status.code(), stdout(&out), stderr(&out))
}

const DETAILS: &str = "serial,vbios_version,pci.domain,pci.bus,pci.device,pci.device_id,\
pci.sub_device_id,compute_cap,pcie.link.gen.max,pcie.link.width.max,persistence_mode,\
compute_mode,display_mode,display_active,ecc.mode.current,accounting.mode,\
accounting.buffer_size,clocks_event_reasons.supported,clocks_event_reasons.active,\
clocks_event_reasons.gpu_idle,clocks_throttle_reasons.sw_power_cap,power.draw.average,\
power.draw.instant,power.default_limit,power.min_limit,power.max_limit,temperature.memory,\
clocks.current.video,clocks.applications.graphics,clocks.default_applications.memory,\
ecc.errors.corrected.aggregate.total,retired_pages.sbe,remapped_rows.correctable,\
remapped_rows.pending,encoder.stats.sessionCount,ecc.errors.corrected.volatile.dram,\
ecc.errors.corrected.volatile.device_memory,ecc.errors.corrected.volatile.sram,\
ecc.errors.corrected.volatile.register_file,ecc.errors.uncorrected.aggregate.dram";

#[test]
fn detail_fields_print_as_nvidia_smi_prints_them_and_unsupported_ones_as_na() {
    let sleeper = sleeper();
    let (sandbox, _daemon) = start("smi-details", &sleeper);
    let (code, out, err) = query(
        &sandbox,
        &[&format!("--query-gpu={DETAILS}"), "--format=csv"],
    );
    assert_eq!(code, Some(0), "{err}");
    let deprecated = "[Requested functionality has been deprecated]";
    let expected = format!(
        "\
serial, vbios_version, pci.domain, pci.bus, pci.device, pci.device_id, pci.sub_device_id, \
compute_cap, pcie.link.gen.max, pcie.link.width.max, persistence_mode, compute_mode, \
display_mode, display_active, ecc.mode.current, accounting.mode, accounting.buffer_size, \
clocks_event_reasons.supported, clocks_event_reasons.active, clocks_event_reasons.gpu_idle, \
clocks_throttle_reasons.sw_power_cap, power.draw.average [W], power.draw.instant [W], \
power.default_limit [W], power.min_limit [W], power.max_limit [W], temperature.memory, \
clocks.current.video [MHz], clocks.applications.graphics [MHz], \
clocks.default_applications.memory [MHz], ecc.errors.corrected.aggregate.total, \
retired_pages.single_bit_ecc.count, remapped_rows.correctable, remapped_rows.pending, \
encoder.stats.sessionCount, ecc.errors.corrected.volatile.dram, \
ecc.errors.corrected.volatile.device_memory, ecc.errors.corrected.volatile.sram, \
ecc.errors.corrected.volatile.register_file, ecc.errors.uncorrected.aggregate.dram
1654922000000, 96.00.A5.00.01, 0x0000, 0x00, 0x09, 0x233010DE, 0x16C110DE, 9.0, 5, 16, \
Enabled, Default, Disabled, Disabled, Enabled, Disabled, 4000, 0x00000000000001FF, \
0x0000000000000001, Active, Not Active, 69.85 W, 69.62 W, 700.00 W, 200.00 W, 700.00 W, 48, \
765 MHz, 1755 MHz, 2619 MHz, 2, [N/A], 0, No, 0, 4, 4, 1, [N/A], 0
[N/A], [N/A], 0x0000, 0x01, 0x00, 0x00000000, 0x00000000, [N/A], [N/A], [N/A], [N/A], \
Exclusive_Process, {deprecated}, Enabled, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], \
26.20 W, 26.20 W, [N/A], [N/A], [N/A], N/A, [N/A], {deprecated}, [N/A], [N/A], [N/A], \
[N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]
"
    );
    assert_eq!(out, expected);
}

/// The infoROM versions, the GPU operation mode, the driver model, the fabric
/// registration and the recovery action, as nvidia-smi 590 prints them for an H100 on an
/// NVSwitch system and 595 for an RTX 4080 Super (its infoROM has no ECC object, its
/// fabric state is a bare `N/A`); `inforom.image` and `gpu_operation_mode.current` are
/// aliases. The GeForce here is given no recovery action, as on a driver that predates
/// the field.
#[test]
fn inforom_gom_driver_model_and_fabric_print_as_nvidia_smi_prints_them() {
    let sleeper = sleeper();
    let (sandbox, _daemon) = start("smi-inforom", &sleeper);
    let fields = "--query-gpu=inforom.image,inforom.oem,inforom.ecc,inforom.pwr,\
gpu_operation_mode.current,gom.pending,driver_model.current,driver_model.pending,\
fabric.state,fabric.status,gpu_recovery_action";
    let (code, out, err) = query(&sandbox, &[fields, "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "\
inforom.img, inforom.oem, inforom.ecc, inforom.pwr, gom.current, gom.pending, \
driver_model.current, driver_model.pending, fabric.state, fabric.status, gpu_recovery_action
G520.0200.00.05, 2.1, 7.16, [N/A], [N/A], [N/A], [N/A], [N/A], Completed, Success, None
G002.0000.00.03, 2.0, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], N/A, N/A, [N/A]
"
    );
}

/// The clock event reason counters, the GPU's own maximum PCIe generation and the JPEG
/// and OFA utilisations (ABI 1.5's `valid3`), as nvidia-smi prints them: `5` for an
/// H100's `pcie.link.gen.gpumax` and `0 %` for its `utilization.jpeg [%]` (590.48.01),
/// `212553937 us` for an RTX 2080 SUPER's software power cap counter (595.71.05), with
/// `[us]` in the header; `[N/A]` on a GPU that has none of them.
const COUNTERS: &str = "--query-gpu=pcie.link.gen.gpumax,\
clocks_event_reasons_counters.sw_power_cap,clocks_event_reasons_counters.sync_boost,\
clocks_event_reasons_counters.sw_thermal_slowdown,\
clocks_event_reasons_counters.hw_thermal_slowdown,\
clocks_event_reasons_counters.hw_power_brake_slowdown,utilization.jpeg,utilization.ofa";

/// [`two_gpus`] on driver `driver`, the H100 with power smoothing's state
/// (`[enabled, privilege level, immediate ramp down]`, what a Blackwell answers) and
/// slowdown counters of its own, so that a counter read from another field shows.
fn counters_on(driver: &str, sleeper: &Proc) -> serde_json::Value {
    let mut scenario = two_gpus(sleeper.0.id());
    scenario["driver_version"] = json!(driver);
    let h100 = &mut scenario["gpus"][0];
    h100["power_smoothing"] = json!({"enabled": 1, "priv_level": 2, "imm_ramp_down": 1});
    h100["clocks_event_reasons_counters"] = json!({
        "sw_power_cap": 212553937u64, "sync_boost": 0, "sw_thermal_slowdown": 31,
        "hw_thermal_slowdown": 32, "hw_power_brake_slowdown": 33
    });
    scenario
}

fn counters_query(tag: &str, driver: &str) -> (String, String) {
    let sleeper = sleeper();
    let (sandbox, daemon) = start_with(tag, &sleeper, counters_on(driver, &sleeper));
    // The counters come with a slow tick: wait for the first one to be published.
    sandbox.snapshot_when(&daemon, "the counters are read", |s| {
        s.gpus[0].valid3 & gpupeek_shm::layout::gpu_valid3::CLOCKS_EVENT_US_SW_POWER_CAP != 0
    });
    let (code, csv, err) = query(&sandbox, &[COUNTERS, "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    let (_, bare, _) = query(&sandbox, &[COUNTERS, "--format=csv,noheader,nounits"]);
    (csv, bare)
}

/// nvml.h has numbered the fields after 250 three ways, and each driver answers by its
/// own: the SW thermal, HW thermal and HW power brake slowdown counters are fields
/// 251–253 on R575 and R580, 269–271 on R590 and later, where 251–253 are power
/// smoothing's state (as on R570, which has no such counters).
#[test]
fn clock_event_counters_and_gpumax_print_as_nvidia_smi_prints_them_on_each_drivers_numbering() {
    let header = "\
pcie.link.gen.gpumax, clocks_event_reasons_counters.sw_power_cap [us], \
clocks_event_reasons_counters.sync_boost [us], \
clocks_event_reasons_counters.sw_thermal_slowdown [us], \
clocks_event_reasons_counters.hw_thermal_slowdown [us], \
clocks_event_reasons_counters.hw_power_brake_slowdown [us], utilization.jpeg [%], \
utilization.ofa [%]
";
    let geforce = "[N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]\n";
    for (tag, driver) in [
        ("smi-counters-590", "590.48.01"),
        ("smi-counters-580", "580.65.06"),
    ] {
        let (csv, bare) = counters_query(tag, driver);
        assert_eq!(
            csv,
            format!("{header}5, 212553937 us, 0 us, 31 us, 32 us, 33 us, 0 %, 0 %\n{geforce}"),
            "driver {driver}"
        );
        assert_eq!(
            bare,
            format!("5, 212553937, 0, 31, 32, 33, 0, 0\n{geforce}")
        );
    }
    let (csv, _) = counters_query("smi-counters-570", "570.124.06");
    assert_eq!(
        csv,
        format!("{header}5, 212553937 us, 0 us, [N/A], [N/A], [N/A], 0 %, 0 %\n{geforce}")
    );
}

#[test]
fn compute_apps_lists_each_compute_process_with_its_argv0_and_mib() {
    let sleeper = sleeper();
    let (sandbox, _daemon) = start("smi-apps", &sleeper);
    let fields = "--query-compute-apps=pid,process_name,used_memory,gpu_uuid,gpu_bus_id";
    let (code, out, err) = query(&sandbox, &[fields, "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        format!(
            "pid, process_name, used_gpu_memory [MiB], gpu_uuid, gpu_bus_id\n\
             {}, sleep, 2566 MiB, GPU-11111111-2222-3333-4444-555555555555, 00000000:00:09.0\n",
            sleeper.0.id()
        ),
        "the graphics process is not listed"
    );
    // A GPU without compute processes: the header alone, as nvidia-smi prints it.
    let (_, out, _) = query(&sandbox, &[fields, "--format=csv", "-i", "1"]);
    assert_eq!(
        out,
        "pid, process_name, used_gpu_memory [MiB], gpu_uuid, gpu_bus_id\n"
    );
    let (_, out, _) = query(
        &sandbox,
        &[
            "--query-compute-apps=pid,used_gpu_memory",
            "--format=csv,noheader,nounits",
        ],
    );
    assert_eq!(out, format!("{}, 2566\n", sleeper.0.id()));
    let (code, _, err) = query(&sandbox, &["--query-compute-apps=pid,sm", "--format=csv"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        "gpupeek: Field \"sm\" is not a valid field to query.\n"
    );
}

#[test]
fn list_gpus_prints_nvidia_smis_lines_and_id_selects_by_uuid_or_bus_id() {
    let sleeper = sleeper();
    let (sandbox, _daemon) = start("smi-list", &sleeper);
    let (code, out, err) = query(&sandbox, &["-L"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n\
         GPU 1: NVIDIA GeForce RTX 4080 SUPER (UUID: GPU-77777777-2222-3333-4444-555555555555)\n"
    );
    let uuid = "GPU-77777777-2222-3333-4444-555555555555";
    let (_, out, _) = query(&sandbox, &["--list-gpus", "-i", uuid]);
    assert!(out.starts_with("GPU 1: "), "{out}");
    let (_, out, _) = query(
        &sandbox,
        &[
            "--query-gpu=index,serial",
            "--format=csv,noheader",
            "--id=0000:00:09.0",
        ],
    );
    assert_eq!(out, "0, 1654922000000\n");
}

/// Milliseconds of a `2024/05/01 21:30:00.123` timestamp since midnight.
fn ms_of_day(ts: &str) -> u64 {
    let time = ts.split(", ").next().unwrap().split(' ').nth(1).unwrap();
    let (hms, ms) = time.split_once('.').unwrap();
    let parts: Vec<u64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    ((parts[0] * 60 + parts[1]) * 60 + parts[2]) * 1000 + ms.parse::<u64>().unwrap()
}

#[test]
fn a_loop_prints_the_header_once_then_a_block_per_update_past_the_interval() {
    let sleeper = sleeper();
    let (sandbox, _daemon) = start("smi-loop", &sleeper);
    let mut cmd = Command::new(&gpupeek_e2e::bins().client);
    cmd.args([
        "query",
        "--shm",
        &sandbox.shm,
        "--query-gpu=timestamp,index",
    ])
    .args(["--format=csv", "-lms", "300"])
    .stdout(Stdio::piped());
    let mut child = Proc(cmd.spawn().unwrap());
    let lines: Vec<String> = BufReader::new(child.0.stdout.take().unwrap())
        .lines()
        .take(1 + 2 * 4)
        .map(Result::unwrap)
        .collect();
    drop(child);
    assert_eq!(lines[0], "timestamp, index");
    let blocks: Vec<&[String]> = lines[1..].chunks(2).collect();
    assert_eq!(blocks.len(), 4, "{lines:?}");
    let mut stamps = Vec::new();
    for block in &blocks {
        let (t0, t1) = (&block[0], &block[1]);
        assert!(t0.ends_with(", 0") && t1.ends_with(", 1"), "{block:?}");
        assert_eq!(t0.split(", ").next(), t1.split(", ").next(), "one update");
        stamps.push(ms_of_day(t0));
    }
    // Each block is a later publish of the 100 ms daemon, at least 300 ms (less half a
    // period of jitter) after the one before: the daemon's clock, not a timer of ours.
    for pair in stamps.windows(2) {
        let gap = pair[1].wrapping_sub(pair[0]);
        assert!((250..5_000).contains(&gap), "{stamps:?}");
    }
}
