//! Concurrent readers for the daemon-cost benchmark: `readers N SEGMENT PERIOD_MS TOTAL_MS`
//! starts N reader processes that each map SEGMENT and take a snapshot every PERIOD_MS
//! for TOTAL_MS, then exit. `readers --generation SEGMENT` prints the generation word. The daemon must not notice them: its cost per tick has to stay
//! flat from 0 to 1,000 readers (`benches/run daemon`).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use gpupeek_shm::Segment;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [one, name, period, ms_total] if one == "--one" => read(name, ms(period), ms(ms_total)),
        [flag, name] if flag == "--generation" => {
            let segment = Segment::open(name).expect("open segment");
            println!("{}", segment.generation());
        }
        [n, name, period, total] => spawn(n.parse().expect("reader count"), name, period, total),
        _ => {
            eprintln!("usage: readers N SEGMENT PERIOD_MS TOTAL_MS | readers --generation SEGMENT");
            std::process::exit(2);
        }
    }
}

fn ms(s: &str) -> Duration {
    Duration::from_millis(s.parse().expect("a number"))
}

fn spawn(n: usize, name: &str, period: &str, total: &str) {
    let me = std::env::current_exe().expect("own path");
    let mut children: Vec<Child> = (0..n)
        .map(|_| {
            Command::new(&me)
                .args(["--one", name, period, total])
                .spawn()
                .expect("spawn reader")
        })
        .collect();
    for child in &mut children {
        let _ = child.wait();
    }
}

fn read(name: &str, period: Duration, total: Duration) {
    let segment = Segment::open(name).expect("open segment");
    let mut snap = segment.snapshot().expect("snapshot");
    let end = Instant::now() + total;
    while Instant::now() < end {
        // A daemon restarting on the segment (the benchmark restarts it under callgrind)
        // is not this reader's business: an error just waits for the next period.
        if segment.snapshot_into(&mut snap).is_ok() {
            std::hint::black_box(&snap);
        }
        std::thread::sleep(period);
    }
}
