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
//! Retries are bounded ([`MAX_ATTEMPTS`]): a writer that died mid-write leaves an odd
//! sequence forever, and the reader then reports [`Stale`] instead of spinning.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use zerocopy::{FromBytes, Immutable, IntoBytes};

/// How many times a reader tries a block before calling it stale.
pub const MAX_ATTEMPTS: u32 = 200;

/// A block stayed odd (mid-write) or kept changing for [`MAX_ATTEMPTS`] tries.
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
/// with [`Stale`] after [`MAX_ATTEMPTS`]; results of rejected attempts are dropped.
pub fn read_with<R>(seq: &AtomicU64, mut load: impl FnMut() -> R) -> Result<(u64, R), Stale> {
    for attempt in 0..MAX_ATTEMPTS {
        let s1 = seq.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if s1 & 1 == 1 {
            backoff(attempt);
            continue;
        }
        let value = load();
        fence(Ordering::Acquire);
        if seq.load(Ordering::Relaxed) == s1 {
            return Ok((s1, value));
        }
        backoff(attempt);
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

/// Spin briefly, then yield so a preempted writer on this core can finish.
fn backoff(attempt: u32) {
    if attempt < 16 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::GpuRecord;
    use zerocopy::FromZeros;

    fn block(words: usize) -> Vec<AtomicU64> {
        (0..words).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn write_then_read_round_trips_and_advances_sequence_by_two() {
        let b = block(64);
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
    fn reader_reports_stale_when_writer_died_mid_write() {
        let b = block(64);
        b[0].store(7, Ordering::Relaxed);
        let mut out = GpuRecord::new_zeroed();
        assert_eq!(read(&b, &mut out), Err(Stale));
    }

    #[test]
    fn writer_recovers_from_an_odd_sequence_left_by_a_dead_writer() {
        let b = block(64);
        b[0].store(7, Ordering::Relaxed);
        write(&b, &GpuRecord::new_zeroed());
        assert_eq!(b[0].load(Ordering::Relaxed), 8);
        let mut out = GpuRecord::new_zeroed();
        assert_eq!(read(&b, &mut out), Ok(8));
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
