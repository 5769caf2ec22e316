//! Renders the generated sections of the C and Python readers from the Rust definitions:
//! the records ([`pin::RECORDS`]), the bit sets ([`layout::BIT_SETS`]), the state enums
//! ([`layout::STATE_ENUMS`]) and the ABI constants. Each reader keeps one file (the C
//! reader is header-only, the Python one is copied next to a user's code), so the
//! generated text is a marked block inside it, replaced by [`splice`]; everything outside
//! the markers is hand-written.
//!
//! Shared by `main.rs` (`--write`, `--check`) and `tests/readers.rs`, which fails on any
//! drift between the committed files and this output.

use std::collections::BTreeSet;
use std::fmt::Write;

use gpupeek_shm::layout::{self, BitSet, EnumTable};
use gpupeek_shm::pin::{self, FieldType, Record};
use gpupeek_shm::seqlock;

/// How to regenerate, said in every generated block.
pub const COMMAND: &str = "cargo run -p gpupeek-shm --example gen-readers -- --write";

/// One generated block: the file it lives in (relative to the repository root), the
/// first line of its begin marker, its end marker line, and its text (markers included).
pub struct Block {
    pub path: &'static str,
    pub begin: &'static str,
    pub end: &'static str,
    pub text: String,
}

/// Every generated block.
pub fn blocks() -> Vec<Block> {
    vec![c_block(), python_block()]
}

/// `current` with its block replaced by `block.text`; an error if the markers are
/// missing or out of order.
pub fn splice(current: &str, block: &Block) -> Result<String, String> {
    let start = current
        .find(block.begin)
        .ok_or_else(|| format!("{}: no line starting {:?}", block.path, block.begin))?;
    let end = current[start..]
        .find(block.end)
        .map(|i| start + i + block.end.len())
        .ok_or_else(|| format!("{}: no {:?} after the begin marker", block.path, block.end))?;
    let end = current[end..]
        .find('\n')
        .map_or(current.len(), |i| end + i + 1);
    Ok(format!(
        "{}{}{}",
        &current[..start],
        block.text,
        &current[end..]
    ))
}

/// `NotResponding` -> `NOT_RESPONDING`.
fn upper_snake(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

// ---- C ---------------------------------------------------------------------------------

/// The C struct of each record: the C reader's own spelling.
fn c_struct(record: &str) -> &'static str {
    match record {
        "StaticHeader" => "gpupeek_static_header",
        "StatusRecord" => "gpupeek_status",
        "GpuRecord" => "gpupeek_gpu",
        "ProcTableHead" => "gpupeek_proc_head",
        "ProcRecord" => "gpupeek_proc",
        "HistoryHead" => "gpupeek_history_head",
        "HistorySample" => "gpupeek_history_sample",
        "MigTableHead" => "gpupeek_mig_head",
        "MigRecord" => "gpupeek_mig",
        "TierTableHead" => "gpupeek_tier_table",
        "TrackHead" => "gpupeek_track_head",
        "TierBucket" => "gpupeek_tier_bucket",
        other => panic!("name the C struct of {other} in gen-readers/render.rs"),
    }
}

/// The prefix (after `GPUPEEK_`) of each bit set's and enum's C constants.
fn c_prefix(table: &str) -> &'static str {
    match table {
        "status_valid" => "STATUS",
        "gpu_valid" => "GPU",
        "gpu_valid2" => "GPU_V2",
        "gpu_valid3" => "GPU_V3",
        "gpu_valid4" => "GPU_V4",
        "proc_flags" => "PROC_FLAG",
        "proc_kind" | "proc_valid" => "PROC",
        "history_valid" => "HISTORY",
        "mig_valid" => "MIG",
        "tier_valid" => "TIER",
        "TrackKind" => "TRACK",
        "DaemonState" => "DAEMON",
        "GpuState" => "GPU",
        "ProcPolicy" => "POLICY",
        other => panic!("name the C prefix of {other} in gen-readers/render.rs"),
    }
}

fn c_field(name: &str, ty: FieldType) -> String {
    match ty {
        FieldType::U8 => format!("uint8_t {name};"),
        FieldType::U16 => format!("uint16_t {name};"),
        FieldType::I16 => format!("int16_t {name};"),
        FieldType::U32 => format!("uint32_t {name};"),
        FieldType::I32 => format!("int32_t {name};"),
        FieldType::U64 => format!("uint64_t {name};"),
        FieldType::Text(n) => format!("char {name}[{n}];"),
        FieldType::Words(n) => format!("uint64_t {name}[{n}];"),
    }
}

fn c_enum(out: &mut String, names: &mut BTreeSet<String>, table: &EnumTable) {
    let (record, field) = (c_struct(table.record), table.field);
    writeln!(out, "/* Values of {record}.{field} ({}). */", table.ty).unwrap();
    out.push_str("enum {\n");
    for v in table.variants {
        let name = format!("GPUPEEK_{}_{}", c_prefix(table.ty), upper_snake(v.ident));
        assert!(names.insert(name.clone()), "{name} is declared twice");
        writeln!(out, "    {name} = {}, /* {} */", v.raw, v.name).unwrap();
    }
    out.push_str("};\n\n");
}

fn c_bits(out: &mut String, names: &mut BTreeSet<String>, set: &BitSet) {
    let one = if set.width == 64 { "UINT64_C(1)" } else { "1u" };
    writeln!(
        out,
        "/* Bits of {}.{} ({}). */",
        c_struct(set.record),
        set.field,
        set.module
    )
    .unwrap();
    for b in set.bits {
        let name = format!("GPUPEEK_{}_{}", c_prefix(set.module), b.name);
        assert!(names.insert(name.clone()), "{name} is declared twice");
        write!(out, "#define {name} ({one} << {})", b.bit).unwrap();
        if !b.fields.is_empty() {
            write!(out, " /* {} */", b.fields.join(", ")).unwrap();
        }
        out.push('\n');
    }
    out.push('\n');
}

fn c_record(out: &mut String, record: &Record) {
    let name = c_struct(record.name);
    writeln!(out, "struct {name} {{").unwrap();
    for f in record.fields {
        writeln!(out, "    {}", c_field(f.name, f.ty)).unwrap();
    }
    out.push_str("};\n");
    let size = record.size;
    writeln!(
        out,
        "_Static_assert(sizeof(struct {name}) == {size}, \"{name} size\");"
    )
    .unwrap();
    for f in record.fields {
        writeln!(out, "GPUPEEK_PIN({name}, {}, {});", f.name, f.offset).unwrap();
    }
    out.push('\n');
}

fn c_block() -> Block {
    let begin = "/* BEGIN GENERATED";
    let end = "/* END GENERATED */";
    let mut t = format!(
        "{begin} by `{COMMAND}`\n * from the Rust definitions in shm-layout \
         (layout.rs, pin.rs, seqlock.rs): do not edit by hand. */\n\n"
    );
    t.push_str("/* \"GPUPEEK\\0\" read as a little-endian 64-bit word; 0 while the daemon initialises. */\n");
    let constants = [
        (
            "MAGIC",
            format!("UINT64_C({:#018X})", layout::MAGIC).replace("0X", "0x"),
        ),
        ("ABI_MAJOR", format!("{}u", layout::ABI_MAJOR)),
        ("ABI_MINOR", format!("{}u", layout::ABI_MINOR)),
        ("DEFAULT_NAME", format!("{:?}", gpupeek_shm::DEFAULT_NAME)),
        ("ENV_NAME", format!("{:?}", gpupeek_shm::ENV_NAME)),
        ("MAX_CAPACITY", format!("{}u", layout::MAX_CAPACITY)),
        (
            "MAX_HISTORY_SLOTS",
            format!("{}u", layout::MAX_HISTORY_SLOTS),
        ),
        ("MAX_TIER_SLOTS", format!("{}u", layout::MAX_TIER_SLOTS)),
        ("MAX_TIER_TRACKS", format!("{}u", layout::MAX_TIER_TRACKS)),
        (
            "MAX_SEGMENT_BYTES",
            format!("((size_t){}u)", gpupeek_shm::reader::MAX_SEGMENT_BYTES),
        ),
        (
            "MAX_TEXT_PER_PROCESS",
            format!("{}u", layout::MAX_TEXT_PER_PROCESS),
        ),
        (
            "STALE_PERIODS",
            format!("{}u", gpupeek_shm::reader::STALE_PERIODS),
        ),
        (
            "PROC_RECORD_V1_0_SIZE",
            format!("{}u", pin::PROC_RECORD_V1_0_SIZE),
        ),
        ("SPIN_ATTEMPTS", format!("{}u", seqlock::SPIN_ATTEMPTS)),
        ("MIN_ATTEMPTS", format!("{}u", seqlock::MIN_ATTEMPTS)),
        ("MAX_ATTEMPTS", format!("{}u", seqlock::MAX_ATTEMPTS)),
        (
            "STALE_AFTER_NS",
            format!("UINT64_C({})", seqlock::STALE_AFTER.as_nanos()),
        ),
        (
            "BUSY_FOR_NS",
            format!("UINT64_C({})", seqlock::BUSY_FOR.as_nanos()),
        ),
    ];
    for (name, value) in constants {
        writeln!(t, "#define GPUPEEK_{name} {value}").unwrap();
    }
    t.push('\n');
    let mut names = BTreeSet::new();
    for table in &layout::STATE_ENUMS {
        c_enum(&mut t, &mut names, table);
    }
    for set in &layout::BIT_SETS {
        c_bits(&mut t, &mut names, set);
    }
    t.push_str("/* Records: native byte order, no implicit padding; every offset pinned. */\n");
    t.push_str("#define GPUPEEK_PIN(type, field, off) \\\n    _Static_assert(offsetof(struct type, field) == (off), #type \".\" #field \" moved\")\n\n");
    for record in &pin::RECORDS {
        c_record(&mut t, record);
    }
    t.push_str(end);
    t.push('\n');
    Block {
        path: "contrib/c/gpupeek.h",
        begin,
        end,
        text: t,
    }
}

// ---- Python ----------------------------------------------------------------------------

/// The Python dict of each state enum: the Python reader's own spelling.
fn py_enum(ty: &str) -> &'static str {
    match ty {
        "DaemonState" => "DAEMON_STATES",
        "GpuState" => "GPU_STATES",
        "ProcPolicy" => "POLICIES",
        "TrackKind" => "TRACK_KINDS",
        other => panic!("name the Python dict of {other} in gen-readers/render.rs"),
    }
}

/// The `struct` module's format of a field.
fn py_format(ty: FieldType) -> String {
    match ty {
        FieldType::U8 => "B".into(),
        FieldType::U16 => "H".into(),
        FieldType::I16 => "h".into(),
        FieldType::U32 => "I".into(),
        FieldType::I32 => "i".into(),
        FieldType::U64 => "Q".into(),
        FieldType::Text(n) => format!("{n}s"),
        FieldType::Words(n) => format!("{}s", 8 * n),
    }
}

fn python_block() -> Block {
    let begin = "# BEGIN GENERATED";
    let end = "# END GENERATED";
    let mut t = format!(
        "{begin} by `{COMMAND}`\n# from the Rust definitions in shm-layout (layout.rs, pin.rs, \
         seqlock.rs): \
         do not edit by hand.\n\n"
    );
    writeln!(
        t,
        "MAGIC = {:#018x}  # b\"GPUPEEK\\0\", little-endian",
        layout::MAGIC
    )
    .unwrap();
    writeln!(t, "ABI_MAJOR = {}", layout::ABI_MAJOR).unwrap();
    writeln!(t, "ABI_MINOR = {}", layout::ABI_MINOR).unwrap();
    writeln!(t, "DEFAULT_NAME = {:?}", gpupeek_shm::DEFAULT_NAME).unwrap();
    writeln!(t, "ENV_NAME = {:?}", gpupeek_shm::ENV_NAME).unwrap();
    writeln!(t, "MAX_CAPACITY = {}", layout::MAX_CAPACITY).unwrap();
    writeln!(t, "MAX_HISTORY_SLOTS = {}", layout::MAX_HISTORY_SLOTS).unwrap();
    writeln!(t, "MAX_TIER_SLOTS = {}", layout::MAX_TIER_SLOTS).unwrap();
    writeln!(t, "MAX_TIER_TRACKS = {}", layout::MAX_TIER_TRACKS).unwrap();
    writeln!(
        t,
        "MAX_SEGMENT_BYTES = {}",
        gpupeek_shm::reader::MAX_SEGMENT_BYTES
    )
    .unwrap();
    writeln!(t, "MAX_TEXT_PER_PROCESS = {}", layout::MAX_TEXT_PER_PROCESS).unwrap();
    writeln!(t, "STALE_PERIODS = {}", gpupeek_shm::reader::STALE_PERIODS).unwrap();
    writeln!(t, "PROC_RECORD_V1_0_SIZE = {}", pin::PROC_RECORD_V1_0_SIZE).unwrap();
    writeln!(t, "SPIN_ATTEMPTS = {}", seqlock::SPIN_ATTEMPTS).unwrap();
    writeln!(t, "MIN_ATTEMPTS = {}", seqlock::MIN_ATTEMPTS).unwrap();
    writeln!(t, "MAX_ATTEMPTS = {}", seqlock::MAX_ATTEMPTS).unwrap();
    writeln!(t, "STALE_AFTER_NS = {}", seqlock::STALE_AFTER.as_nanos()).unwrap();
    writeln!(t, "BUSY_FOR_NS = {}", seqlock::BUSY_FOR.as_nanos()).unwrap();
    for record in &pin::RECORDS {
        writeln!(t, "{}_SIZE = {}", upper_snake(record.name), record.size).unwrap();
    }
    t.push_str("\n# State enums: raw value -> name.\n");
    for table in &layout::STATE_ENUMS {
        let (name, record, field) = (py_enum(table.ty), table.record, table.field);
        writeln!(t, "{name} = {{  # {record}.{field} ({})", table.ty).unwrap();
        for v in table.variants {
            writeln!(t, "    {}: {:?},", v.raw, v.name).unwrap();
        }
        t.push_str("}\n");
    }
    t.push_str(
        "\n# GpuRecord.clock_event_reasons: (bit, nvidia-smi's name), in bit order.\n\
         CLOCK_EVENT_REASONS = [\n",
    );
    for (bit, name) in layout::clock_event_reason::NAMES {
        writeln!(t, "    ({bit:#x}, {name:?}),").unwrap();
    }
    t.push_str("]\n");
    t.push_str(
        "\n# Bit sets: NAME -> bit index. Validity sets also map each field to the bit that\n\
         # says it is valid: a field whose bit is clear is None (\"not available\"), never 0.\n",
    );
    for set in &layout::BIT_SETS {
        let upper = set.module.to_ascii_uppercase();
        writeln!(t, "{upper}_BITS = {{  # {}.{}", set.record, set.field).unwrap();
        for b in set.bits {
            writeln!(t, "    {:?}: {},", b.name, b.bit).unwrap();
        }
        t.push_str("}\n");
        if set.bits.iter().any(|b| !b.fields.is_empty()) {
            writeln!(t, "{upper} = {{").unwrap();
            for b in set.bits {
                for f in b.fields {
                    writeln!(t, "    {f:?}: {},  # {}", b.bit, b.name).unwrap();
                }
            }
            t.push_str("}\n");
        }
    }
    t.push_str("\n# Each record's validity table, for walking them all.\nVALID_FIELDS = {\n");
    // One table per record: its first mask, `valid` (`GpuRecord.valid2`'s is GPU_VALID2).
    for set in layout::BIT_SETS
        .iter()
        .filter(|s| s.field == "valid" && s.bits.iter().any(|b| !b.fields.is_empty()))
    {
        let upper = set.module.to_ascii_uppercase();
        writeln!(t, "    {:?}: {upper},  # {}", set.record, set.field).unwrap();
    }
    t.push_str("}\n");
    t.push_str(
        "\n# Every record as (name, size, [(field, offset, struct format)]), in memory order.\n\
         LAYOUT = [\n",
    );
    for record in &pin::RECORDS {
        writeln!(t, "    ({:?}, {}, [", record.name, record.size).unwrap();
        for f in record.fields {
            writeln!(
                t,
                "        ({:?}, {}, {:?}),",
                f.name,
                f.offset,
                py_format(f.ty)
            )
            .unwrap();
        }
        t.push_str("    ]),\n");
    }
    t.push_str("]\n");
    t.push_str(end);
    t.push('\n');
    Block {
        path: "contrib/python/gpupeek.py",
        begin,
        end,
        text: t,
    }
}
