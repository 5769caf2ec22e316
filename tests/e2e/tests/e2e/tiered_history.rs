//! The tiered history (ABI 1.7), through the real daemon on the fake NVML: a GPU whose
//! values change on a known schedule (and which falls off the bus for part of it), a
//! daemon whose history unit the test hook shortens to 100 ms (raw samples every 100 ms,
//! buckets of 1 s and 6 s, the same code as 1 s, 10 s and 60 s), and a reader that
//! checks every tier and the integrals against the samples the schedule implies.

use std::time::Duration;

use gpupeek_e2e::{wait_for, Daemon, Sandbox};
use gpupeek_shm::layout::TrackKind;
use gpupeek_shm::{TierBucket, Track};
use serde_json::json;

const UUID: &str = "GPU-5e3d1c2a-0000-4000-8000-000000000001";
const UNIT_MS: &str = "100";
/// One sample's values: (util %, memory MiB, power mW, temp °C, SM MHz).
type Vals = (u32, u32, u32, u32, u32);

/// Values of the schedule's phases; `None`: the GPU is lost.
const PHASES: [Option<Vals>; 8] = [
    Some((10, 1000, 50_000, 40, 1000)),
    Some((90, 3000, 250_000, 70, 1800)),
    Some((40, 2000, 120_000, 55, 1400)),
    Some((70, 2500, 200_000, 65, 1600)),
    None,
    None,
    None,
    Some((25, 1500, 80_000, 45, 1200)),
];
const STEP_MS: u64 = 500;

fn scenario() -> serde_json::Value {
    let phases: Vec<serde_json::Value> = PHASES
        .iter()
        .map(|p| match p {
            Some((util, mib, mw, temp, sm)) => json!({"gpus": [{
                "utilization_gpu_pct": util, "memory_used_bytes": u64::from(*mib) << 20,
                "power_usage_mw": mw, "temperature_c": temp,
                "clocks_mhz": {"graphics": sm, "sm": sm, "memory": 5000}}]}),
            None => json!({"gpus": [{"errors": {"*": "GPU_IS_LOST"}}]}),
        })
        .collect();
    json!({
        "gpus": [{"name": "NVIDIA H100", "uuid": UUID, "memory_total_bytes": 80u64 << 30,
                  "memory_used_bytes": 1000u64 << 20, "utilization_gpu_pct": 10,
                  "utilization_memory_pct": 1, "temperature_c": 40, "power_usage_mw": 50_000,
                  "clocks_mhz": {"graphics": 1000, "sm": 1000, "memory": 5000}}],
        "schedule": {"step_ms": STEP_MS, "phases": phases},
    })
}

fn start(sandbox: &Sandbox, flags: &[&str]) -> Daemon {
    sandbox.start_daemon_env(
        "100ms",
        flags,
        &[("GPUPEEKD_TEST_HISTORY_UNIT_MS", UNIT_MS.as_ref())],
    )
}

/// The GPU's track, whole.
fn track(sandbox: &Sandbox) -> Option<Track> {
    let segment = sandbox.segment();
    (0..segment.track_count())
        .filter_map(|i| segment.track(i, [usize::MAX; 3]).ok().flatten())
        .find(|t| {
            t.head.kind == TrackKind::Gpu as u32 && gpupeek_shm::text::decode(&t.head.uuid) == UUID
        })
}

/// Waits until the track's samples cover `span` of wall time (polling its head only,
/// and not often: a whole track is 700 kB to copy).
fn wait_covered(sandbox: &Sandbox, daemon: &Daemon, span: Duration) -> Track {
    wait_for("history covering the schedule", daemon, || {
        std::thread::sleep(Duration::from_millis(200));
        let segment = sandbox.segment();
        (0..segment.track_count()).any(|i| {
            segment.track_head(i).ok().flatten().is_some_and(|h| {
                gpupeek_shm::text::decode(&h.uuid) == UUID
                    && h.last_sample_unix_ns - h.integral_start_unix_ns >= span.as_nanos() as u64
            })
        })
    });
    track(sandbox).expect("the GPU's track")
}

/// The phase in force at `ms` (Unix ms).
fn phase_at(ms: u64) -> Option<Vals> {
    PHASES[(ms / STEP_MS) as usize % PHASES.len()]
}

/// The values of a raw sample, as the phase tuple (`None` for a gap).
fn raw_values(b: &TierBucket) -> Option<Vals> {
    (b.samples == 1).then_some((
        b.util_pct_min.into(),
        b.mem_used_mib_min,
        b.power_mw_min,
        b.temp_c_min.into(),
        b.sm_clock_mhz_min.into(),
    ))
}

/// What a bucket of `raw` samples must hold: (samples, per metric (min, rounded mean
/// in the bucket's unit, max)).
fn aggregate(raw: &[Option<Vals>]) -> (u8, Vec<(u32, u32, u32)>) {
    let vals: Vec<_> = raw.iter().flatten().collect();
    let n = vals.len() as u64;
    let stat = |f: &dyn Fn(&Vals) -> u32, scale: u64| {
        let min = vals.iter().map(|v| f(v)).min().unwrap_or(0);
        let max = vals.iter().map(|v| f(v)).max().unwrap_or(0);
        let sum: u64 = vals.iter().map(|v| u64::from(f(v))).sum();
        let mean = (sum * scale + n / 2).checked_div(n).unwrap_or(0) as u32;
        (min, mean, max)
    };
    (
        n as u8,
        vec![
            stat(&|v| v.0, 100),
            stat(&|v| v.1, 1),
            stat(&|v| v.2, 1),
            stat(&|v| v.3, 100),
            stat(&|v| v.4, 1),
        ],
    )
}

fn bucket_stats(b: &TierBucket) -> (u8, Vec<(u32, u32, u32)>) {
    if b.samples == 0 {
        assert_eq!(b.valid, 0, "a gap bucket has no value: {b:?}");
        return (0, vec![(0, 0, 0); 5]);
    }
    (
        b.samples,
        vec![
            (
                b.util_pct_min.into(),
                b.util_centipct_mean.into(),
                b.util_pct_max.into(),
            ),
            (b.mem_used_mib_min, b.mem_used_mib_mean, b.mem_used_mib_max),
            (b.power_mw_min, b.power_mw_mean, b.power_mw_max),
            (
                b.temp_c_min.into(),
                b.temp_centi_c_mean.into(),
                b.temp_c_max.into(),
            ),
            (
                b.sm_clock_mhz_min.into(),
                b.sm_clock_mhz_mean.into(),
                b.sm_clock_mhz_max.into(),
            ),
        ],
    )
}

/// Checks every tier and the integrals of `t` against its raw samples, and the raw
/// samples against the schedule; returns the number of gap buckets of tier 1.
fn check_track(t: &Track) -> usize {
    let raw = &t.tiers[0];
    assert!(
        raw.windows(2)
            .all(|w| w[0].start_unix_ns < w[1].start_unix_ns),
        "raw samples in time order"
    );
    // A raw sample's time is its tick's, taken just before the driver is asked: each of
    // its values is that of the phase in force then or a few ms later (a phase can
    // change between two calls of one tick) or, on a loaded machine, of a tick or a few
    // before (a GPU whose answer is late keeps its last record), and a GPU back from
    // being lost is published as such for a few more ticks.
    for b in raw {
        let ms = b.start_unix_ns / 1_000_000;
        let got = raw_values(b);
        let near: Vec<_> = (0..=11)
            .map(|k| phase_at((ms + 100).saturating_sub(k * 100)))
            .collect();
        let fits = match got {
            None => near.contains(&None),
            Some(v) => {
                let each = |f: fn(&Vals) -> u32| near.iter().flatten().any(|p| f(p) == f(&v));
                each(|v| v.0) && each(|v| v.1) && each(|v| v.2) && each(|v| v.3) && each(|v| v.4)
            }
        };
        assert!(
            fits,
            "raw sample at {ms} ms: {got:?}, schedule says {near:?}"
        );
    }
    let values: Vec<_> = raw.iter().map(raw_values).collect();
    let first = raw[0].start_unix_ns;
    let mut gaps = 0;
    for tier in 1..3 {
        let width = t.width_ns(tier);
        assert_eq!(width, [0, 1_000_000_000, 6_000_000_000][tier]);
        for b in &t.tiers[tier] {
            assert_eq!(b.start_unix_ns % width, 0, "bucket starts are aligned");
            if b.start_unix_ns < first {
                continue; // began before the first raw sample: partly the start-up
            }
            let inside: Vec<_> = raw
                .iter()
                .zip(&values)
                .filter(|(r, _)| {
                    (b.start_unix_ns..b.start_unix_ns + width).contains(&r.start_unix_ns)
                })
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(
                bucket_stats(b),
                aggregate(&inside),
                "tier {tier} bucket {b:?}"
            );
            if tier == 1 && b.samples == 0 {
                gaps += 1;
            }
        }
    }
    let h = &t.head;
    let all: Vec<_> = values.iter().flatten().collect();
    let n = all.len() as u64;
    assert_eq!(h.count_util, n);
    assert_eq!(
        h.sum_util_pct,
        all.iter().map(|v| u64::from(v.0)).sum::<u64>()
    );
    assert_eq!(
        h.sum_mem_used_mib,
        all.iter().map(|v| u64::from(v.1)).sum::<u64>()
    );
    assert_eq!(
        h.sum_power_mw,
        all.iter().map(|v| u64::from(v.2)).sum::<u64>()
    );
    assert_eq!(
        h.sum_temp_c,
        all.iter().map(|v| u64::from(v.3)).sum::<u64>()
    );
    assert_eq!(
        h.sum_sm_clock_mhz,
        all.iter().map(|v| u64::from(v.4)).sum::<u64>()
    );
    assert_eq!((h.count_power, h.count_sm_active), (n, 0));
    gaps
}

#[test]
fn every_tier_and_the_integrals_hold_what_the_schedule_implies() {
    let sandbox = Sandbox::new("tiered-schedule");
    sandbox.write_scenario(&scenario());
    let daemon = start(&sandbox, &[]);
    sandbox.wait_live(&daemon);
    // Three cycles of the schedule: two whole 6 s buckets, lost spans of 1.5 s.
    let t = wait_covered(&sandbox, &daemon, Duration::from_millis(13_000));
    let gaps = check_track(&t);
    assert!(
        gaps >= 1,
        "a whole 1 s bucket while the GPU was lost is a gap"
    );
    assert!(t.tiers[2].len() >= 3);
    assert_eq!(t.head.raw_step_ns, 100_000_000);
}

#[test]
fn the_model_window_covers_the_schedule_with_gaps_where_the_gpu_was_lost() {
    let sandbox = Sandbox::new("tiered-window");
    sandbox.write_scenario(&scenario());
    let daemon = start(&sandbox, &[]);
    sandbox.wait_live(&daemon);
    wait_covered(&sandbox, &daemon, Duration::from_millis(5_000));
    let segment = sandbox.segment();
    let snapshot = segment.snapshot().unwrap();
    let series = gpupeek_model::history::window(&segment, &snapshot, Duration::from_secs(60));
    let gpu = series
        .iter()
        .find(|s| s.uuid == UUID)
        .expect("the GPU's series");
    assert_eq!((gpu.gpu_index, gpu.mig), (0, None));
    let p = &gpu.points;
    let t = track(&sandbox).unwrap();
    assert!(
        p.len() > 40,
        "{} points from {:?}: {:?}",
        p.len(),
        t.tiers.each_ref().map(Vec::len),
        p.iter()
            .map(|p| (
                p.start_unix_ns / 1_000_000,
                p.span_ns / 1_000_000,
                p.samples
            ))
            .collect::<Vec<_>>()
    );
    // In time order; a bucket ends before the next point starts (raw samples are
    // instants a nominal step long: a late tick's sample can be followed closely).
    assert!(p.windows(2).all(|w| w[0].start_unix_ns < w[1].start_unix_ns
        && (w[0].span_ns < 1_000_000_000
            || w[0].start_unix_ns + w[0].span_ns <= w[1].start_unix_ns)));
    assert!(p.iter().any(|p| p.is_gap()), "lost spans are gaps");
    let integrals = gpupeek_model::history::integrals(&segment, &snapshot);
    let i = integrals.iter().find(|i| i.uuid == UUID).unwrap();
    let mean = i.mean(gpupeek_model::Metric::Utilization).unwrap();
    assert!((10.0..=90.0).contains(&mean), "{mean}");
}

#[test]
fn a_gpu_lost_when_first_seen_gets_its_uuid_and_history_once_back() {
    let sandbox = Sandbox::new("tiered-lost-first");
    let mut lost = scenario();
    lost.as_object_mut().unwrap().remove("schedule");
    lost["gpus"][0]["errors"] = json!({"*": "GPU_IS_LOST"});
    sandbox.write_scenario(&lost);
    let daemon = start(&sandbox, &[]);
    sandbox.snapshot_when(&daemon, "the GPU published as lost", |s| {
        s.gpus
            .first()
            .is_some_and(|g| g.state == gpupeek_shm::GpuState::Lost as u32)
    });
    lost["gpus"][0].as_object_mut().unwrap().remove("errors");
    sandbox.write_scenario(&lost);
    let snap = sandbox.snapshot_when(&daemon, "the GPU back with its UUID", |s| {
        s.gpus
            .first()
            .is_some_and(|g| gpupeek_shm::text::decode(&g.uuid) == UUID)
    });
    assert_eq!(gpupeek_shm::text::decode(&snap.gpus[0].name), "NVIDIA H100");
    wait_covered(&sandbox, &daemon, Duration::from_millis(300));
}

/// The Python reader's integrals of segment `name`, as JSON lines
/// `[uuid, metric, sum, count]` (none without python3).
fn python_integrals(name: &str) -> Option<Vec<serde_json::Value>> {
    let python = gpupeek_e2e::tool("python3", "python3")?;
    let script = "import gpupeek, json, sys\n\
                  for i in gpupeek.integrals(sys.argv[1]):\n    \
                  for m, (s, n) in sorted(i.sums.items()):\n        \
                  print(json.dumps([i.uuid, i.kind, m, s, n]))\n";
    let mut cmd = std::process::Command::new(python);
    cmd.args(["-c", script, name])
        .env("PYTHONPATH", gpupeek_e2e::repo().join("contrib/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    assert!(out.status.success(), "{}", gpupeek_e2e::stderr(&out));
    let text = gpupeek_e2e::stdout(&out);
    Some(
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

#[test]
fn history_survives_a_restart_and_python_reads_the_same_integrals() {
    let sandbox = Sandbox::new("tiered-restart");
    sandbox.write_scenario(&scenario());
    let mut daemon = start(&sandbox, &[]);
    sandbox.wait_live(&daemon);
    wait_covered(&sandbox, &daemon, Duration::from_millis(1500));
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
    let before = track(&sandbox).unwrap();
    if let Some(lines) = python_integrals(&sandbox.shm) {
        let h = &before.head;
        let want = [
            ("mem_used", h.sum_mem_used_mib as f64, h.count_mem_used),
            ("power", h.sum_power_mw as f64 / 1000.0, h.count_power),
            ("sm_active", 0.0, 0),
            ("sm_clock", h.sum_sm_clock_mhz as f64, h.count_sm_clock),
            ("temp", h.sum_temp_c as f64, h.count_temp),
            ("util", h.sum_util_pct as f64, h.count_util),
        ];
        let want: Vec<serde_json::Value> = want
            .iter()
            .map(|(m, s, n)| json!([UUID, "gpu", m, s, n]))
            .collect();
        assert_eq!(lines, want);
    }
    let daemon = start(&sandbox, &[]);
    sandbox.wait_live(&daemon);
    let after = wait_covered(&sandbox, &daemon, Duration::from_millis(2500));
    let log = daemon.log();
    assert!(
        log.contains("history: 1 track(s) taken over from the previous segment"),
        "{log}"
    );
    assert!(
        !log.contains("restored from the state file"),
        "the state file holds nothing newer: {log}"
    );
    assert_eq!(
        after.head.integral_start_unix_ns,
        before.head.integral_start_unix_ns
    );
    assert!(after.head.raw_written > before.head.raw_written);
    let raw = |t: &Track| {
        t.tiers[0]
            .iter()
            .map(|b| b.start_unix_ns)
            .collect::<Vec<_>>()
    };
    assert!(
        raw(&after).starts_with(&raw(&before)),
        "the new daemon's raw samples follow the old ones"
    );
    let segment = sandbox.segment();
    let snapshot = segment.snapshot().unwrap();
    let series = gpupeek_model::history::window(&segment, &snapshot, Duration::from_secs(60));
    let first = series[0].points.iter().find(|p| !p.is_gap()).unwrap();
    assert!(first.start_unix_ns <= before.tiers[0][1].start_unix_ns);
}

const OTHER: &str = "GPU-5e3d1c2a-0000-4000-8000-000000000002";

/// GPUs with steady values (30 % for [`UUID`], 60 % for the others), in this order.
fn gpus(uuids: &[&str]) -> serde_json::Value {
    let gpu = |uuid: &str| {
        let util = if uuid == UUID { 30 } else { 60 };
        json!({"name": "NVIDIA H100", "uuid": uuid, "memory_total_bytes": 80u64 << 30,
               "memory_used_bytes": 1u64 << 30, "utilization_gpu_pct": util,
               "utilization_memory_pct": 1, "temperature_c": 40, "power_usage_mw": 50_000})
    };
    json!({"gpus": uuids.iter().map(|u| gpu(u)).collect::<Vec<_>>()})
}

/// Two GPUs, `first` at index 0.
fn two_gpus(first: &str, second: &str) -> serde_json::Value {
    gpus(&[first, second])
}

/// The track of `uuid`, whole.
fn track_of(sandbox: &Sandbox, uuid: &str) -> Option<Track> {
    let segment = sandbox.segment();
    (0..segment.track_count())
        .filter_map(|i| segment.track(i, [usize::MAX; 3]).ok().flatten())
        .find(|t| gpupeek_shm::text::decode(&t.head.uuid) == uuid)
}

#[test]
fn the_state_file_brings_history_back_by_uuid_when_the_segment_is_gone() {
    let sandbox = Sandbox::new("tiered-state");
    let state = sandbox.dir.join("state");
    let state_flags = ["--state-dir", state.to_str().unwrap()];
    let gone = "GPU-5e3d1c2a-0000-4000-8000-00000000dead";
    sandbox.write_scenario(&gpus(&[UUID, OTHER, gone]));
    let mut daemon = start(&sandbox, &state_flags);
    sandbox.wait_live(&daemon);
    wait_covered(&sandbox, &daemon, Duration::from_millis(1500));
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
    let before = track_of(&sandbox, UUID).unwrap();
    assert_eq!(before.head.gpu_index, 0);
    let file = state.join(format!("{}.history", sandbox.shm));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&state).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert!(file.is_file(), "a clean stop writes the state file");
    // The segment is gone (a reboot), and the GPUs swapped places.
    std::fs::remove_file(sandbox.shm_path()).unwrap();
    sandbox.write_scenario(&two_gpus(OTHER, UUID));
    let daemon = start(&sandbox, &state_flags);
    sandbox.wait_live(&daemon);
    let mut after = None;
    wait_for("the GPU's old history at its new index", &daemon, || {
        std::thread::sleep(Duration::from_millis(200));
        after = track_of(&sandbox, UUID).filter(|t| t.head.gpu_index == 1);
        after
            .as_ref()
            .is_some_and(|t| t.head.raw_written > before.head.raw_written)
    });
    let after = after.unwrap();
    assert_eq!(
        after.head.integral_start_unix_ns,
        before.head.integral_start_unix_ns
    );
    assert_eq!(
        after.head.sum_util_pct - before.head.sum_util_pct,
        30 * (after.head.count_util - before.head.count_util)
    );
    let raw = |t: &Track| {
        t.tiers[0]
            .iter()
            .map(|b| b.start_unix_ns)
            .collect::<Vec<_>>()
    };
    assert!(raw(&after).starts_with(&raw(&before)));
    assert!(!daemon.log().contains("refused"), "{}", daemon.log());
    assert!(
        daemon.log().contains(&format!(
            "history: 3 track(s) restored from the state file {}",
            file.display()
        )),
        "{}",
        daemon.log()
    );
    // The GPU that is gone: its history is dropped, here and from the next state file.
    assert!(
        daemon
            .log()
            .contains("history of 1 GPU(s) or MIG instance(s) no longer present dropped"),
        "{}",
        daemon.log()
    );
    assert!(track_of(&sandbox, gone).is_none());
}

#[test]
fn a_corrupt_state_file_is_refused_in_one_line_and_history_starts_empty() {
    let sandbox = Sandbox::new("tiered-corrupt");
    let state = sandbox.dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let file = state.join(format!("{}.history", sandbox.shm));
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "bad magic",
            b"this is not a state file at all, not even close".repeat(4),
        ),
        ("truncated", {
            let mut b = b"GPKHIST\0".to_vec();
            b.extend_from_slice(&[1, 0, 0, 0, 64, 0, 0, 0]);
            b
        }),
        ("empty", Vec::new()),
    ];
    for (what, bytes) in cases {
        std::fs::write(&file, &bytes).unwrap();
        sandbox.write_scenario(&two_gpus(UUID, OTHER));
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let mut daemon = start(&sandbox, &["--state-dir", state.to_str().unwrap()]);
        sandbox.wait_live(&daemon);
        wait_covered(&sandbox, &daemon, Duration::from_millis(300));
        let log = daemon.log();
        let refusals: Vec<&str> = log.lines().filter(|l| l.contains("refused")).collect();
        assert_eq!(refusals.len(), 1, "{what}: {log}");
        assert!(
            refusals[0].contains("history starts empty"),
            "{what}: {log}"
        );
        let t = track_of(&sandbox, UUID).unwrap();
        assert!(
            t.head.integral_start_unix_ns >= started,
            "{what}: history is new"
        );
        daemon.signal(nix::sys::signal::Signal::SIGTERM);
        assert_eq!(daemon.wait_exit(), Some(0));
        // Each run starts from a fresh segment, with only the file to take over from.
        std::fs::remove_file(sandbox.shm_path()).unwrap();
    }
}

#[test]
fn mig_instances_have_series_of_their_own() {
    use crate::mig::{instance, scenario};
    let sandbox = Sandbox::new("tiered-mig");
    sandbox.write_scenario(&scenario(
        vec![instance(1, 9, Some(40.0)), instance(5, 14, None)],
        vec![],
    ));
    let daemon = start(&sandbox, &[]);
    sandbox.wait_live(&daemon);
    let metric = |s: &gpupeek_model::Series, m: gpupeek_model::Metric| {
        s.points.iter().rev().find_map(|p| p.get(m)).map(|v| v.mean)
    };
    let mut series = Vec::new();
    wait_for("MIG series with GPM activity", &daemon, || {
        std::thread::sleep(Duration::from_millis(200));
        let segment = sandbox.segment();
        let snapshot = segment.snapshot().unwrap();
        series = gpupeek_model::history::window(&segment, &snapshot, Duration::from_secs(60));
        series.iter().any(|s| {
            s.mig == Some((1, 0))
                && metric(s, gpupeek_model::Metric::SmActivity).is_some_and(|v| v == 40.0)
        })
    });
    let migs: Vec<_> = series.iter().filter(|s| s.mig.is_some()).collect();
    assert_eq!(migs.len(), 2, "{series:?}");
    assert!(series.iter().filter(|s| s.mig.is_none()).count() == 2);
    let gi5 = migs.iter().find(|s| s.mig == Some((5, 0))).unwrap();
    assert_eq!(gi5.gpu_index, 0);
    assert!(gi5.uuid.starts_with("MIG-"));
    assert_eq!(metric(gi5, gpupeek_model::Metric::SmActivity), None);
    assert!(metric(gi5, gpupeek_model::Metric::MemoryUsed).is_some());
    assert_eq!(metric(gi5, gpupeek_model::Metric::Utilization), None);
}

#[test]
fn a_gpu_beyond_the_tracks_is_drawn_from_its_raw_ring() {
    let sandbox = Sandbox::new("tiered-beyond");
    sandbox.write_scenario(&two_gpus(UUID, OTHER));
    let daemon = start(&sandbox, &["--history-tracks", "1"]);
    sandbox.wait_live(&daemon);
    let mut series = Vec::new();
    wait_for("both GPUs' series", &daemon, || {
        std::thread::sleep(Duration::from_millis(200));
        let segment = sandbox.segment();
        let snapshot = segment.snapshot().unwrap();
        series = gpupeek_model::history::window(&segment, &snapshot, Duration::from_secs(60));
        series.len() == 2 && series.iter().all(|s| s.points.len() >= 2)
    });
    assert_eq!(series[0].uuid, UUID);
    assert_eq!(series[1].uuid, OTHER);
    // The first GPU's track has raw samples every 100 ms (the test unit); the second
    // has only the ring, a sample a second.
    assert_eq!(series[0].points.last().unwrap().span_ns, 100_000_000);
    assert_eq!(series[1].points.last().unwrap().span_ns, 1_000_000_000);
    let log = daemon.log();
    assert_eq!(log.matches("history tracks are in use").count(), 1, "{log}");
}

/// Gap time at the end of `points` (after the last point with a value), ns.
fn trailing_gap_ns(points: &[gpupeek_model::history::Point]) -> u64 {
    let valued = points
        .iter()
        .rposition(|p| !p.is_gap())
        .map_or(0, |i| i + 1);
    points[valued..].iter().map(|p| p.span_ns).sum()
}

/// A driver call that hangs (a GPU after an Xid): once the daemon calls the GPU not
/// responding (`--nvml-timeout`), its history is gaps, not its last values held; once
/// the call returns it has values again, after the gap.
#[test]
fn a_hung_gpu_is_a_gap_in_its_history_until_it_answers_again() {
    let sandbox = Sandbox::new("tiered-hung");
    let scenario = |hang: bool| {
        let mut s = gpus(&[UUID]);
        if hang {
            s["gpus"][0]["hang"] = json!(["nvmlDeviceGetUtilizationRates"]);
        }
        s
    };
    sandbox.write_scenario(&scenario(false));
    let daemon = start(&sandbox, &["--nvml-timeout", "1s"]);
    sandbox.wait_live(&daemon);
    sandbox.wait_sampled(&daemon);
    let window = || {
        let segment = sandbox.segment();
        let snapshot = segment.snapshot().unwrap();
        let mut series =
            gpupeek_model::history::window(&segment, &snapshot, Duration::from_secs(60));
        series.remove(0).points
    };
    wait_for("values in the history", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        window().iter().any(|p| !p.is_gap())
    });

    sandbox.write_scenario(&scenario(true));
    sandbox.snapshot_when(&daemon, "the GPU not responding", |s| {
        s.gpus[0].state == gpupeek_shm::GpuState::NotResponding as u32
    });
    // Half a second of not responding is five raw samples at the test's 100 ms unit.
    wait_for("gaps while the GPU does not respond", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        trailing_gap_ns(&window()) >= 500_000_000
    });

    sandbox.write_scenario(&scenario(false));
    let mut points = Vec::new();
    wait_for("values again once it answers", &daemon, || {
        std::thread::sleep(Duration::from_millis(100));
        points = window();
        points.last().is_some_and(|p| !p.is_gap())
    });
    let last_gap = points
        .iter()
        .rposition(|p| p.is_gap())
        .expect("the hang's gap");
    assert!(trailing_gap_ns(&points[..=last_gap]) >= 500_000_000);
    assert_eq!(
        points[last_gap + 1].get(gpupeek_model::history::Metric::Utilization),
        Some(gpupeek_model::history::Stat::one(30.0))
    );
}
