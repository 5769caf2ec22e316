//! Hostile input: segments that lie, segments put there by someone else, and malformed
//! command lines. Every case ends in one clear line and a distinct exit status, never a
//! panic, a hang (each client runs under the watchdog) or a signal such as SIGBUS.

use std::ffi::OsStr;
use std::mem::offset_of;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use gpupeek_e2e::{
    assert_one_line_failure, bins, hostile, root_or_skip, run_with_watchdog, stderr, Sandbox,
};
use gpupeek_shm::layout::{ProcTableHead, TierTableHead};
use gpupeek_shm::{Error, Geometry, GpuRecord, StaticHeader, StatusRecord};

const GPUS: u32 = 2;
const PROCS: u32 = 4;

/// A valid live image with GPUS GPUs and PROCS processes, heartbeat now.
fn live_image() -> (Geometry, Vec<u8>) {
    let geometry = Geometry::with_tracks(GPUS, PROCS, hostile::IMAGE_TRACKS);
    let mut image = hostile::valid_image(GPUS, PROCS);
    let at = geometry.status_offset + offset_of!(StatusRecord, heartbeat_mono_ns);
    put(&mut image, at, gpupeek_shm::mono_now_ns());
    (geometry, image)
}

fn put(image: &mut [u8], at: usize, value: u64) {
    image[at..at + 8].copy_from_slice(&value.to_ne_bytes());
}

fn put_u32(image: &mut [u8], at: usize, value: u32) {
    image[at..at + 4].copy_from_slice(&value.to_ne_bytes());
}

#[test]
fn every_fuzz_corpus_input_reads_as_a_snapshot_or_an_error() {
    let sb = Sandbox::new("corpus");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/reader");
    let (mut snapshots, mut errors) = (0, 0);
    for entry in std::fs::read_dir(&dir).expect("the fuzz corpus is in the repository") {
        let path = entry.unwrap().path();
        let input = std::fs::read(&path).unwrap();
        hostile::place(&sb.shm, &hostile::image_from_fuzz_input(&input));
        match hostile::read_like_a_client(&sb.shm) {
            Ok(_) => snapshots += 1,
            Err(_) => errors += 1,
        }
    }
    // The corpus must exercise both outcomes, or it tests less than it claims.
    assert!(
        snapshots > 0 && errors > 0,
        "{snapshots} snapshots, {errors} errors"
    );
}

#[test]
fn hostile_header_and_record_numbers_get_the_matching_error_and_exit_status() {
    let (g, image) = live_image();
    let status = g.status_offset;
    let head = g.proc_table_offset;
    let tiers = g.tiers.expect("a 1.7 writer's segment has tiered history");
    type Patch = Box<dyn Fn(&mut Vec<u8>)>;
    let header_word = |field: usize, value: u64| -> Patch {
        Box::new(move |img: &mut Vec<u8>| put(img, field, value))
    };
    let cases: Vec<(&str, Patch, i32)> = vec![
        ("untouched (control)", Box::new(|_: &mut Vec<u8>| {}), 0),
        (
            "magic zero: not initialised",
            header_word(offset_of!(StaticHeader, magic), 0),
            3,
        ),
        (
            "bad magic",
            header_word(0, u64::from_le_bytes(*b"NOTOURS\0")),
            8,
        ),
        (
            "size in header larger than the object",
            header_word(
                offset_of!(StaticHeader, segment_size_bytes),
                g.segment_size as u64 + 128,
            ),
            8,
        ),
        (
            "GPU table offset near u64::MAX",
            header_word(offset_of!(StaticHeader, gpu_table_offset), u64::MAX - 7),
            8,
        ),
        (
            "status offset inside the header",
            header_word(offset_of!(StaticHeader, status_offset), 64),
            8,
        ),
        (
            "misaligned process table",
            header_word(offset_of!(StaticHeader, proc_table_offset), head as u64 + 4),
            8,
        ),
        (
            "process capacity beyond the object",
            Box::new(|img: &mut Vec<u8>| {
                put_u32(img, offset_of!(StaticHeader, proc_capacity), 65536)
            }),
            8,
        ),
        (
            "GPU count above capacity",
            Box::new(move |img: &mut Vec<u8>| {
                put_u32(img, status + offset_of!(StatusRecord, gpu_count), 99)
            }),
            8,
        ),
        (
            "process count above capacity",
            Box::new(move |img: &mut Vec<u8>| {
                put_u32(img, head + offset_of!(ProcTableHead, count), 1_000_000)
            }),
            8,
        ),
        (
            "status left mid-write",
            Box::new(move |img: &mut Vec<u8>| put(img, status, 7)),
            4,
        ),
        (
            "GPU 1 left mid-write",
            Box::new(move |img: &mut Vec<u8>| put(img, g.gpu_table_offset + g.gpu_record_size, 9)),
            4,
        ),
        (
            "heartbeat from long ago",
            Box::new(move |img: &mut Vec<u8>| {
                put(img, status + offset_of!(StatusRecord, heartbeat_mono_ns), 1)
            }),
            4,
        ),
        (
            "tier table beyond the object",
            Box::new(move |img: &mut Vec<u8>| {
                let len = img.len() as u32;
                put_u32(img, offset_of!(StaticHeader, tier_table_offset), len - 64)
            }),
            8,
        ),
        (
            "tier table misaligned",
            Box::new(move |img: &mut Vec<u8>| {
                put_u32(
                    img,
                    offset_of!(StaticHeader, tier_table_offset),
                    tiers.table_offset as u32 + 4,
                )
            }),
            8,
        ),
        (
            "tier table inside the static header",
            Box::new(move |img: &mut Vec<u8>| {
                put_u32(img, offset_of!(StaticHeader, tier_table_offset), 64)
            }),
            8,
        ),
        (
            "tier tracks offset near u64::MAX",
            Box::new(move |img: &mut Vec<u8>| {
                put(
                    img,
                    tiers.table_offset + offset_of!(TierTableHead, tracks_offset),
                    u64::MAX - 7,
                )
            }),
            8,
        ),
        (
            "more tier tracks than the object holds",
            Box::new(move |img: &mut Vec<u8>| {
                put_u32(
                    img,
                    tiers.table_offset + offset_of!(TierTableHead, track_count),
                    4000,
                )
            }),
            8,
        ),
        (
            "tier ring slots out of range",
            Box::new(move |img: &mut Vec<u8>| {
                put_u32(
                    img,
                    tiers.table_offset + offset_of!(TierTableHead, tier2_slots),
                    u32::MAX,
                )
            }),
            8,
        ),
        (
            "strings with no terminator and escape sequences",
            Box::new(move |img: &mut Vec<u8>| {
                let name = g.gpu_table_offset + offset_of!(GpuRecord, name);
                img[name..name + 96].fill(0x1b);
            }),
            0,
        ),
    ];
    let sb = Sandbox::new("headers");
    for (what, patch, code) in cases {
        let mut bad = image.clone();
        patch(&mut bad);
        hostile::place(&sb.shm, &bad);
        let out = sb.client(&[]);
        if code == 0 {
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
            assert!(
                !out.stdout.contains(&0x1b),
                "{what}: an escape byte reached the terminal"
            );
        } else {
            assert_one_line_failure(&out, code, what);
        }
    }
}

#[test]
fn truncated_or_oversized_objects_are_refused_before_any_page_is_touched() {
    let (g, image) = live_image();
    let sb = Sandbox::new("truncated");
    for (len, code) in [
        (0, 3),
        (64, 3),
        (1000, 8),
        (g.segment_size - 128, 8),
        (g.segment_size + 4, 8),
    ] {
        let mut cut = image.clone();
        cut.resize(len, 0);
        hostile::place(&sb.shm, &cut);
        let out = sb.client(&[]);
        assert_one_line_failure(&out, code, &format!("{len} bytes"));
    }
    // A header that matches a sparse 300 MiB object: refused on its size alone.
    let mut huge = image.clone();
    put(
        &mut huge,
        offset_of!(StaticHeader, segment_size_bytes),
        300 << 20,
    );
    hostile::place(&sb.shm, &huge);
    std::fs::OpenOptions::new()
        .write(true)
        .open(sb.shm_path())
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let out = sb.client(&[]);
    assert_one_line_failure(&out, 8, "300 MiB");
    assert!(
        stderr(&out).contains("implausible size"),
        "{}",
        stderr(&out)
    );
}

/// What a reader says about the object now at the sandbox's name, in-process and from
/// the real client.
fn refused_as_untrusted(sb: &Sandbox, what: &str, why: &str) {
    match gpupeek_shm::Segment::open(&sb.shm) {
        Err(Error::Untrusted { .. }) => {}
        other => panic!("{what}: expected untrusted, got {other:?}"),
    }
    let out = sb.client(&[]);
    assert_one_line_failure(&out, 7, what);
    assert!(stderr(&out).contains(why), "{what}: {}", stderr(&out));
}

#[test]
fn group_or_world_writable_segments_are_untrusted() {
    let (_, image) = live_image();
    let sb = Sandbox::new("writable");
    for mode in [0o664, 0o666, 0o646] {
        hostile::place(&sb.shm, &image);
        std::fs::set_permissions(sb.shm_path(), PermissionsExt::from_mode(mode)).unwrap();
        refused_as_untrusted(
            &sb,
            &format!("mode {mode:o}"),
            "writable by group or others",
        );
    }
}

#[test]
fn a_segment_squatted_by_another_user_is_untrusted() {
    if !root_or_skip("a_segment_squatted_by_another_user_is_untrusted") {
        return;
    }
    let (_, image) = live_image();
    let sb = Sandbox::new("squatter");
    hostile::place(&sb.shm, &image);
    std::os::unix::fs::chown(sb.shm_path(), Some(65534), Some(65534)).unwrap();
    refused_as_untrusted(&sb, "owned by uid 65534", "owned by uid 65534");
}

#[test]
fn a_symlink_fifo_or_directory_at_the_name_is_untrusted_and_never_hangs() {
    let (_, image) = live_image();
    let sb = Sandbox::new("oddfiles");
    let target = Sandbox::new("linktarget");
    hostile::place(&target.shm, &image);
    std::os::unix::fs::symlink(target.shm_path(), sb.shm_path()).unwrap();
    refused_as_untrusted(&sb, "symlink", "symbolic link");
    std::fs::remove_file(sb.shm_path()).unwrap();

    // Opening a FIFO for reading blocks until a writer comes: the reader must not.
    nix::unistd::mkfifo(
        &sb.shm_path(),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    refused_as_untrusted(&sb, "fifo", "not a regular");
    std::fs::remove_file(sb.shm_path()).unwrap();

    std::fs::create_dir(sb.shm_path()).unwrap();
    std::fs::set_permissions(sb.shm_path(), PermissionsExt::from_mode(0o755)).unwrap();
    refused_as_untrusted(&sb, "directory", "not a regular");
    std::fs::remove_dir(sb.shm_path()).unwrap();
}

#[test]
fn the_daemon_replaces_a_symlink_or_fifo_at_its_name_and_never_writes_through_it() {
    let sb = Sandbox::new("replace");
    sb.write_scenario(&serde_json::json!({"gpus": [{"name": "GPU", "memory_total_bytes": 1000}]}));
    let victim = sb.dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, sb.shm_path()).unwrap();
    let mut daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let meta = std::fs::symlink_metadata(sb.shm_path()).unwrap();
    assert!(meta.file_type().is_file(), "{meta:?}");
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));

    std::fs::remove_file(sb.shm_path()).unwrap();
    nix::unistd::mkfifo(
        &sb.shm_path(),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .unwrap();
    let daemon = sb.start_daemon("100ms");
    sb.wait_live(&daemon);
    assert!(std::fs::symlink_metadata(sb.shm_path())
        .unwrap()
        .file_type()
        .is_file());
    assert_eq!(sb.client(&["--no-header"]).status.code(), Some(0));
}

fn shown(args: &[&[u8]]) -> String {
    let args: Vec<_> = args.iter().map(|a| String::from_utf8_lossy(a)).collect();
    args.join(" ")
}

fn os_args<'a>(args: &[&'a [u8]]) -> Vec<&'a OsStr> {
    args.iter().map(|a| OsStr::from_bytes(a)).collect()
}

#[test]
fn every_malformed_client_flag_gets_one_line_and_exit_2() {
    let sb = Sandbox::new("badflags");
    let long_name = "x".repeat(201);
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"--bogus"],
        vec![b"-x"],
        vec![b"-cuq"],
        vec![b"extra"],
        vec![b"--id"],
        vec![b"--id", b""],
        vec![b"--id", b"x"],
        vec![b"--id", b"-1"],
        vec![b"--id", b"0,,1"],
        vec![b"--id", b"4294967296"],
        vec![b"--gpuname-width", b"-1"],
        vec![b"--gpuname-width", b"1001"],
        vec![b"--gpuname-width", b"18446744073709551615"],
        vec![b"--gpuname-width", b"99999999999999999999"],
        // Given twice, a flag of gpupeek keeps its last value, as gpustat's argparse does
        // (cli::gpustat checks it); gpupeekd refuses it (below).
        vec![b"--show-codec", b"enc,mp4"],
        vec![b"-P", b"watts"],
        vec![b"--shm"],
        vec![b"--shm", b""],
        vec![b"--shm", b"a/b"],
        vec![b"--shm", b"."],
        vec![b"--shm", b".."],
        vec![b"--shm", long_name.as_bytes()],
        vec![b"--shm", b"\xff\xfe"],
        vec![b"--json", b"\x80"],
        // No daemon runs here: a bad interval must still be a usage error, not "no daemon".
        vec![b"--watch", b"0.001"],
        vec![b"--watch", b"-1"],
        vec![b"--watch", b"nan"],
        vec![b"--watch", b"1e20"],
        vec![b"-i", b"0"],
        // Table flags the one-line outputs would silently ignore.
        vec![b"--follow", b"--json"],
        vec![b"-o", b"waybar", b"--by-user"],
        vec![b"--format", b"{util}", b"-i", b"1"],
    ];
    for args in cases {
        let mut cmd = Command::new(&bins().client);
        cmd.args(os_args(&args));
        // A valid name by default, so a case fails for its own flag only.
        cmd.env("GPUPEEK_SHM", &sb.shm);
        let out = run_with_watchdog(cmd);
        assert_one_line_failure(&out, 2, &format!("gpupeek {}", shown(&args)));
    }
    let mut cmd = Command::new(&bins().client);
    cmd.env("GPUPEEK_SHM", "a/b");
    assert_one_line_failure(&run_with_watchdog(cmd), 2, "GPUPEEK_SHM=a/b");
}

#[test]
fn every_malformed_daemon_flag_gets_one_line_and_exit_2() {
    let sb = Sandbox::new("badflagsd");
    let long_name = "x".repeat(201);
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"--bogus"],
        vec![b"extra"],
        vec![b"--interval"],
        vec![b"--interval", b""],
        vec![b"--interval", b"fast"],
        vec![b"--interval", b"9ms"],
        vec![b"--interval", b"2h"],
        vec![b"--interval", b"-1s"],
        vec![b"--interval", b"NaN"],
        vec![b"--interval", b"1e400"],
        vec![b"--interval", b"18446744073709551616s"],
        vec![b"--interval", b"1s", b"--interval", b"2s"],
        vec![b"--nvml-lib"],
        vec![b"--shm", b""],
        vec![b"--shm", b"a/b"],
        vec![b"--shm", b"."],
        vec![b"--shm", b".."],
        vec![b"--shm", long_name.as_bytes()],
        vec![b"--shm", b"\xff"],
        vec![b"--interval", b"\xff"],
        vec![b"--process-interval"],
        vec![b"--process-interval", b"often"],
        vec![b"--process-interval", b"9ms"],
        vec![b"--process-interval", b"-1s"],
        vec![b"--prompt-file"],
        vec![b"--prompt-file", b""],
        vec![b"--prompt-file", b"dir/"],
        vec![b"--prompt-file", b"p", b"--prompt-format", b"{bogus}"],
        vec![b"--prompt-file", b"p", b"--prompt-format", b"{util:spark0}"],
        vec![b"--prompt-format", b"{util}"],
        vec![b"--prompt-stopped"],
        vec![b"--prompt-stopped", b"--prompt-file", b"dir/"],
    ];
    for args in cases {
        let mut cmd = Command::new(&bins().daemon);
        // --foreground first: a case that wrongly started would otherwise detach.
        cmd.arg("--foreground").args(os_args(&args));
        cmd.env("GPUPEEK_SHM", &sb.shm)
            .env("GPUPEEK_LOCK_DIR", &sb.dir)
            // History state stays in the sandbox (a root daemon's default is
            // /var/lib/gpupeek).
            .env("GPUPEEK_STATE_DIR", sb.dir.join("state"));
        let out = run_with_watchdog(cmd);
        assert_one_line_failure(&out, 2, &format!("gpupeekd {}", shown(&args)));
    }
    assert!(
        !sb.shm_path().exists(),
        "a daemon with bad flags created the segment"
    );
}

#[test]
fn every_malformed_format_template_is_exit_2_naming_the_column_without_output() {
    let sb = Sandbox::new("badtemplates");
    for template in [
        "{bogus}",
        "{util",
        "}",
        "{}",
        "{mem_used:XiB}",
        "{util:.999999999}",
        "{util:99999999}",
        "{util:>99999}",
        "{mem_used:GiB:.99}",
        "{mem_used:GiB:.1:x}",
        "{{util}",
        "{util}}",
        "{name:\u{1b}[31m}",
        "{util!90,70}",
        "{util!nan}",
    ] {
        let out = sb.client(&["--format", template]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{template:?}: {err}");
        assert!(out.stdout.is_empty(), "{template:?}");
        assert!(!err.contains("panicked"), "{template:?}: {err}");
        // One line that says what and where; the template and a caret under the
        // column may follow it.
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("gpupeek: bad --format template at column "),
            "{template:?}: {err}"
        );
        assert!(err.lines().count() <= 3, "{template:?}: {err}");
    }
}
