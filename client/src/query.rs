//! `gpupeek query`: nvidia-smi's `--query-gpu=FIELDS --format=csv` for the fields that
//! status-bar scripts and cluster tools read, printed the way nvidia-smi prints them, so a
//! script can switch from `nvidia-smi` to `gpupeek query` without a driver call.
//!
//! Output: a header line of the canonical field names with their units in brackets
//! (`memory.used [MiB]`, even with `nounits`, as nvidia-smi does) unless `noheader`, then
//! one line per GPU, values joined by `", "`. Values carry their unit (`45 %`, `1234 MiB`,
//! `123.45 W`, `1410 MHz`) unless `nounits`. A value the GPU does not report, and every
//! live value of a GPU that is lost, failing or suspended, is `[N/A]`; every live value of
//! a GPU whose driver is not responding is `[Unknown Error]`, nvidia-smi's text for a call
//! that failed, while its identity and maximum clocks are kept. Memory is in MiB
//! rounded down, power in watts with two decimals, clocks in MHz. `power.limit` and
//! `enforced.power.limit` both print the enforced limit, the one gpupeekd publishes.
//! An unknown field is nvidia-smi's one-line error and exit status 2.

use argh::FromArgs;
use chrono::{DateTime, Local};
use gpupeek_model::{Bytes, Gpu, MegaHertz, MilliWatts, Model, Text};

use crate::{live, Exit, EXIT_USAGE};

/// Query GPU fields by nvidia-smi's names and print them as nvidia-smi's CSV.
#[derive(FromArgs, Debug)]
#[argh(
    note = "Fields (aliases in parentheses): timestamp, driver_version, count, \
name (gpu_name), uuid (gpu_uuid), pci.bus_id (gpu_bus_id), index, pstate, fan.speed, \
memory.total, memory.reserved, memory.used, memory.free, utilization.gpu, \
utilization.memory, utilization.encoder, utilization.decoder, temperature.gpu, \
power.draw, power.limit, enforced.power.limit, clocks.current.graphics (clocks.gr), \
clocks.current.sm (clocks.sm), clocks.current.memory (clocks.mem), clocks.max.graphics \
(clocks.max.gr), clocks.max.sm, clocks.max.memory (clocks.max.mem), \
clocks_event_reasons.active, clocks_throttle_reasons.active, pcie.link.gen.current, \
pcie.link.width.current, ecc.errors.corrected.volatile.total, \
ecc.errors.uncorrected.volatile.total.\n\n\
Example: gpupeek query --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader"
)]
pub struct Args {
    /// comma-separated fields, e.g. index,name,memory.used,utilization.gpu
    #[argh(option)]
    pub query_gpu: String,

    /// output format: csv, optionally followed by ",noheader" and/or ",nounits" (default csv)
    #[argh(option, default = "String::from(\"csv\")")]
    pub format: String,

    /// only these GPUs: comma-separated indices, UUIDs or PCI bus ids
    #[argh(option, short = 'i')]
    pub id: Option<String>,

    /// shared-memory segment name (default: $GPUPEEK_SHM, else "gpupeek")
    #[argh(option)]
    pub shm: Option<String>,
}

/// Every field: names (the first is canonical and goes in the header), unit, and value.
const FIELDS: &[Field] = &[
    field(&["timestamp"], "", |c, _| Some(c.timestamp.clone())),
    field(&["driver_version"], "", |c, _| c.driver_version.clone()),
    field(&["count"], "", |c, _| Some(c.count.to_string())),
    field(&["name", "gpu_name"], "", |_, g| text(g.name)),
    field(&["uuid", "gpu_uuid"], "", |_, g| text(g.uuid)),
    field(&["pci.bus_id", "gpu_bus_id"], "", |_, g| text(g.pci_bus_id)),
    field(&["index"], "", |_, g| Some(g.index.to_string())),
    field(&["pstate"], "", |_, g| g.pstate.map(|p| format!("P{p}"))),
    field(&["fan.speed"], "%", |_, g| show(g.fan_pct)),
    field(&["memory.total"], "MiB", |_, g| {
        mib(g.memory.map(|m| m.total))
    }),
    field(&["memory.reserved"], "MiB", |_, g| mib(g.mem_reserved)),
    field(&["memory.used"], "MiB", |_, g| {
        mib(g.memory.map(|m| m.used))
    }),
    field(&["memory.free"], "MiB", |_, g| {
        mib(g.memory.map(|m| m.free))
    }),
    field(&["utilization.gpu"], "%", |_, g| show(g.util_pct)),
    field(&["utilization.memory"], "%", |_, g| show(g.util_mem_pct)),
    field(&["utilization.encoder"], "%", |_, g| show(g.util_enc_pct)),
    field(&["utilization.decoder"], "%", |_, g| show(g.util_dec_pct)),
    field(&["temperature.gpu"], "", |_, g| show(g.temp_c)),
    field(&["power.draw"], "W", |_, g| watts(g.power_draw)),
    field(&["power.limit"], "W", |_, g| watts(g.power_limit)),
    field(&["enforced.power.limit"], "W", |_, g| watts(g.power_limit)),
    field(&["clocks.current.graphics", "clocks.gr"], "MHz", |_, g| {
        mhz(g.clock.graphics)
    }),
    field(&["clocks.current.sm", "clocks.sm"], "MHz", |_, g| {
        mhz(g.clock.sm)
    }),
    field(&["clocks.current.memory", "clocks.mem"], "MHz", |_, g| {
        mhz(g.clock.mem)
    }),
    field(&["clocks.max.graphics", "clocks.max.gr"], "MHz", |_, g| {
        mhz(g.clock_max.graphics)
    }),
    field(&["clocks.max.sm"], "MHz", |_, g| mhz(g.clock_max.sm)),
    field(&["clocks.max.memory", "clocks.max.mem"], "MHz", |_, g| {
        mhz(g.clock_max.mem)
    }),
    field(&["clocks_event_reasons.active"], "", |_, g| reasons(g)),
    field(&["clocks_throttle_reasons.active"], "", |_, g| reasons(g)),
    field(&["pcie.link.gen.current"], "", |_, g| show(g.pcie_link_gen)),
    field(&["pcie.link.width.current"], "", |_, g| {
        show(g.pcie_link_width)
    }),
    field(&["ecc.errors.corrected.volatile.total"], "", |_, g| {
        show(g.ecc_corrected)
    }),
    field(&["ecc.errors.uncorrected.volatile.total"], "", |_, g| {
        show(g.ecc_uncorrected)
    }),
];

/// What nvidia-smi prints for a value it cannot give.
const NOT_AVAILABLE: &str = "[N/A]";

/// What nvidia-smi prints for a value whose NVML call failed in a way it cannot name:
/// the live values of a GPU whose driver is not responding, which scripts must not take
/// for a GPU that merely lacks the field (or sleeps).
const UNKNOWN_ERROR: &str = "[Unknown Error]";

/// Fields that are not sampled live: known, or `[N/A]`, whatever state the GPU is in.
const KEPT: &[&str] = &[
    "timestamp",
    "driver_version",
    "count",
    "name",
    "uuid",
    "pci.bus_id",
    "index",
    "clocks.max.graphics",
    "clocks.max.sm",
    "clocks.max.memory",
];

type Getter = fn(&Context, &Gpu) -> Option<String>;

/// One queryable field.
struct Field {
    names: &'static [&'static str],
    unit: &'static str,
    get: Getter,
}

const fn field(names: &'static [&'static str], unit: &'static str, get: Getter) -> Field {
    Field { names, unit, get }
}

/// Facts shared by every GPU line.
struct Context {
    timestamp: String,
    driver_version: Option<String>,
    count: u32,
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
fn parse_fields(s: &str) -> Result<Vec<&'static Field>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            FIELDS
                .iter()
                .find(|f| f.names.contains(&name))
                .ok_or_else(|| format!("Field \"{name}\" is not a valid field to query."))
        })
        .collect()
}

/// Runs `gpupeek query`.
pub fn run(args: Args) -> Result<(), Exit> {
    let fields = parse_fields(&args.query_gpu).map_err(|e| Exit::new(EXIT_USAGE, e))?;
    if fields.is_empty() {
        return Err(Exit::new(EXIT_USAGE, "--query-gpu names no field"));
    }
    let format = parse_format(&args.format).map_err(|e| Exit::new(EXIT_USAGE, e))?;
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    let snapshot = live::live_snapshot(&name)?;
    let model = Model::new(&snapshot);
    let gpus = select(&model, args.id.as_deref()).map_err(|e| Exit::new(EXIT_USAGE, e))?;
    crate::write_stdout(&render(&model, &gpus, &fields, &format))
}

/// The GPUs `ids` names (all when `None`), in the order named.
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
                .find(|g| matches_id(g, id))
                .ok_or_else(|| {
                    let have: Vec<String> =
                        model.gpus.iter().map(|g| g.index.to_string()).collect();
                    format!("no GPU matches id \"{id}\" (GPUs: {})", have.join(","))
                })
        })
        .collect()
}

/// An index, a UUID, or a PCI bus id (any case, any domain width).
fn matches_id(g: &Gpu, id: &str) -> bool {
    if let Ok(index) = id.parse::<u32>() {
        return g.index == index;
    }
    if g.uuid.is_some_and(|u| u.decode().eq_ignore_ascii_case(id)) {
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

fn render(model: &Model, gpus: &[&Gpu], fields: &[&Field], format: &Format) -> String {
    let mut out = String::new();
    if format.header {
        let header: Vec<String> = fields
            .iter()
            .map(|f| match f.unit {
                "" => f.names[0].to_owned(),
                unit => format!("{} [{unit}]", f.names[0]),
            })
            .collect();
        out.push_str(&header.join(", "));
        out.push('\n');
    }
    let context = Context {
        timestamp: timestamp(model.status.published_unix_ns),
        driver_version: text(model.status.driver_version),
        count: model.status.gpu_count,
    };
    for gpu in gpus {
        let values: Vec<String> = fields
            .iter()
            .map(|f| match (f.get)(&context, gpu) {
                None if gpu.not_responding() && !KEPT.contains(&f.names[0]) => {
                    UNKNOWN_ERROR.to_owned()
                }
                None => NOT_AVAILABLE.to_owned(),
                Some(value) if format.units && !f.unit.is_empty() => {
                    format!("{value} {}", f.unit)
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

fn text(t: Option<Text>) -> Option<String> {
    t.map(Text::decode)
}

fn show(x: Option<impl ToString>) -> Option<String> {
    x.map(|x| x.to_string())
}

fn mib(bytes: Option<Bytes>) -> Option<String> {
    show(bytes.map(Bytes::mib))
}

fn watts(p: Option<MilliWatts>) -> Option<String> {
    p.map(|p| format!("{:.2}", p.watts()))
}

fn mhz(c: Option<MegaHertz>) -> Option<String> {
    show(c.map(|c| c.0))
}

fn reasons(g: &Gpu) -> Option<String> {
    g.clock_event_reasons.map(|r| format!("{:#018x}", r.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::layout::{gpu_valid as v, GpuState};
    use gpupeek_shm::{text, GpuRecord};

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

    #[test]
    fn power_has_two_decimals_and_memory_rounds_down_to_mib() {
        let w = |mw| watts(Some(MilliWatts(mw))).unwrap();
        assert_eq!(w(123_456), "123.46");
        assert_eq!(w(700_000), "700.00");
        let m = |b| mib(Some(Bytes(b))).unwrap();
        assert_eq!(m(85_520_809_984), "81559");
        assert_eq!(m((1 << 20) - 1), "0");
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
    fn help_lists_every_field_name() {
        let help = Args::from_args(&["gpupeek", "query"], &["--help"])
            .unwrap_err()
            .output
            .replace('\n', " ");
        for name in FIELDS.iter().flat_map(|f| f.names.iter()) {
            assert!(
                help.contains(&format!(" {name},"))
                    || help.contains(&format!(" {name} "))
                    || help.contains(&format!("({name})"))
                    || help.contains(&format!(" {name}."))
                    || help.contains(&format!("({name}),")),
                "--help does not list {name}"
            );
        }
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
    fn kept_fields_are_field_names() {
        for name in KEPT {
            assert!(FIELDS.iter().any(|f| f.names[0] == *name), "{name}");
        }
    }

    #[test]
    fn every_field_name_is_unique() {
        let mut names: Vec<&str> = FIELDS
            .iter()
            .flat_map(|f| f.names.iter().copied())
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
