//! One process of the multi-process seqlock stress test.
//!
//! `seqlock-stress-peer ROLE SEGMENT MILLISECONDS [HZ]`, ROLE one of:
//! - `writer`: publishes GPU record 0, at HZ writes per second (0 or absent: as fast as
//!   it can); every payload word of the n-th write holds n, so any mix of two writes is
//!   detectable;
//! - `checked`: takes snapshots through the real reader API and checks each record;
//! - `control`: copies the record with no sequence check, and must see tearing (proof
//!   that the test can fail);
//! - `frozen`: no segment (SEGMENT is ignored): times how long the reader takes to give
//!   up on a block a dead writer left odd, the bound a client waits on a stuck record;
//! - `load`: takes snapshots of a real daemon's segment as fast as it can (the load
//!   test's readers); `torn` counts nothing here, `stale` counts failed snapshots.
//!
//! Prints one line: `ROLE ops=N torn=T stale=S` (`frozen`: `ops=N mean_ns=M max_ns=X`).

use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use gpupeek_shm::layout::DaemonState;
use gpupeek_shm::{seqlock, GpuRecord, Options, Publisher, Segment, StatusRecord};
use zerocopy::{FromBytes, IntoBytes};

fn record(n: u64) -> GpuRecord {
    let mut words = [n; std::mem::size_of::<GpuRecord>() / 8];
    words[0] = 0;
    GpuRecord::read_from_bytes(words.as_bytes()).expect("a whole record")
}

/// True if the payload words are not all equal.
fn torn(rec: &GpuRecord) -> bool {
    let words = <[u64]>::ref_from_bytes(rec.as_bytes()).expect("aligned");
    words[2..].iter().any(|&w| w != words[1])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (role, name, millis, hz) = match &args[..] {
        [_, role, name, millis] => (role, name, millis, "0"),
        [_, role, name, millis, hz] => (role, name, millis, hz.as_str()),
        _ => {
            eprintln!(
                "usage: seqlock-stress-peer writer|checked|control|frozen SEGMENT MILLISECONDS [HZ]"
            );
            std::process::exit(2);
        }
    };
    let deadline = Instant::now() + Duration::from_millis(millis.parse().expect("milliseconds"));
    let hz: u64 = hz.parse().expect("writes per second");
    match role.as_str() {
        "writer" => writer(name, deadline, hz),
        "checked" | "control" => reader(role, name, deadline),
        "frozen" => frozen(deadline),
        "load" => load(name, deadline),
        _ => {
            eprintln!("unknown role {role}");
            std::process::exit(2);
        }
    }
}

fn writer(name: &str, deadline: Instant, hz: u64) {
    let options = Options {
        gpu_capacity: 1,
        proc_capacity: 1,
        ..Options::new(1, std::process::id())
    };
    let publisher = Publisher::create(name, &options).expect("create");
    let status = StatusRecord {
        state: DaemonState::Live as u32,
        gpu_count: 1,
        ..Default::default()
    };
    publisher.set_status(&status);
    publisher.write_gpu(0, &record(1));
    publisher.bump_generation();
    let start = Instant::now();
    let mut ops = 0u64;
    match 1_000_000_000u64.checked_div(hz) {
        None => {
            while Instant::now() < deadline {
                for _ in 0..256 {
                    ops += 1;
                    publisher.write_gpu(0, &record(ops));
                }
            }
        }
        Some(period_ns) => {
            // Paced: the n-th write is due at start + n/hz; yield until then (a late
            // write goes out at once, so the average rate is exactly hz).
            let period = Duration::from_nanos(period_ns);
            let mut next = start;
            while Instant::now() < deadline {
                ops += 1;
                publisher.write_gpu(0, &record(ops));
                next += period;
                while Instant::now() < next {
                    std::thread::yield_now();
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "writer ops={ops} torn=0 stale=0 rate_hz={:.0}",
        ops as f64 / secs
    );
}

fn reader(role: &str, name: &str, deadline: Instant) {
    let (mut ops, mut torn_reads, mut stale) = (0u64, 0u64, 0u64);
    let segment = Segment::open(name).expect("segment exists");
    while Instant::now() < deadline {
        for _ in 0..64 {
            ops += 1;
            if role == "control" {
                torn_reads += u64::from(torn(&segment.gpu_unchecked(0)));
                continue;
            }
            match segment.snapshot() {
                Ok(snap) => torn_reads += u64::from(torn(&snap.gpus[0])),
                Err(_) => stale += 1,
            }
        }
    }
    println!("{role} ops={ops} torn={torn_reads} stale={stale}");
}

fn load(name: &str, deadline: Instant) {
    let (mut ops, mut failed) = (0u64, 0u64);
    let segment = Segment::open(name).expect("segment exists");
    while Instant::now() < deadline {
        for _ in 0..64 {
            ops += 1;
            failed += u64::from(segment.snapshot().is_err());
        }
    }
    println!("load ops={ops} torn=0 stale={failed}");
}

fn frozen(deadline: Instant) {
    let block: Vec<AtomicU64> = (0..64).map(|_| AtomicU64::new(0)).collect();
    block[0].store(7, std::sync::atomic::Ordering::Relaxed);
    let mut out = GpuRecord::default();
    let (mut ops, mut total, mut max) = (0u64, Duration::ZERO, Duration::ZERO);
    while Instant::now() < deadline {
        let t = Instant::now();
        assert!(seqlock::read(&block, &mut out).is_err());
        let took = t.elapsed();
        ops += 1;
        total += took;
        max = max.max(took);
    }
    println!(
        "frozen ops={ops} mean_ns={} max_ns={}",
        total.as_nanos() / u128::from(ops.max(1)),
        max.as_nanos()
    );
}
