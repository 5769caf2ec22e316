//! MIG, read from the segment: an H100 split into three instances of mixed profiles,
//! with processes in each, publishes every instance with its profile, memory, ids and
//! UUID, and every process with the ids of its instance; the parent's utilisation,
//! which NVML does not report under MIG, is published as not available (never 0); a
//! reconfiguration while readers run is published whole (no reader sees a mix of the
//! two layouts, or an instance that no longer exists once the new one is out); the
//! instances cost the fast tick one call each (two more for GPM); the profile is found
//! without the GPU-instance queries and on the first MIG driver; and a hung MIG call is
//! the GPU's "not responding", like any other.

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use gpupeek_e2e::{compile_c_reader, run_with_watchdog, stdout, wait_for, Daemon, Sandbox};
use gpupeek_shm::layout::{gpu_valid as v, mig_valid};
use gpupeek_shm::{text, MigRecord, Snapshot};
use serde_json::{json, Value};

pub(crate) const MIB: u64 = 1 << 20;

/// A child process, killed when dropped: a real pid for the fake's process lists.
pub(crate) struct Sleeper(Child);

impl Sleeper {
    fn new() -> Self {
        Sleeper(
            Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("sleep starts"),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// Four sleepers (killed when dropped) and their pids.
pub(crate) fn four_sleepers() -> ([Sleeper; 4], [u32; 4]) {
    let procs = [(); 4].map(|()| Sleeper::new());
    let pids = [0, 1, 2, 3].map(|i| procs[i].pid());
    (procs, pids)
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One MIG device: GPU instance id, profile id (H100 80GB: 9 is 3g.40gb, 14 2g.20gb,
/// 19 1g.10gb, 5 4g.40gb), UUID.
pub(crate) fn instance(gi: u32, profile_id: u32, gpm: Option<f64>) -> Value {
    let mut m = json!({
        "gpu_instance_id": gi, "compute_instance_id": 0, "profile_id": profile_id,
        "uuid": format!("MIG-{gi:08x}-7d1c-5b8e-9d2a-{profile_id:012x}"),
    });
    if let Some(pct) = gpm {
        m["gpm"] = json!({"sm_activity_pct": pct, "dram_bw_util_pct": pct / 2.0});
    }
    m
}

/// A process of `pid` using `mib` MiB in GPU instance `gi`.
pub(crate) fn process(pid: u32, mib: u64, gi: u32) -> Value {
    json!({"pid": pid, "used_gpu_memory_bytes": mib * MIB,
           "gpu_instance_id": gi, "compute_instance_id": 0})
}

/// An H100 with MIG on, `instances` and `processes`, and a plain GPU beside it.
pub(crate) fn scenario(instances: Vec<Value>, processes: Vec<Value>) -> Value {
    json!({"gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-a1b2c3d4-0000-1111-2222-333344445555",
            "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 9u64 << 30,
            // What the GPU would say without MIG: NVML must not report it under MIG.
            "utilization_gpu_pct": 77, "utilization_memory_pct": 33,
            "temperature_c": 45, "power_usage_mw": 200000,
            "gpm": {"sm_activity_pct": 30.0},
            "processes": processes,
            "mig": {"instances": instances}
        },
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-ffffffff-0000-1111-2222-333344445555",
            "memory_total_bytes": 80u64 << 30, "memory_used_bytes": 1u64 << 30,
            "utilization_gpu_pct": 12, "utilization_memory_pct": 3, "temperature_c": 40
        }
    ]})
}

/// The three-way split: 3g.40gb (GI 1, two processes), 2g.20gb (GI 5), 1g.10gb (GI 13).
pub(crate) fn three_way(pids: &[u32; 4]) -> Value {
    scenario(
        vec![
            instance(1, 9, Some(40.0)),
            instance(5, 14, None),
            instance(13, 19, Some(10.0)),
        ],
        vec![
            process(pids[0], 1000, 1),
            process(pids[1], 2000, 1),
            process(pids[2], 3000, 5),
            process(pids[3], 500, 13),
        ],
    )
}

/// `scenario` (two GPUs, the first with [`three_way`]'s instances) on a machine whose
/// kernel numbered the GPUs the other way round from NVML (minor number 1 is NVML's GPU
/// 0), with the instances where a driver places them: 3g.40gb at memory slice 0,
/// 2g.20gb at 4, 1g.10gb at 6.
pub(crate) fn numbered_by_minor(mut scenario: Value) -> Value {
    scenario["gpus"][0]["minor_number"] = json!(1);
    scenario["gpus"][1]["minor_number"] = json!(0);
    for (instance, start) in [(0, 0), (1, 4), (2, 6)] {
        scenario["gpus"][0]["mig"]["instances"][instance]["placement_start"] = json!(start);
    }
    scenario
}

/// A driver leaves a destroyed MIG device's index free (`NOT_FOUND` there): each device
/// after such a gap is found and published at its own index, which `N:M` device ids and
/// NVIDIA's index strategy name it by, not at its place in the list.
#[test]
fn mig_devices_after_a_gap_in_the_indices_keep_their_own_index() {
    let sb = Sandbox::new("mig-gaps");
    let (_procs, pids) = four_sleepers();
    let mut s = three_way(&pids);
    s["gpus"][0]["mig"]["instances"][1]["mig_index"] = json!(2);
    s["gpus"][0]["mig"]["instances"][2]["mig_index"] = json!(5);
    sb.write_scenario(&s);
    let daemon = sb.start_daemon_with("200ms", &["--process-interval", "200ms"]);
    let snap = sb.snapshot_when(&daemon, "three instances and their processes", |s| {
        s.mig.len() == 3 && s.processes.len() == 4
    });
    let indices: Vec<(u32, u32)> = snap
        .mig
        .iter()
        .map(|m| (m.gpu_instance_id, m.mig_index))
        .collect();
    assert_eq!(indices, [(1, 0), (5, 2), (13, 5)]);
    assert_eq!(pids_in(&snap, &snap.mig[2]), [pids[3]]);
}

/// A driver that has no minor number for a GPU ("not supported") leaves it unpublished,
/// and the GPU in no error: readers then take its index for it.
#[test]
fn a_gpu_the_driver_gives_no_minor_number_publishes_none_and_no_error() {
    use gpupeek_shm::layout::{gpu_valid4, GpuState};
    let sb = Sandbox::new("minor-none");
    let (_procs, pids) = four_sleepers();
    let mut s = numbered_by_minor(three_way(&pids));
    s["gpus"][1]["errors"] = json!({"nvmlDeviceGetMinorNumber": "NOT_SUPPORTED"});
    sb.write_scenario(&s);
    let daemon = sb.start_daemon("200ms");
    let snap = sb.snapshot_when(&daemon, "both GPUs sampled", |s| {
        s.gpus.len() == 2 && s.gpus.iter().all(|g| g.valid & v::MEMORY != 0)
    });
    let minors: Vec<Option<u32>> = snap
        .gpus
        .iter()
        .map(|g| (g.valid4 & gpu_valid4::MINOR_NUMBER != 0).then_some(g.minor_number))
        .collect();
    assert_eq!(minors, [Some(1), None]);
    let g1 = &snap.gpus[1];
    assert_eq!((g1.state, g1.nvml_error_code), (GpuState::Ok as u32, 0));
}

/// `(gpu instance id, profile)` of every published instance of GPU 0.
pub(crate) fn layout(snap: &Snapshot) -> Vec<(u32, String)> {
    snap.mig_on(0)
        .map(|m| (m.gpu_instance_id, text::decode(&m.profile)))
        .collect()
}

fn pids_in(snap: &Snapshot, m: &MigRecord) -> Vec<u32> {
    let mut pids: Vec<u32> = snap.processes_in(m).map(|p| p.pid).collect();
    pids.sort_unstable();
    pids
}

#[test]
fn each_instance_of_a_three_way_h100_is_published_with_its_profile_memory_and_processes() {
    let sb = Sandbox::new("mig-three");
    let (_procs, pids) = four_sleepers();
    sb.write_scenario(&three_way(&pids));
    let daemon = sb.start_daemon_with("200ms", &["--process-interval", "200ms"]);
    let snap = sb.snapshot_when(&daemon, "three instances with GPM and processes", |s| {
        s.mig.len() == 3
            && s.processes.len() == 4
            && [0, 2]
                .iter()
                .all(|&i| s.mig[i].valid & mig_valid::GPM_SM_ACTIVITY != 0)
    });
    assert_eq!(
        layout(&snap),
        [
            (1, "3g.40gb".into()),
            (5, "2g.20gb".into()),
            (13, "1g.10gb".into())
        ]
    );
    // The profiles' memory (MiB), SMs and slices, as `nvidia-smi mig -lgip` lists them.
    let want = [
        (40_448, 3_000, 60, 3),
        (20_096, 3_000, 32, 2),
        (9_984, 500, 16, 1),
    ];
    for (m, (total_mib, used_mib, sms, slices)) in snap.mig.iter().zip(want) {
        let all = mig_valid::UUID | mig_valid::PROFILE | mig_valid::MEMORY;
        assert_eq!(m.valid & all, all, "{m:?}");
        assert_eq!(m.gpu_index, 0);
        assert_eq!(m.compute_instance_id, 0);
        assert_eq!(m.mem_total_bytes, total_mib * MIB);
        assert_eq!(m.mem_used_bytes, used_mib * MIB);
        assert_eq!(m.mem_free_bytes, (total_mib - used_mib) * MIB);
        assert_eq!((m.sm_count, m.gpu_instance_slice_count), (sms, slices));
        let uuid = text::decode(&m.uuid);
        assert!(
            uuid.starts_with(&format!("MIG-{:08x}", m.gpu_instance_id)),
            "{uuid}"
        );
    }
    assert_eq!(pids_in(&snap, &snap.mig[0]), sorted(&[pids[0], pids[1]]));
    assert_eq!(pids_in(&snap, &snap.mig[1]), [pids[2]]);
    assert_eq!(pids_in(&snap, &snap.mig[2]), [pids[3]]);
    // Per-instance GPM where the instance has it, not available where it has not.
    assert_eq!(snap.mig[0].gpm_sm_activity_centipct, 4000);
    assert_eq!(snap.mig[0].gpm_dram_bw_util_centipct, 2000);
    assert_eq!(snap.mig[1].valid & mig_valid::GPM, 0);
    assert_eq!(snap.mig[2].gpm_sm_activity_centipct, 1000);
    // The parent: MIG on, utilisation not available (not 0), the rest as usual.
    let parent = &snap.gpus[0];
    assert_ne!(parent.valid & v::MIG_MODE, 0);
    assert_eq!((parent.mig_mode_current, parent.mig_mode_pending), (1, 1));
    assert_eq!(parent.valid & v::UTILIZATION, 0, "published as N/A");
    assert_ne!(parent.valid & v::MEMORY, 0);
    assert_ne!(parent.valid & v::TEMPERATURE, 0);
    // The GPU beside it cannot do MIG: no mode, its utilisation as usual, no instances.
    let plain = &snap.gpus[1];
    assert_eq!(plain.valid & v::MIG_MODE, 0);
    assert_eq!(
        (plain.valid & v::UTILIZATION != 0, plain.util_gpu_pct),
        (true, 12)
    );
    assert_eq!(snap.mig_on(1).count(), 0);
    // The C reader reads the same instances, and each process's instance ids.
    let Some(exe) = compile_c_reader(&sb) else {
        return;
    };
    let out = run_with_watchdog({
        let mut cmd = Command::new(exe);
        cmd.arg(&sb.shm);
        cmd
    });
    let text = stdout(&out);
    let migs: Vec<&str> = text.lines().filter(|l| l.starts_with("mig ")).collect();
    assert_eq!(migs.len(), 3, "{text}");
    assert!(
        migs[1].contains("gi=5 ci=0 profile=\"2g.20gb\"")
            && migs[1].contains(&format!("mem_total_bytes={}", 20_096 * MIB)),
        "{text}"
    );
    let proc_line = text
        .lines()
        .find(|l| l.contains(&format!("pid={}", pids[3])))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(proc_line.ends_with("gi=13 ci=0"), "{proc_line}");
}

fn sorted(pids: &[u32]) -> Vec<u32> {
    let mut pids = pids.to_vec();
    pids.sort_unstable();
    pids
}

#[test]
fn a_reconfiguration_while_readers_run_is_published_whole_and_nothing_stale_stays() {
    let sb = Sandbox::new("mig-reconfig");
    let (_procs, pids) = four_sleepers();
    sb.write_scenario(&three_way(&pids));
    let daemon = sb.start_daemon_with("50ms", &["--process-interval", "100ms"]);
    let before = vec![
        (1, "3g.40gb".to_owned()),
        (5, "2g.20gb".to_owned()),
        (13, "1g.10gb".to_owned()),
    ];
    sb.snapshot_when(&daemon, "the first layout", |s| layout(s) == before);
    // GIs 5 and 13 destroyed, GI 2 (4g.40gb) created: pids[2] moved into it, pids[3] gone.
    // The new instance lists its process itself, by its profile's name.
    let created = json!({
        "gpu_instance_id": 2, "profile": "4g.40gb", "uuid": "MIG-00000002-new",
        "processes": [{"pid": pids[2], "used_gpu_memory_bytes": 3000 * MIB}]
    });
    let after_scenario = scenario(
        vec![instance(1, 9, None), created],
        vec![process(pids[0], 1000, 1), process(pids[1], 2000, 1)],
    );
    let after = vec![(1, "3g.40gb".to_owned()), (2, "4g.40gb".to_owned())];
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (shm, stop) = (sb.shm.clone(), Arc::clone(&stop));
            let (before, after) = (before.clone(), after.clone());
            std::thread::spawn(move || {
                let segment = gpupeek_shm::Segment::open(&shm).unwrap();
                let mut seen = BTreeMap::new();
                while !stop.load(Ordering::Relaxed) {
                    let Ok(snap) = segment.snapshot() else {
                        continue;
                    };
                    let l = layout(&snap);
                    assert!(l == before || l == after, "a mixed layout: {l:?}");
                    *seen.entry(l == after).or_insert(0u64) += 1;
                }
                seen
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    sb.write_scenario(&after_scenario);
    let snap = sb.snapshot_when(&daemon, "the new layout and its processes", |s| {
        layout(s) == after && s.processes.len() == 3
    });
    assert_eq!(snap.mig[1].mem_total_bytes, 40_448 * MIB);
    assert_eq!(pids_in(&snap, &snap.mig[1]), [pids[2]]);
    assert_eq!(snap.mig[1].mem_used_bytes, 3_000 * MIB);
    // Once out, the new layout stays: no tick republishes a destroyed instance.
    let gen = snap.generation;
    sb.wait_generation(gen + 10, &daemon);
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        let seen = reader.join().expect("no reader saw a mixed layout");
        assert!(
            seen.contains_key(&false) && seen.contains_key(&true),
            "{seen:?}"
        );
    }
    let last = sb.segment().snapshot().unwrap();
    assert_eq!(layout(&last), after);
    // MIG turned off (after a reset): no instances, and utilisation is the GPU's again.
    let mut off = after_scenario.clone();
    off["gpus"][0]["mig"]["enabled"] = json!(false);
    off["gpus"][0]["processes"] = json!([]);
    sb.write_scenario(&off);
    let snap = sb.snapshot_when(&daemon, "MIG off", |s| {
        s.mig.is_empty() && s.gpus[0].valid & v::UTILIZATION != 0
    });
    assert_eq!(
        (snap.gpus[0].mig_mode_current, snap.gpus[0].util_gpu_pct),
        (0, 77)
    );
}

#[test]
fn an_instance_created_without_a_process_is_found_on_the_next_process_turn() {
    let sb = Sandbox::new("mig-created-empty");
    let (_procs, pids) = four_sleepers();
    let two = scenario(
        vec![instance(1, 9, None), instance(5, 14, None)],
        vec![process(pids[0], 1000, 1), process(pids[2], 3000, 5)],
    );
    sb.write_scenario(&two);
    let daemon = sb.start_daemon_with("50ms", &["--process-interval", "100ms"]);
    let before = vec![(1, "3g.40gb".to_owned()), (5, "2g.20gb".to_owned())];
    sb.snapshot_when(&daemon, "the first layout", |s| layout(s) == before);
    // GI 13 (1g.10gb) created, nothing runs in it: no process list names it, and the
    // regular enumeration is 10 s after the one at start.
    let three = scenario(
        vec![
            instance(1, 9, None),
            instance(5, 14, None),
            instance(13, 19, None),
        ],
        vec![process(pids[0], 1000, 1), process(pids[2], 3000, 5)],
    );
    let written = std::time::Instant::now();
    sb.write_scenario(&three);
    let mut after = before.clone();
    after.push((13, "1g.10gb".to_owned()));
    sb.snapshot_when(&daemon, "the new, empty instance", |s| layout(s) == after);
    let took = written.elapsed();
    assert!(
        took < std::time::Duration::from_secs(5),
        "found after {took:?}: by the 10 s enumeration, not a process turn"
    );
}

fn calls(sb: &Sandbox, daemon: &Daemon) -> BTreeMap<String, u64> {
    sb.nvml_call_file(daemon.pid()).unwrap_or_default()
}

#[test]
fn the_instances_cost_the_fast_tick_one_memory_call_each_and_gpm_where_supported() {
    let sb = Sandbox::new("mig-cost");
    let (_procs, pids) = four_sleepers();
    let mut s = three_way(&pids);
    s["gpus"].as_array_mut().unwrap().truncate(1);
    sb.write_scenario(&s);
    // 120 ms ticks: GPM every tick; processes and the slow values once an hour.
    let daemon = sb.start_daemon_with("120ms", &["--process-interval", "60m"]);
    sb.snapshot_when(&daemon, "three instances", |s| s.mig.len() == 3);
    // The temperature is read once per fast tick of the GPU.
    let tick = "nvmlDeviceGetTemperatureV";
    wait_for("a few ticks", &daemon, || {
        calls(&sb, &daemon).get(tick) >= Some(&5)
    });
    let before = calls(&sb, &daemon);
    let mut after = before.clone();
    wait_for("20 ticks", &daemon, || {
        after = calls(&sb, &daemon);
        after.get(tick) >= Some(&(before[tick] + 20))
    });
    let ticks = after[tick] - before[tick];
    // The calls file is read while a tick may be under way: the calls counted may hold
    // part of one more tick than the temperature says.
    let bound = ticks + 1;
    let diff: BTreeMap<&str, u64> = after
        .iter()
        .filter(|(k, _)| k.starts_with("nvml"))
        .map(|(k, n)| (k.as_str(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    // Memory: the parent's and one per instance, every tick.
    let memory = diff["nvmlDeviceGetMemoryInfo_v2"];
    assert!(memory.abs_diff(4 * ticks) <= 4, "{diff:?}");
    // GPM: the parent's two calls, and two for each instance that has it (two of
    // three), on every tick that closes a window of at least 100 ms (a tick that comes
    // early after a late one does not).
    let mig_samples = diff["nvmlGpmMigSampleGet"];
    assert!(mig_samples > 0 && mig_samples <= 2 * bound, "{diff:?}");
    assert!(diff["nvmlGpmMetricsGet"] <= 3 * bound, "{diff:?}");
    // The layout is not enumerated again while nothing changes, and the parent's
    // utilisation, which NVML does not report under MIG, is not asked for.
    for idle in [
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetGpuInstanceProfileInfoV",
    ] {
        assert!(!diff.contains_key(idle), "{idle}: {diff:?}");
    }
    // The fast tick: the GPU's own calls (at most 8) plus what the instances need (the
    // GPU count is read once per tick, not per GPU).
    let total: u64 = diff
        .iter()
        .filter(|(k, _)| **k != "nvmlDeviceGetCount_v2")
        .map(|(_, n)| n)
        .sum();
    let instances = 3 + 2 * 2;
    assert!(
        total <= (8 + instances) * bound,
        "{total} calls over {ticks} ticks: {diff:?}"
    );
}

#[test]
fn without_the_gpu_instance_queries_the_profile_comes_from_the_mig_device_name() {
    let sb = Sandbox::new("mig-noperm");
    let (_procs, pids) = four_sleepers();
    let mut s = three_way(&pids);
    // As for an unprivileged caller on a real driver.
    s["gpus"][0]["errors"] = json!({"nvmlDeviceGetGpuInstanceById": "NO_PERMISSION"});
    // A compute instance of one slice of the 3g.40gb GPU instance.
    s["gpus"][0]["mig"]["instances"][0]["compute_slices"] = json!(1);
    s["gpus"].as_array_mut().unwrap().truncate(1);
    sb.write_scenario(&s);
    let daemon = sb.start_daemon_with("100ms", &["--process-interval", "100ms"]);
    let snap = sb.snapshot_when(&daemon, "three instances and their processes", |s| {
        s.mig.len() == 3 && s.processes.len() == 4
    });
    assert_eq!(
        layout(&snap),
        [
            (1, "1c.3g.40gb".into()),
            (5, "2g.20gb".into()),
            (13, "1g.10gb".into())
        ]
    );
    assert_eq!(snap.mig[0].compute_instance_slice_count, 1);
    assert_eq!(
        snap.gpus[0].nvml_error_code, 0,
        "a MIG query is no GPU failure"
    );
    // Neither the GPU's utilisation nor its processes' is asked for under MIG (NVML
    // reports neither), from the first tick on.
    let calls = calls(&sb, &daemon);
    assert!(
        calls.contains_key("nvmlDeviceGetRunningProcessDetailList"),
        "{calls:?}"
    );
    for never in [
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetProcessUtilization",
    ] {
        assert!(!calls.contains_key(never), "{never}: {calls:?}");
    }
}

#[test]
fn on_the_first_mig_driver_the_profile_still_comes_from_the_device_name() {
    // R450 lacks the versioned profile info (with the profile's name) and the device
    // attributes (SM count, slices): what is left is the MIG device's name.
    let profile = gpupeek_e2e::profiles::R450;
    let sb = Sandbox::new("mig-r450");
    sb.use_driver(profile);
    let (_procs, pids) = four_sleepers();
    let mut s = three_way(&pids);
    s["driver_version"] = json!(profile.driver_version);
    sb.write_scenario(&s);
    let daemon = sb.start_daemon("100ms");
    let snap = sb.snapshot_when(&daemon, "three instances", |s| s.mig.len() == 3);
    assert_eq!(
        layout(&snap),
        [
            (1, "3g.40gb".into()),
            (5, "2g.20gb".into()),
            (13, "1g.10gb".into())
        ]
    );
    for m in &snap.mig {
        assert_eq!(
            m.valid & (mig_valid::SM_COUNT | mig_valid::SLICES),
            0,
            "{m:?}"
        );
        assert_ne!(m.valid & mig_valid::MEMORY, 0);
    }
}

#[test]
fn a_hung_mig_query_makes_its_gpu_not_responding_and_the_other_gpu_goes_on() {
    // Every MIG call runs on the GPU's own worker, under the NVML timeout, like the
    // GPU's other calls: a hang in one leaves the publishing thread and the other GPU
    // alone, and the GPU's instances are not published while it hangs.
    let sb = Sandbox::new("mig-hung");
    let (_procs, pids) = four_sleepers();
    let ok = three_way(&pids);
    sb.write_scenario(&ok);
    let daemon = sb.start_daemon_with("50ms", &["--nvml-timeout", "300ms"]);
    let first = sb.snapshot_when(&daemon, "three instances", |s| s.mig.len() == 3);
    let mut hanging = ok.clone();
    hanging["gpus"][0]["hang"] = json!(["nvmlGpmMigSampleGet"]);
    sb.write_scenario(&hanging);
    let hung = sb.snapshot_when(&daemon, "GPU 0 not responding, GPU 1 going on", |s| {
        s.gpus[0].state == gpupeek_shm::GpuState::NotResponding as u32
            && s.gpus[1].sample_mono_ns > first.gpus[1].sample_mono_ns + 300_000_000
    });
    assert!(hung.mig.is_empty(), "{:?}", layout(&hung));
    sb.write_scenario(&ok);
    sb.snapshot_when(&daemon, "GPU 0 and its instances back", |s| {
        s.gpus[0].state == gpupeek_shm::GpuState::Ok as u32 && s.mig.len() == 3
    });
}

/// `gpupeek ARGS` against the sandbox's daemon.
pub(crate) fn client(sb: &Sandbox, args: &[&str]) -> String {
    let out = run_with_watchdog({
        let mut cmd = Command::new(&gpupeek_e2e::bins().client);
        cmd.args(["--shm", &sb.shm]).args(args).env("NO_COLOR", "1");
        cmd
    });
    assert!(out.status.success(), "{out:?}");
    stdout(&out)
}

#[test]
fn the_table_nests_each_instance_under_its_gpu_with_its_processes_and_json_lists_them() {
    let sb = Sandbox::new("mig-outputs");
    let (_procs, pids) = four_sleepers();
    sb.write_scenario(&three_way(&pids));
    let daemon = sb.start_daemon_with("200ms", &["--process-interval", "200ms"]);
    sb.snapshot_when(&daemon, "three instances with GPM and processes", |s| {
        s.mig.len() == 3
            && s.processes.len() == 4
            && [0, 2]
                .iter()
                .all(|&i| s.mig[i].valid & mig_valid::GPM_SM_ACTIVITY != 0)
    });
    let table = client(&sb, &["-p"]);
    let lines: Vec<&str> = table.lines().collect();
    // Header, GPU 0, its three instances, GPU 1.
    assert_eq!(lines.len(), 6, "{table}");
    let gpu0 = lines[1];
    assert!(gpu0.starts_with("[0] NVIDIA H100 80GB HBM3 |"), "{table}");
    // NVML gives no utilisation under MIG: unknown, not 0; no process of an instance
    // on the GPU's own line.
    assert!(gpu0.contains(" ?? % |"), "{table}");
    for pid in pids {
        assert!(!gpu0.contains(&format!("/{pid}(")), "{table}");
    }
    let want = [
        (
            "├─ MIG 3g.40gb (1/0)",
            "SM  40 %",
            " 3000 / 40448 MB",
            &pids[..2],
        ),
        (
            "├─ MIG 2g.20gb (5/0)",
            "SM  ?? %",
            " 3000 / 20096 MB",
            &pids[2..3],
        ),
        (
            "└─ MIG 1g.10gb (13/0)",
            "SM  10 %",
            "  500 /  9984 MB",
            &pids[3..],
        ),
    ];
    for (line, (label, sm, memory, in_it)) in lines[2..5].iter().zip(want) {
        assert!(line.starts_with(&format!(" {label}")), "{line:?}\n{table}");
        assert!(
            line.contains(sm) && line.contains(memory),
            "{line:?}\n{table}"
        );
        for pid in pids {
            assert_eq!(
                line.contains(&format!("/{pid}(")),
                in_it.contains(&pid),
                "pid {pid} in {line:?}"
            );
        }
    }
    assert!(
        lines[5].starts_with("[1] NVIDIA H100 80GB HBM3 |"),
        "{table}"
    );

    let doc: Value = serde_json::from_str(&client(&sb, &["--json"])).unwrap();
    let gpu0 = &doc["gpus"][0];
    assert_eq!(gpu0["utilization.gpu"], Value::Null);
    // gpustat's processes stay under the GPU; the instances list theirs by pid.
    assert_eq!(gpu0["processes"].as_array().unwrap().len(), 4);
    let mig = gpu0["mig"].as_array().unwrap();
    let got: Vec<(u64, &str, u64, u64)> = mig
        .iter()
        .map(|m| {
            (
                m["gpu_instance_id"].as_u64().unwrap(),
                m["profile"].as_str().unwrap(),
                m["memory.used"].as_u64().unwrap(),
                m["memory.total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, "3g.40gb", 3000, 40448),
            (5, "2g.20gb", 3000, 20096),
            (13, "1g.10gb", 500, 9984)
        ]
    );
    let pids_of = |m: &Value| -> Vec<u32> {
        let mut p: Vec<u32> = serde_json::from_value(m["pids"].clone()).unwrap();
        p.sort_unstable();
        p
    };
    assert_eq!(pids_of(&mig[0]), sorted(&pids[..2]));
    assert_eq!(pids_of(&mig[2]), [pids[3]]);
    assert_eq!(mig[0]["gpm"]["sm_activity"], 40.0);
    assert_eq!(mig[1]["gpm"], Value::Null);
    assert_eq!(mig[0]["sm_count"], 60);
    // A GPU without MIG has no "mig" key: gpustat's document as before.
    assert!(doc["gpus"][1].get("mig").is_none());

    // nvidia-smi's MIG mode fields; the parent's utilisation is [N/A], as nvidia-smi
    // prints it under MIG.
    let csv = client(
        &sb,
        &[
            "query",
            "--query-gpu=index,mig.mode.current,mig.mode.pending,utilization.gpu",
            "--format=csv,noheader",
        ],
    );
    assert_eq!(
        csv, "0, Enabled, Enabled, [N/A]\n1, [N/A], [N/A], 12 %\n",
        "{csv}"
    );
}

/// `serve --kubelet.pod-resources-socket`: a process in a MIG instance takes the pod its
/// instance is assigned to, whether the device plugin names it by MIG UUID (NVIDIA's,
/// here with a time-slicing suffix), as `nvidiaN/giM` (GKE's) or as `N:M` (NVIDIA's
/// index strategy: MIG device `M` of GPU `N`); a MIG device that does not exist names
/// no process.
#[test]
fn serve_names_the_pod_of_each_mig_instance() {
    use gpupeek_kube::api::{
        ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
    };
    use gpupeek_kube::fake::{Answer, FakeKubelet};
    let sb = Sandbox::new("mig-pods");
    let (_procs, pids) = four_sleepers();
    sb.write_scenario(&three_way(&pids));
    let daemon = sb.start_daemon_with("200ms", &["--process-interval", "200ms"]);
    let snap = sb.snapshot_when(&daemon, "three instances and their processes", |s| {
        s.mig.len() == 3 && s.processes.len() == 4
    });
    let gi1 = snap.mig.iter().find(|m| m.gpu_instance_id == 1).unwrap();
    let pod = |name: &str, resource: &str, id: String| PodResources {
        name: name.into(),
        namespace: "ml".into(),
        containers: vec![ContainerResources {
            name: "main".into(),
            devices: vec![ContainerDevices {
                resource_name: resource.into(),
                device_ids: vec![id],
            }],
            dynamic_resources: Vec::new(),
        }],
    };
    let socket = std::env::temp_dir().join(format!(
        "gpupeek-e2e-kubelet-mig-{}.sock",
        std::process::id()
    ));
    let _kubelet = FakeKubelet::start(
        &socket,
        Answer::Pods(ListPodResourcesResponse {
            pod_resources: vec![
                // GI 5's UUID (see `instance`), shared: NVIDIA's `::N` suffix.
                pod(
                    "infer",
                    "nvidia.com/mig-2g.20gb",
                    format!("MIG-{:08x}-7d1c-5b8e-9d2a-{:012x}::0", 5, 14),
                ),
                pod("gke", "nvidia.com/gpu", "nvidia0/gi13".into()),
                pod(
                    "by-index",
                    "nvidia.com/mig-1g.10gb",
                    format!("0:{}", gi1.mig_index),
                ),
                pod("ghost", "nvidia.com/mig-1g.10gb", "0:7".into()),
            ],
        }),
    );
    let body = scrape_with_kubelet(&sb, &socket);
    let pod_of = |pid: u32| pod_of(&body, pid);
    assert_eq!(pod_of(pids[2]), "infer", "GI 5, by MIG UUID");
    assert_eq!(pod_of(pids[3]), "gke", "GI 13, as GKE names it");
    assert_eq!(pod_of(pids[0]), "by-index", "GI 1, by MIG device index");
    assert_eq!(pod_of(pids[1]), "by-index", "GI 1, by MIG device index");
    assert!(!body.contains("pod=\"ghost\""), "{body}");
}

/// One scrape of `serve --per-process` reading the kubelet at `socket`, which answered.
fn scrape_with_kubelet(sb: &Sandbox, socket: &std::path::Path) -> String {
    let client = Command::new(&gpupeek_e2e::bins().client);
    let (_serve, url) = gpupeek_e2e::spawn_serve(
        sb,
        client,
        &[
            "--per-process".as_ref(),
            "--kubelet.pod-resources-socket".as_ref(),
            socket.as_os_str(),
        ],
    );
    let addr = url.strip_prefix("http://").unwrap();
    let (status, body) = gpupeek_e2e::http("GET", addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains("gpupeek_kubelet_pod_resources_up 1\n"),
        "{body}"
    );
    body
}

/// The `pod` label of process `pid`'s memory series in `body`.
fn pod_of(body: &str, pid: u32) -> String {
    let line = body
        .lines()
        .find(|l| {
            l.starts_with("gpupeek_process_gpu_memory_bytes{")
                && l.contains(&format!("pid=\"{pid}\""))
        })
        .unwrap_or_else(|| panic!("no series of {pid}: {body}"));
    let at = line.find(",pod=\"").expect("a pod label") + 6;
    line[at..].split('"').next().unwrap().to_owned()
}

/// The segment has each GPU's minor number and each GPU instance's profile id and
/// placement (ABI 1.12), and `serve` names the pod of each device of NVIDIA's DRA driver:
/// a whole GPU by minor number (`gpu-0` is NVML's GPU 1 here), a MIG device by its
/// parent's minor number, profile and placement in today's form and in earlier
/// releases'. A name that fits GPU 0 by index rather than minor number names no process,
/// nor does another DRA driver's device.
#[test]
fn serve_names_the_pod_of_each_dra_device() {
    dra_pods("mig-dra", false);
}

/// [`serve_names_the_pod_of_each_dra_device`] where the daemon may not ask for the GPU
/// instances (MIG monitoring needs privileges a container may lack): no placement is
/// published, and a MIG device is still named by a profile no other GPU instance of its
/// GPU has; the form without a profile (`PROFILEID-START-SIZE`) names nothing.
#[test]
fn without_placements_a_dra_mig_device_is_named_by_a_profile_of_its_own() {
    dra_pods("mig-dra-np", true);
}

/// The DRA pod names of [`three_way`]'s processes, numbered by minor number;
/// `unprivileged`: `nvmlDeviceGetGpuInstanceById` answers `NO_PERMISSION`.
fn dra_pods(tag: &str, unprivileged: bool) {
    use gpupeek_kube::api::{
        ClaimResource, ContainerResources, DynamicResource, ListPodResourcesResponse, PodResources,
    };
    use gpupeek_kube::fake::{Answer, FakeKubelet};
    use gpupeek_shm::layout::gpu_valid4;
    let sb = Sandbox::new(tag);
    let (_procs, pids) = four_sleepers();
    let mut s = numbered_by_minor(three_way(&pids));
    if unprivileged {
        s["gpus"][0]["errors"] = json!({"nvmlDeviceGetGpuInstanceById": "NO_PERMISSION"});
    }
    sb.write_scenario(&s);
    let daemon = sb.start_daemon_with("200ms", &["--process-interval", "200ms"]);
    let snap = sb.snapshot_when(&daemon, "three instances and their processes", |s| {
        s.mig.len() == 3 && s.processes.len() == 4
    });
    let minors: Vec<Option<u32>> = snap
        .gpus
        .iter()
        .map(|g| (g.valid4 & gpu_valid4::MINOR_NUMBER != 0).then_some(g.minor_number))
        .collect();
    assert_eq!(minors, [Some(1), Some(0)]);
    let placements: Vec<(u32, u32, u32, u32)> = snap
        .mig
        .iter()
        .filter(|m| m.valid & mig_valid::PLACEMENT != 0)
        .map(|m| {
            let (id, start, size) = (
                m.gpu_instance_profile_id,
                m.placement_start,
                m.placement_size,
            );
            (m.gpu_instance_id, id, start, size)
        })
        .collect();
    // The H100's profile ids, and its memory slices per profile (`nvidia-smi mig -lgipp`).
    match unprivileged {
        false => assert_eq!(placements, [(1, 9, 0, 4), (5, 14, 4, 2), (13, 19, 6, 1)]),
        true => assert_eq!(placements, []),
    }

    let pod = |name: &str, driver: &str, device: &str| PodResources {
        name: name.into(),
        namespace: "ml".into(),
        containers: vec![ContainerResources {
            name: "main".into(),
            devices: Vec::new(),
            dynamic_resources: vec![DynamicResource {
                claim_name: format!("{name}-gpu"),
                claim_namespace: "ml".into(),
                claim_resources: vec![ClaimResource {
                    driver_name: driver.into(),
                    pool_name: "node-1".into(),
                    device_name: device.into(),
                    share_id: None,
                }],
            }],
        }],
    };
    let nvidia = "gpu.nvidia.com";
    let socket = std::env::temp_dir().join(format!(
        "gpupeek-e2e-kubelet-{tag}-{}.sock",
        std::process::id()
    ));
    let _kubelet = FakeKubelet::start(
        &socket,
        Answer::Pods(ListPodResourcesResponse {
            pod_resources: vec![
                pod("whole", nvidia, "gpu-0"),
                pod("today", nvidia, "gpu-1-mig-3g40gb-9-0"),
                pod("mid", nvidia, "gpu-1-mig-2g20gb-4-5"),
                pod("old", nvidia, "gpu-1-mig-19-6-1"),
                // GPU 0's GI 1 if `gpu-N` were NVML's index: it is minor number 0,
                // NVML's GPU 1, which has no MIG device.
                pod("by-index", nvidia, "gpu-0-mig-3g40gb-9-0"),
                pod("other-driver", "gpu.example.com", "gpu-1-mig-1g10gb-19-6"),
            ],
        }),
    );
    let body = scrape_with_kubelet(&sb, &socket);
    let pod_of = |pid: u32| pod_of(&body, pid);
    assert_eq!(pod_of(pids[0]), "today", "GI 1, today's form");
    assert_eq!(pod_of(pids[1]), "today", "GI 1, today's form");
    assert_eq!(pod_of(pids[2]), "mid", "GI 5, PROFILE-START-END");
    match unprivileged {
        false => assert_eq!(pod_of(pids[3]), "old", "GI 13, PROFILEID-START-SIZE"),
        true => assert_eq!(pod_of(pids[3]), "", "no profile in the name, no placement"),
    }
    let second_gpu = body
        .lines()
        .find(|l| {
            l.starts_with("gpupeek_gpu_memory_used_bytes{")
                && l.contains("GPU-ffffffff-0000-1111-2222-333344445555")
        })
        .unwrap_or_else(|| panic!("no memory series of GPU 1: {body}"));
    assert!(second_gpu.contains("pod=\"whole\""), "{second_gpu}");
    for nobody in ["by-index", "other-driver"] {
        assert!(!body.contains(&format!("pod=\"{nobody}\"")), "{body}");
    }
}
