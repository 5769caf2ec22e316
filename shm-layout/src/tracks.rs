//! Reading and writing the tracks of tiered history (ABI 1.6; layout in
//! [`crate::layout::TrackHead`] and [`crate::geometry::tiers`]).
//!
//! Shared by the reader ([`crate::Segment::track`]) and the writer (which reads back the
//! tracks a previous daemon left in a segment it takes over). Every number read from a
//! track head is treated as hostile: ring positions are taken modulo the validated slot
//! counts, so a copy can never leave the track.

use std::mem::size_of;
use std::sync::atomic::AtomicU64;

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::geometry::tiers::{TierGeometry, TIERS};
use crate::layout::{TierBucket, TrackHead};
use crate::seqlock::{self, Stale};

/// A private copy of (part of) one track.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Track {
    /// The head, integrals included.
    pub head: TrackHead,
    /// Per tier (raw, tier 1, tier 2), the newest buckets copied, oldest first.
    pub tiers: [Vec<TierBucket>; TIERS],
}

impl Track {
    /// Width of tier `tier`'s buckets (the raw step for tier 0), ns.
    pub fn width_ns(&self, tier: usize) -> u64 {
        width_ns(&self.head, tier)
    }
}

/// Buckets ever written to tier `tier` of `head`.
pub fn written(head: &TrackHead, tier: usize) -> u64 {
    [head.raw_written, head.tier1_written, head.tier2_written][tier]
}

/// Sets the buckets ever written to tier `tier` of `head`.
pub fn set_written(head: &mut TrackHead, tier: usize, n: u64) {
    *[
        &mut head.raw_written,
        &mut head.tier1_written,
        &mut head.tier2_written,
    ][tier] = n;
}

/// Width of tier `tier`'s buckets in `head`, ns.
pub fn width_ns(head: &TrackHead, tier: usize) -> u64 {
    [head.raw_step_ns, head.tier1_width_ns, head.tier2_width_ns][tier]
}

/// Track `index`'s head alone (the integrals), under its seqlock.
pub fn load_head(g: &TierGeometry, words: &[AtomicU64], index: usize) -> Result<TrackHead, Stale> {
    let track = g.track(words, index);
    let mut head = TrackHead::new_zeroed();
    let n = size_of::<TrackHead>() / 8;
    seqlock::read_with(&track[0], || {
        seqlock::load_words(&track[1..n], &mut head.as_mut_bytes()[8..]);
    })?;
    Ok(head)
}

/// Track `index` with at most `keep[t]` of the newest buckets of each tier `t`, under
/// its seqlock (one copy of the head and those buckets).
pub fn load_track(
    g: &TierGeometry,
    words: &[AtomicU64],
    index: usize,
    keep: [usize; TIERS],
) -> Result<Track, Stale> {
    let track = g.track(words, index);
    let head_words = size_of::<TrackHead>() / 8;
    let bucket_words = size_of::<TierBucket>() / 8;
    let mut out = Track::default();
    let mut raw = vec![0u8; size_of::<TierBucket>()];
    seqlock::read_with(&track[0], || {
        seqlock::load_words(&track[1..head_words], &mut out.head.as_mut_bytes()[8..]);
        for (tier, buckets) in out.tiers.iter_mut().enumerate() {
            buckets.clear();
            let slots = g.slots[tier] as u64;
            let written = written(&out.head, tier);
            let kept = written.min(slots).min(keep[tier] as u64);
            for n in written - kept..written {
                let at = g.slot_offset(tier, (n % slots) as usize) / 8;
                seqlock::load_words(&track[at..at + bucket_words], &mut raw);
                buckets.push(TierBucket::read_from_bytes(&raw).unwrap_or_default());
            }
        }
    })?;
    Ok(out)
}

/// Stores `head` and `buckets` (`(tier, slot, bucket)`, slot below the tier's slot
/// count) into track `index` under its seqlock. The writer's side.
pub fn store_track(
    g: &TierGeometry,
    words: &[AtomicU64],
    index: usize,
    head: &TrackHead,
    buckets: impl IntoIterator<Item = (usize, usize, TierBucket)>,
) {
    let track = g.track(words, index);
    let head_words = size_of::<TrackHead>() / 8;
    let bucket_words = size_of::<TierBucket>() / 8;
    seqlock::write_with(&track[0], || {
        for (tier, slot, bucket) in buckets {
            assert!(slot < g.slots[tier], "tier {tier} slot {slot} out of range");
            let at = g.slot_offset(tier, slot) / 8;
            seqlock::store_words(&track[at..at + bucket_words], bucket.as_bytes());
        }
        seqlock::store_words(&track[1..head_words], &head.as_bytes()[8..]);
    });
}
