//! Where the tier region (ABI 1.7) lies, and the checks that make a hostile tier table
//! harmless: every number of the [`TierTableHead`] is bounded and checked against the
//! mapping (with checked arithmetic) before any track is touched.

use std::mem::size_of;
use std::sync::atomic::AtomicU64;

use crate::layout::{
    StaticHeader, TierBucket, TierTableHead, TrackHead, MAX_TIER_SLOTS, MAX_TIER_TRACKS, SLOT_ALIGN,
};

/// Number of tiers of a track: raw, tier 1, tier 2.
pub const TIERS: usize = 3;

/// Validated offsets and sizes of the tier region, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierGeometry {
    /// Offset of the [`TierTableHead`].
    pub table_offset: usize,
    /// Offset of the first track.
    pub tracks_offset: usize,
    /// Number of tracks.
    pub track_count: usize,
    /// Size of one track.
    pub track_size: usize,
    /// Size of a track head.
    pub head_size: usize,
    /// Size of a bucket.
    pub bucket_size: usize,
    /// Slots of each tier's ring: raw, tier 1, tier 2.
    pub slots: [usize; TIERS],
}

impl TierGeometry {
    /// The layout a writer uses for `track_count` tracks of `slots` buckets per tier,
    /// its table at `table_offset` (128-aligned).
    pub fn for_writer(table_offset: usize, track_count: usize, slots: [usize; TIERS]) -> Self {
        let head_size = size_of::<TrackHead>();
        let bucket_size = size_of::<TierBucket>();
        let rings: usize = slots.iter().sum::<usize>() * bucket_size;
        TierGeometry {
            table_offset,
            tracks_offset: table_offset + size_of::<TierTableHead>(),
            track_count,
            track_size: (head_size + rings).div_ceil(SLOT_ALIGN) * SLOT_ALIGN,
            head_size,
            bucket_size,
            slots,
        }
    }

    /// End of the region (one past its last byte).
    pub fn end(&self) -> usize {
        self.tracks_offset + self.track_size * self.track_count
    }

    /// The table head describing this geometry.
    pub fn table_head(&self) -> TierTableHead {
        TierTableHead {
            track_count: self.track_count as u32,
            track_size_bytes: self.track_size as u32,
            tracks_offset: self.tracks_offset as u64,
            track_head_size_bytes: self.head_size as u32,
            bucket_size_bytes: self.bucket_size as u32,
            raw_slots: self.slots[0] as u32,
            tier1_slots: self.slots[1] as u32,
            tier2_slots: self.slots[2] as u32,
            ..Default::default()
        }
    }

    /// Where a header's tier table head would lie, if the header has one and it fits in
    /// `mapped_len` bytes; `Err` names what is wrong.
    pub fn table_at(h: &StaticHeader, mapped_len: usize) -> Result<Option<usize>, String> {
        let offset = h.tier_table_offset as usize;
        if offset == 0 {
            return Ok(None);
        }
        if offset % 8 != 0 || offset < size_of::<StaticHeader>() {
            return Err("tier table misaligned or overlapping the static header".into());
        }
        if offset + size_of::<TierTableHead>() > mapped_len {
            return Err("tier table lies outside the segment".into());
        }
        Ok(Some(offset))
    }

    /// Checks the tier table head `t` found at `table_offset` in a mapping of
    /// `mapped_len` bytes.
    pub fn validate(
        table_offset: usize,
        t: &TierTableHead,
        mapped_len: usize,
    ) -> Result<Self, String> {
        let g = TierGeometry {
            table_offset,
            tracks_offset: usize::try_from(t.tracks_offset).unwrap_or(usize::MAX),
            track_count: t.track_count as usize,
            track_size: t.track_size_bytes as usize,
            head_size: t.track_head_size_bytes as usize,
            bucket_size: t.bucket_size_bytes as usize,
            slots: [
                t.raw_slots as usize,
                t.tier1_slots as usize,
                t.tier2_slots as usize,
            ],
        };
        if t.track_count > MAX_TIER_TRACKS {
            return Err("tier track count out of range".into());
        }
        if [t.raw_slots, t.tier1_slots, t.tier2_slots]
            .iter()
            .any(|&s| s == 0 || s > MAX_TIER_SLOTS)
        {
            return Err("tier slot count out of range".into());
        }
        if g.head_size < size_of::<TrackHead>() || g.head_size % 8 != 0 {
            return Err("track head misaligned or too small".into());
        }
        if g.bucket_size < size_of::<TierBucket>() || g.bucket_size % 8 != 0 {
            return Err("tier bucket misaligned or too small".into());
        }
        // Slots are bounded by 2^20 and sizes are u32s: no overflow on 64-bit.
        let needed = g.head_size + g.slots.iter().sum::<usize>() * g.bucket_size;
        if g.track_size < needed || g.track_size % 8 != 0 {
            return Err("track misaligned or too small for its rings".into());
        }
        if g.tracks_offset % 8 != 0 || g.tracks_offset < table_offset + size_of::<TierTableHead>() {
            return Err("tracks misaligned or overlapping the tier table".into());
        }
        let end = g
            .track_size
            .checked_mul(g.track_count)
            .and_then(|len| len.checked_add(g.tracks_offset));
        if end.is_none_or(|end| end > mapped_len) {
            return Err("tier tracks lie outside the segment".into());
        }
        Ok(g)
    }

    /// Track `index`'s words (head first). Panics if `index >= track_count` (callers
    /// bound it).
    pub fn track<'a>(&self, words: &'a [AtomicU64], index: usize) -> &'a [AtomicU64] {
        assert!(index < self.track_count, "track {index} out of range");
        let offset = self.tracks_offset + index * self.track_size;
        &words[offset / 8..(offset + self.track_size) / 8]
    }

    /// Offset of slot `slot` of tier `tier` from the start of a track, bytes.
    pub fn slot_offset(&self, tier: usize, slot: usize) -> usize {
        let before: usize = self.slots[..tier].iter().sum();
        self.head_size + (before + slot) * self.bucket_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> TierGeometry {
        TierGeometry::for_writer(1024, 4, [600, 2160, 10080])
    }

    #[test]
    fn writer_tier_geometry_validates_as_itself() {
        let g = writer();
        assert_eq!(
            TierGeometry::validate(1024, &g.table_head(), g.end()),
            Ok(g)
        );
        assert_eq!(g.track_size % SLOT_ALIGN, 0);
    }

    #[test]
    fn hostile_tier_tables_are_refused() {
        let cases: [fn(&mut TierTableHead); 9] = [
            |t| t.tracks_offset = u64::MAX - 7,
            |t| t.tracks_offset = 1024,
            |t| t.tracks_offset += 4,
            |t| t.track_count = u32::MAX,
            |t| t.track_count += 1,
            |t| t.raw_slots = 0,
            |t| t.tier2_slots = u32::MAX,
            |t| t.bucket_size_bytes = 8,
            |t| t.track_size_bytes = 128,
        ];
        let g = writer();
        for (i, hostile) in cases.iter().enumerate() {
            let mut t = g.table_head();
            hostile(&mut t);
            assert!(
                TierGeometry::validate(1024, &t, g.end()).is_err(),
                "case {i}"
            );
        }
    }
}
