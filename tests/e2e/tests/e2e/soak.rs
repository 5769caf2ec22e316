//! Load and soak: many readers cost the daemon nothing, and a daemon running fast with
//! values that never stop changing keeps its memory and descriptors flat.
//!
//! Both run briefly under `cargo test`; `scripts/soak` and `scripts/load` run them long
//! (release build, figures printed) through these environment variables:
//! - `GPUPEEK_LOAD_READERS` (default 100) reader processes, `GPUPEEK_LOAD_SECS`
//!   (default 2) seconds per phase;
//! - `GPUPEEK_SOAK_SECS` (default 20) seconds at 100 Hz.
//!
//! What they assert holds on any machine (no reader changes how many driver calls a
//! tick makes; descriptors do not grow; memory does not climb); the CPU and timing
//! figures they print are recorded in docs/RELIABILITY.md, never asserted.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpupeek_e2e::{one_at_a_time, stdout, Daemon, Sandbox};
use serde_json::{json, Value};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory of `pid`, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Open descriptors of `pid`, the least of five looks 1 ms apart: a file the daemon has
/// open for a moment (the scenario being reloaded, a `/proc` entry read by path) is not a
/// leak. Apart: those of the `/proc/PID/stat` and `statm` files gpupeekd keeps open for
/// the processes it knows (their number follows the processes), and all the others.
fn fds(pid: u32) -> (usize, usize) {
    let kept = |link: &std::path::Path| {
        let mut parts = link.iter().skip(1).map(|p| p.to_str().unwrap_or(""));
        parts.next() == Some("proc")
            && parts.next().is_some_and(|n| n.parse::<u32>().is_ok())
            && matches!(parts.next(), Some("stat" | "statm"))
            && parts.next().is_none()
    };
    (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(1));
            let links: Vec<std::path::PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .collect();
            let procs = links.iter().filter(|l| kept(l)).count();
            (links.len() - procs, procs)
        })
        .min()
        .unwrap()
}

/// Time `pid` has run on a CPU and time it waited, runnable, for one, ns
/// (`/proc/PID/schedstat`).
fn sched_ns(pid: u32) -> [u64; 2] {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    let mut fields = s.split_whitespace().map(|f| f.parse().unwrap());
    [fields.next().unwrap(), fields.next().unwrap()]
}

fn gpus(n: u32, tick: u64, procs: &[(u32, u32)]) -> Value {
    let gpus: Vec<Value> = (0..n)
        .map(|i| {
            let t = tick + u64::from(i);
            let list: Vec<Value> = procs
                .iter()
                .filter(|(gpu, _)| *gpu == i)
                .map(|(_, pid)| json!({"pid": pid, "used_gpu_memory_bytes": (t % 64) << 26}))
                .collect();
            json!({
                "name": format!("NVIDIA H100 80GB HBM3 #{i}"),
                "uuid": format!("GPU-{i:08}-2222-3333-4444-555555555555"),
                "pci_bus_id": format!("00000000:{:02x}:00.0", 0x18 + i),
                "memory_total_bytes": 80u64 << 30, "memory_used_bytes": (t % 80) << 30,
                "utilization_gpu_pct": t % 101, "utilization_memory_pct": (t * 7) % 101,
                "temperature_c": 30 + t % 60, "power_usage_mw": 50_000 + (t % 600) * 1000,
                "power_limit_mw": 700_000, "fan_speed_pct": t % 100,
                "clocks_mhz": {"graphics": 1000 + t % 900, "sm": 1000 + t % 900, "memory": 2619},
                "processes": list
            })
        })
        .collect();
    json!({ "gpus": gpus })
}

/// Processes to list as GPU users: real ones, so `/proc` lookups succeed.
struct Sleepers(Vec<Child>);

impl Sleepers {
    fn new(n: usize) -> Self {
        Sleepers(
            (0..n)
                .map(|_| Command::new("sleep").arg("7200").spawn().unwrap())
                .collect(),
        )
    }
    fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One measured phase: ticks, NVML calls per tick (when counted), CPU µs per tick, µs
/// per tick spent runnable but waiting for a CPU, and the median and 99th percentile of
/// the in-daemon tick time (first GPU sampled → heartbeat), µs.
struct Phase {
    ticks: u64,
    calls_per_tick: f64,
    /// NVML calls per GPU sample, the device count aside (each GPU job reads memory
    /// once): a tick whose GPU was still busy with the job before (a starved machine)
    /// samples it once less, and only this stays the same then.
    calls_per_sample: f64,
    cpu_us_per_tick: f64,
    wait_us_per_tick: f64,
    tick_us: (u64, u64),
}

/// What [`at_tick_boundary`] reads.
struct Boundary {
    generation: u64,
    /// NVML calls (0 when not counted).
    calls: u64,
    /// Of those, the ones made for GPUs (all but the device count).
    gpu_calls: u64,
    /// GPU samples taken (each reads memory once).
    samples: u64,
    cpu_ns: u64,
    wait_ns: u64,
}

/// Generation, NVML calls, CPU time and run-queue wait of the daemon, read while it is
/// stopped just after a publish, so that no tick is counted in part.
fn at_tick_boundary(sb: &Sandbox, daemon: &Daemon, segment: &gpupeek_shm::Segment) -> Boundary {
    let g = segment.generation();
    let deadline = Instant::now() + gpupeek_e2e::WATCHDOG;
    while segment.generation() == g {
        assert!(Instant::now() < deadline, "the daemon stopped publishing");
        std::hint::spin_loop();
    }
    daemon.signal(nix::sys::signal::Signal::SIGSTOP);
    let calls = sb
        .nvml_calls()
        .get(&daemon.pid())
        .map_or(0, |&(total, _)| total);
    let file = sb.nvml_call_file(daemon.pid()).unwrap_or_default();
    let of = |f: &str| file.get(f).copied().unwrap_or(0);
    let [cpu_ns, wait_ns] = sched_ns(daemon.pid());
    let counts = Boundary {
        generation: segment.generation(),
        calls,
        gpu_calls: calls.saturating_sub(of("nvmlDeviceGetCount_v2")),
        samples: of("nvmlDeviceGetMemoryInfo_v2"),
        cpu_ns,
        wait_ns,
    };
    daemon.signal(nix::sys::signal::Signal::SIGCONT);
    counts
}

fn measure(sb: &Sandbox, daemon: &Daemon, secs: u64) -> Phase {
    let segment = sb.segment();
    let b0 = at_tick_boundary(sb, daemon, &segment);
    let mut tick_ns = Vec::new();
    let mut last = b0.generation;
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if let Ok(snap) = segment.snapshot() {
            if snap.consistent && snap.generation != last && !snap.gpus.is_empty() {
                last = snap.generation;
                let t = snap.status.heartbeat_mono_ns;
                tick_ns.push(t.saturating_sub(snap.gpus[0].sample_mono_ns));
            }
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    let b1 = at_tick_boundary(sb, daemon, &segment);
    let ticks = (b1.generation - b0.generation).max(1);
    tick_ns.sort_unstable();
    let pct = |p: usize| tick_ns.get(tick_ns.len() * p / 100).copied().unwrap_or(0) / 1000;
    Phase {
        ticks,
        calls_per_tick: (b1.calls - b0.calls) as f64 / ticks as f64,
        calls_per_sample: (b1.gpu_calls - b0.gpu_calls) as f64
            / (b1.samples - b0.samples).max(1) as f64,
        cpu_us_per_tick: (b1.cpu_ns - b0.cpu_ns) as f64 / ticks as f64 / 1000.0,
        wait_us_per_tick: (b1.wait_ns - b0.wait_ns) as f64 / ticks as f64 / 1000.0,
        tick_us: (pct(50), pct(99)),
    }
}

/// Starts `readers` processes taking snapshots of `sb`'s segment non-stop for `ms`,
/// under `SCHED_IDLE`: they use every cycle nobody else wants, so what is measured is
/// the work readers cause the daemon, not a 2-core machine handing its time to a
/// thousand busy processes.
fn start_readers(sb: &Sandbox, readers: u64, ms: u64) -> Vec<Child> {
    let peer = env!("CARGO_BIN_EXE_seqlock-stress-peer");
    (0..readers)
        .map(|_| {
            Command::new("chrt")
                .args(["--idle", "0", peer, "load", &sb.shm, &ms.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .expect("a reader starts")
        })
        .collect()
}

/// Waits for the readers; returns (snapshots taken, snapshots failed).
fn reader_totals(children: Vec<Child>) -> (u64, u64) {
    let (mut reads, mut failed) = (0, 0);
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let line = stdout(&out);
        let field = |key: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.parse().ok())
                .unwrap_or(0)
        };
        reads += field("ops=");
        failed += field("stale=");
    }
    (reads, failed)
}

/// Runs an idle phase, then a phase with the readers, on a daemon already live.
fn idle_then_loaded(sb: &Sandbox, daemon: &Daemon, readers: u64, secs: u64) -> [Phase; 2] {
    let _turn = one_at_a_time();
    // A session's first job per GPU also reads its identity and near-static values
    // (some 60 calls since ABI 1.5), and the daemon goes live before that job answers:
    // measuring from then would count them in the idle window alone.
    sb.wait_sampled(daemon);
    let idle = measure(sb, daemon, secs);
    let children = start_readers(sb, readers, secs * 1000 + 2000);
    std::thread::sleep(Duration::from_millis(500));
    let loaded = measure(sb, daemon, secs);
    let (reads, failed) = reader_totals(children);
    eprintln!("load: {readers} readers took {reads} snapshots, {failed} failed");
    assert_eq!(failed, 0, "a reader's snapshot failed under load");
    assert!(reads >= readers, "every reader read");
    [idle, loaded]
}

#[test]
fn many_readers_at_full_speed_add_no_driver_calls_to_the_daemons_tick() {
    let readers = env_u64("GPUPEEK_LOAD_READERS", 100);
    let secs = env_u64("GPUPEEK_LOAD_SECS", 2);
    let sb = Sandbox::new("loadcalls");
    sb.write_scenario(&gpus(1, 0, &[]));
    // Every tick a slow one: with the default process interval the share of slow ticks
    // in a window depends on how many ticks the machine let run, not on the readers.
    let daemon = sb.start_daemon_with("10ms", &["--process-interval", "10ms"]);
    sb.wait_live(&daemon);
    let [idle, loaded] = idle_then_loaded(&sb, &daemon, readers, secs);
    eprintln!(
        "load: NVML calls per tick {:.2} ({} ticks) -> {:.2} ({} ticks); per GPU sample \
         {:.2} -> {:.2}",
        idle.calls_per_tick,
        idle.ticks,
        loaded.calls_per_tick,
        loaded.ticks,
        idle.calls_per_sample,
        loaded.calls_per_sample
    );
    // Per GPU sample, not per tick: on this 2-core machine a starved tick can find its
    // GPU still busy with the job before and not sample it, which is not the readers'
    // doing. Both windows start and end just after a publish, so this is exact unless a
    // job was cut by the stop (allow one sample) or a turn of a time-driven tier (the
    // 30 s near-static reads, the PCIe fallback) fell into one window and not the other,
    // which a loaded CI machine has shown as +7% (19.07 -> 20.40): allow a tenth. A
    // driver call per this many snapshots, or per reader, would still be many times that.
    let slack = (2.0 * idle.calls_per_sample / idle.ticks.min(loaded.ticks) as f64)
        .max(idle.calls_per_sample / 10.0);
    assert!(
        (idle.calls_per_sample - loaded.calls_per_sample).abs() <= slack,
        "readers changed the daemon's driver calls per GPU sample"
    );
}

#[test]
fn many_readers_at_full_speed_leave_the_daemons_cpu_per_tick_as_it_was() {
    let readers = env_u64("GPUPEEK_LOAD_READERS", 100);
    let secs = env_u64("GPUPEEK_LOAD_SECS", 2);
    let sb = Sandbox::new("loadcpu");
    let sleepers = Sleepers::new(8);
    let procs: Vec<(u32, u32)> = sleepers.pids().iter().map(|&p| (p % 8, p)).collect();
    sb.write_scenario(&gpus(8, 0, &procs));
    let mut cmd = sb.daemon_command("10ms");
    // Per-call count files would be most of the daemon's CPU time.
    cmd.env_remove("FAKE_NVML_CALLS_DIR");
    let daemon = sb.spawn_daemon(cmd);
    sb.wait_live(&daemon);
    std::thread::sleep(Duration::from_millis(300));
    let [idle, loaded] = idle_then_loaded(&sb, &daemon, readers, secs);
    // Figures only: CPU time and timing are measured and recorded, never asserted.
    eprintln!(
        "load: ticks {} -> {}; daemon CPU per tick {:.0} us -> {:.0} us; \
         waiting for a CPU per tick {:.0} us -> {:.0} us; \
         tick time p50/p99 {:?} us -> {:?} us",
        idle.ticks,
        loaded.ticks,
        idle.cpu_us_per_tick,
        loaded.cpu_us_per_tick,
        idle.wait_us_per_tick,
        loaded.wait_us_per_tick,
        idle.tick_us,
        loaded.tick_us
    );
}

#[test]
fn a_daemon_at_100_hz_with_churning_values_keeps_memory_and_descriptors_flat() {
    let secs = env_u64("GPUPEEK_SOAK_SECS", 20);
    let _turn = one_at_a_time();
    let sb = Sandbox::new("soak");
    let sleepers = Sleepers::new(16);
    let pids = sleepers.pids();
    let churn = |tick: u64| -> Value {
        // A rotating half of the sleepers uses the GPUs: processes come and go.
        let procs: Vec<(u32, u32)> = (0..8)
            .map(|k| {
                let pid = pids[(tick as usize + k) % pids.len()];
                ((tick as u32 + k as u32) % 4, pid)
            })
            .collect();
        gpus(4, tick, &procs)
    };
    sb.write_scenario(&churn(0));
    let mut cmd = sb.daemon_command("10ms");
    // Processes on every tick too, so that the churn reaches the process table 100
    // times a second rather than once (the default process interval).
    cmd.args(["--process-interval", "10ms"]);
    // No per-call count files: at 100 Hz they would be most of the daemon's work.
    cmd.env_remove("FAKE_NVML_CALLS_DIR");
    let daemon = sb.spawn_daemon(cmd);
    sb.wait_live(&daemon);
    let segment = sb.segment();
    let pid = daemon.pid();
    let start = Instant::now();
    let every = Duration::from_secs(secs.div_ceil(20).max(1));
    let mut next_sample = start;
    let mut samples: Vec<(u64, u64, (usize, usize), u64)> = Vec::new();
    let mut tick = 0;
    while start.elapsed() < Duration::from_secs(secs) {
        tick += 1;
        sb.write_scenario(&churn(tick));
        if Instant::now() >= next_sample {
            next_sample += every;
            let snap = segment.snapshot().expect("snapshot during the soak");
            assert_eq!(
                snap.liveness(gpupeek_shm::mono_now_ns()),
                gpupeek_shm::Liveness::Live
            );
            samples.push((
                start.elapsed().as_secs(),
                rss_kib(pid),
                fds(pid),
                snap.generation,
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let last_gen = segment.generation();
    eprintln!("soak: {secs} s, {last_gen} publishes, {tick} scenario changes");
    eprintln!("soak: second rss_kib fds kept_proc_fds generation");
    for (t, rss, (fd, kept), generation) in &samples {
        eprintln!("soak: {t} {rss} {fd} {kept} {generation}");
    }
    // Far below 100 Hz only if it was starved or stuck; the real rate is printed above.
    assert!(
        last_gen >= secs * 25,
        "the daemon ran at well under 100 Hz: {last_gen} publishes in {secs} s"
    );
    // After a warm-up quarter: descriptors constant, memory not climbing.
    let warm = &samples[samples.len() / 4..];
    let fd_counts: Vec<usize> = warm.iter().map(|s| s.2 .0).collect();
    assert!(
        fd_counts.iter().all(|&n| n == fd_counts[0]),
        "descriptors changed: {fd_counts:?}"
    );
    // The kept /proc files: two per process at most, of the processes there are.
    let kept: Vec<usize> = samples.iter().map(|s| s.2 .1).collect();
    assert!(
        kept.iter().all(|&n| n <= 2 * pids.len()),
        "more kept /proc files than two per process: {kept:?}"
    );
    assert!(kept.iter().any(|&n| n > 0), "no /proc file kept open");
    let first = warm[0].1;
    let peak = warm.iter().map(|s| s.1).max().unwrap();
    assert!(
        peak <= first + 512,
        "resident memory climbed from {first} KiB to {peak} KiB"
    );
}
