//! The tiered history's state file: what lets history survive a daemon restart when the
//! segment is gone too (a reboot of the shared-memory filesystem, a new layout).
//!
//! `DIR/NAME.history` (NAME the segment's name) holds every track in use: a [`FileHead`]
//! then, per track, its [`TrackHead`] (whose `*_written` are the numbers of buckets that
//! follow for each tier) and those buckets, oldest first. The whole payload is covered by
//! an FNV-1a checksum. It is written atomically (a temporary file in the same directory,
//! fsync, rename), off the daemon's loop, every 10 minutes (see `run::SAVE_UNITS`)
//! and on a clean stop.
//!
//! The file is read like hostile input: size bounded before reading, magic, version,
//! record sizes, checksum, every count against its bounds and the payload, UUIDs,
//! kinds, bucket order and min ≤ max, and no time after the file was written (nor the
//! file after now). Anything wrong refuses the whole file with one line saying why;
//! history then starts empty. Nothing in it is trusted for more than values to show.

use std::io::Write;
use std::mem::size_of;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use gpupeek_shm::geometry::tiers::TIERS;
use gpupeek_shm::layout::{TrackKind, MAX_TIER_SLOTS, MAX_TIER_TRACKS};
use gpupeek_shm::tracks::{set_written, written};
use gpupeek_shm::{TierBucket, Track, TrackHead};

/// `b"GPKHIST\0"`.
pub const MAGIC: [u8; 8] = *b"GPKHIST\0";
/// Format version.
pub const VERSION: u32 = 1;
/// Environment variable naming the state directory when `--state-dir` does not.
pub const DIR_ENV: &str = "GPUPEEK_STATE_DIR";
/// Default state directory of a root daemon.
pub const DEFAULT_DIR: &str = "/var/lib/gpupeek";
/// Slack allowed for clocks: a time up to this far past "now" is not "in the future".
const CLOCK_SLACK_NS: u64 = 300_000_000_000;
/// Largest file read: 256 full tracks (`--history-tracks` at most) are 184 MB.
const MAX_FILE_BYTES: u64 = 256 << 20;

/// Head of the state file.
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
struct FileHead {
    magic: [u8; 8],
    version: u32,
    head_size: u32,
    track_head_size: u32,
    bucket_size: u32,
    track_count: u32,
    reserved: u32,
    written_unix_ns: u64,
    payload_len: u64,
    checksum: u64,
}

/// FNV-1a, 64 bits: the state file's checksum, which catches a torn or corrupted file
/// (not an attacker, who is refused by the directory's permissions); also how
/// [`crate::procfs`] remembers a process's name without an allocation.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The state file of segment `shm` in `dir`.
pub fn path(dir: &Path, shm: &str) -> PathBuf {
    dir.join(format!("{shm}.history"))
}

/// `tracks` as the bytes of a state file written at `now_unix_ns`.
pub fn encode(tracks: &[Track], now_unix_ns: u64) -> Vec<u8> {
    let mut payload = Vec::new();
    for t in tracks {
        let mut head = t.head;
        head.seq = 0;
        for (tier, buckets) in t.tiers.iter().enumerate() {
            set_written(&mut head, tier, buckets.len() as u64);
        }
        payload.extend_from_slice(head.as_bytes());
        for buckets in &t.tiers {
            payload.extend_from_slice(buckets.as_bytes());
        }
    }
    let head = FileHead {
        magic: MAGIC,
        version: VERSION,
        head_size: size_of::<FileHead>() as u32,
        track_head_size: size_of::<TrackHead>() as u32,
        bucket_size: size_of::<TierBucket>() as u32,
        track_count: tracks.len() as u32,
        reserved: 0,
        written_unix_ns: now_unix_ns,
        payload_len: payload.len() as u64,
        checksum: fnv1a(&payload),
    };
    let mut out = head.as_bytes().to_vec();
    out.extend_from_slice(&payload);
    out
}

/// The tracks in a state file's `bytes`, checked against `now_unix_ns`; `Err` says
/// why the file is refused.
pub fn decode(bytes: &[u8], now_unix_ns: u64) -> Result<Vec<Track>, String> {
    let (head, payload) =
        FileHead::read_from_prefix(bytes).map_err(|_| "shorter than its header".to_owned())?;
    if head.magic != MAGIC {
        return Err("not a gpupeekd state file (bad magic)".into());
    }
    if head.version != VERSION {
        return Err(format!(
            "format version {} (this gpupeekd reads {VERSION})",
            head.version
        ));
    }
    if head.head_size as usize != size_of::<FileHead>()
        || head.track_head_size as usize != size_of::<TrackHead>()
        || head.bucket_size as usize != size_of::<TierBucket>()
    {
        return Err("written with other record sizes".into());
    }
    if head.payload_len != payload.len() as u64 {
        return Err(format!(
            "truncated or padded: header says {} payload bytes, file has {}",
            head.payload_len,
            payload.len()
        ));
    }
    if fnv1a(payload) != head.checksum {
        return Err("checksum mismatch (corrupt)".into());
    }
    if head.written_unix_ns > now_unix_ns.saturating_add(CLOCK_SLACK_NS) {
        return Err("written in the future".into());
    }
    if head.track_count > MAX_TIER_TRACKS {
        return Err(format!(
            "{} tracks (at most {MAX_TIER_TRACKS})",
            head.track_count
        ));
    }
    let mut rest = payload;
    let mut tracks = Vec::new();
    for i in 0..head.track_count {
        let (track, tail) =
            decode_track(rest, head.written_unix_ns).map_err(|why| format!("track {i}: {why}"))?;
        tracks.push(track);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(format!("{} bytes after the last track", rest.len()));
    }
    Ok(tracks)
}

fn decode_track(bytes: &[u8], written_unix_ns: u64) -> Result<(Track, &[u8]), String> {
    let (mut head, mut rest) =
        TrackHead::read_from_prefix(bytes).map_err(|_| "cut short in its head".to_owned())?;
    head.seq = 0;
    if !matches!(
        TrackKind::from_raw(head.kind),
        Some(TrackKind::Gpu | TrackKind::Mig)
    ) {
        return Err(format!("unknown kind {}", head.kind));
    }
    let uuid = head.uuid.split(|&b| b == 0).next().unwrap_or_default();
    let tail_zero = head.uuid[uuid.len()..].iter().all(|&b| b == 0);
    if uuid.is_empty() || !tail_zero || !uuid.iter().all(|b| b.is_ascii_graphic()) {
        return Err("UUID empty or not printable ASCII".into());
    }
    if head.last_sample_unix_ns > written_unix_ns
        || head.integral_start_unix_ns > head.last_sample_unix_ns
    {
        return Err("sample times after the file was written or before the start".into());
    }
    let mut track = Track {
        head,
        ..Default::default()
    };
    for tier in 0..TIERS {
        let count = written(&head, tier);
        let width = gpupeek_shm::tracks::width_ns(&head, tier);
        if count > u64::from(MAX_TIER_SLOTS) || width == 0 {
            return Err(format!("tier {tier}: {count} buckets of width {width} ns"));
        }
        let need = (count as usize) * size_of::<TierBucket>();
        if rest.len() < need {
            return Err(format!("tier {tier}: cut short"));
        }
        let (mine, tail) = rest.split_at(need);
        let buckets: Vec<TierBucket> = mine
            .chunks_exact(size_of::<TierBucket>())
            .map(|c| TierBucket::read_from_bytes(c).unwrap_or_default())
            .collect();
        check_buckets(&buckets, written_unix_ns).map_err(|why| format!("tier {tier}: {why}"))?;
        track.tiers[tier] = buckets;
        rest = tail;
    }
    Ok((track, rest))
}

fn check_buckets(buckets: &[TierBucket], written_unix_ns: u64) -> Result<(), String> {
    let mut last = 0;
    for b in buckets {
        if b.start_unix_ns <= last || b.start_unix_ns > written_unix_ns {
            return Err("bucket times out of order or after the file was written".into());
        }
        last = b.start_unix_ns;
        let ordered = b.util_pct_min <= b.util_pct_max
            && b.mem_used_mib_min <= b.mem_used_mib_max
            && b.power_mw_min <= b.power_mw_max
            && b.temp_c_min <= b.temp_c_max
            && b.sm_clock_mhz_min <= b.sm_clock_mhz_max
            && b.sm_active_centipct_min <= b.sm_active_centipct_max;
        if b.valid >> 6 != 0 || (b.samples == 0) != (b.valid == 0) || !ordered {
            return Err("a bucket with inconsistent values".into());
        }
    }
    Ok(())
}

/// Reads and checks the state file at `path`. `Ok(empty)` when there is none;
/// `Err` is the one line to log.
pub fn load(path: &Path, now_unix_ns: u64) -> Result<Vec<Track>, String> {
    let refuse = |why: String| {
        format!(
            "state file {} refused: {why}; history starts empty",
            path.display()
        )
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(refuse(e.to_string())),
    };
    let meta = file.metadata().map_err(|e| refuse(e.to_string()))?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return Err(refuse(format!(
            "not a regular file of at most {MAX_FILE_BYTES} bytes"
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_FILE_BYTES), &mut bytes)
        .map_err(|e| refuse(e.to_string()))?;
    decode(&bytes, now_unix_ns).map_err(refuse)
}

/// Why the directory of `path`, if it exists, is not to be trusted: owned by another
/// user, or writable by the group or others.
fn untrusted_dir(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = path.parent()?;
    let meta = std::fs::symlink_metadata(dir).ok()?;
    let euid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() {
        return Some(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != euid {
        return Some(format!("{} is owned by uid {}", dir.display(), meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "{} is writable by others (mode {:o})",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Writes `bytes` to `path` atomically: a private temporary file in the same directory
/// (created 0700 if missing), fsync, rename over `path`, fsync of the directory.
pub fn store(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let tmp = path.with_extension("history.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Writes the state file every `every` on a thread of its own, and
/// once more, waited for, on a clean stop.
#[derive(Debug)]
pub struct Saver {
    path: Option<PathBuf>,
    every: std::time::Duration,
    next: Option<std::time::Instant>,
    writing: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// The last write failed (logged once until one succeeds).
    failing: bool,
}

impl Saver {
    /// A saver of `path` (none: nothing is saved) every `every`.
    /// A state directory that another user owns or can write to is not used (it could
    /// feed the daemon a file or race its writes): one log line says so.
    pub fn new(path: Option<PathBuf>, every: std::time::Duration) -> Self {
        let path = path.filter(|p| match untrusted_dir(p) {
            Some(why) => {
                log::warn!("history state file {} not used: {why}", p.display());
                false
            }
            None => true,
        });
        Saver {
            path,
            every,
            next: None,
            writing: None,
            failing: false,
        }
    }

    /// The history to take over: `in_segment` (what a previous daemon left in the
    /// segment), completed by the state file's tracks of other UUIDs, or whose segment
    /// copy is older. A refused file is logged in one line.
    pub fn previous(&self, in_segment: Vec<Track>, now_unix_ns: u64) -> Vec<Track> {
        let from_file = match &self.path {
            Some(path) => load(path, now_unix_ns).unwrap_or_else(|why| {
                log::warn!("{why}");
                Vec::new()
            }),
            None => Vec::new(),
        };
        let mut out = in_segment;
        let taken_over = out.len();
        let mut restored = 0;
        for t in from_file {
            match out.iter_mut().find(|s| s.head.uuid == t.head.uuid) {
                Some(s) if s.head.last_sample_unix_ns >= t.head.last_sample_unix_ns => {}
                Some(s) => {
                    *s = t;
                    restored += 1;
                }
                None => {
                    out.push(t);
                    restored += 1;
                }
            }
        }
        if taken_over > 0 {
            log::info!("history: {taken_over} track(s) taken over from the previous segment");
        }
        if let (Some(path), true) = (&self.path, restored > 0) {
            log::info!(
                "history: {restored} track(s) restored from the state file {}",
                path.display()
            );
        }
        out
    }

    /// True when a periodic save is due at `now` (the first one a period after start).
    pub fn due(&mut self, now: std::time::Instant) -> bool {
        if self.path.is_none() {
            return false;
        }
        let next = *self.next.get_or_insert(now + self.every);
        if now < next {
            return false;
        }
        self.next = Some(now + self.every);
        true
    }

    /// Writes `tracks` on a thread, unless the previous write is still going.
    pub fn save(&mut self, tracks: Vec<Track>, now_unix_ns: u64) {
        let Some(path) = self.path.clone() else {
            return;
        };
        if self.writing.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        self.finish();
        // Encoding (a checksum over every byte) is off the loop too.
        self.writing = Some(std::thread::spawn(move || {
            store(&path, &encode(&tracks, now_unix_ns))
        }));
    }

    /// Writes `tracks` and waits for it (a clean stop).
    pub fn save_now(&mut self, tracks: Vec<Track>, now_unix_ns: u64) {
        if self.path.is_none() {
            return;
        }
        if let Some(w) = self.writing.take() {
            let _ = w.join();
        }
        self.save(tracks, now_unix_ns);
        self.finish();
    }

    /// Reaps the last write, logging a failure once.
    fn finish(&mut self) {
        let Some(w) = self.writing.take() else { return };
        let result = w
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("writer panicked")));
        match result {
            Ok(()) => self.failing = false,
            Err(e) if !self.failing => {
                self.failing = true;
                let path = self
                    .path
                    .as_deref()
                    .unwrap_or(Path::new(""))
                    .display()
                    .to_string();
                log::warn!("cannot write the history state file {path}: {e}");
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000_000_000;

    fn track(uuid: &str, buckets: usize) -> Track {
        let mut head = TrackHead {
            kind: TrackKind::Gpu as u32,
            integral_start_unix_ns: NOW - 10_000,
            last_sample_unix_ns: NOW - 100,
            raw_step_ns: 1,
            tier1_width_ns: 10,
            tier2_width_ns: 60,
            sum_util_pct: 42,
            count_util: 3,
            ..Default::default()
        };
        head.uuid[..uuid.len()].copy_from_slice(uuid.as_bytes());
        let mut t = Track {
            head,
            ..Default::default()
        };
        for tier in 0..TIERS {
            t.tiers[tier] = (0..buckets)
                .map(|i| TierBucket {
                    start_unix_ns: NOW - 5000 + i as u64 * 10,
                    util_pct_min: 1,
                    util_pct_max: 9,
                    samples: 1,
                    valid: 1,
                    ..Default::default()
                })
                .collect();
        }
        t
    }

    fn good() -> Vec<u8> {
        encode(&[track("GPU-a", 5), track("GPU-b", 0)], NOW)
    }

    #[test]
    fn a_written_file_reads_back_as_its_tracks() {
        let tracks = decode(&good(), NOW).unwrap();
        assert_eq!(tracks.len(), 2);
        assert_eq!(tracks[0].tiers[1].len(), 5);
        assert_eq!(tracks[0].head.tier1_written, 5);
        assert_eq!(tracks[0].head.sum_util_pct, 42);
        assert_eq!(tracks[1].tiers[0].len(), 0);
    }

    fn refused(bytes: &[u8], now: u64) -> String {
        decode(bytes, now).expect_err("refused")
    }

    #[test]
    fn corrupt_truncated_and_hostile_files_are_refused_with_a_reason() {
        let good = good();
        assert!(refused(&good[..good.len() - 1], NOW).contains("truncated"));
        assert!(refused(&good[..10], NOW).contains("shorter"));
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(refused(&flipped, NOW).contains("checksum"));
        let mut magic = good.clone();
        magic[0] = b'X';
        assert!(refused(&magic, NOW).contains("magic"));
        assert!(refused(&good, NOW - CLOCK_SLACK_NS - 1_000_000).contains("future"));
    }

    /// A hostile file with a valid checksum: every check below the checksum holds.
    #[test]
    fn a_well_checksummed_file_with_impossible_contents_is_refused() {
        let mut cases: Vec<(&str, Track)> = Vec::new();
        let mut t = track("GPU-a", 3);
        t.head.kind = 7;
        cases.push(("kind", t));
        let mut t = track("GPU-a", 3);
        t.head.uuid[50] = b'x';
        cases.push(("UUID", t));
        let mut t = track("\x1b[2J", 3);
        t.head.uuid[0] = 0x1b;
        cases.push(("UUID", t));
        let mut t = track("GPU-a", 3);
        t.head.last_sample_unix_ns = NOW + 1;
        cases.push(("after the file", t));
        let mut t = track("GPU-a", 3);
        t.tiers[2][1].start_unix_ns = t.tiers[2][0].start_unix_ns;
        cases.push(("order", t));
        let mut t = track("GPU-a", 3);
        t.tiers[0][0].util_pct_min = 50;
        cases.push(("inconsistent", t));
        let mut t = track("GPU-a", 3);
        t.head.tier2_width_ns = 0;
        cases.push(("width", t));
        for (why, t) in cases {
            let msg = refused(&encode(&[t], NOW), NOW);
            assert!(msg.contains(why), "{why}: {msg}");
        }
        // A count past the payload, with a checksum made to fit.
        let mut bytes = encode(&[track("GPU-a", 1)], NOW);
        let at = size_of::<FileHead>() + std::mem::offset_of!(TrackHead, tier2_written);
        bytes[at..at + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
        let sum = fnv1a(&bytes[size_of::<FileHead>()..]);
        let at = std::mem::offset_of!(FileHead, checksum);
        bytes[at..at + 8].copy_from_slice(&sum.to_ne_bytes());
        assert!(refused(&bytes, NOW).contains("tier 2"));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let good = good();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000 {
            let mut bytes = good.clone();
            for _ in 0..1 + round % 8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize) % bytes.len();
                bytes[at] = (x >> 32) as u8;
            }
            if round % 3 == 0 {
                bytes.truncate((x as usize >> 8) % (bytes.len() + 1));
            }
            let _ = decode(&bytes, NOW);
        }
    }

    #[test]
    fn a_directory_others_can_write_is_not_trusted() {
        let dir = std::env::temp_dir().join(format!("gpupeekd-open-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = untrusted_dir(&path(&dir, "seg")).unwrap();
        assert!(why.contains("writable by others"), "{why}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(untrusted_dir(&path(&dir, "seg")), None);
        assert_eq!(untrusted_dir(&path(&dir.join("missing"), "seg")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn store_replaces_the_file_atomically_in_a_private_directory() {
        let dir = std::env::temp_dir().join(format!("gpupeekd-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = path(&dir.join("sub"), "seg");
        store(&file, &good()).unwrap();
        store(&file, &good()).unwrap();
        let mode = std::fs::metadata(dir.join("sub"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(load(&file, NOW).unwrap().len(), 2);
        assert!(load(&path(&dir, "none"), NOW).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
