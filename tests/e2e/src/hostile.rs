//! Hostile segments: arbitrary bytes turned into a segment image, placed where a reader
//! will open it, and read the way a client reads. The fuzz target
//! (`fuzz/fuzz_targets/reader.rs`) and the corpus regression test
//! (`tests/e2e/hostile.rs`) share this code, so what the fuzzer found keeps being checked
//! by `cargo test`.
//!
//! A fuzz input is decoded as follows. Its first byte's low bit picks the mode:
//! - raw (bit clear): the rest of the input is the whole segment;
//! - structured (bit set): bytes 1 and 2 choose the capacities (GPUs `b1 % 5`, process
//!   slots `b2 % 9`, and one MIG device per GPU) of a segment that a real [`Publisher`]
//!   wrote, live and complete;
//!   then come header overrides, each 9 bytes (a header word index `% 16`, then the
//!   word's new value, little-endian), ended by a `0xff` byte or the end of the input;
//!   the rest is XORed onto the image from byte 128 on (status, GPU and process
//!   records, sequence words included), or, if bit 2 of the first byte is set, from the
//!   MIG table on (its head and records). If bit 1 of the first byte is set, the image
//!   is then cut to the length given by the last two bytes of the input (little-endian).

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use gpupeek_shm::layout::{mig_valid, proc_valid, DaemonState, GpuState};
use gpupeek_shm::{
    text, Error, GpuRecord, MigRecord, Options, ProcContext, ProcPolicy, ProcRecord, Publisher,
    Segment, StatusRecord,
};

/// Tracks of tiered history in a [`valid_image`].
pub const IMAGE_TRACKS: u32 = 1;

/// Size of the static header, in bytes.
const HEADER_BYTES: usize = 128;

/// A complete, live segment image with `gpus` GPUs and `procs` processes, exactly as
/// the real writer lays it out (built once per shape, then cached).
pub fn valid_image(gpus: u32, procs: u32) -> Vec<u8> {
    type Images = HashMap<(u32, u32), Vec<u8>>;
    static CACHE: OnceLock<Mutex<Images>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .entry((gpus, procs))
        .or_insert_with(|| publish_image(gpus, procs))
        .clone()
}

fn publish_image(gpus: u32, procs: u32) -> Vec<u8> {
    let name = format!("gpupeek-image-{}-{gpus}-{procs}", std::process::id());
    let lock_dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&lock_dir).expect("lock dir");
    let options = Options {
        gpu_capacity: gpus,
        proc_capacity: procs,
        lock_dir: lock_dir.clone(),
        // One track of tiered history: its region is there to be attacked, and the
        // image stays small (a track is 700 KiB).
        tier_tracks: IMAGE_TRACKS,
        ..Options::new(0x5eed, 4242)
    };
    let publisher = Publisher::create(&name, &options).expect("publisher");
    for slot in 0..gpus {
        let mut gpu = GpuRecord {
            index: slot,
            state: GpuState::Ok as u32,
            mem_total_bytes: 80 << 30,
            mem_used_bytes: u64::from(slot) << 30,
            valid: u64::MAX,
            ..Default::default()
        };
        text::encode(&mut gpu.name, "NVIDIA H100 80GB HBM3");
        text::encode(&mut gpu.uuid, &format!("GPU-{slot:08}"));
        publisher.write_gpu(slot as usize, &gpu);
    }
    let mut pool = gpupeek_shm::pool::TextPool::new(publisher.text_pool_size());
    let processes: Vec<ProcRecord> = (0..procs)
        .map(|i| {
            let mut p = ProcRecord {
                gpu_index: i % gpus.max(1),
                pid: 1000 + i,
                valid: u64::MAX,
                gpu_mem_bytes: 1 << 30,
                ..Default::default()
            };
            text::encode(&mut p.command, "python train.py");
            text::encode(&mut p.user, "alice");
            p.valid &= !(proc_valid::FULL_COMMAND | proc_valid::FULL_CMDLINE);
            pool.put(
                &mut p,
                "python-with-a-long-name",
                Some(b"python\0train.py\0"),
            );
            p
        })
        .collect();
    let context = ProcContext::new(ProcPolicy::Full);
    publisher.write_processes(&context, &processes, pool.bytes());
    let mig: Vec<MigRecord> = (0..gpus)
        .map(|gpu_index| {
            let mut m = MigRecord {
                gpu_index,
                mem_total_bytes: 40 << 30,
                valid: mig_valid::UUID | mig_valid::PROFILE | mig_valid::MEMORY,
                ..Default::default()
            };
            text::encode(&mut m.profile, "3g.40gb");
            text::encode(&mut m.uuid, &format!("MIG-{gpu_index:08}"));
            m
        })
        .collect();
    publisher.write_mig(&mig);
    let mut status = StatusRecord {
        state: DaemonState::Live as u32,
        gpu_count: gpus,
        period_ns: 1_000_000_000,
        heartbeat_mono_ns: gpupeek_shm::mono_now_ns(),
        ..Default::default()
    };
    text::encode(&mut status.driver_version, "550.54.15");
    publisher.set_status(&status);
    publisher.bump_generation();
    let image = std::fs::read(Path::new("/dev/shm").join(&name)).expect("image");
    drop(publisher);
    let _ = gpupeek_shm::writer::unlink(&name);
    let _ = std::fs::remove_dir_all(lock_dir);
    image
}

/// Decodes a fuzz input into a segment image (see the module documentation).
pub fn image_from_fuzz_input(data: &[u8]) -> Vec<u8> {
    let Some((&mode, rest)) = data.split_first() else {
        return Vec::new();
    };
    if mode & 1 == 0 {
        return rest.to_vec();
    }
    let (gpus, procs, mut rest) = match rest {
        [g, p, rest @ ..] => (u32::from(*g % 5), u32::from(*p % 9), rest),
        _ => (1, 1, &[][..]),
    };
    let mut image = valid_image(gpus, procs);
    while let Some((&index, tail)) = rest.split_first() {
        if index == 0xff {
            rest = tail;
            break;
        }
        let Some((value, tail)) = tail.split_first_chunk::<8>() else {
            break;
        };
        let at = usize::from(index % 16) * 8;
        image[at..at + 8].copy_from_slice(value);
        rest = tail;
    }
    let from = if mode & 4 != 0 {
        // The writer's MIG table offset (the header overrides above may have moved it).
        let g = gpupeek_shm::Geometry::with_tracks(gpus, procs, IMAGE_TRACKS);
        g.mig_table_offset.min(image.len())
    } else {
        HEADER_BYTES
    };
    for (byte, x) in image[from..].iter_mut().zip(rest) {
        *byte ^= x;
    }
    if mode & 2 != 0 {
        if let Some(len) = data.last_chunk::<2>() {
            image.truncate(usize::from(u16::from_le_bytes(*len)));
        }
    }
    image
}

/// Puts `image` at `/dev/shm/NAME`, owned by the caller, mode 0644 (what a reader
/// trusts), replacing what was there.
pub fn place(name: &str, image: &[u8]) {
    let path = Path::new("/dev/shm").join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(&path)
        .expect("segment file");
    file.write_all(image).expect("segment written");
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
        .expect("segment mode");
}

/// Opens segment `name` and uses everything in it the way a client does: snapshot,
/// liveness, every string, every process's GPU. Returns the reader's verdict.
pub fn read_like_a_client(name: &str) -> Result<usize, Error> {
    let segment = Segment::open(name)?;
    let _ = segment.status();
    let snapshot = segment.snapshot()?;
    let _ = snapshot.liveness(gpupeek_shm::mono_now_ns());
    let mut text_bytes = text::decode(&snapshot.status.driver_version).len()
        + text::decode(&snapshot.status.error_message).len();
    for gpu in &snapshot.gpus {
        text_bytes += text::decode(&gpu.name).len() + text::decode(&gpu.uuid).len();
        text_bytes += snapshot.processes_on(gpu.index).count();
    }
    for p in &snapshot.processes {
        text_bytes += text::decode(&p.command).len() + text::decode(&p.user).len();
        let full = snapshot.full_text(p);
        text_bytes += full.command.map_or(0, |c| text::decode(c).len());
        text_bytes += full
            .cmdline
            .map_or(0, |a| text::decode_argv(a, p.cmdline_len).len());
    }
    for m in &snapshot.mig {
        text_bytes += text::decode(&m.profile).len() + text::decode(&m.uuid).len();
        text_bytes += snapshot.processes_in(m).count();
    }
    // The tiered history (ABI 1.7), as plots and the collector read it.
    for i in 0..segment.track_count() {
        if let Ok(Some(track)) = segment.track(i, [usize::MAX; 3]) {
            text_bytes += text::decode(&track.head.uuid).len();
            text_bytes += track.tiers.iter().map(Vec::len).sum::<usize>();
        }
    }
    let week = std::time::Duration::from_secs(7 * 86_400);
    text_bytes += gpupeek_model::history::window(&segment, &snapshot, week).len();
    text_bytes += gpupeek_model::history::integrals(&segment, &snapshot).len();
    Ok(text_bytes)
}

/// Removes `/dev/shm/NAME` (what [`place`] put there).
pub fn remove(name: &str) {
    let _ = gpupeek_shm::writer::unlink(name);
}
