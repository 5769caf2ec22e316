//! The per-GPU history rings (ABI 1.1): written by a publisher, read back by a reader in
//! order, wrapping once full.

use gpupeek_shm::layout::{history_valid, DEFAULT_HISTORY_SLOTS};
use gpupeek_shm::testing::TempName;
use gpupeek_shm::{HistorySample, Publisher, Segment};

fn publisher(name: &TempName, gpus: u32) -> Publisher {
    Publisher::create(&name.0, &name.options(gpus, 4)).unwrap()
}

fn sample(n: u64) -> HistorySample {
    HistorySample {
        sample_mono_ns: 1_000_000_000 * n,
        mem_used_mib: n as u32 * 10,
        power_draw_mw: n as u32 * 1000,
        util_gpu_pct: (n % 101) as u8,
        util_mem_pct: (n % 7) as u8,
        temp_gpu_c: 30 + (n % 50) as i16,
        valid: history_valid::UTILIZATION | history_valid::MEMORY,
        reserved: 0,
    }
}

#[test]
fn fresh_segment_has_an_empty_history_for_every_gpu_slot() {
    let name = TempName::new("empty");
    let _publisher = publisher(&name, 2);
    let segment = Segment::open(&name.0).unwrap();
    assert!(segment.geometry().has_history());
    assert_eq!(
        segment.geometry().history_slots,
        DEFAULT_HISTORY_SLOTS as usize
    );
    for slot in 0..2 {
        let history = segment.history(slot).unwrap().unwrap();
        assert_eq!(history.written, 0);
        assert!(history.samples.is_empty());
    }
    assert_eq!(segment.history(2).unwrap(), None, "beyond the capacity");
}

#[test]
fn appended_samples_read_back_oldest_first_per_gpu() {
    let name = TempName::new("roundtrip");
    let publisher = publisher(&name, 2);
    for n in 1..=5 {
        publisher.append_history(0, 1_000_000_000, &sample(n));
    }
    publisher.append_history(1, 2_000_000_000, &sample(42));
    let segment = Segment::open(&name.0).unwrap();
    let gpu0 = segment.history(0).unwrap().unwrap();
    assert_eq!(gpu0.step_ns, 1_000_000_000);
    assert_eq!(gpu0.written, 5);
    assert_eq!(gpu0.samples, (1..=5).map(sample).collect::<Vec<_>>());
    let gpu1 = segment.history(1).unwrap().unwrap();
    assert_eq!(gpu1.step_ns, 2_000_000_000);
    assert_eq!(gpu1.samples, vec![sample(42)]);
}

#[test]
fn a_full_ring_wraps_and_keeps_the_newest_samples_in_order() {
    let name = TempName::new("wrap");
    let publisher = publisher(&name, 1);
    let slots = u64::from(DEFAULT_HISTORY_SLOTS);
    let total = slots * 2 + 17;
    for n in 0..total {
        publisher.append_history(0, 1_000_000_000, &sample(n));
    }
    let history = Segment::open(&name.0).unwrap().history(0).unwrap().unwrap();
    assert_eq!(history.written, total);
    assert_eq!(history.samples.len() as u64, slots);
    let expected: Vec<_> = (total - slots..total).map(sample).collect();
    assert_eq!(history.samples, expected);
}

#[test]
fn a_reader_mapped_before_the_appends_sees_them() {
    let name = TempName::new("live");
    let publisher = publisher(&name, 1);
    let segment = Segment::open(&name.0).unwrap();
    assert!(segment.history(0).unwrap().unwrap().samples.is_empty());
    publisher.append_history(0, 1_000_000_000, &sample(7));
    let history = segment.history(0).unwrap().unwrap();
    assert_eq!(history.samples, vec![sample(7)]);
}
