//! The seqlock: one writer, many readers in other processes, readers on `PROT_READ` pages.
//!
//! A *block* is a slice of `AtomicU64` whose first word is the sequence and whose other
//! words are the payload. Every shared word is accessed through `AtomicU64`: a plain or
//! volatile read of memory another process writes would be a data race. Readers use only
//! Relaxed loads of 8 bytes (the only atomic access that works on read-only pages) and
//! fences. Payloads are copied into a reader-owned value that may be torn; the value is
//! handed out only after the sequence check proves it was not.
//!
//! # Atomic orderings
//! Writer: `s = seq; seq = s+1 (Relaxed); fence(Release); payload (Relaxed); seq = s+2
//! (Release)`.
//! - The Release fence after the odd store orders that store before every payload store:
//!   a reader that sees any new payload word (and then fences Acquire) also sees the odd
//!   sequence, so its final check fails.
//! - The Release store of `s+2` orders every payload store before it: a reader whose first
//!   load saw `s+2` (followed by its Acquire fence) sees the complete payload.
//!
//! Reader: `s1 = seq (Relaxed); fence(Acquire); if odd retry; copy payload (Relaxed);
//! fence(Acquire); accept only if seq (Relaxed) == s1`.
//! - The first Acquire fence pairs with the writer's final Release store: payload loads
//!   cannot be satisfied by writes older than the publish that produced `s1`.
//! - The second Acquire fence pairs with the writer's Release fence: if any payload load
//!   observed a store of a later write, the final load sees at least that write's odd
//!   sequence, and the copy is rejected.
//!
//! Retries are bounded: a writer that died mid-write leaves an odd sequence forever, and
//! the reader then reports [`Stale`] instead of spinning. A writer preempted mid-write
//! leaves the same odd sequence for a while too, and on a loaded machine that while can
//! be tens of milliseconds, so only time tells the two apart: a reader calls a block
//! stale when, after [`MIN_ATTEMPTS`] failed attempts, its sequence has stayed at one odd
//! value for [`STALE_AFTER`]. A sequence that moved on proves a live writer, and the
//! reader keeps trying: a copy fails against a live writer only when a write overlapped
//! it (the reader was itself preempted mid-copy, or the writer rewrites the block faster
//! than it can be copied), and the next attempt starts right after a write. Against a
//! live writer the reader gives up only after [`BUSY_FOR`] of failed attempts, or
//! [`MAX_ATTEMPTS`] whatever the clock says.
//!
//! # Backoff
//! After a failed attempt the reader spin-loads the sequence until it is even again (at
//! most [`SPIN_LOADS`] loads), then retries at once: the copy starts right after a write
//! ended, which is when it has the most time before the next one. A writer preempted on
//! the reader's own core never turns even while the reader spins, so after
//! [`SPIN_ATTEMPTS`] attempts the reader also yields its core between attempts.
//!
//! # Model checking
//! Built with `--cfg loom` (only this module is then compiled), the atomics and fences
//! are loom's and a reader gives up after [`LOOM_ATTEMPTS`] attempts with no clock, so
//! `shm-layout/tests/loom.rs` can explore every interleaving of a writer and a reader.

use std::time::{Duration, Instant};

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicU64, Ordering};

use zerocopy::{FromBytes, Immutable, IntoBytes};

/// Attempts a reader always makes before it may call a block stale.
pub const MIN_ATTEMPTS: u32 = 64;

/// How long a block's sequence must stay at one odd value (a write begun and not
/// ended) before a reader calls its writer dead, once [`MIN_ATTEMPTS`] attempts failed.
/// Longer than a loaded machine keeps a runnable writer off its CPU (2 ms was not: a
/// soak run on 2 saturated cores saw live writers called dead); it is what a reader
/// waits, once per snapshot, for a writer that really died mid-write.
#[cfg(not(fuzzing))]
pub const STALE_AFTER: Duration = Duration::from_millis(50);

/// How long a reader keeps trying a block whose writer is alive (its sequence moves)
/// but rewrote it during every copy, once [`MIN_ATTEMPTS`] attempts failed.
#[cfg(not(fuzzing))]
pub const BUSY_FOR: Duration = Duration::from_secs(1);

/// Under cargo-fuzz: no waiting past [`MIN_ATTEMPTS`], so that hostile segments full of
/// odd sequences do not slow the fuzzer down a thousandfold.
#[cfg(fuzzing)]
pub const STALE_AFTER: Duration = Duration::ZERO;

/// Under cargo-fuzz: see [`STALE_AFTER`].
#[cfg(fuzzing)]
pub const BUSY_FOR: Duration = Duration::ZERO;

/// Attempts after which a reader gives up whatever the clock says.
pub const MAX_ATTEMPTS: u32 = 1 << 20;

/// Attempts before a reader starts yielding its core between attempts.
pub const SPIN_ATTEMPTS: u32 = 16;

/// Most loads of the sequence word while waiting for an odd sequence to turn even.
pub const SPIN_LOADS: u32 = 1 << 8;

/// Under loom: attempts before a reader gives up (the model has no clock).
#[cfg(loom)]
pub const LOOM_ATTEMPTS: u32 = 3;

/// A block stayed at one odd sequence (mid-write) for [`STALE_AFTER`], or kept changing
/// under every copy for [`BUSY_FOR`], after [`MIN_ATTEMPTS`] tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale;

/// Runs `store` (which must only do Relaxed stores of payload words) as one write of the
/// block whose sequence word is `seq`. Only one writer may use a block at a time.
pub fn write_with(seq: &AtomicU64, store: impl FnOnce()) {
    let s = seq.load(Ordering::Relaxed);
    // A writer that died mid-write left `s` odd: start from that odd value.
    let odd = s | 1;
    seq.store(odd, Ordering::Relaxed);
    fence(Ordering::Release);
    store();
    seq.store(odd + 1, Ordering::Release);
}

/// Runs `load` (which must only do Relaxed loads of payload words) until it ran entirely
/// inside one even sequence, and returns that sequence with `load`'s result. Gives up
/// with [`Stale`] as the module documentation says; results of rejected attempts are
/// dropped.
pub fn read_with<R>(seq: &AtomicU64, load: impl FnMut() -> R) -> Result<(u64, R), Stale> {
    read_within(seq, load, Patience::new(STALE_AFTER, BUSY_FOR))
}

/// [`read_with`] with the bounds of `patience` (the tests' shorter ones).
fn read_within<R>(
    seq: &AtomicU64,
    mut load: impl FnMut() -> R,
    mut patience: Patience,
) -> Result<(u64, R), Stale> {
    for attempt in 0..MAX_ATTEMPTS {
        let s1 = seq.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if s1 & 1 == 0 {
            let value = load();
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return Ok((s1, value));
            }
        }
        if patience.give_up(attempt, seq.load(Ordering::Relaxed)) {
            return Err(Stale);
        }
        backoff(seq, attempt);
    }
    Err(Stale)
}

/// Publishes `record` into `block` (sequence word first). `record`'s own first word (its
/// `seq` field) is ignored.
pub fn write<T: IntoBytes + Immutable>(block: &[AtomicU64], record: &T) {
    write_with(&block[0], || {
        store_words(&block[1..], &record.as_bytes()[8..])
    });
}

/// Copies a consistent image of `block` into `out` and returns its (even) sequence, which
/// is also stored in `out`'s first word. Bytes of `out` beyond the block are zeroed (a
/// writer with an older minor version wrote a shorter record). On [`Stale`], `out` holds
/// unspecified (but valid, since `T: FromBytes`) bytes.
pub fn read<T: FromBytes + IntoBytes>(block: &[AtomicU64], out: &mut T) -> Result<u64, Stale> {
    let bytes = out.as_mut_bytes();
    let (seq, ()) = read_with(&block[0], || load_words(&block[1..], &mut bytes[8..]))?;
    bytes[..8].copy_from_slice(&seq.to_ne_bytes());
    Ok(seq)
}

/// Copies `block`'s payload with no sequence check at all: the *control* reader of the
/// stress test, which must observe torn payloads. Never use it for real data.
#[doc(hidden)]
pub fn read_unchecked<T: FromBytes + IntoBytes>(block: &[AtomicU64], out: &mut T) {
    load_words(&block[1..], &mut out.as_mut_bytes()[8..]);
}

/// Relaxed-stores `bytes` (a multiple of 8 long) into as many words as both sides hold.
pub fn store_words(words: &[AtomicU64], bytes: &[u8]) {
    // Records are 8-byte aligned: store whole words (one load and one store each).
    if let Ok(src) = <[u64]>::ref_from_bytes(bytes) {
        for (word, &value) in words.iter().zip(src) {
            word.store(value, Ordering::Relaxed);
        }
        return;
    }
    for (word, src) in words.iter().zip(bytes.chunks_exact(8)) {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(src);
        word.store(u64::from_ne_bytes(raw), Ordering::Relaxed);
    }
}

/// Relaxed-stores `bytes` (any length) into the first words of `words`, the last word
/// zero-padded.
pub fn store_bytes(words: &[AtomicU64], bytes: &[u8]) {
    let whole = bytes.len() / 8 * 8;
    store_words(words, &bytes[..whole]);
    let tail = &bytes[whole..];
    if let (false, Some(word)) = (tail.is_empty(), words.get(whole / 8)) {
        let mut raw = [0u8; 8];
        raw[..tail.len()].copy_from_slice(tail);
        word.store(u64::from_ne_bytes(raw), Ordering::Relaxed);
    }
}

/// Relaxed-loads as many whole words as both sides hold into `out`, and zeroes the rest
/// of `out` (the fields a writer with an older minor version does not have).
pub fn load_words(words: &[AtomicU64], out: &mut [u8]) {
    let loaded = words.len().min(out.len() / 8) * 8;
    let (head, tail) = out.split_at_mut(loaded);
    tail.fill(0);
    // Records are 8-byte aligned: load into whole words, a load and a store each (the
    // byte-wise path below costs several times as many instructions per word).
    if let Ok(dst) = <[u64]>::mut_from_bytes(head) {
        for (word, value) in words.iter().zip(dst) {
            *value = word.load(Ordering::Relaxed);
        }
        return;
    }
    for (word, dst) in words.iter().zip(head.chunks_exact_mut(8)) {
        dst.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
    }
}

/// What a reader remembers of its failed attempts at one block, to tell a dead writer
/// (one odd sequence for [`STALE_AFTER`]) from a live one (see the module
/// documentation). The clock is read only on this slow path, first after
/// [`MIN_ATTEMPTS`] failures.
#[cfg_attr(loom, allow(dead_code))]
struct Patience {
    stale_after: Duration,
    busy_for: Duration,
    /// When the reader first looked at the clock.
    since: Option<Instant>,
    /// The odd sequence last seen and when it was first seen.
    odd: Option<(u64, Instant)>,
}

impl Patience {
    fn new(stale_after: Duration, busy_for: Duration) -> Self {
        Patience {
            stale_after,
            busy_for,
            since: None,
            odd: None,
        }
    }

    /// True when attempt number `attempt` (0-based) failed, the sequence is now `seq`,
    /// and the reader should stop.
    #[cfg(not(loom))]
    fn give_up(&mut self, attempt: u32, seq: u64) -> bool {
        if attempt + 1 < MIN_ATTEMPTS {
            return false;
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) >= self.busy_for {
            return true;
        }
        match self.odd {
            Some((odd, at)) if odd == seq => now.duration_since(at) >= self.stale_after,
            _ => {
                self.odd = (seq & 1 == 1).then_some((seq, now));
                false
            }
        }
    }

    /// Under loom, which has no clock: a count.
    #[cfg(loom)]
    fn give_up(&mut self, attempt: u32, _: u64) -> bool {
        attempt + 1 >= LOOM_ATTEMPTS
    }
}

/// Under loom: one scheduling point instead of a spin.
#[cfg(loom)]
fn backoff(_: &AtomicU64, _: u32) {
    loom::thread::yield_now();
}

/// Waits (spinning) for `seq` to turn even, then, past [`SPIN_ATTEMPTS`], yields if it
/// did not: see "Backoff" above.
#[cfg(not(loom))]
fn backoff(seq: &AtomicU64, attempt: u32) {
    for _ in 0..SPIN_LOADS {
        if seq.load(Ordering::Relaxed) & 1 == 0 {
            return;
        }
        std::hint::spin_loop();
    }
    if attempt >= SPIN_ATTEMPTS {
        std::thread::yield_now();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::GpuRecord;
    use zerocopy::FromZeros;

    /// Words of a [`GpuRecord`].
    const RECORD_WORDS: usize = std::mem::size_of::<GpuRecord>() / 8;

    fn block(words: usize) -> Vec<AtomicU64> {
        (0..words).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn write_then_read_round_trips_and_advances_sequence_by_two() {
        let b = block(RECORD_WORDS);
        let mut rec = GpuRecord::new_zeroed();
        rec.mem_used_bytes = 123;
        rec.name[..4].copy_from_slice(b"H100");
        write(&b, &rec);
        let mut out = GpuRecord::new_zeroed();
        assert_eq!(read(&b, &mut out), Ok(2));
        assert_eq!(out.mem_used_bytes, 123);
        assert_eq!(&out.name[..4], b"H100");
        write(&b, &rec);
        assert_eq!(read(&b, &mut out), Ok(4));
    }

    #[test]
    fn bytes_of_any_length_round_trip_with_the_last_word_zero_padded() {
        let b = block(4);
        b[3].store(u64::MAX, Ordering::Relaxed);
        let text = b"eleven byte text, twenty-six";
        store_bytes(&b, text);
        let mut out = [0xffu8; 32];
        load_words(&b, &mut out);
        assert_eq!(&out[..text.len()], text);
        assert_eq!(out[text.len()..], [0; 4]);
        // More bytes than words: what fits.
        store_bytes(&b[..1], text);
        assert_eq!(b[0].load(Ordering::Relaxed).to_ne_bytes(), text[..8]);
    }

    #[test]
    fn reader_reports_stale_when_writer_died_mid_write() {
        let b = block(RECORD_WORDS);
        b[0].store(7, Ordering::Relaxed);
        let mut out = GpuRecord::new_zeroed();
        assert_eq!(read(&b, &mut out), Err(Stale));
    }

    #[test]
    fn writer_recovers_from_an_odd_sequence_left_by_a_dead_writer() {
        let b = block(RECORD_WORDS);
        b[0].store(7, Ordering::Relaxed);
        write(&b, &GpuRecord::new_zeroed());
        assert_eq!(b[0].load(Ordering::Relaxed), 8);
        let mut out = GpuRecord::new_zeroed();
        assert_eq!(read(&b, &mut out), Ok(8));
    }

    /// Short bounds, so that the tests of giving up take milliseconds (and Miri, whose
    /// clock advances with the code it runs, not forever).
    fn short() -> Patience {
        Patience::new(Duration::from_millis(2), Duration::from_millis(20))
    }

    #[test]
    fn reader_gives_up_on_a_block_that_changes_under_every_copy() {
        let b = block(8);
        let mut copies = 0u32;
        let start = Instant::now();
        let result = read_within(
            &b[0],
            || {
                copies += 1;
                // A writer that finishes a whole write during every copy.
                b[0].fetch_add(2, Ordering::Relaxed);
            },
            short(),
        );
        assert_eq!(result, Err(Stale));
        assert!(copies >= MIN_ATTEMPTS, "gave up after {copies} copies");
        // A live writer is not given up for the dead writer's bound (2 ms here).
        assert!(
            start.elapsed() >= Duration::from_millis(20),
            "gave up early"
        );
    }

    #[test]
    fn only_one_odd_sequence_that_stays_calls_a_writer_dead() {
        let hour = Duration::from_secs(3600);
        let mut p = Patience::new(Duration::ZERO, hour);
        for attempt in 0..MIN_ATTEMPTS - 1 {
            assert!(!p.give_up(attempt, 7), "before MIN_ATTEMPTS");
        }
        // A writer seen mid-write at every attempt, but in a new write each time: alive.
        for (attempt, seq) in (MIN_ATTEMPTS..).zip((9..200).step_by(2)) {
            assert!(!p.give_up(attempt, seq), "odd {seq}, moving on");
        }
        // An even sequence between two sightings of one odd value: it moved on too.
        assert!(!p.give_up(1000, 201));
        assert!(!p.give_up(1001, 202));
        assert!(!p.give_up(1002, 203), "the next write");
        // The same odd value twice, STALE_AFTER (here 0) apart: dead.
        assert!(p.give_up(1003, 203));
    }

    #[test]
    #[cfg_attr(miri, ignore = "sleeps 10 ms while another thread spins")]
    fn a_writer_preempted_mid_write_longer_than_2_ms_is_waited_for() {
        // What a loaded machine does to the daemon: its thread is taken off the CPU in
        // the middle of a write, for longer than readers used to wait (2 ms).
        let b = block(RECORD_WORDS);
        let started = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                write_with(&b[0], || {
                    started.store(true, Ordering::Release);
                    std::thread::sleep(Duration::from_millis(10));
                    store_words(&b[1..], &numbered(7).as_bytes()[8..]);
                });
            });
            while !started.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            let mut out = GpuRecord::new_zeroed();
            assert_eq!(
                read(&b, &mut out),
                Ok(2),
                "the write in progress, waited for"
            );
            assert!(is_numbered(&out) && out.mem_used_bytes == 7);
        });
    }

    /// A record whose every payload word holds `n` (so a mix of two writes shows).
    fn numbered(n: u64) -> GpuRecord {
        let mut rec = GpuRecord::new_zeroed();
        for word in rec.as_mut_bytes().chunks_exact_mut(8) {
            word.copy_from_slice(&n.to_ne_bytes());
        }
        rec
    }

    fn is_numbered(rec: &GpuRecord) -> bool {
        let words: Vec<&[u8]> = rec.as_bytes()[8..].chunks_exact(8).collect();
        words.iter().all(|w| *w == words[0])
    }

    #[test]
    fn threads_reading_during_writes_never_accept_a_torn_record() {
        // Small under Miri, which checks every access for data races and lets Relaxed
        // loads return older values; larger natively.
        let writes: u64 = if cfg!(miri) { 30 } else { 20_000 };
        let b = block(RECORD_WORDS);
        let (accepted, stale) = std::thread::scope(|s| {
            s.spawn(|| {
                for n in 1..=writes {
                    write(&b, &numbered(n));
                }
            });
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let (mut accepted, mut stale) = (0u64, 0u64);
                        let mut out = GpuRecord::new_zeroed();
                        while b[0].load(Ordering::Relaxed) < 2 * writes {
                            match read(&b, &mut out) {
                                Ok(seq) => {
                                    assert!(is_numbered(&out), "torn record at {seq}");
                                    assert_eq!(out.as_bytes()[8..16], (seq / 2).to_ne_bytes());
                                    accepted += 1;
                                }
                                Err(Stale) => stale += 1,
                            }
                        }
                        (accepted, stale)
                    })
                })
                .collect();
            readers
                .into_iter()
                .map(|r| r.join().unwrap())
                .fold((0, 0), |(a, s), (a2, s2)| (a + a2, s + s2))
        });
        assert!(accepted > 0, "no read succeeded ({stale} stale)");
    }

    #[test]
    fn shorter_block_leaves_the_rest_of_the_record_zero() {
        let b = block(4);
        b[3].store(99, Ordering::Relaxed);
        let mut out = GpuRecord::new_zeroed();
        out.mem_used_bytes = 5;
        assert_eq!(read(&b, &mut out), Ok(0));
        assert_eq!(out.index, 0);
        assert_eq!(out.mem_used_bytes, 0);
    }

    #[test]
    fn words_load_into_aligned_and_unaligned_buffers_alike_and_zero_the_rest() {
        let b = block(3);
        for (i, w) in b.iter().enumerate() {
            w.store(0x0101_0101_0101_0101 * (i as u64 + 1), Ordering::Relaxed);
        }
        let mut expected = Vec::new();
        for w in &b {
            expected.extend_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        expected.extend_from_slice(&[0; 8]);
        // 8 spare bytes in front so that both alignments can be had from one buffer.
        let mut raw = [0xffu8; 8 + 33];
        for offset in [0, 1] {
            let start = (8 - raw.as_ptr() as usize % 8) % 8 + offset;
            let out = &mut raw[start..start + 32];
            load_words(&b, out);
            assert_eq!(out, &expected[..], "offset {offset}");
            raw.fill(0xff);
        }
    }
}
