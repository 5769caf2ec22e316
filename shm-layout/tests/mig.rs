//! The MIG table (ABI 1.4): what a publisher writes is what a snapshot reads, processes
//! are attributed to their instance by their ids, and a reader racing a reconfiguration
//! sees the whole layout before it or the whole layout after it, never a mix.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use gpupeek_shm::layout::{mig_valid, DaemonState};
use gpupeek_shm::testing::TempName;
use gpupeek_shm::{
    text, MigRecord, ProcContext, ProcPolicy, ProcRecord, Publisher, Segment, StatusRecord,
};
use zerocopy::FromZeros;

fn instance(gi: u32, ci: u32, profile: &str, mem_gib: u64) -> MigRecord {
    let mut m = MigRecord::new_zeroed();
    m.gpu_index = 0;
    m.mig_index = gi;
    m.gpu_instance_id = gi;
    m.compute_instance_id = ci;
    text::encode(&mut m.uuid, &format!("MIG-{gi}-{ci}"));
    text::encode(&mut m.profile, profile);
    m.mem_total_bytes = mem_gib << 30;
    m.mem_used_bytes = gi as u64;
    m.mem_free_bytes = (mem_gib << 30) - gi as u64;
    m.sm_count = 16 * gi;
    m.valid = mig_valid::UUID | mig_valid::PROFILE | mig_valid::MEMORY | mig_valid::SM_COUNT;
    m
}

fn process(pid: u32, gi: u32, ci: u32) -> ProcRecord {
    let mut p = ProcRecord::new_zeroed();
    p.pid = pid;
    p.gpu_instance_id = gi;
    p.compute_instance_id = ci;
    p
}

fn publish_live(publisher: &Publisher) {
    let mut s = StatusRecord::new_zeroed();
    s.state = DaemonState::Live as u32;
    s.gpu_count = 1;
    s.period_ns = 1_000_000_000;
    s.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
    publisher.set_status(&s);
}

#[test]
fn published_instances_read_back_with_their_processes() {
    let name = TempName::new("readback");
    let publisher = Publisher::create(&name.0, &name.options(2, 8)).unwrap();
    publish_live(&publisher);
    let layout = [
        instance(1, 0, "3g.40gb", 40),
        instance(5, 0, "2g.20gb", 20),
        instance(13, 0, "1g.10gb", 10),
    ];
    publisher.write_mig(&layout);
    let procs = [
        process(10, 1, 0),
        process(11, 5, 0),
        process(12, 13, 0),
        process(13, 1, 0),
    ];
    publisher.write_processes(&ProcContext::new(ProcPolicy::Full), &procs, &[]);
    publisher.bump_generation();

    let segment = Segment::open(&name.0).unwrap();
    assert_eq!(segment.header().abi_minor, gpupeek_shm::layout::ABI_MINOR);
    let snap = segment.snapshot().unwrap();
    assert_eq!(snap.mig.len(), 3);
    assert_eq!(snap.mig_overflow, 0);
    let profiles: Vec<String> = snap.mig_on(0).map(|m| text::decode(&m.profile)).collect();
    assert_eq!(profiles, ["3g.40gb", "2g.20gb", "1g.10gb"]);
    assert_eq!(snap.mig[1].mem_total_bytes, 20 << 30);
    assert_eq!(text::decode(&snap.mig[2].uuid), "MIG-13-0");
    let pids = |m: &MigRecord| snap.processes_in(m).map(|p| p.pid).collect::<Vec<_>>();
    assert_eq!(pids(&snap.mig[0]), [10, 13]);
    assert_eq!(pids(&snap.mig[1]), [11]);
    assert_eq!(pids(&snap.mig[2]), [12]);
    assert_eq!(snap.mig_on(1).count(), 0);
}

#[test]
fn instances_beyond_the_capacity_are_counted_as_overflow() {
    let name = TempName::new("overflow");
    let publisher = Publisher::create(&name.0, &name.options(2, 8)).unwrap();
    publish_live(&publisher);
    let capacity = publisher.geometry().mig_capacity;
    let many: Vec<MigRecord> = (0..capacity as u32 + 3)
        .map(|i| instance(i, 0, "1g.10gb", 10))
        .collect();
    publisher.write_mig(&many);
    let snap = Segment::open(&name.0).unwrap().snapshot().unwrap();
    assert_eq!(snap.mig.len(), capacity);
    assert_eq!(snap.mig_overflow, 3);
}

#[test]
fn a_reader_racing_reconfigurations_sees_one_whole_layout_or_the_other() {
    let name = TempName::new("race");
    let publisher = Publisher::create(&name.0, &name.options(2, 8)).unwrap();
    publish_live(&publisher);
    let before = vec![
        instance(1, 0, "3g.40gb", 40),
        instance(5, 0, "2g.20gb", 20),
        instance(13, 0, "1g.10gb", 10),
    ];
    let after = vec![instance(2, 0, "4g.40gb", 40), instance(7, 0, "3g.40gb", 40)];
    publisher.write_mig(&before);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (name, stop) = (name.0.clone(), Arc::clone(&stop));
        let (before, after) = (before.clone(), after.clone());
        std::thread::spawn(move || {
            let segment = Segment::open(&name).unwrap();
            let ids = |l: &[MigRecord]| -> Vec<(u32, String)> {
                l.iter()
                    .map(|m| (m.gpu_instance_id, text::decode(&m.profile)))
                    .collect()
            };
            let (a, b) = (ids(&before), ids(&after));
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // A writer that keeps the table busy can make a bounded read give up
                // (stale): that is no answer, never a mixed one.
                let Ok(snap) = segment.snapshot() else {
                    continue;
                };
                let seen = ids(&snap.mig);
                assert!(seen == a || seen == b, "a mixed layout: {seen:?}");
                reads += 1;
            }
            reads
        })
    };
    for i in 0..4_000 {
        publisher.write_mig(if i % 2 == 0 { &after } else { &before });
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 100, "the reader read");
}

#[test]
fn a_segment_of_an_older_writer_has_no_mig_table_and_reads_as_before() {
    use std::os::unix::fs::FileExt;
    let name = TempName::new("older");
    let publisher = Publisher::create(&name.0, &name.options(2, 8)).unwrap();
    publish_live(&publisher);
    publisher.write_mig(&[instance(1, 0, "7g.80gb", 80)]);
    publisher.bump_generation();
    // What a 1.3 writer's header holds: minor 3, and zeros where the MIG fields are.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/dev/shm/{}", name.0))
        .unwrap();
    file.write_all_at(&3u32.to_ne_bytes(), 12).unwrap();
    file.write_all_at(&[0; 16], 112).unwrap();
    let segment = Segment::open(&name.0).unwrap();
    assert!(!segment.geometry().has_mig());
    let snap = segment.snapshot().unwrap();
    assert!(snap.mig.is_empty());
    assert_eq!((snap.status.gpu_count, snap.mig_overflow), (1, 0));
}
