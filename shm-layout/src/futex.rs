//! Sleeping until the next publish: a futex on the generation word.
//!
//! The daemon calls [`wake_all`] after each bump of the generation word; a follower
//! calls [`wait`] with the generation it has seen. `FUTEX_WAIT` only reads the word, so
//! it works on a reader's `PROT_READ` mapping; the futex is *shared* (no
//! `FUTEX_PRIVATE_FLAG`): the kernel keys it by the object and offset, so a wake through
//! the daemon's read-write mapping reaches waiters on every other mapping of the object.
//!
//! Futexes are 32-bit: both sides use the half of the 64-bit generation word that holds
//! its low 32 bits (the first half on little-endian machines), which changes on every
//! bump. A waiter whose value is already stale returns at once (`EAGAIN`), so a bump
//! between the reader's check and its sleep is never missed; the timeout bounds a wait
//! on a daemon that died without waking anyone.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The address of the low 32 bits of `word`.
fn low_half(word: &AtomicU64) -> *const u32 {
    let first = word.as_ptr().cast::<u32>().cast_const();
    if cfg!(target_endian = "big") {
        first.wrapping_add(1)
    } else {
        first
    }
}

/// Sleeps while the low 32 bits of `word` equal those of `seen`, until a wake or
/// `timeout`. Returns early (and harmlessly) on a signal or a spurious wake: callers
/// re-read the word.
pub fn wait(word: &AtomicU64, seen: u64, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: the address is a 4-aligned u32 inside `word`, which lives in a mapping that
    // outlives the call; FUTEX_WAIT only reads it (atomically, in the kernel), which is
    // allowed on a read-only mapping; `ts` is a valid timespec for the call's duration.
    // A failure (EAGAIN: value changed, ETIMEDOUT, EINTR) needs no handling: the caller
    // re-reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            low_half(word),
            libc::FUTEX_WAIT,
            seen as u32,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every process sleeping in [`wait`] on `word` (which must be in a shared mapping).
pub fn wake_all(word: &AtomicU64) {
    // SAFETY: the address is a 4-aligned u32 inside `word`, valid for the call;
    // FUTEX_WAKE does not access the memory at all, only the kernel's wait queue for it.
    unsafe {
        libc::syscall(libc::SYS_futex, low_half(word), libc::FUTEX_WAKE, i32::MAX);
    }
}
