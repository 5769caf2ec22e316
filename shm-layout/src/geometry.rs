//! Where each region of a segment lies, and the checks that make a hostile header harmless.
//!
//! The writer builds a [`Geometry`] from its capacities; a reader builds one from the
//! static header it found, and [`Geometry::validate`] checks every number against the
//! mapping before any region is touched: offsets 8-aligned, records at least as large as
//! this ABI major's, capacities bounded, every region inside the segment (with checked
//! arithmetic). After that, slicing a region can never go out of bounds.
//!
//! The history region (ABI 1.1) is optional: a header whose `history_offset` is 0 has
//! none, and every history field then reads as 0 in the geometry. So is the MIG table
//! (ABI 1.4): a `mig_table_offset` of 0 means none. And so is the tier region (ABI 1.7,
//! see [`tiers`]): a `tier_table_offset` of 0 means none; its table head lives in the
//! mapping, not the static header, and is checked by [`Geometry::load_tiers`].

pub mod tiers;

use std::mem::size_of;
use std::sync::atomic::AtomicU64;

use crate::error::Error;
use crate::layout::{
    GpuRecord, HistoryHead, HistorySample, MigRecord, MigTableHead, ProcRecord, ProcTableHead,
    StaticHeader, StatusRecord, TierTableHead, ABI_MAJOR, ABI_MINOR, DEFAULT_HISTORY_SLOTS,
    DEFAULT_RAW_SLOTS, DEFAULT_TIER1_SLOTS, DEFAULT_TIER2_SLOTS, DEFAULT_TIER_TRACKS,
    GENERATION_OFFSET, GPU_TABLE_OFFSET, MAGIC, MAX_CAPACITY, MAX_HISTORY_SLOTS, MIG_SLOTS_PER_GPU,
    SLOT_ALIGN, STATUS_OFFSET, TEXT_POOL_BYTES_PER_PROC_SLOT,
};
pub use tiers::TierGeometry;

/// Validated offsets and sizes of a segment's regions, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Total size.
    pub segment_size: usize,
    /// Offset of the generation word.
    pub generation_offset: usize,
    /// Offset of the status record.
    pub status_offset: usize,
    /// Size of the status record.
    pub status_size: usize,
    /// Offset of the GPU table.
    pub gpu_table_offset: usize,
    /// Size of one GPU slot.
    pub gpu_record_size: usize,
    /// Number of GPU slots.
    pub gpu_capacity: usize,
    /// Offset of the process table head.
    pub proc_table_offset: usize,
    /// Size of one process slot.
    pub proc_record_size: usize,
    /// Number of process slots.
    pub proc_capacity: usize,
    /// Offset of the history region; 0 when the segment has none.
    pub history_offset: usize,
    /// Size of one GPU's history ring (head and samples).
    pub history_ring_size: usize,
    /// Samples per ring.
    pub history_slots: usize,
    /// Size of one history sample.
    pub history_sample_size: usize,
    /// Offset of the MIG table head; 0 when the segment has none.
    pub mig_table_offset: usize,
    /// Size of one MIG slot.
    pub mig_record_size: usize,
    /// Number of MIG slots.
    pub mig_capacity: usize,
    /// The tier region (ABI 1.7), if the segment has one.
    pub tiers: Option<TierGeometry>,
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl Geometry {
    /// The layout this ABI version writes for the given capacities, with
    /// [`DEFAULT_HISTORY_SLOTS`] history samples, [`MIG_SLOTS_PER_GPU`] MIG slots per
    /// GPU slot and [`DEFAULT_TIER_TRACKS`] tracks of tiered history.
    pub fn for_capacities(gpu_capacity: u32, proc_capacity: u32) -> Self {
        Self::with_tracks(gpu_capacity, proc_capacity, DEFAULT_TIER_TRACKS)
    }

    /// [`Geometry::for_capacities`] with `tracks` tracks of tiered history (none for 0).
    pub fn with_tracks(gpu_capacity: u32, proc_capacity: u32, tracks: u32) -> Self {
        let slots = [DEFAULT_RAW_SLOTS, DEFAULT_TIER1_SLOTS, DEFAULT_TIER2_SLOTS];
        Self::with_tiers(gpu_capacity, proc_capacity, tracks, slots)
    }

    /// [`Geometry::with_tracks`] with `slots` buckets in each tier's ring (raw, tier 1,
    /// tier 2) instead of the defaults.
    pub fn with_tiers(gpu_capacity: u32, proc_capacity: u32, tracks: u32, slots: [u32; 3]) -> Self {
        let gpu_record_size = round_up(size_of::<GpuRecord>(), SLOT_ALIGN);
        let proc_table_offset = GPU_TABLE_OFFSET + gpu_record_size * gpu_capacity as usize;
        let proc_end = proc_table_offset
            + size_of::<ProcTableHead>()
            + size_of::<ProcRecord>() * proc_capacity as usize;
        let history_offset = round_up(proc_end, SLOT_ALIGN);
        let history_slots = DEFAULT_HISTORY_SLOTS as usize;
        let history_ring_size = round_up(
            size_of::<HistoryHead>() + size_of::<HistorySample>() * history_slots,
            SLOT_ALIGN,
        );
        let mig_table_offset = history_offset + history_ring_size * gpu_capacity as usize;
        let mig_capacity = (gpu_capacity * MIG_SLOTS_PER_GPU) as usize;
        let mig_end =
            mig_table_offset + size_of::<MigTableHead>() + size_of::<MigRecord>() * mig_capacity;
        let text_pool_size = (TEXT_POOL_BYTES_PER_PROC_SLOT * proc_capacity) as usize;
        let tiers = (tracks > 0).then(|| {
            TierGeometry::for_writer(
                round_up(mig_end, SLOT_ALIGN),
                tracks as usize,
                slots.map(|s| s as usize),
            )
        });
        let before_pool = tiers.map_or(mig_end, |t| t.end());
        Geometry {
            segment_size: round_up(before_pool, SLOT_ALIGN) + text_pool_size,
            generation_offset: GENERATION_OFFSET,
            status_offset: STATUS_OFFSET,
            status_size: size_of::<StatusRecord>(),
            gpu_table_offset: GPU_TABLE_OFFSET,
            gpu_record_size,
            gpu_capacity: gpu_capacity as usize,
            proc_table_offset,
            proc_record_size: size_of::<ProcRecord>(),
            proc_capacity: proc_capacity as usize,
            history_offset,
            history_ring_size,
            history_slots,
            history_sample_size: size_of::<HistorySample>(),
            mig_table_offset,
            mig_record_size: size_of::<MigRecord>(),
            mig_capacity,
            tiers,
        }
    }

    /// Where a writer puts the text pool (ABI 1.5): the last `proc_capacity` ×
    /// [`TEXT_POOL_BYTES_PER_PROC_SLOT`] bytes of a segment laid out by
    /// [`Geometry::for_capacities`]. Readers find the pool through the process table head
    /// (see [`crate::pool`]), never through this.
    pub fn writer_text_pool(&self) -> std::ops::Range<usize> {
        let size = TEXT_POOL_BYTES_PER_PROC_SLOT as usize * self.proc_capacity;
        self.segment_size - size..self.segment_size
    }

    /// True when the segment has a MIG table.
    pub fn has_mig(&self) -> bool {
        self.mig_table_offset != 0
    }

    /// True when the segment has a history region.
    pub fn has_history(&self) -> bool {
        self.history_offset != 0
    }

    /// The static header describing this geometry (magic included).
    pub fn static_header(&self, epoch: u64, writer_pid: u32) -> StaticHeader {
        StaticHeader {
            magic: MAGIC,
            abi_major: ABI_MAJOR,
            abi_minor: ABI_MINOR,
            segment_size_bytes: self.segment_size as u64,
            epoch,
            writer_pid,
            status_size_bytes: self.status_size as u32,
            status_offset: self.status_offset as u64,
            gpu_table_offset: self.gpu_table_offset as u64,
            gpu_record_size_bytes: self.gpu_record_size as u32,
            gpu_capacity: self.gpu_capacity as u32,
            proc_table_offset: self.proc_table_offset as u64,
            proc_record_size_bytes: self.proc_record_size as u32,
            proc_capacity: self.proc_capacity as u32,
            generation_offset: self.generation_offset as u64,
            history_offset: self.history_offset as u64,
            history_ring_size_bytes: self.history_ring_size as u32,
            history_slots: self.history_slots as u32,
            history_sample_size_bytes: self.history_sample_size as u32,
            tier_table_offset: self.tiers.map_or(0, |t| t.table_offset as u32),
            mig_table_offset: self.mig_table_offset as u64,
            mig_record_size_bytes: self.mig_record_size as u32,
            mig_capacity: self.mig_capacity as u32,
        }
    }

    /// Checks a header found in a mapping of `mapped_len` bytes and returns its geometry.
    pub fn validate(name: &str, h: &StaticHeader, mapped_len: usize) -> Result<Self, Error> {
        if h.magic == 0 {
            return Err(Error::NotReady {
                name: name.to_owned(),
            });
        }
        if h.magic != MAGIC {
            return Err(Error::corrupt(name, "bad magic: not a gpupeek segment"));
        }
        if h.abi_major != ABI_MAJOR {
            return Err(Error::AbiMismatch {
                name: name.to_owned(),
                found: (h.abi_major, h.abi_minor),
                ours: (ABI_MAJOR, ABI_MINOR),
            });
        }
        let bad = |what: String| Err(Error::corrupt(name, what));
        if h.segment_size_bytes != mapped_len as u64 {
            return bad(format!(
                "header says {} bytes but the object has {mapped_len}",
                h.segment_size_bytes
            ));
        }
        if h.gpu_capacity > MAX_CAPACITY || h.proc_capacity > MAX_CAPACITY {
            return bad("capacity out of range".into());
        }
        let g = Geometry {
            segment_size: mapped_len,
            generation_offset: to_usize(h.generation_offset),
            status_offset: to_usize(h.status_offset),
            status_size: h.status_size_bytes as usize,
            gpu_table_offset: to_usize(h.gpu_table_offset),
            gpu_record_size: h.gpu_record_size_bytes as usize,
            gpu_capacity: h.gpu_capacity as usize,
            proc_table_offset: to_usize(h.proc_table_offset),
            proc_record_size: h.proc_record_size_bytes as usize,
            proc_capacity: h.proc_capacity as usize,
            history_offset: 0,
            history_ring_size: 0,
            history_slots: 0,
            history_sample_size: 0,
            mig_table_offset: 0,
            mig_record_size: 0,
            mig_capacity: 0,
            tiers: None,
        };
        let regions = [
            ("generation word", g.generation_offset, 8, 1, 8),
            ("status record", g.status_offset, g.status_size, 1, 48),
            // A GPU record must at least reach `state` and the identity strings.
            (
                "GPU table",
                g.gpu_table_offset,
                g.gpu_record_size,
                g.gpu_capacity,
                256,
            ),
            (
                "process table head",
                g.proc_table_offset,
                size_of::<ProcTableHead>(),
                1,
                16,
            ),
            (
                "process table",
                g.proc_table_offset
                    .saturating_add(size_of::<ProcTableHead>()),
                g.proc_record_size,
                g.proc_capacity,
                // A 1.0 writer's records are smaller; their missing tail reads as zero.
                crate::pin::PROC_RECORD_V1_0_SIZE,
            ),
        ];
        for (what, offset, size, count, min_size) in regions {
            if offset % 8 != 0 || size % 8 != 0 || size < min_size {
                return bad(format!("{what}: misaligned or too small"));
            }
            let end = size
                .checked_mul(count)
                .and_then(|len| len.checked_add(offset));
            if end.is_none_or(|end| end > mapped_len) {
                return bad(format!("{what} lies outside the segment"));
            }
        }
        if g.status_offset < size_of::<StaticHeader>() {
            return bad("status record overlaps the static header".into());
        }
        let g = if h.history_offset == 0 {
            g
        } else {
            validate_history(g, h, mapped_len).map_err(|what| Error::corrupt(name, what))?
        };
        if h.mig_table_offset == 0 {
            return Ok(g);
        }
        validate_mig(g, h, mapped_len).map_err(|what| Error::corrupt(name, what))
    }

    /// This geometry with the tier region of header `h` filled in, its table head read
    /// from `words` (the mapping the header was found in) and checked; unchanged when
    /// the header has no tier table.
    pub fn load_tiers(
        mut self,
        name: &str,
        h: &StaticHeader,
        words: &[AtomicU64],
    ) -> Result<Self, Error> {
        let mapped_len = words.len() * 8;
        let corrupt = |what: String| Error::corrupt(name, what);
        let Some(offset) = TierGeometry::table_at(h, mapped_len).map_err(corrupt)? else {
            return Ok(self);
        };
        let mut table = TierTableHead::default();
        let table_words = &words[offset / 8..(offset + size_of::<TierTableHead>()) / 8];
        crate::seqlock::load_words(table_words, zerocopy::IntoBytes::as_mut_bytes(&mut table));
        self.tiers = Some(TierGeometry::validate(offset, &table, mapped_len).map_err(corrupt)?);
        Ok(self)
    }

    /// The generation word.
    pub fn generation<'a>(&self, words: &'a [AtomicU64]) -> &'a AtomicU64 {
        &words[self.generation_offset / 8]
    }

    /// The status record's block (sequence word first).
    pub fn status<'a>(&self, words: &'a [AtomicU64]) -> &'a [AtomicU64] {
        region(words, self.status_offset, self.status_size)
    }

    /// GPU slot `slot`'s block. Panics if `slot >= gpu_capacity` (callers bound it).
    pub fn gpu<'a>(&self, words: &'a [AtomicU64], slot: usize) -> &'a [AtomicU64] {
        assert!(slot < self.gpu_capacity, "GPU slot {slot} out of range");
        let offset = self.gpu_table_offset + slot * self.gpu_record_size;
        region(words, offset, self.gpu_record_size)
    }

    /// The process table head (its first word is the table's sequence).
    pub fn proc_head<'a>(&self, words: &'a [AtomicU64]) -> &'a [AtomicU64] {
        region(words, self.proc_table_offset, size_of::<ProcTableHead>())
    }

    /// GPU slot `slot`'s history ring (head first). Panics if the segment has no history
    /// or `slot >= gpu_capacity` (callers check both).
    pub fn history<'a>(&self, words: &'a [AtomicU64], slot: usize) -> &'a [AtomicU64] {
        assert!(self.has_history(), "segment has no history");
        assert!(slot < self.gpu_capacity, "GPU slot {slot} out of range");
        let offset = self.history_offset + slot * self.history_ring_size;
        region(words, offset, self.history_ring_size)
    }

    /// The MIG table head (its first word is the table's sequence). Panics if the segment
    /// has no MIG table (callers check).
    pub fn mig_head<'a>(&self, words: &'a [AtomicU64]) -> &'a [AtomicU64] {
        assert!(self.has_mig(), "segment has no MIG table");
        region(words, self.mig_table_offset, size_of::<MigTableHead>())
    }

    /// MIG slot `slot`. Panics if `slot >= mig_capacity` (callers bound it).
    pub fn mig_slot<'a>(&self, words: &'a [AtomicU64], slot: usize) -> &'a [AtomicU64] {
        assert!(slot < self.mig_capacity, "MIG slot {slot} out of range");
        let offset =
            self.mig_table_offset + size_of::<MigTableHead>() + slot * self.mig_record_size;
        region(words, offset, self.mig_record_size)
    }

    /// Process slot `slot`. Panics if `slot >= proc_capacity` (callers bound it).
    pub fn proc_slot<'a>(&self, words: &'a [AtomicU64], slot: usize) -> &'a [AtomicU64] {
        assert!(
            slot < self.proc_capacity,
            "process slot {slot} out of range"
        );
        let offset =
            self.proc_table_offset + size_of::<ProcTableHead>() + slot * self.proc_record_size;
        region(words, offset, self.proc_record_size)
    }
}

/// Checks the history fields of `h` and returns `g` with them filled in.
fn validate_history(
    mut g: Geometry,
    h: &StaticHeader,
    mapped_len: usize,
) -> Result<Geometry, String> {
    g.history_offset = to_usize(h.history_offset);
    g.history_ring_size = h.history_ring_size_bytes as usize;
    g.history_slots = h.history_slots as usize;
    g.history_sample_size = h.history_sample_size_bytes as usize;
    if h.history_slots == 0 || h.history_slots > MAX_HISTORY_SLOTS {
        return Err("history slot count out of range".into());
    }
    if g.history_sample_size < size_of::<HistorySample>() || g.history_sample_size % 8 != 0 {
        return Err("history sample misaligned or too small".into());
    }
    // The sample size and slot count are bounded u32s, so this cannot overflow.
    let needed = size_of::<HistoryHead>() + g.history_sample_size * g.history_slots;
    if g.history_ring_size < needed || g.history_ring_size % 8 != 0 {
        return Err("history ring misaligned or too small for its samples".into());
    }
    if g.history_offset % 8 != 0 || g.history_offset < size_of::<StaticHeader>() {
        return Err("history region misaligned or overlapping the static header".into());
    }
    let end = g
        .history_ring_size
        .checked_mul(g.gpu_capacity)
        .and_then(|len| len.checked_add(g.history_offset));
    if end.is_none_or(|end| end > mapped_len) {
        return Err("history region lies outside the segment".into());
    }
    Ok(g)
}

/// Checks the MIG table fields of `h` and returns `g` with them filled in.
fn validate_mig(mut g: Geometry, h: &StaticHeader, mapped_len: usize) -> Result<Geometry, String> {
    g.mig_table_offset = to_usize(h.mig_table_offset);
    g.mig_record_size = h.mig_record_size_bytes as usize;
    g.mig_capacity = h.mig_capacity as usize;
    if h.mig_capacity > MAX_CAPACITY {
        return Err("MIG capacity out of range".into());
    }
    if g.mig_record_size < size_of::<MigRecord>() || g.mig_record_size % 8 != 0 {
        return Err("MIG record misaligned or too small".into());
    }
    if g.mig_table_offset % 8 != 0 || g.mig_table_offset < size_of::<StaticHeader>() {
        return Err("MIG table misaligned or overlapping the static header".into());
    }
    // The record size and capacity are bounded u32s, so the product cannot overflow.
    let end = (g.mig_record_size * g.mig_capacity)
        .checked_add(size_of::<MigTableHead>())
        .and_then(|len| len.checked_add(g.mig_table_offset));
    if end.is_none_or(|end| end > mapped_len) {
        return Err("MIG table lies outside the segment".into());
    }
    Ok(g)
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn region(words: &[AtomicU64], offset: usize, size: usize) -> &[AtomicU64] {
    &words[offset / 8..(offset + size) / 8]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer's geometry without a tier region: the static header alone describes it
    /// (the tier region's checks are in `tiers`).
    fn header() -> (Geometry, StaticHeader) {
        let g = Geometry::with_tracks(8, 16, 0);
        (g, g.static_header(1, 2))
    }

    #[test]
    fn writer_geometry_validates_as_itself() {
        let (g, h) = header();
        assert_eq!(Geometry::validate("t", &h, g.segment_size), Ok(g));
        assert_eq!(g.segment_size % SLOT_ALIGN, 0);
        assert_eq!(g.proc_table_offset % SLOT_ALIGN, 0);
    }

    #[test]
    fn header_claiming_more_than_the_mapping_is_corrupt() {
        let (g, h) = header();
        let err = Geometry::validate("t", &h, g.segment_size - 128).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    }

    #[test]
    fn region_past_the_end_is_corrupt_even_with_overflowing_numbers() {
        let (g, mut h) = header();
        h.gpu_table_offset = u64::MAX - 7;
        assert!(matches!(
            Geometry::validate("t", &h, g.segment_size),
            Err(Error::Corrupt { .. })
        ));
        let (_, mut h) = header();
        h.proc_capacity = 1000;
        assert!(matches!(
            Geometry::validate("t", &h, g.segment_size),
            Err(Error::Corrupt { .. })
        ));
        let (_, mut h) = header();
        h.gpu_record_size_bytes = 12;
        assert!(matches!(
            Geometry::validate("t", &h, g.segment_size),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn zero_history_offset_means_no_history() {
        let (mut g, mut h) = header();
        h.history_offset = 0;
        h.history_slots = 12345;
        let found = Geometry::validate("t", &h, g.segment_size).unwrap();
        assert!(!found.has_history());
        g.history_offset = 0;
        g.history_ring_size = 0;
        g.history_slots = 0;
        g.history_sample_size = 0;
        assert_eq!(found, g);
    }

    #[test]
    fn zero_mig_offset_means_no_mig_table() {
        let (mut g, mut h) = header();
        h.mig_table_offset = 0;
        h.mig_capacity = u32::MAX;
        let found = Geometry::validate("t", &h, g.segment_size).unwrap();
        assert!(!found.has_mig());
        g.mig_table_offset = 0;
        g.mig_record_size = 0;
        g.mig_capacity = 0;
        assert_eq!(found, g);
    }

    #[test]
    fn hostile_mig_fields_are_corrupt() {
        let cases: [fn(&mut StaticHeader); 6] = [
            |h| h.mig_table_offset = u64::MAX - 7,
            |h| h.mig_table_offset += 4,
            |h| h.mig_table_offset = 8,
            |h| h.mig_capacity = u32::MAX,
            |h| h.mig_capacity += 1000,
            |h| h.mig_record_size_bytes = 8,
        ];
        for (i, hostile) in cases.iter().enumerate() {
            let (g, mut h) = header();
            hostile(&mut h);
            let err = Geometry::validate("t", &h, g.segment_size);
            assert!(
                matches!(err, Err(Error::Corrupt { .. })),
                "case {i}: {err:?}"
            );
        }
    }

    #[test]
    fn hostile_history_fields_are_corrupt() {
        let cases: [fn(&mut StaticHeader); 7] = [
            |h| h.history_offset = u64::MAX - 7,
            |h| h.history_offset += 4,
            |h| h.history_offset = 8,
            |h| h.history_slots = u32::MAX,
            |h| h.history_slots += 10,
            |h| h.history_sample_size_bytes = 8,
            |h| h.history_ring_size_bytes = u32::MAX - 7,
        ];
        for (i, hostile) in cases.iter().enumerate() {
            let (g, mut h) = header();
            hostile(&mut h);
            let err = Geometry::validate("t", &h, g.segment_size);
            assert!(
                matches!(err, Err(Error::Corrupt { .. })),
                "case {i}: {err:?}"
            );
        }
    }

    #[test]
    fn unknown_major_is_an_abi_mismatch_naming_both_versions() {
        let (g, mut h) = header();
        h.abi_major = 2;
        h.abi_minor = 7;
        let err = Geometry::validate("t", &h, g.segment_size).unwrap_err();
        assert!(err.to_string().contains("2.7"), "{err}");
        assert!(err
            .to_string()
            .contains(&format!("{ABI_MAJOR}.{ABI_MINOR}")));
    }

    #[test]
    fn zero_magic_means_not_ready_and_other_magic_is_corrupt() {
        let (g, mut h) = header();
        h.magic = 0;
        assert!(matches!(
            Geometry::validate("t", &h, g.segment_size),
            Err(Error::NotReady { .. })
        ));
        h.magic = 42;
        assert!(matches!(
            Geometry::validate("t", &h, g.segment_size),
            Err(Error::Corrupt { .. })
        ));
    }
}
