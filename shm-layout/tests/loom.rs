//! Model checking of the seqlock with loom: every interleaving of one writer and one
//! reader (and every value a Relaxed load may legally return under the C++ memory model
//! that loom simulates) is tried, and a reader must never accept a torn payload.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gpupeek-shm --test loom --release`
//! (a separate target directory avoids rebuilding everything twice); without the cfg
//! this file is empty.
#![cfg(loom)]

use gpupeek_shm::seqlock::{self, Stale};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A sequence word and three payload words, written with write `n` as `[n, n, n]`.
fn block() -> Arc<Vec<AtomicU64>> {
    Arc::new((0..4).map(|_| AtomicU64::new(0)).collect())
}

fn write(block: &[AtomicU64], n: u64) {
    seqlock::write_with(&block[0], || {
        for word in &block[1..] {
            word.store(n, Ordering::Relaxed);
        }
    });
}

fn copy(block: &[AtomicU64]) -> [u64; 3] {
    let mut out = [0; 3];
    for (o, word) in out.iter_mut().zip(&block[1..]) {
        *o = word.load(Ordering::Relaxed);
    }
    out
}

/// A writer doing `writes` writes against one checked reader: whatever the reader
/// accepts must be exactly the payload of the write its sequence names.
fn check_one_reader(writes: u64) {
    loom::model(move || {
        let b = block();
        let writer = {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                for n in 1..=writes {
                    write(&b, n);
                }
            })
        };
        let result = seqlock::read_with(&b[0], || copy(&b));
        writer.join().unwrap();
        if let Ok((seq, payload)) = result {
            assert_eq!(seq % 2, 0, "accepted an odd sequence");
            let n = seq / 2;
            assert_eq!(
                payload, [n; 3],
                "torn or mismatched payload at sequence {seq}"
            );
        }
    });
}

#[test]
fn a_reader_never_accepts_a_torn_payload_against_one_write() {
    check_one_reader(1);
}

#[test]
fn a_reader_never_accepts_a_torn_payload_against_two_writes() {
    check_one_reader(2);
}

#[test]
fn a_reader_of_a_block_left_odd_reports_stale() {
    loom::model(|| {
        let b = block();
        b[0].store(5, Ordering::Relaxed);
        assert_eq!(seqlock::read_with(&b[0], || copy(&b)), Err(Stale));
    });
}

/// The control: the same copy with no sequence check. If loom could not find a torn
/// payload here, the tests above would prove nothing.
#[test]
#[should_panic(expected = "torn")]
fn the_model_finds_tearing_in_a_reader_without_the_sequence_check() {
    loom::model(|| {
        let b = block();
        let writer = {
            let b = Arc::clone(&b);
            thread::spawn(move || write(&b, 1))
        };
        let payload = copy(&b);
        writer.join().unwrap();
        assert!(
            payload == [0; 3] || payload == [1; 3],
            "torn payload {payload:?}"
        );
    });
}
