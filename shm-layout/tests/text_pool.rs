//! The text pool (ABI 1.5): whole command names and command lines read back through a
//! snapshot, hostile pool fields are refused, and a reader of ABI 1.4, which knows no
//! pool, still reads a 1.5 segment's fixed fields at the offsets it knows.

use std::collections::HashMap;

use gpupeek_shm::layout::{proc_valid as pv, DaemonState};
use gpupeek_shm::pool::TextPool;
use gpupeek_shm::testing::TempName;
use gpupeek_shm::{
    text, Error, ProcContext, ProcPolicy, ProcRecord, Publisher, Segment, StatusRecord,
};

const NAME: &str = "a-program-whose-name-is-well-over-forty-characters";

/// A command line of about 2 KB: the program's path and 100 arguments.
fn long_cmdline() -> Vec<u8> {
    let mut raw = format!("/opt/tools/bin/{NAME}\0").into_bytes();
    for i in 0..100 {
        raw.extend_from_slice(format!("--option-{i:03}=value-{i:03}\0").as_bytes());
    }
    raw
}

/// Publishes pid 42 on GPUs 0 and 1 with [`long_cmdline`], the way the daemon does.
fn publish(publisher: &Publisher) -> Vec<u8> {
    let mut status = StatusRecord {
        state: DaemonState::Live as u32,
        gpu_count: 0,
        period_ns: 1_000_000_000,
        heartbeat_mono_ns: gpupeek_shm::mono_now_ns(),
        ..Default::default()
    };
    text::encode(&mut status.driver_version, "550.54.15");
    publisher.set_status(&status);
    let raw = long_cmdline();
    let mut pool = TextPool::new(publisher.text_pool_size());
    let procs: Vec<ProcRecord> = (0..2)
        .map(|gpu| {
            let mut p = ProcRecord {
                gpu_index: gpu,
                pid: 42,
                valid: pv::COMMAND | pv::CMDLINE,
                ..Default::default()
            };
            text::encode(&mut p.command, NAME);
            p.cmdline_len = text::encode_argv(&mut p.cmdline, &raw);
            pool.put(&mut p, NAME, Some(&raw));
            p
        })
        .collect();
    publisher.write_processes(&ProcContext::new(ProcPolicy::Full), &procs, pool.bytes());
    publisher.bump_generation();
    raw
}

#[test]
fn whole_names_and_command_lines_read_back_from_the_pool() {
    let name = TempName::new("readback");
    let publisher = Publisher::create(&name.0, &name.options(2, 8)).unwrap();
    let raw = publish(&publisher);
    let segment = Segment::open(&name.0).unwrap();
    assert!(segment.header().abi_minor >= 5);
    let snap = segment.snapshot().unwrap();
    assert_eq!(snap.processes.len(), 2);
    for p in &snap.processes {
        let full = snap.full_text(p);
        assert_eq!(full.command, Some(NAME.as_bytes()));
        assert_eq!(full.cmdline, Some(&raw[..raw.len() - 1]));
        assert_eq!(text::decode(&p.command), NAME[..31]);
        assert_eq!(p.cmdline_len as usize, raw.len() - 1);
    }
    // The process's two slots share one copy of its text.
    assert_eq!(snap.processes[0].text_offset, snap.processes[1].text_offset);
    assert_eq!(snap.text.len(), NAME.len() + raw.len() - 1);
}

#[test]
fn a_pool_outside_the_segment_is_corrupt() {
    use std::os::unix::fs::FileExt;
    let name = TempName::new("hostile");
    let publisher = Publisher::create(&name.0, &name.options(2, 8)).unwrap();
    publish(&publisher);
    let head = publisher.geometry().proc_table_offset as u64;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(name.path())
        .unwrap();
    // text_pool_size_bytes at head + 56: far past the end of the segment.
    file.write_all_at(&u32::MAX.to_ne_bytes(), head + 56)
        .unwrap();
    let err = Segment::open(&name.0).unwrap().snapshot().unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
}

/// `record -> field -> (offset, size)` from a `describe-layout` text.
fn parse_layout(text: &str) -> HashMap<String, HashMap<String, (usize, usize)>> {
    let mut records: HashMap<String, HashMap<String, (usize, usize)>> = HashMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if !line.starts_with(' ') {
            current = line.split_whitespace().next().unwrap().to_owned();
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        records.entry(current.clone()).or_default().insert(
            f[2].to_owned(),
            (f[0].parse().unwrap(), f[1].parse().unwrap()),
        );
    }
    records
}

#[test]
fn every_field_of_abi_1_4_keeps_its_place() {
    let old = parse_layout(include_str!("layout-v1.4.golden"));
    let new = parse_layout(&gpupeek_shm::pin::describe());
    for (record, fields) in &old {
        for (field, place) in fields {
            if field.starts_with("reserved") {
                continue;
            }
            assert_eq!(new[record].get(field), Some(place), "{record}.{field}");
        }
    }
}

/// Reads a field at its ABI 1.4 place from raw segment bytes.
fn field(bytes: &[u8], at: usize, place: (usize, usize)) -> &[u8] {
    &bytes[at + place.0..at + place.0 + place.1]
}

fn le_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_ne_bytes(w)
}

#[test]
fn a_1_4_reader_reads_the_fixed_fields_of_a_1_5_segment() {
    let name = TempName::new("old-reader");
    let publisher = Publisher::create(&name.0, &name.options(2, 8)).unwrap();
    let raw = publish(&publisher);
    // Everything a 1.4 reader knows comes from the 1.4 layout: the header's offsets and
    // sizes, then the process slots' fields.
    let old = parse_layout(include_str!("layout-v1.4.golden"));
    let bytes = std::fs::read(name.path()).unwrap();
    let h = &old["StaticHeader"];
    assert_eq!(le_u64(field(&bytes, 0, h["abi_major"])), 1);
    assert_eq!(
        le_u64(field(&bytes, 0, h["segment_size_bytes"])) as usize,
        bytes.len()
    );
    let table = le_u64(field(&bytes, 0, h["proc_table_offset"])) as usize;
    let record_size = le_u64(field(&bytes, 0, h["proc_record_size_bytes"])) as usize;
    assert_eq!(record_size, old["ProcRecord"]["cmdline"].0 + 328);
    let head = &old["ProcTableHead"];
    assert_eq!(le_u64(field(&bytes, table, head["count"])), 2);
    let slot = table + 128;
    let p = &old["ProcRecord"];
    assert_eq!(le_u64(field(&bytes, slot, p["pid"])), 42);
    let valid = le_u64(field(&bytes, slot, p["valid"]));
    assert_ne!(valid & (pv::COMMAND | pv::CMDLINE), 0);
    assert_eq!(text::decode(field(&bytes, slot, p["command"])), NAME[..31]);
    let len = le_u64(field(&bytes, slot, p["cmdline_len"])) as u32;
    let argv = text::decode_argv(field(&bytes, slot, p["cmdline"]), len);
    let whole: Vec<String> = raw[..raw.len() - 1]
        .split(|&b| b == 0)
        .map(|a| String::from_utf8(a.to_vec()).unwrap())
        .collect();
    assert!(argv.len() < whole.len() && argv.last().unwrap().ends_with('…'));
    assert_eq!(argv[..argv.len() - 1], whole[..argv.len() - 1]);
    // And the 1.5 reader of this crate, with its 1.4 header checks, opens it.
    Segment::open(&name.0).unwrap().snapshot().unwrap();
}
