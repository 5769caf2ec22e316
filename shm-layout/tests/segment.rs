//! Real segments in /dev/shm: creation, trust checks, validation and takeover.

use std::os::unix::fs::PermissionsExt;

use gpupeek_shm::layout::{gpu_valid, proc_flags, DaemonState};
use gpupeek_shm::testing::TempName;
use gpupeek_shm::{
    text, Error, GpuRecord, Options, ProcContext, ProcPolicy, ProcRecord, Publisher, Segment,
    StatusRecord, Untrusted,
};
use zerocopy::FromZeros;

fn options(name: &TempName, gpus: u32, procs: u32, epoch: u64, pid: u32) -> Options {
    Options {
        epoch,
        writer_pid: pid,
        ..name.options(gpus, procs)
    }
}

fn live_status(gpus: u32) -> StatusRecord {
    let mut s = StatusRecord::new_zeroed();
    s.state = DaemonState::Live as u32;
    s.gpu_count = gpus;
    s.period_ns = 1_000_000_000;
    s.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
    s
}

#[test]
fn layout_matches_the_golden_file() {
    let golden = include_str!("layout-v1.golden");
    assert_eq!(gpupeek_shm::pin::describe(), golden);
}

#[test]
fn published_records_read_back_in_a_snapshot() {
    let name = TempName::new("roundtrip");
    let publisher =
        Publisher::create(&name.0, &options(&name, 4, 8, 77, std::process::id())).unwrap();
    let mut gpu = GpuRecord::new_zeroed();
    gpu.index = 0;
    gpu.valid = gpu_valid::NAME | gpu_valid::MEMORY;
    text::encode(&mut gpu.name, "NVIDIA H100");
    gpu.mem_used_bytes = 5 << 30;
    publisher.write_gpu(0, &gpu);
    let mut p = ProcRecord::new_zeroed();
    p.pid = 42;
    let context = ProcContext {
        policy: ProcPolicy::Basic,
        flags: proc_flags::HIDEPID,
        pid_ns_inode: 4026531836,
        sample_mono_ns: 123_456_789,
        period_ns: 5_000_000_000,
    };
    publisher.write_processes(&context, &[p; 10], &[]);
    publisher.set_status(&live_status(1));
    publisher.bump_generation();

    let segment = Segment::open(&name.0).unwrap();
    assert_eq!(segment.header().epoch, 77);
    let snap = segment.snapshot().unwrap();
    assert!(snap.consistent);
    assert_eq!(snap.generation, 1);
    assert_eq!(snap.gpus.len(), 1);
    assert_eq!(text::decode(&snap.gpus[0].name), "NVIDIA H100");
    assert_eq!(snap.gpus[0].mem_used_bytes, 5 << 30);
    assert_eq!(snap.processes.len(), 8, "capacity bounds the table");
    assert_eq!(
        snap.proc_overflow, 2,
        "the rest is counted, not dropped silently"
    );
    assert_eq!(snap.proc_policy(), Some(ProcPolicy::Basic));
    assert_eq!(snap.proc_head.flags, proc_flags::HIDEPID);
    assert_eq!(snap.proc_head.pid_ns_inode, 4026531836);
    assert_eq!(snap.proc_head.sample_mono_ns, 123_456_789);
    assert_eq!(snap.proc_head.period_ns, 5_000_000_000);
    assert_eq!(
        snap.liveness(gpupeek_shm::mono_now_ns()),
        gpupeek_shm::Liveness::Live
    );
}

#[test]
fn segment_is_created_mode_0644() {
    let name = TempName::new("mode");
    let _p = Publisher::create(&name.0, &options(&name, 1, 1, 1, 1)).unwrap();
    let mode = std::fs::metadata(name.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o644);
}

#[test]
fn second_publisher_on_a_held_segment_is_refused_with_the_owner_pid() {
    let name = TempName::new("second");
    let _first = Publisher::create(&name.0, &options(&name, 1, 1, 1, 4242)).unwrap();
    match Publisher::create(&name.0, &options(&name, 1, 1, 2, 1)) {
        Err(Error::AlreadyRunning { pid, .. }) => assert_eq!(pid, Some(4242)),
        other => panic!("expected AlreadyRunning, got {other:?}"),
    }
    // The first one's header is untouched.
    assert_eq!(Segment::open(&name.0).unwrap().header().epoch, 1);
}

#[test]
fn a_dead_publishers_segment_is_taken_over_in_place_so_old_readers_see_the_new_daemon() {
    let name = TempName::new("takeover");
    let first = Publisher::create(&name.0, &options(&name, 2, 2, 1, 1)).unwrap();
    let reader = Segment::open(&name.0).unwrap();
    drop(first);
    assert_eq!(reader.status().unwrap().state, DaemonState::Starting as u32);
    let mut second = Publisher::create(&name.0, &options(&name, 2, 2, 2, 1)).unwrap();
    second.set_writer_pid(4242);
    second.set_status(&live_status(0));
    // Same object: the mapping opened under the first daemon sees the second one's writes.
    assert_eq!(reader.status().unwrap().state, DaemonState::Live as u32);
    let header = *Segment::open(&name.0).unwrap().header();
    assert_eq!((header.epoch, header.writer_pid), (2, 4242));
    assert_eq!(
        header.status_size_bytes, 256,
        "the pid's neighbour in its word is intact"
    );
}

#[test]
fn a_segment_with_other_capacities_is_replaced_not_resized_under_readers() {
    let name = TempName::new("resize");
    drop(Publisher::create(&name.0, &options(&name, 2, 2, 1, 1)).unwrap());
    let reader = Segment::open(&name.0).unwrap();
    let _second = Publisher::create(&name.0, &options(&name, 4, 4, 2, 1)).unwrap();
    assert!(
        reader.status().is_ok(),
        "the old object is still mapped, not truncated"
    );
    assert_eq!(Segment::open(&name.0).unwrap().geometry().gpu_capacity, 4);
}

#[test]
fn reader_rejects_a_world_writable_segment() {
    let name = TempName::new("writable");
    let _p = Publisher::create(&name.0, &options(&name, 1, 1, 1, 1)).unwrap();
    std::fs::set_permissions(name.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    match Segment::open(&name.0) {
        Err(Error::Untrusted {
            why: Untrusted::Writable { mode },
            ..
        }) => assert_eq!(mode, 0o666),
        other => panic!("expected Untrusted, got {other:?}"),
    }
}

#[test]
fn reader_rejects_a_segment_owned_by_another_user() {
    let name = TempName::new("owner");
    let _p = Publisher::create(&name.0, &options(&name, 1, 1, 1, 1)).unwrap();
    if nix::unistd::geteuid().is_root() {
        // Root-owned segments are trusted by everyone: hand this one to a squatter.
        std::os::unix::fs::chown(name.path(), Some(54321), None).unwrap();
    }
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(name.path()).unwrap());
    // A reader who is neither root nor the owner runs exactly this check.
    let stranger = owner.wrapping_add(1).max(1);
    match Segment::open_as(&name.0, stranger) {
        Err(Error::Untrusted {
            why: Untrusted::Owner { uid },
            ..
        }) => assert_eq!(uid, owner),
        other => panic!("expected Untrusted owner, got {other:?}"),
    }
}

#[test]
fn reader_rejects_a_symlink_in_place_of_the_segment() {
    let name = TempName::new("symlink");
    std::os::unix::fs::symlink("/etc/passwd", name.path()).unwrap();
    match Segment::open(&name.0) {
        Err(Error::Untrusted {
            why: Untrusted::Symlink,
            ..
        }) => {}
        other => panic!("expected Untrusted symlink, got {other:?}"),
    }
}

#[test]
fn truncated_or_garbage_segments_are_errors_not_crashes() {
    let name = TempName::new("garbage");
    std::fs::write(name.path(), b"short").unwrap();
    std::fs::set_permissions(name.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(matches!(
        Segment::open(&name.0),
        Err(Error::NotReady { .. })
    ));
    std::fs::write(name.path(), vec![0xabu8; 4096]).unwrap();
    assert!(matches!(Segment::open(&name.0), Err(Error::Corrupt { .. })));
    std::fs::write(name.path(), vec![0u8; 4096]).unwrap();
    assert!(matches!(
        Segment::open(&name.0),
        Err(Error::NotReady { .. })
    ));
}

#[test]
fn missing_segment_and_bad_names_are_reported_as_such() {
    assert!(matches!(
        Segment::open("gpupeek-test-does-not-exist"),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        Segment::open("a/b"),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(Segment::open(""), Err(Error::InvalidName { .. })));
}

#[test]
fn a_reader_locking_the_segment_cannot_keep_the_daemon_from_restarting() {
    let name = TempName::new("readerlock");
    drop(Publisher::create(&name.0, &options(&name, 1, 1, 1, 1)).unwrap());
    // Any user may open the segment read-only, and flock needs no write access.
    let file = std::fs::File::open(name.path()).unwrap();
    let _held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
    let again = Publisher::create(&name.0, &options(&name, 1, 1, 2, 1));
    assert!(again.is_ok(), "{again:?}");
}

#[test]
fn a_lock_file_owned_by_someone_else_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        return; // only root can hand a file to another user
    }
    let name = TempName::new("foreignlock");
    let options = options(&name, 1, 1, 1, 1);
    let lock = options.lock_dir.join(format!("gpupeekd-{}.lock", name.0));
    std::fs::write(&lock, b"").unwrap();
    std::os::unix::fs::chown(&lock, Some(54321), None).unwrap();
    match Publisher::create(&name.0, &options) {
        Err(Error::Lock { problem, .. }) => assert!(problem.contains("54321"), "{problem}"),
        other => panic!("expected a lock error, got {other:?}"),
    }
}

#[test]
fn a_segment_file_in_a_directory_is_read_by_its_path() {
    use std::os::fd::AsFd;
    let name = TempName::new("podfile");
    let dir = std::env::temp_dir().join(&name.0).join("pod");
    std::fs::create_dir_all(&dir).unwrap();
    let dir_fd = std::fs::File::open(&dir).unwrap();
    let path = dir.join("gpupeek");
    // Whatever stands at the name (here a symbolic link to a file that must survive) is
    // unlinked, never followed.
    let victim = dir.join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let label = path.to_str().unwrap();
    let publisher = Publisher::create_file(
        dir_fd.as_fd(),
        "gpupeek",
        label,
        &options(&name, 2, 8, 7, 1),
    )
    .unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    let mut gpu = GpuRecord::new_zeroed();
    gpu.index = 1;
    gpu.valid = gpu_valid::UUID;
    text::encode(&mut gpu.uuid, "GPU-1");
    publisher.write_gpu(0, &gpu);
    publisher.set_status(&live_status(1));
    publisher.bump_generation();
    let segment = Segment::open(label).unwrap();
    let snap = segment.snapshot().unwrap();
    assert_eq!(snap.gpus.len(), 1);
    assert_eq!(text::decode(&snap.gpus[0].uuid), "GPU-1");
    assert!(!segment.replaced());
    gpupeek_shm::writer::unlink_file(dir_fd.as_fd(), "gpupeek", label).unwrap();
    assert!(segment.replaced());
    match Segment::open(label) {
        Err(e @ Error::NotFound { .. }) => {
            assert!(e.to_string().contains("--pod-views"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // A symbolic link at the path is refused, as at a name.
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    assert!(matches!(
        Segment::open(label),
        Err(Error::Untrusted {
            why: Untrusted::Symlink,
            ..
        })
    ));
    // Bad file names are refused before anything is touched.
    for bad in ["", ".", "..", "a/b"] {
        assert!(matches!(
            Publisher::create_file(dir_fd.as_fd(), bad, "x", &options(&name, 1, 1, 1, 1)),
            Err(Error::InvalidName { .. })
        ));
    }
}
