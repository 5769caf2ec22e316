//! What the daemon costs the driver, counted by function through the fake NVML's calls
//! file: a handful of calls per GPU per fast tick, none of them
//! `nvmlDeviceGetPcieThroughput` (20 ms each on real drivers) where the GPU has PCIe
//! counters, the handle looked up once per session; per-GPU "not supported" fields
//! falling back to their own getters; and the P-state NVML does not know published as
//! no value.

use std::collections::BTreeMap;

use gpupeek_e2e::{wait_for, Daemon, Sandbox};
use gpupeek_shm::layout::gpu_valid as v;
use gpupeek_shm::GpuState;
use serde_json::{json, Value};

/// Read once per fast tick per GPU: the tick counter.
const PER_TICK: &str = "nvmlDeviceGetUtilizationRates";

/// A Hopper GPU that has everything: GPM, PCIe byte counters, field values.
fn hopper(i: usize) -> Value {
    json!({
        "name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-{i:08}"),
        "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + i),
        "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 2u64 << 30,
        "utilization_gpu_pct": 50, "utilization_memory_pct": 10, "temperature_c": 41,
        "fan_speed_pct": 30, "power_usage_mw": 123456, "power_limit_mw": 700000,
        "energy_mj": 1000, "clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
        "pstate": 0, "clock_event_reasons": 0, "encoder_utilization_pct": 0,
        "decoder_utilization_pct": 0, "pcie_tx_kbps": 1, "pcie_rx_kbps": 2,
        "pcie_tx_bytes": 1u64 << 30, "pcie_rx_bytes": 1u64 << 31,
        "pcie_link_gen": 5, "pcie_link_width": 16,
        "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
        "gpm": {"sm_activity_pct": 40.0, "pcie_tx_mib_per_s": 1.0, "pcie_rx_mib_per_s": 2.0}
    })
}

fn calls(sb: &Sandbox, daemon: &Daemon) -> BTreeMap<String, u64> {
    sb.nvml_call_file(daemon.pid()).unwrap_or_default()
}

/// Calls by function made over `ticks` more ticks of GPU 0 (after the first ones), and
/// how many ticks that was.
fn calls_over(sb: &Sandbox, daemon: &Daemon, ticks: u64) -> (BTreeMap<String, u64>, u64) {
    wait_for("a few ticks", daemon, || {
        calls(sb, daemon).get(PER_TICK).copied().unwrap_or(0) >= 5
    });
    // The Xid events thread registers each GPU once, on its own thread, after the GPU's
    // first job (a handle and its event types): a start-up cost that a loaded machine
    // can delay into the measured ticks.
    let gpus = sb.segment().snapshot().unwrap().gpus.len() as u64;
    wait_for("the events registrations", daemon, || {
        let c = calls(sb, daemon);
        c.get("nvmlDeviceGetSupportedEventTypes")
            .copied()
            .unwrap_or(0)
            >= gpus
    });
    let before = calls(sb, daemon);
    let mut after = before.clone();
    wait_for("ticks", daemon, || {
        after = calls(sb, daemon);
        after.get(PER_TICK).copied().unwrap_or(0) >= before[PER_TICK] + ticks
    });
    let n = after[PER_TICK] - before[PER_TICK];
    let diff = after
        .iter()
        .filter(|(k, _)| k.starts_with("nvml"))
        .map(|(k, c)| (k.clone(), c - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, c)| *c > 0)
        .collect();
    (diff, n)
}

#[test]
fn a_fast_tick_costs_6_calls_per_gpu_besides_gpm_and_never_samples_pcie_for_20_ms() {
    let sb = Sandbox::new("cost-fast");
    sb.write_scenario(&json!({"gpus": [hopper(0), hopper(1)]}));
    // 120 ms ticks: GPM samples every tick (it needs 100 ms windows); processes, ECC
    // and the other slow values once an hour.
    let daemon = sb.start_daemon_with("120ms", &["--process-interval", "60m"]);
    sb.wait_live(&daemon);
    let gpus = 2;
    let (diff, calls) = calls_over(&sb, &daemon, 20 * gpus);
    let ticks = calls / gpus;
    let per_gpu_tick = |gpm: bool| {
        let n: u64 = diff
            .iter()
            // The GPU count is read once per tick, not per GPU; the Xid events thread
            // waits on its own (none here: these GPUs have no events).
            .filter(|(k, _)| *k != "nvmlDeviceGetCount_v2" && !k.starts_with("nvmlEventSet"))
            .filter(|(k, _)| gpm || !k.starts_with("nvmlGpm"))
            .map(|(_, n)| n)
            .sum();
        n as f64 / (ticks * gpus) as f64
    };
    // The calls file is read between two calls of a tick: allow one tick of slack
    // (half a call per GPU-tick over 20 ticks of 2 GPUs).
    // Six calls besides GPM, and GPM two (a sample into the buffer kept from the window
    // before, and the metrics): the 8 of the budget.
    assert!(
        per_gpu_tick(false) <= 6.5,
        "{} calls: {diff:?}",
        per_gpu_tick(false)
    );
    assert!(
        per_gpu_tick(true) <= 8.5,
        "{} calls: {diff:?}",
        per_gpu_tick(true)
    );
    // Every function called at all is at most once per GPU per tick (the clocks: two).
    for (name, n) in &diff {
        let per = if name == "nvmlDeviceGetClockInfo" {
            2
        } else {
            1
        };
        assert!(
            *n <= per * (ticks + 1) * gpus,
            "{name} {n} times in {ticks} ticks"
        );
    }
    for absent in [
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetTotalEccErrors",
    ] {
        assert!(
            !diff.contains_key(absent),
            "{absent} in the steady state: {diff:?}"
        );
    }
    // And the values are all there, PCIe included.
    let snap = sb.segment().snapshot().unwrap();
    let g = &snap.gpus[0];
    for bit in [
        v::TEMPERATURE,
        v::POWER_DRAW,
        v::ENERGY,
        v::POWER_LIMIT,
        v::PCIE_LINK_GEN,
        v::PSTATE,
        v::FAN_SPEED,
        v::ECC_CORRECTED,
    ] {
        assert_ne!(g.valid & bit, 0, "bit {bit:#x} of {:#x}", g.valid);
    }
    assert_eq!(
        (g.temp_gpu_c, g.power_draw_mw, g.energy_mj),
        (41, 123456, 1000)
    );
    assert_eq!(g.power_limit_mw, 700000);
}

#[test]
fn pcie_counters_give_the_throughput_over_the_tick() {
    let sb = Sandbox::new("cost-pcie");
    let mut doc = json!({"gpus": [hopper(0)]});
    doc["gpus"][0].as_object_mut().unwrap().remove("gpm");
    sb.write_scenario(&doc);
    let daemon = sb.start_daemon("50ms");
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 2);
    // Traffic flows: the counter grows by 100 MiB at every poll, so every tick's window
    // holds some of it (a single jump shows for one 50 ms tick only, which a poller
    // descheduled on a loaded machine can miss).
    let segment = sb.segment();
    let mut tx = 1u64 << 30;
    wait_for("a PCIe rate", &daemon, || {
        tx += 100 << 20;
        doc["gpus"][0]["pcie_tx_bytes"] = json!(tx);
        sb.write_scenario(&doc);
        let g = segment.snapshot().unwrap().gpus[0];
        g.valid & v::PCIE_TX != 0 && g.pcie_tx_kbytes_per_s > 100_000
    });
    assert!(!calls(&sb, &daemon).contains_key("nvmlDeviceGetPcieThroughput"));
}

#[test]
fn fields_a_gpu_does_not_support_come_from_their_getters_and_old_drivers_still_work() {
    let sb = Sandbox::new("cost-fallback");
    let mut old = hopper(1);
    old["unsupported_fields"] = json!([185, 83, 197, 198]);
    old.as_object_mut().unwrap().remove("gpm");
    let doc = json!({
        "errors": {"nvmlDeviceGetTemperatureV": "FUNCTION_NOT_FOUND"},
        "gpus": [hopper(0), old]
    });
    sb.write_scenario(&doc);
    let daemon = sb.start_daemon_with("50ms", &["--process-interval", "60m"]);
    sb.wait_live(&daemon);
    let (diff, ticks) = calls_over(&sb, &daemon, 10);
    let n = |f: &str| diff.get(f).copied().unwrap_or(0);
    // GPU 1 (only) reads power and energy alone; temperature falls back for both GPUs,
    // and the new call is not tried again once it failed.
    // (`ticks` counts both GPUs' ticks, and each GPU has a worker of its own: the file
    // may be read with one GPU a tick ahead of the other.)
    let power = n("nvmlDeviceGetPowerUsage");
    assert!(power + 2 >= ticks / 2 && power <= ticks / 2 + 2, "{diff:?}");
    assert!(n("nvmlDeviceGetPowerUsage").abs_diff(n("nvmlDeviceGetTotalEnergyConsumption")) <= 1);
    assert_eq!(n("nvmlDeviceGetTemperatureV"), 0, "{diff:?}");
    // Both GPUs, each with the one-tick slack above.
    assert!(n("nvmlDeviceGetTemperature") + 2 >= ticks, "{diff:?}");
    // Without counters or GPM, throughput is sampled, but not every tick.
    assert!(n("nvmlDeviceGetPcieThroughput") <= 2, "{diff:?}");
    let snap = sb.segment().snapshot().unwrap();
    for g in &snap.gpus[..2] {
        let want = v::TEMPERATURE | v::POWER_DRAW | v::ENERGY | v::PCIE_TX | v::PCIE_RX;
        assert_eq!(g.valid & want, want, "GPU {}: {:#x}", g.index, g.valid);
        assert_eq!((g.temp_gpu_c, g.power_draw_mw), (41, 123456));
    }
}

#[test]
fn an_unknown_pstate_is_no_value_and_a_lost_gpu_looks_its_handle_up_again() {
    let sb = Sandbox::new("cost-pstate");
    let mut doc = json!({"gpus": [hopper(0)]});
    doc["gpus"][0]["pstate"] = json!(32);
    sb.write_scenario(&doc);
    let daemon = sb.start_daemon("20ms");
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 2);
    let g = sb.segment().snapshot().unwrap().gpus[0];
    assert_eq!(g.valid & v::PSTATE, 0, "P-state {} published", g.pstate);
    // Once for the sampler, once for the Xid events thread's registration (done once it
    // has asked which events the GPU has).
    wait_for("the events registration", &daemon, || {
        calls(&sb, &daemon).contains_key("nvmlDeviceGetSupportedEventTypes")
    });
    assert_eq!(calls(&sb, &daemon)["nvmlDeviceGetHandleByIndex_v2"], 2);

    doc["gpus"][0]["errors"] = json!({"*": "GPU_IS_LOST"});
    sb.write_scenario(&doc);
    let segment = sb.segment();
    wait_for("GPU lost", &daemon, || {
        segment.snapshot().unwrap().gpus[0].state == GpuState::Lost as u32
    });
    doc["gpus"][0]["errors"] = json!({});
    sb.write_scenario(&doc);
    wait_for("GPU back", &daemon, || {
        segment.snapshot().unwrap().gpus[0].state == GpuState::Ok as u32
    });
    assert!(calls(&sb, &daemon)["nvmlDeviceGetHandleByIndex_v2"] >= 3);
}

/// Delayed power smoothing's fourteen field values (275 to 288) are read on the
/// near-static tier, in one call: a Blackwell GPU on a 590 driver asks for none of them
/// on a fast tick, and its fast tick costs what a Hopper's does.
#[test]
fn power_smoothing_is_never_asked_on_a_fast_tick() {
    let sb = Sandbox::new("cost-smoothing");
    let mut gpu = hopper(0);
    gpu["name"] = json!("NVIDIA GB200");
    gpu["power_smoothing"] = json!({
        "delayed_power_smoothing_supported": 1, "primary_power_floor": 560,
        "window_multiplier": 5
    });
    sb.write_scenario(&json!({"driver_version": "590.48.01", "gpus": [gpu]}));
    let daemon = sb.start_daemon_with("120ms", &["--process-interval", "60m"]);
    sb.wait_live(&daemon);
    sb.snapshot_when(&daemon, "the power smoothing values", |s| {
        s.gpus[0].valid3 & gpupeek_shm::layout::gpu_valid3::POWER_SMOOTHING_PRIMARY_FLOOR != 0
    });
    let ids: Vec<u32> = (275..=288).collect();
    let asked = |calls: &BTreeMap<String, u64>| field_ids_asked(calls, &ids);
    let before = asked(&calls(&sb, &daemon));
    // Read once, at the first near-static read, each of the fourteen.
    assert_eq!(before, [1; 14]);
    let (diff, ticks) = calls_over(&sb, &daemon, 20);
    assert_eq!(asked(&calls(&sb, &daemon)), before, "over {ticks} ticks");
    assert_fast_tick_cost_unchanged(&diff, ticks);
}

/// nvidia-smi 595's and 610's values (inactive remapped rows 301-302, power smoothing's
/// eighteen renumbered ids 251-268 and 300, the base power limits, the black box) are
/// read on the near-static tier: a Blackwell GPU on a 610 driver asks for none of them
/// on a fast tick, each id once at the near-static read, and its fast tick costs what
/// a Hopper's does.
#[test]
fn the_610_values_are_never_asked_on_a_fast_tick() {
    let sb = Sandbox::new("cost-smi610");
    sb.use_driver(gpupeek_e2e::profiles::R610);
    let mut gpu = hopper(0);
    gpu["name"] = json!("NVIDIA GB200");
    gpu["remapped_rows_inactive"] = json!([0, 0]);
    gpu["gpu_base_power"] = json!({"current_limit_mw": 800000});
    gpu["bbx_time_run_s"] = json!(3600);
    gpu["power_smoothing"] = json!({"enabled": 1, "active_profile": 0, "tmp_floor": 560});
    sb.write_scenario(&json!({"driver_version": "610.57.04", "gpus": [gpu]}));
    let daemon = sb.start_daemon_with("120ms", &["--process-interval", "60m"]);
    sb.wait_live(&daemon);
    sb.snapshot_when(&daemon, "the 610 values", |s| {
        let v4 = s.gpus[0].valid4;
        use gpupeek_shm::layout::gpu_valid4 as v4s;
        v4 & v4s::BBX_TIME_RUN != 0 && v4 & v4s::POWER_SMOOTHING_TMP_FLOOR != 0
    });
    let ids: Vec<u32> = (251..=268).chain(300..=302).collect();
    let asked = |calls: &BTreeMap<String, u64>| field_ids_asked(calls, &ids);
    let bbx = |calls: &BTreeMap<String, u64>| calls.get("nvmlDeviceGetBBXTimeData_v1").copied();
    let before = calls(&sb, &daemon);
    assert_eq!(asked(&before), vec![1; ids.len()]);
    assert_eq!(bbx(&before), Some(1));
    let (diff, ticks) = calls_over(&sb, &daemon, 20);
    let after = calls(&sb, &daemon);
    assert_eq!(asked(&after), asked(&before), "over {ticks} ticks");
    assert_eq!(bbx(&after), Some(1), "over {ticks} ticks");
    assert_fast_tick_cost_unchanged(&diff, ticks);
}

/// A GPU without power smoothing (every Hopper and older GPU: the driver answers each
/// power smoothing entry `NOT_SUPPORTED`) is not asked the active profile's values: its
/// near-static read makes one power smoothing call, not two. A Blackwell beside it, on
/// the same 610 driver, still is, with its active profile's values.
#[test]
fn a_gpu_without_power_smoothing_is_not_asked_the_profile_values() {
    use gpupeek_shm::layout::gpu_valid4 as v4;
    let sb = Sandbox::new("cost-no-smoothing");
    sb.use_driver(gpupeek_e2e::profiles::R610);
    let mut blackwell = hopper(1);
    blackwell["name"] = json!("NVIDIA GB200");
    blackwell["power_smoothing"] = json!({
        "enabled": 1, "active_profile": 1, "tmp_floor": 560,
        "profiles": [{"percent_tmp_floor": 50}, {"percent_tmp_floor": 65}]
    });
    let doc = json!({"driver_version": "610.57.04", "gpus": [hopper(0), blackwell]});
    sb.write_scenario(&doc);
    let daemon = sb.start_daemon_with("120ms", &["--process-interval", "60m"]);
    sb.wait_live(&daemon);
    // R610's NVML_FI_PWR_SMOOTHING_ENABLED (251) is in the first call: both GPUs made
    // theirs once both have asked it.
    wait_for("both GPUs' near-static reads", &daemon, || {
        field_ids_asked(&calls(&sb, &daemon), &[251]) == [2]
    });
    sb.let_ticks_pass(&daemon, 4);
    // The PROFILE_* ids: 260-263 on R610 (251 + 9 to 12), and 281-284.
    let profile: Vec<u32> = (260..=263).chain(281..=284).collect();
    let first: Vec<u32> = (251..=259).chain(264..=268).chain(275..=280).collect();
    let now = calls(&sb, &daemon);
    assert_eq!(field_ids_asked(&now, &first), vec![2; first.len()]);
    assert_eq!(
        field_ids_asked(&now, &profile),
        vec![1; profile.len()],
        "the GPU without power smoothing was asked the profile ids"
    );
    let snap = sb.segment().snapshot().unwrap();
    let (hopper, blackwell) = (&snap.gpus[0], &snap.gpus[1]);
    let profile_bits = v4::POWER_SMOOTHING_PROFILE_PCT_TMP_FLOOR
        | v4::POWER_SMOOTHING_PROFILE_RAMP_UP
        | v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN
        | v4::POWER_SMOOTHING_PROFILE_RAMP_DOWN_HYST;
    assert_eq!(hopper.valid4 & profile_bits, 0, "{:#x}", hopper.valid4);
    assert_ne!(
        blackwell.valid4 & v4::POWER_SMOOTHING_PROFILE_PCT_TMP_FLOOR,
        0,
        "{:#x}",
        blackwell.valid4
    );
    assert_eq!(blackwell.power_smoothing_profile_pct_tmp_floor, 65);
}

/// How many times the fake was asked each field value of `ids` (its `field:ID` lines).
fn field_ids_asked(calls: &BTreeMap<String, u64>, ids: &[u32]) -> Vec<u64> {
    ids.iter()
        .map(|id| calls.get(&format!("field:{id}")).copied().unwrap_or(0))
        .collect()
}

/// The calls of `ticks` fast ticks (`diff`), besides GPM, the device count and the
/// events thread's, are what a Hopper's cost: at most 6.5 a tick.
fn assert_fast_tick_cost_unchanged(diff: &BTreeMap<String, u64>, ticks: u64) {
    let per_tick: u64 = diff
        .iter()
        .filter(|(k, _)| *k != "nvmlDeviceGetCount_v2" && !k.starts_with("nvmlEventSet"))
        .filter(|(k, _)| !k.starts_with("nvmlGpm"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        per_tick as f64 / ticks as f64 <= 6.5,
        "{per_tick} calls in {ticks} ticks: {diff:?}"
    );
}
