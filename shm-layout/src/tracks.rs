//! Reading and writing the tracks of tiered history (ABI 1.7; layout in
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A tier region in plain memory: a table head's worth of words, then `tracks` tracks
    /// of small rings (Miri runs this: every access is through the seqlock's atomics).
    fn region(tracks: usize) -> (TierGeometry, Vec<AtomicU64>) {
        let g = TierGeometry::for_writer(0, tracks, [4, 3, 2]);
        let words = (0..g.end() / 8).map(|_| AtomicU64::new(0)).collect();
        (g, words)
    }

    fn bucket(start: u64) -> TierBucket {
        TierBucket {
            start_unix_ns: start,
            samples: 1,
            valid: 1,
            util_pct_min: 7,
            ..Default::default()
        }
    }

    #[test]
    fn stored_buckets_load_back_newest_last_after_wrapping() {
        let (g, words) = region(2);
        let mut head = TrackHead::default();
        for n in 1..=6u64 {
            head.raw_written = n;
            head.tier2_written = n.min(1);
            let writes = [(0, ((n - 1) % 4) as usize, bucket(n)), (2, 0, bucket(100))];
            store_track(&g, &words, 1, &head, writes);
        }
        let t = load_track(&g, &words, 1, [usize::MAX; 3]).unwrap();
        let starts: Vec<u64> = t.tiers[0].iter().map(|b| b.start_unix_ns).collect();
        assert_eq!(starts, [3, 4, 5, 6]);
        assert_eq!(t.tiers[1], []);
        assert_eq!(t.tiers[2], [bucket(100)]);
        assert_eq!(
            load_track(&g, &words, 1, [2, 0, 0]).unwrap().tiers[0].len(),
            2
        );
        assert_eq!(load_head(&g, &words, 1).unwrap().raw_written, 6);
        assert_eq!(load_head(&g, &words, 0).unwrap(), TrackHead::default());
    }

    #[test]
    fn a_track_left_mid_write_is_stale_not_torn() {
        let (g, words) = region(1);
        g.track(&words, 0)[0].store(1, std::sync::atomic::Ordering::Relaxed);
        assert!(load_track(&g, &words, 0, [1; 3]).is_err());
        assert!(load_head(&g, &words, 0).is_err());
    }
}
