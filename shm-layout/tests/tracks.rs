//! The tracks of tiered history (ABI 1.7): written by a publisher, read back by a
//! reader newest-last, wrapping once full; hostile ring counters stay inside the track.

use gpupeek_shm::layout::{TrackKind, DEFAULT_RAW_SLOTS};
use gpupeek_shm::testing::TempName;
use gpupeek_shm::{Options, Publisher, Segment, TierBucket, TrackHead};

fn publisher(name: &TempName, tracks: u32) -> Publisher {
    let options = Options {
        tier_tracks: tracks,
        ..name.options(2, 4)
    };
    Publisher::create(&name.0, &options).unwrap()
}

fn bucket(n: u64) -> TierBucket {
    TierBucket {
        start_unix_ns: n,
        mem_used_mib_min: n as u32,
        samples: 1,
        valid: 2,
        ..Default::default()
    }
}

#[test]
fn raw_samples_read_back_oldest_first_and_wrap_once_full() {
    let name = TempName::new("wrap");
    let publisher = publisher_with_raw(&name, DEFAULT_RAW_SLOTS as u64 + 5);
    let segment = Segment::open(&name.0).unwrap();
    assert_eq!(segment.track_count(), 3);
    let track = segment.track(1, [usize::MAX; 3]).unwrap().unwrap();
    let starts: Vec<u64> = track.tiers[0].iter().map(|b| b.start_unix_ns).collect();
    let expected: Vec<u64> = (6..=DEFAULT_RAW_SLOTS as u64 + 5).collect();
    assert_eq!(starts, expected);
    let newest = segment.track(1, [3, 0, 0]).unwrap().unwrap();
    assert_eq!(newest.tiers[0].len(), 3);
    assert_eq!(
        newest.tiers[0][2].start_unix_ns,
        DEFAULT_RAW_SLOTS as u64 + 5
    );
    assert_eq!(segment.track_head(1).unwrap().unwrap().raw_written, 605);
    assert_eq!(segment.track(3, [1; 3]).unwrap(), None, "beyond the count");
    drop(publisher);
}

fn publisher_with_raw(name: &TempName, n: u64) -> Publisher {
    let publisher = publisher(name, 3);
    let mut head = TrackHead {
        kind: TrackKind::Gpu as u32,
        raw_step_ns: 1,
        ..Default::default()
    };
    for i in 1..=n {
        head.raw_written = i;
        let slot = ((i - 1) % u64::from(DEFAULT_RAW_SLOTS)) as usize;
        publisher.write_track(1, &head, [(0, slot, bucket(i))]);
    }
    publisher
}

#[test]
fn hostile_ring_counters_never_leave_the_track() {
    let name = TempName::new("hostile");
    let publisher = publisher(&name, 1);
    let head = TrackHead {
        raw_written: u64::MAX,
        tier1_written: u64::MAX - 3,
        tier2_written: 1 << 63,
        ..Default::default()
    };
    publisher.write_track(0, &head, []);
    let segment = Segment::open(&name.0).unwrap();
    let track = segment.track(0, [usize::MAX; 3]).unwrap().unwrap();
    let slots = segment.geometry().tiers.unwrap().slots;
    assert_eq!(track.tiers.each_ref().map(Vec::len), slots);
}

#[test]
fn a_segment_without_tracks_has_no_tiered_history() {
    let name = TempName::new("none");
    let publisher = publisher(&name, 0);
    let segment = Segment::open(&name.0).unwrap();
    assert_eq!(segment.track_count(), 0);
    assert_eq!(segment.track_head(0).unwrap(), None);
    assert!(segment.geometry().tiers.is_none());
    drop(publisher);
}
