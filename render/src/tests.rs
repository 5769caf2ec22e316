use super::*;
use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{GpuRecord, StatusRecord};

const GIB: u64 = 1 << 30;

fn gpu(index: u32, util: u32, used_gib: u64, temp: i32, power_mw: u32) -> GpuRecord {
    let mut g = GpuRecord {
        index,
        state: GpuState::Ok as u32,
        valid: v::NAME | v::MEMORY | v::UTILIZATION | v::TEMPERATURE | v::POWER_DRAW,
        util_gpu_pct: util,
        mem_used_bytes: used_gib * GIB,
        mem_total_bytes: 80 * GIB,
        temp_gpu_c: temp,
        power_draw_mw: power_mw,
        ..GpuRecord::default()
    };
    g.name[..4].copy_from_slice(b"H100");
    g
}

fn render(template: &str, gpus: &[GpuRecord]) -> Rendered {
    let gpus: Vec<Gpu> = gpus.iter().map(Gpu::new).collect();
    let status = StatusRecord::default();
    let data = Data {
        gpus: &gpus,
        status: Status::new(&status),
        history: &[],
        mig: &[],
    };
    Template::parse(template)
        .unwrap_or_else(|e| panic!("{}", e.describe(template)))
        .render(&data, &Brackets)
}

/// Shows each painted value with its level, so tests can see which were painted.
struct Brackets;

impl Markup for Brackets {
    fn paint(&self, level: Level, text: &str) -> String {
        format!("<{}:{text}>", level.name())
    }
}

fn two() -> Vec<GpuRecord> {
    vec![gpu(0, 40, 10, 60, 100_500), gpu(1, 80, 30, 85, 250_000)]
}

#[test]
fn per_gpu_fields_by_index_with_default_units() {
    let r = render("{0.mem_used} MiB, {1.util}%, {1.power} W, {0.name}", &two());
    assert_eq!(r.text, "10240 MiB, 80%, 250 W, H100");
    assert_eq!(r.level, Level::Ok);
}

#[test]
fn units_and_precision_convert_the_number_only() {
    let r = render(
        "{0.mem_used:GiB:.1} {1.mem_used:GiB} {0.power:kW:.3} {0.temp:F}",
        &two(),
    );
    assert_eq!(r.text, "10.0 30.0 0.101 140");
    let r = render("{0.mem_used:auto} {0.mem_total:auto:.0}", &two());
    assert_eq!(r.text, "10.0GiB 80GiB");
}

#[test]
fn unqualified_fields_outside_a_block_take_their_natural_aggregate() {
    let r = render(
        "{util}% {mem_used:GiB:.0}/{mem_total:GiB:.0} {temp} {count}",
        &two(),
    );
    assert_eq!(r.text, "60% 40/160 85 2");
}

#[test]
fn named_aggregates_apply_to_any_numeric_field() {
    let r = render(
        "{sum.util} {max.util} {min.util} {mean.power:.1} {avg.temp}",
        &two(),
    );
    assert_eq!(r.text, "120 80 40 175.2 72");
}

#[test]
fn each_repeats_the_body_per_gpu_with_a_separator() {
    let r = render("[{each \" | \"}{index}:{util}%{end}]", &two());
    assert_eq!(r.text, "[0:40% | 1:80%]");
    let r = render("{each}{index}{end}", &two());
    assert_eq!(r.text, "01");
}

#[test]
fn thresholds_paint_values_and_raise_the_line_level() {
    let r = render("{each ' '}{util!50,75}{end}", &two());
    assert_eq!(r.text, "<ok:40> <critical:80>");
    assert_eq!(r.level, Level::Critical);
    let r = render("{0.temp!55,90}", &two());
    assert_eq!((r.text.as_str(), r.level), ("<warning:60>", Level::Warning));
    // Lower is worse: free memory below 60 GiB warns.
    let r = render(
        "{1.mem_free:GiB:.0!<60,10}",
        &[gpu(0, 0, 0, 0, 0), {
            let mut g = gpu(1, 0, 30, 0, 0);
            g.mem_free_bytes = 50 * GIB;
            g
        }],
    );
    assert_eq!(r.text, "<warning:50>");
}

#[test]
fn braces_escape_by_doubling() {
    assert_eq!(render("{{{0.util}}}", &two()).text, "{40}");
}

#[test]
fn missing_values_and_asleep_gpus_show_na_and_are_skipped_by_aggregates() {
    let mut gpus = two();
    gpus[0].valid &= !v::TEMPERATURE;
    gpus[1].state = GpuState::Suspended as u32;
    let r = render("{0.temp} {1.util} {1.name} {util} {0.fan}", &gpus);
    assert_eq!(r.text, "N/A N/A H100 40 N/A");
    gpus[0].state = GpuState::Idle as u32;
    assert_eq!(render("{util} {sum.mem_used}", &gpus).text, "N/A N/A");
}

#[test]
fn a_gpu_whose_driver_is_not_responding_shows_only_its_identity() {
    let mut gpus = two();
    // Whatever the record still holds, nothing of it is current.
    gpus[1].state = GpuState::NotResponding as u32;
    let r = render(
        "{1.util} {1.name} {1.state} {util} {sum.mem_used:GiB}",
        &gpus,
    );
    assert_eq!(r.text, "N/A H100 not responding 40 10.0");
}

#[test]
fn a_line_names_the_gpus_that_are_not_responding() {
    let mut gpus = two();
    let note = |gpus: &[GpuRecord]| {
        let list: Vec<Gpu> = gpus.iter().map(Gpu::new).collect();
        let mut out = String::from("40%");
        let any = note_not_responding(&list, &Brackets, &mut out);
        (any, out, none_responding(&list))
    };
    assert_eq!(note(&gpus), (false, "40%".into(), false));
    gpus[1].state = GpuState::NotResponding as u32;
    assert_eq!(
        note(&gpus),
        (true, "40% <critical:[GPU 1 not responding]>".into(), false)
    );
    gpus[0].state = GpuState::Suspended as u32;
    assert_eq!(
        note(&gpus),
        (true, "40% <critical:[GPU 1 not responding]>".into(), true),
        "asleep and hung: nothing is awake"
    );
    gpus[0].state = GpuState::NotResponding as u32;
    assert_eq!(note(&gpus).1, "40% <critical:[GPU 0,1 not responding]>");
    assert!(!none_responding(&[]), "no GPU is not a hung GPU");
}

#[test]
fn errors_point_at_the_column() {
    let e = Template::parse("GPU {0.mem_usd}").unwrap_err();
    assert_eq!(e.column, 8);
    assert!(
        e.message.contains("unknown field \"mem_usd\""),
        "{}",
        e.message
    );
    assert!(e
        .describe("GPU {0.mem_usd}")
        .ends_with("\n  GPU {0.mem_usd}\n         ^"));
    let col = |t: &str| Template::parse(t).unwrap_err().column;
    assert_eq!(col("{util:GiB}"), 7, "a unit of another dimension");
    assert_eq!(col("ab {util"), 4, "unclosed brace");
    assert_eq!(col("a}"), 2, "stray closing brace");
    assert_eq!(col("{x.util}"), 2, "bad scope");
    assert_eq!(col("{util:.x}"), 7, "bad precision");
    assert_eq!(col("{util!a}"), 7, "bad threshold");
    assert_eq!(col("{each}{util}"), 1, "unclosed block");
    assert_eq!(col("{end}"), 1, "end without each");
    assert_eq!(col("{each}{each}{end}{end}"), 7, "nested blocks");
    assert_eq!(col("{name!5}"), 2, "threshold on text");
    assert_eq!(col("{}"), 2, "empty placeholder");
}

#[test]
fn thresholds_whose_critical_comes_before_warning_or_that_are_not_numbers_are_errors() {
    for bad in [
        "{util!90,70}",
        "{util!<10,20}",
        "{util!nan}",
        "{util!70,inf}",
    ] {
        let e = Template::parse(bad).unwrap_err();
        assert_eq!(e.column, 7, "{bad}");
        assert!(
            e.message.starts_with("bad threshold"),
            "{bad}: {}",
            e.message
        );
    }
    let e = Template::parse("{util!90,70}").unwrap_err();
    assert!(
        e.message
            .contains("critical 70 must be at or above warning 90"),
        "{}",
        e.message
    );
    for good in ["{util!70,90}", "{util!<20,10}", "{util!80,80}", "{util!80}"] {
        assert!(Template::parse(good).is_ok(), "{good}");
    }
}

#[test]
fn a_mig_scope_shows_that_instance_and_na_for_one_that_is_not_there() {
    let parent = gpu(0, 0, 9, 45, 0);
    let parent = Gpu::new(&parent);
    let mut instance = parent;
    instance.util_pct = None;
    instance.memory = Some(gpupeek_model::Memory {
        total: gpupeek_model::Bytes(10 * GIB),
        used: gpupeek_model::Bytes(2 * GIB),
        free: gpupeek_model::Bytes(8 * GIB),
    });
    let mig = [MigGpu {
        gpu_index: 0,
        gpu_instance_id: 13,
        gpu: instance,
    }];
    let status = StatusRecord::default();
    let data = Data {
        gpus: std::slice::from_ref(&parent),
        status: Status::new(&status),
        history: &[],
        mig: &mig,
    };
    let render = |t: &str| Template::parse(t).unwrap().render(&data, &Plain).text;
    assert_eq!(
        render("{0.gi13.mem_used:GiB:.0}/{0.gi13.mem_total:GiB:.0} {0.gi13.util} {0.gi13.temp}"),
        "2/10 N/A 45"
    );
    assert_eq!(
        render("{0.gi2.mem_used} {0.gi13.mem_used:spark}"),
        "N/A N/A"
    );
    assert_eq!(render("{0.mem_used:GiB:.0}"), "9");
    for (bad, col) in [
        ("{0.gi.util}", 4),
        ("{sum.gi1.util}", 2),
        ("{0.gi1.nope}", 8),
    ] {
        let e = Template::parse(bad).unwrap_err();
        assert_eq!(e.column, col, "{bad}: {}", e.message);
    }
}
