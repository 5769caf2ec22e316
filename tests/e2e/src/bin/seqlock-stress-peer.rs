//! One process of the multi-process seqlock stress test.
//!
//! `seqlock-stress-peer ROLE SEGMENT MILLISECONDS`, ROLE one of:
//! - `writer`: publishes GPU record 0 as fast as it can; every payload word of the n-th
//!   write holds n, so any mix of two writes is detectable;
//! - `checked`: takes snapshots through the real reader API and checks each record;
//! - `control`: copies the record with no sequence check, and must see tearing (proof
//!   that the test can fail).
//!
//! Prints one line: `ROLE ops=N torn=T stale=S`.

use std::time::{Duration, Instant};

use gpupeek_shm::layout::DaemonState;
use gpupeek_shm::{GpuRecord, Options, Publisher, Segment, StatusRecord};
use zerocopy::{FromBytes, IntoBytes};

fn record(n: u64) -> GpuRecord {
    let mut words = [n; 64];
    words[0] = 0;
    GpuRecord::read_from_bytes(words.as_bytes()).expect("512 bytes")
}

/// True if the payload words are not all equal.
fn torn(rec: &GpuRecord) -> bool {
    let words = <[u64]>::ref_from_bytes(rec.as_bytes()).expect("aligned");
    words[2..].iter().any(|&w| w != words[1])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, role, name, millis] = &args[..] else {
        eprintln!("usage: seqlock-stress-peer writer|checked|control SEGMENT MILLISECONDS");
        std::process::exit(2);
    };
    let deadline = Instant::now() + Duration::from_millis(millis.parse().expect("milliseconds"));
    let (mut ops, mut torn_reads, mut stale) = (0u64, 0u64, 0u64);
    match role.as_str() {
        "writer" => {
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
            while Instant::now() < deadline {
                for _ in 0..256 {
                    ops += 1;
                    publisher.write_gpu(0, &record(ops));
                }
            }
        }
        "checked" | "control" => {
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
        }
        _ => {
            eprintln!("unknown role {role}");
            std::process::exit(2);
        }
    }
    println!("{role} ops={ops} torn={torn_reads} stale={stale}");
}
