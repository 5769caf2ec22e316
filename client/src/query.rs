//! `gpupeek query`: nvidia-smi's `--query-gpu=FIELDS --format=csv` for the fields that
//! status-bar scripts and cluster tools read, printed the way nvidia-smi prints them, so a
//! script can switch from `nvidia-smi` to `gpupeek query` without a driver call.
//!
//! Output: a header line of the canonical field names with their units in brackets
//! (`memory.used [MiB]`, even with `nounits`, as nvidia-smi does) unless `noheader`, then
//! one line per GPU, values joined by `", "`. Values carry their unit (`45 %`, `1234 MiB`,
//! `123.45 W`, `1410 MHz`) unless `nounits`; ids and reason masks are upper-case hex of
//! nvidia-smi's widths, modes its words. A value the GPU does not report or support, and
//! every live value of a GPU that is lost, failing or suspended, is `[N/A]` (bare `N/A`
//! for `temperature.memory`), one the driver calls deprecated is nvidia-smi's
//! "[Requested functionality has been deprecated]" (as are, from driver 590 on, the
//! display mode, power management and applications clocks, whatever NVML answers, as
//! nvidia-smi 590 prints them); every live value of
//! a GPU whose driver is not responding is `[Unknown Error]`, nvidia-smi's text for a call
//! that failed, while its identity and maximum clocks are kept. Memory is in MiB
//! rounded up (as nvidia-smi rounds), power in watts with two decimals, clocks in MHz,
//! counters of time in microseconds (`212553937 us`), power smoothing's window
//! multiplier in milliseconds (`5 ms`). `power.limit` and
//! `enforced.power.limit` both print the enforced limit, the one gpupeekd publishes.
//! An unknown field is nvidia-smi's one-line error and exit status 2.
//!
//! The fields are the field table's ([`gpupeek_model::FIELDS`]) that have nvidia-smi
//! names, after `timestamp`, `driver_version` and `count`; a field's unit decides how it
//! prints, and its tier whether a hung GPU errs on it.

use chrono::{DateTime, Local};
use gpupeek_model::fields::{Tier, Unit, Value};
use gpupeek_model::{Bytes, Gpu, MilliWatts, Model, Text, FIELDS};

use crate::{live, smi, Exit, EXIT_USAGE};

/// Appended to `gpupeek query --help`.
pub const NOTE: &str = "Fields: the GPU fields listed by --help-query-gpu (nvidia-smi's names \
and aliases), and timestamp, driver_version, kmd_version, count, driver_model.current \
and driver_model.pending.\n\n\
Example:\n  gpupeek query --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader";

/// `--help-query-gpu`: every field, as nvidia-smi lists its own: the names (canonical
/// first, then aliases), then what it is, from the field table.
pub fn fields_help() -> String {
    let mut out =
        String::from("List of valid properties to query for the switch \"--query-gpu=\":\n");
    for f in fields() {
        let names: Vec<String> = f.names.iter().map(|n| format!("{n:?}")).collect();
        let about = match f.gpu {
            Some(field) => field.about,
            None => GLOBALS
                .iter()
                .find(|(names, _)| *names == f.names)
                .map_or("", |(_, about)| about),
        };
        let mut chars = about.chars();
        let about: String = chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        let unit = match f.unit() {
            "" => String::new(),
            unit => format!(" ({unit})"),
        };
        out += &format!("\n{}\n{about}{unit}.\n", names.join(" or "));
    }
    out
}

/// The flags of `gpupeek query` (their table is `crate::commands::QUERY`).
#[derive(Debug)]
pub struct Args {
    /// `--query-gpu`.
    pub query_gpu: String,

    /// `--format`.
    pub format: String,

    /// `-i`, `--id`.
    pub id: Option<String>,

    /// `--shm`.
    pub shm: Option<String>,

    /// `--help-query-gpu`.
    pub help_query_gpu: bool,

    /// `--query-compute-apps`.
    pub query_compute_apps: Option<String>,

    /// `--help-query-compute-apps`.
    pub help_query_compute_apps: bool,

    /// `-L`, `--list-gpus`.
    pub list_gpus: bool,

    /// `-l`, `--loop`: seconds.
    pub loop_s: Option<String>,

    /// `-lms`, `--loop-ms`: milliseconds.
    pub loop_ms: Option<String>,
}

/// Facts about the machine, before the GPU fields of the field table: nvidia-smi's names
/// and what each is. nvidia-smi's `driver_model.*` are WDDM or TCC on Windows and `[N/A]`
/// on Linux (its `--help-query-gpu` says "Always N/A on Linux"; every Linux capture
/// prints `[N/A]`). nvidia-smi 595 added `kmd_version` (the kernel-mode driver's
/// version, which every capture prints equal to `driver_version`) and calls
/// `driver_version` deprecated in its favour.
const GLOBALS: [(&[&str], &str); 6] = [
    (
        &["timestamp"],
        "the time of the query, as \"YYYY/MM/DD HH:MM:SS.msec\"",
    ),
    (
        &["driver_version"],
        "the version of the NVIDIA driver the daemon runs on",
    ),
    (
        &["kmd_version"],
        "the version of the NVIDIA kernel-mode driver the daemon runs on (nvidia-smi 595+)",
    ),
    (&["count"], "the number of GPUs the daemon publishes"),
    (
        &["driver_model.current"],
        "the driver model in use, a Windows notion: always [N/A] on Linux, as nvidia-smi prints it",
    ),
    (
        &["driver_model.pending"],
        "the driver model after the next reboot: always [N/A] on Linux",
    ),
];

/// Every field: nvidia-smi's names (the first is canonical and goes in the header), and
/// where its value comes from. The GPU fields are the field table's (`gpupeek_model::
/// FIELDS`) that nvidia-smi has a name for.
fn fields() -> impl Iterator<Item = Field> {
    let globals = GLOBALS.map(|(names, _)| Field { names, gpu: None });
    let gpu = FIELDS.iter().flat_map(|f| {
        f.smi.iter().map(move |&names| Field {
            names,
            gpu: Some(f),
        })
    });
    globals.into_iter().chain(gpu)
}

/// What nvidia-smi prints for a value it cannot give, whether the value does not apply
/// or NVML answered "not supported": drivers 465 to 595 print `[N/A]` for both (the
/// `--query-gpu` captures of nvidia_gpu_exporter's `internal/captures`, from an RTX 2080
/// Super, RTX 4080 Super, L40S, H100 and H200 with and without MIG, print `[N/A]` for the
/// fan of an H100, the ECC mode of a GeForce, every retired-pages field of an H100, and
/// never `[Not Supported]`).
const NOT_AVAILABLE: &str = "[N/A]";

/// The fields nvidia-smi prints without brackets when it cannot give them: the memory
/// temperature of a GPU without HBM is `N/A` in every capture above (RTX 2080 Super
/// on 465, RTX 4080 Super and L40S on 595), and so are the fabric state, status, clique
/// and cluster of a GPU outside an NVLink fabric (RTX 2080 Super, RTX 4080 Super, L40S on
/// 595), and the fabric health of any GPU whose driver gives no health summary (those
/// and an H100 and H200 on 590).
const BARE_NOT_AVAILABLE: [&str; 12] = [
    "temperature.memory",
    "fabric.state",
    "fabric.status",
    "fabric.cliqueId",
    "fabric.clusterUuid",
    "fabric.health.summary",
    "fabric.health.bandwidth",
    "fabric.health.route_recovery_in_progress",
    "fabric.health.route_unhealthy",
    "fabric.health.access_timeout_recovery",
    "fabric.health.incorrect_configuration",
    "fabric.health.partition_assigned",
];

/// What nvidia-smi prints for a value whose NVML function answered
/// `NVML_ERROR_DEPRECATED` (the display mode and the applications clocks on 590+
/// drivers, in the same captures).
const DEPRECATED: &str = "[Requested functionality has been deprecated]";

/// The fields nvidia-smi 590 and later print as deprecated whatever NVML answers (it
/// does not ask): every 590, 595 and 610 capture above, on every GPU, and
/// nvidia_gpu_exporter's trace-verified NVML backend (`internal/nvmlnative/catalog.go`,
/// `deprecatedFields`).
const DEPRECATED_FROM_590: [&str; 6] = [
    "display_mode",
    "power.management",
    "clocks.applications.graphics",
    "clocks.applications.memory",
    "clocks.default_applications.graphics",
    "clocks.default_applications.memory",
];

/// What nvidia-smi prints for a value whose NVML call failed in a way it cannot name:
/// the live values of a GPU whose driver is not responding, which scripts must not take
/// for a GPU that merely lacks the field (or sleeps).
const UNKNOWN_ERROR: &str = "[Unknown Error]";

/// One queryable field.
struct Field {
    names: &'static [&'static str],
    /// `None` for a global.
    gpu: Option<&'static gpupeek_model::Field>,
}

impl Field {
    /// nvidia-smi's unit for the field, in its header and after each value.
    fn unit(&self) -> &'static str {
        match self.gpu.map(|f| f.unit) {
            Some(Unit::Bytes) => "MiB",
            Some(Unit::Percent) => "%",
            Some(Unit::MilliWatts) => "W",
            Some(Unit::MegaHertz) => "MHz",
            Some(Unit::Microseconds) => "us",
            Some(Unit::Milliseconds) => "ms",
            Some(Unit::Seconds) => "seconds",
            Some(Unit::MilliWattsPerSec) => "W/s",
            _ => "",
        }
    }

    /// Whether the field is sampled live, so that a GPU whose driver is not responding
    /// has no value for it (globals and identity are known, or `[N/A]`, in any state).
    fn is_live(&self) -> bool {
        self.gpu.is_some_and(|f| f.tier == Tier::Live)
    }

    /// The value, as nvidia-smi prints it without its unit.
    fn value(&self, c: &Context, g: &Gpu) -> Option<String> {
        let Some(field) = self.gpu else {
            return match self.names[0] {
                "timestamp" => Some(c.timestamp.clone()),
                "driver_version" | "kmd_version" => c.driver_version.clone(),
                "count" => Some(c.count.to_string()),
                _ => None,
            };
        };
        Some(match ((field.get)(g)?, field.unit) {
            (Value::Int(b), Unit::Bytes) => Bytes(b).mib_ceil().to_string(),
            (Value::Int(mw), Unit::MilliWatts) => format!("{:.2}", MilliWatts(mw).watts()),
            // Two decimals, as every power (not yet checked against a capture).
            (Value::Int(mw), Unit::MilliWattsPerSec) => format!("{:.2}", MilliWatts(mw).watts()),
            (Value::Int(x), _) => x.to_string(),
            (Value::Signed(x), _) => x.to_string(),
            (Value::Real(x), _) => x.to_string(),
            // Two decimals, as nvidia-smi prints edpp_multiplier (`100.00 %`).
            (Value::Centi(c), _) => format!("{:.2}", c.pct()),
            (Value::Text(t), _) => t.decode(),
            (Value::Name(n), _) => n.to_owned(),
            (Value::PState(p), _) => p.to_string(),
            (Value::Reasons(r), _) => format!("0x{:016X}", r.0),
            (Value::Hex(x, digits), _) => format!("0x{x:0width$X}", width = digits.into()),
            (Value::Dotted(a, b), _) => format!("{a}.{b}"),
            (Value::Uuid(b), _) => gpupeek_model::fields::uuid_text(&b),
        })
    }
}

/// Facts shared by every GPU line.
struct Context {
    timestamp: String,
    driver_version: Option<String>,
    count: u32,
}

impl Context {
    /// Whether the driver is 590 or later, whose nvidia-smi calls
    /// [`DEPRECATED_FROM_590`] deprecated.
    fn driver_590_or_later(&self) -> bool {
        let major = self
            .driver_version
            .as_deref()
            .and_then(|v| v.split('.').next());
        major
            .and_then(|m| m.parse::<u32>().ok())
            .is_some_and(|m| m >= 590)
    }
}

/// The output options of `--format`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Format {
    header: bool,
    units: bool,
}

fn parse_format(s: &str) -> Result<Format, String> {
    let mut parts = s.split(',').map(str::trim);
    if parts.next() != Some("csv") {
        return Err(format!(
            "\"{s}\" is not a valid format: use csv[,noheader][,nounits]"
        ));
    }
    let mut format = Format {
        header: true,
        units: true,
    };
    for part in parts {
        match part {
            "noheader" => format.header = false,
            "nounits" => format.units = false,
            _ => return Err(format!("\"{part}\" is not a valid format option")),
        }
    }
    Ok(format)
}

/// Looks up every requested field, or gives nvidia-smi's error for the first unknown one.
fn parse_fields(s: &str) -> Result<Vec<Field>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            fields()
                .find(|f| f.names.contains(&name))
                .ok_or_else(|| format!("Field \"{name}\" is not a valid field to query."))
        })
        .collect()
}

/// What a `gpupeek query` prints.
enum What {
    /// `--query-gpu`: a line per GPU.
    Gpus(Vec<Field>),
    /// `--query-compute-apps`: a line per compute process.
    Apps(Vec<(String, smi::AppField)>),
    /// `-L`.
    List,
}

/// Runs `gpupeek query`.
pub fn run(args: Args) -> Result<(), Exit> {
    let usage = |e: String| Exit::new(EXIT_USAGE, e);
    let every = smi::interval(args.loop_s.as_deref(), args.loop_ms.as_deref())?;
    let format = parse_format(&args.format).map_err(usage)?;
    let what = if args.list_gpus {
        What::List
    } else if let Some(apps) = &args.query_compute_apps {
        What::Apps(smi::parse_app_fields(apps).map_err(usage)?)
    } else {
        let fields = parse_fields(&args.query_gpu).map_err(usage)?;
        if fields.is_empty() {
            return Err(Exit::new(EXIT_USAGE, "--query-gpu names no field"));
        }
        What::Gpus(fields)
    };
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    let (segment, snapshot) = live::live_segment(&name)?;
    let block = |snap: &gpupeek_shm::Snapshot| -> Result<String, Exit> {
        let model = Model::new(snap);
        let gpus = select(&model, args.id.as_deref()).map_err(usage)?;
        Ok(match &what {
            What::Gpus(fields) => rows(&model, &gpus, fields, format.units),
            What::Apps(fields) => {
                let now = timestamp(model.status.published_unix_ns);
                smi::apps_lines(&model, &gpus, fields, &now, format.units)
            }
            What::List => smi::list_gpus(&model, &gpus),
        })
    };
    let header = match &what {
        What::Gpus(fields) if format.header => header(fields),
        What::Apps(fields) if format.header => smi::apps_header(fields),
        _ => String::new(),
    };
    crate::write_stdout(&(header + &block(&snapshot)?))?;
    match every {
        Some(every) if !matches!(what, What::List) => {
            smi::repeat(&segment, snapshot.status.heartbeat_mono_ns, every, block)
        }
        _ => Ok(()),
    }
}

/// The GPUs `ids` names (all when `None`), in the order named; a MIG device's UUID
/// names its GPU, as in nvidia-smi's `-i`.
fn select<'a>(model: &'a Model, ids: Option<&str>) -> Result<Vec<&'a Gpu<'a>>, String> {
    let Some(ids) = ids else {
        return Ok(model.gpus.iter().collect());
    };
    ids.split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(|id| {
            model
                .gpus
                .iter()
                .find(|g| {
                    matches_id(g, id)
                        || model
                            .mig_by_uuid(id)
                            .is_some_and(|m| m.gpu_index == g.index)
                })
                .ok_or_else(|| {
                    let have: Vec<String> =
                        model.gpus.iter().map(|g| g.index.to_string()).collect();
                    format!("no GPU matches id \"{id}\" (GPUs: {})", have.join(","))
                })
        })
        .collect()
}

/// An index, a UUID, a PCI bus id (any case, any domain width) or the board's serial
/// number: the forms nvidia-smi's `-i` takes.
fn matches_id(g: &Gpu, id: &str) -> bool {
    if let Ok(index) = id.parse::<u32>() {
        if g.index == index {
            return true;
        }
    }
    if g.uuid.is_some_and(|u| u.decode().eq_ignore_ascii_case(id)) {
        return true;
    }
    if g.details.serial.is_some_and(|s| s.decode() == id) {
        return true;
    }
    g.pci_bus_id
        .is_some_and(|b| normal_bus_id(&b.decode()) == normal_bus_id(id))
}

/// `0000:18:00.0` and `00000000:18:00.0` are the same GPU.
fn normal_bus_id(s: &str) -> Option<(u32, String)> {
    let (domain, rest) = s.split_once(':')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    Some((domain, rest.to_ascii_lowercase()))
}

#[cfg(test)]
fn render(model: &Model, gpus: &[&Gpu], fields: &[Field], format: &Format) -> String {
    let mut out = String::new();
    if format.header {
        out += &header(fields);
    }
    out + &rows(model, gpus, fields, format.units)
}

/// The header line: canonical names, with nvidia-smi's units in brackets.
fn header(fields: &[Field]) -> String {
    let header: Vec<String> = fields
        .iter()
        .map(|f| match f.unit() {
            "" => f.names[0].to_owned(),
            unit => format!("{} [{unit}]", f.names[0]),
        })
        .collect();
    header.join(", ") + "\n"
}

/// A line per GPU.
fn rows(model: &Model, gpus: &[&Gpu], fields: &[Field], units: bool) -> String {
    let mut out = String::new();
    let context = Context {
        timestamp: timestamp(model.status.published_unix_ns),
        driver_version: model.status.driver_version.map(Text::decode),
        count: model.status.gpu_count,
    };
    let from_590 = context.driver_590_or_later();
    for gpu in gpus {
        let values: Vec<String> = fields
            .iter()
            .map(|f| match f.value(&context, gpu) {
                _ if from_590 && DEPRECATED_FROM_590.contains(&f.names[0]) => DEPRECATED.to_owned(),
                None if gpu.not_responding() && f.is_live() => UNKNOWN_ERROR.to_owned(),
                None if f.gpu.is_some_and(|field| field.deprecated(gpu)) => DEPRECATED.to_owned(),
                None if BARE_NOT_AVAILABLE.contains(&f.names[0]) => "N/A".to_owned(),
                None => NOT_AVAILABLE.to_owned(),
                Some(value) if units && !f.unit().is_empty() => {
                    format!("{value} {}", f.unit())
                }
                Some(value) => value,
            })
            .collect();
        out.push_str(&values.join(", "));
        out.push('\n');
    }
    out
}

/// nvidia-smi's timestamp: local time, `2024/05/01 21:30:00.123`.
fn timestamp(unix_ns: u64) -> String {
    let secs = (unix_ns / 1_000_000_000) as i64;
    let nanos = (unix_ns % 1_000_000_000) as u32;
    DateTime::from_timestamp(secs, nanos)
        .unwrap_or_default()
        .with_timezone(&Local)
        .format("%Y/%m/%d %H:%M:%S%.3f")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::layout::{gpu_valid as v, GpuState};
    use gpupeek_shm::{text, GpuRecord};

    #[test]
    fn dash_i_takes_an_index_a_uuid_a_bus_id_or_a_serial_number() {
        use gpupeek_shm::layout::gpu_valid2 as v2;
        let gpu = |index: u32, uuid: &str, bus: &str, serial: &str| {
            let mut g = GpuRecord {
                index,
                state: GpuState::Ok as u32,
                valid: v::UUID | v::PCI_BUS_ID,
                valid2: v2::SERIAL,
                ..GpuRecord::default()
            };
            text::encode(&mut g.uuid, uuid);
            text::encode(&mut g.pci_bus_id, bus);
            text::encode(&mut g.serial, serial);
            g
        };
        let snap = crate::testing::live_snapshot(vec![
            gpu(0, "GPU-aaaa", "00000000:18:00.0", "1654922000001"),
            gpu(1, "GPU-bbbb", "00000000:2A:00.0", "1654922000002"),
        ]);
        let model = Model::new(&snap);
        let picked = |ids: &str| -> Result<Vec<u32>, String> {
            select(&model, Some(ids)).map(|gs| gs.iter().map(|g| g.index).collect())
        };
        assert_eq!(picked("1,0"), Ok(vec![1, 0]));
        assert_eq!(picked("gpu-BBBB"), Ok(vec![1]));
        assert_eq!(picked("0000:2a:00.0"), Ok(vec![1]));
        assert_eq!(picked("1654922000001"), Ok(vec![0]));
        assert!(picked("1654922000003")
            .unwrap_err()
            .contains("no GPU matches"));
    }

    #[test]
    fn format_accepts_nvidia_smi_options_in_any_order() {
        let f = |s| parse_format(s);
        assert_eq!(
            f("csv"),
            Ok(Format {
                header: true,
                units: true
            })
        );
        assert_eq!(
            f("csv,nounits,noheader"),
            Ok(Format {
                header: false,
                units: false
            })
        );
        assert!(f("json").is_err());
        assert_eq!(
            f("csv,noheaders").unwrap_err(),
            "\"noheaders\" is not a valid format option"
        );
    }

    #[test]
    fn aliases_resolve_to_the_canonical_field_and_unknown_fields_error_like_nvidia_smi() {
        let fields = parse_fields("clocks.gr, gpu_name,index").unwrap();
        let names: Vec<&str> = fields.iter().map(|f| f.names[0]).collect();
        assert_eq!(names, ["clocks.current.graphics", "name", "index"]);
        assert_eq!(
            parse_fields("index,cuda_version").err().unwrap(),
            "Field \"cuda_version\" is not a valid field to query."
        );
    }

    /// nvidia-smi rounds each MiB value up: on an H100 80GB HBM3 (590.48.01,
    /// nvidia_gpu_exporter's internal/captures) the 501481472 B reserved print as
    /// `479 MiB`, and `Reserved 479`, `Used 0`, `Free 81081` add up to one more than
    /// `Total 81559`.
    #[test]
    fn power_has_two_decimals_and_memory_rounds_up_to_mib_as_nvidia_smi() {
        let mut g = GpuRecord {
            state: GpuState::Ok as u32,
            valid: v::POWER_DRAW | v::MEMORY | v::MEM_RESERVED,
            power_draw_mw: 123_456,
            mem_total_bytes: 85_520_809_984,
            mem_used_bytes: 0,
            mem_free_bytes: 85_019_328_512,
            mem_reserved_bytes: 501_481_472,
            ..GpuRecord::default()
        };
        let line = |g: &GpuRecord| {
            let snap = crate::testing::live_snapshot(vec![*g]);
            let model = Model::new(&snap);
            let fields =
                parse_fields("power.draw,memory.total,memory.reserved,memory.used,memory.free")
                    .unwrap();
            let format = Format::default();
            render(&model, &[&model.gpus[0]], &fields, &format)
        };
        assert_eq!(line(&g), "123.46, 81559, 479, 0, 81081\n");
        g.power_draw_mw = 700_000;
        g.mem_free_bytes = 1;
        assert_eq!(line(&g), "700.00, 81559, 479, 0, 1\n");
    }

    /// The GPU operation mode in nvidia-smi's words, and a fabric registration that has
    /// not completed yet.
    #[test]
    fn gom_and_a_fabric_registration_in_progress_are_in_nvidia_smis_words() {
        use gpupeek_shm::layout::gpu_valid2 as v2;
        let g = GpuRecord {
            state: GpuState::Ok as u32,
            valid2: v2::GOM | v2::FABRIC,
            gom_current: 1,
            gom_pending: 2,
            fabric_state: 2,
            fabric_status: 0,
            ..GpuRecord::default()
        };
        let snap = crate::testing::live_snapshot(vec![g]);
        let model = Model::new(&snap);
        let fields = parse_fields("gom.current,gom.pending,fabric.state,fabric.status").unwrap();
        let out = render(&model, &[&model.gpus[0]], &fields, &Format::default());
        assert_eq!(out, "Compute, Low Double Precision, In Progress, Success\n");
    }

    /// The values of an H100 as nvidia-smi 590.48.01 prints them (nvidia_gpu_exporter's
    /// `internal/captures/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt`), with a
    /// few changed to show the other words.
    #[test]
    fn nvidia_smi_prints_ids_in_hex_modes_as_words_and_deprecated_values_as_such() {
        use gpupeek_shm::layout::gpu_valid2 as v2;
        let mut g = GpuRecord {
            state: GpuState::Ok as u32,
            valid: v::CLOCK_EVENT_REASONS | v::POWER_LIMIT,
            valid2: v2::PCI_INFO
                | v2::COMPUTE_CAP
                | v2::PERSISTENCE_MODE
                | v2::COMPUTE_MODE
                | v2::CLOCK_EVENT_REASONS_SUPPORTED
                | v2::POWER_LIMIT_RANGE
                | v2::REMAPPED_ROWS
                | v2::ECC_MODE
                | v2::CLOCK_VIDEO,
            deprecated2: v2::DISPLAY_MODE | v2::CLOCK_APP_GRAPHICS,
            clock_event_reasons: 0x1,
            clock_event_reasons_supported: 0x1ff,
            pci_bus: 0,
            pci_device: 9,
            pci_device_id: 0x2330_10DE,
            pci_subsystem_id: 0x16C1_10DE,
            compute_cap_major: 9,
            persistence_mode: 1,
            compute_mode: 3,
            power_limit_mw: 700_000,
            power_min_limit_mw: 200_000,
            power_max_limit_mw: 700_000,
            remapped_rows_pending: 0,
            ecc_mode_current: 1,
            ecc_mode_pending: 0,
            clock_video_mhz: 765,
            ..GpuRecord::default()
        };
        g.valid2 |= v2::SERIAL;
        text::encode(&mut g.serial, "1654922000000");
        let snap = crate::testing::live_snapshot(vec![g]);
        let model = Model::new(&snap);
        let names = "serial,pci.domain,pci.bus,pci.device,pci.device_id,pci.sub_device_id,\
            compute_cap,persistence_mode,compute_mode,display_mode,\
            clocks_event_reasons.supported,clocks_event_reasons.active,\
            clocks_throttle_reasons.gpu_idle,clocks_event_reasons.sw_power_cap,\
            power.limit,power.min_limit,gpu.power.max_limit,power.default_limit,\
            remapped_rows.pending,ecc.mode.current,ecc.mode.pending,clocks.video,\
            clocks.applications.gr,temperature.memory,retired_pages.sbe";
        let fields = parse_fields(names).unwrap();
        let format = Format {
            header: true,
            units: true,
        };
        let out = render(&model, &[&model.gpus[0]], &fields, &format);
        let mut lines = out.lines();
        assert_eq!(
            lines.next().unwrap(),
            "serial, pci.domain, pci.bus, pci.device, pci.device_id, pci.sub_device_id, \
             compute_cap, persistence_mode, compute_mode, display_mode, \
             clocks_event_reasons.supported, clocks_event_reasons.active, \
             clocks_throttle_reasons.gpu_idle, clocks_event_reasons.sw_power_cap, \
             power.limit [W], power.min_limit [W], power.max_limit [W], \
             power.default_limit [W], remapped_rows.pending, ecc.mode.current, \
             ecc.mode.pending, clocks.current.video [MHz], \
             clocks.applications.graphics [MHz], temperature.memory, \
             retired_pages.single_bit_ecc.count"
        );
        assert_eq!(
            lines.next().unwrap(),
            "1654922000000, 0x0000, 0x00, 0x09, 0x233010DE, 0x16C110DE, 9.0, Enabled, \
             Exclusive_Process, [Requested functionality has been deprecated], \
             0x00000000000001FF, 0x0000000000000001, Active, Not Active, 700.00 W, \
             200.00 W, 700.00 W, [N/A], No, Enabled, Disabled, 765 MHz, \
             [Requested functionality has been deprecated], N/A, [N/A]"
        );
    }

    #[test]
    fn bus_ids_match_across_domain_widths_and_case() {
        assert_eq!(
            normal_bus_id("0000:1B:00.0"),
            normal_bus_id("00000000:1b:00.0")
        );
        assert_ne!(normal_bus_id("0000:1B:00.0"), normal_bus_id("0000:1C:00.0"));
        assert_eq!(normal_bus_id("GPU-abc"), None);
    }

    #[test]
    fn help_query_gpu_lists_every_field_name_with_what_it_is() {
        let help = fields_help();
        for f in fields() {
            let names: Vec<String> = f.names.iter().map(|n| format!("{n:?}")).collect();
            let line = names.join(" or ");
            let entry = help
                .split("\n\n")
                .find(|e| e.lines().next() == Some(line.as_str()))
                .unwrap_or_else(|| panic!("--help-query-gpu does not list {line}"));
            assert_eq!(entry.lines().count(), 2, "{entry:?}");
            assert!(entry.ends_with(".\n") || entry.ends_with('.'), "{entry:?}");
        }
        let parsed = crate::cli::parse(["query", "--help-query-gpu"].map(String::from).to_vec());
        assert!(matches!(parsed, Ok(crate::cli::Invocation::Print(text)) if text == help));
    }

    #[test]
    fn a_gpu_whose_driver_is_not_responding_keeps_its_identity_and_errs_on_live_values() {
        let mut hung = GpuRecord {
            index: 1,
            state: GpuState::NotResponding as u32,
            valid: v::NAME | v::CLOCK_SM_MAX | v::UTILIZATION,
            clock_sm_max_mhz: 1980,
            util_gpu_pct: 0,
            ..GpuRecord::default()
        };
        text::encode(&mut hung.name, "H100");
        let snap = crate::testing::live_snapshot(vec![hung]);
        let model = Model::new(&snap);
        let gpus: Vec<&Gpu> = model.gpus.iter().collect();
        let fields =
            parse_fields("index,name,uuid,clocks.max.sm,utilization.gpu,memory.used").unwrap();
        let format = Format {
            header: false,
            units: true,
        };
        assert_eq!(
            render(&model, &gpus, &fields, &format),
            "1, H100, [N/A], 1980 MHz, [Unknown Error], [Unknown Error]\n"
        );
    }

    #[test]
    fn every_field_name_is_unique() {
        let mut names: Vec<&str> = fields().flat_map(|f| f.names.iter().copied()).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    /// The lists of fields nvidia-smi prints its own way name canonical fields, so a
    /// misspelt or renamed one cannot silently print the ordinary way.
    #[test]
    fn the_fields_printed_specially_are_canonical_names() {
        let canonical: Vec<&str> = fields().map(|f| f.names[0]).collect();
        for name in BARE_NOT_AVAILABLE.iter().chain(&DEPRECATED_FROM_590) {
            assert!(canonical.contains(name), "{name}");
        }
    }
}
