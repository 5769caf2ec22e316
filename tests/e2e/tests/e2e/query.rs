//! `gpupeek query`: nvidia-smi's `--query-gpu ... --format=csv` output, byte for byte.
//!
//! The expected lines are what nvidia-smi prints for a GPU reporting these values. Its
//! formats, as seen in real output: `index, name, ..., memory.total [MiB], ...` headers
//! with units in brackets (kept by `nounits`); `16280 MiB`, `10 %`, `24.80 W`,
//! `250.00 W`, `405 MHz`, `P0`, a bare temperature (`25`), `[N/A]` for a value the GPU
//! does not report, timestamps like `2024/05/01 21:30:00.000`, and for an unknown field
//! `Field "cuda_version" is not a valid field to query.`

use gpupeek_e2e::{stderr, stdout, Daemon, Sandbox};
use serde_json::json;

const GIB: u64 = 1 << 30;

/// GPU 0 reports everything nvidia-smi would show for an H100 (no fan); GPU 1 was
/// sampled once and is now lost.
fn live() -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new("query");
    let mut scenario = json!({
        "driver_version": "550.54.15",
        "gpus": [
            {
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:1B:00.0",
                "memory_total_bytes": 85520809984u64, "memory_reserved_bytes": 566755328,
                "memory_used_bytes": 10 * GIB,
                "utilization_gpu_pct": 45, "utilization_memory_pct": 12, "temperature_c": 41,
                "power_usage_mw": 123456, "power_limit_mw": 700000,
                "encoder_utilization_pct": 0, "decoder_utilization_pct": 7,
                "clocks_mhz": {"graphics": 1755, "sm": 1755, "memory": 2619},
                "max_clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
                "pstate": 0, "clock_event_reasons": 4, "pcie_link_gen": 5, "pcie_link_width": 16,
                "ecc_corrected_volatile": 3, "ecc_uncorrected_volatile": 0
            },
            {
                "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-77777777-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:1C:00.0", "memory_total_bytes": 42949672960u64,
                "max_clocks_mhz": {"graphics": 1410, "sm": 1410, "memory": 1215}
            }
        ]
    });
    sandbox.write_scenario(&scenario);
    let daemon = sandbox.start_daemon("50ms");
    let generation = sandbox.wait_live(&daemon);
    scenario["gpus"][1]["errors"] = json!({"*": "GPU_IS_LOST"});
    sandbox.write_scenario(&scenario);
    gpupeek_e2e::wait_for("GPU 1 lost", &daemon, || {
        let snap = sandbox.segment().snapshot().unwrap();
        snap.generation > generation && snap.gpus[1].state == gpupeek_shm::GpuState::Lost as u32
    });
    (sandbox, daemon)
}

fn query(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(&gpupeek_e2e::bins().client);
    cmd.arg("query").arg("--shm").arg(&sandbox.shm).args(args);
    let out = gpupeek_e2e::run_with_watchdog(cmd);
    (out.status.code(), stdout(&out), stderr(&out))
}

const ALL: &str = "index,name,uuid,pci.bus_id,driver_version,count,pstate,fan.speed,\
memory.total,memory.reserved,memory.used,memory.free,utilization.gpu,utilization.memory,\
utilization.encoder,utilization.decoder,temperature.gpu,power.draw,power.limit,\
enforced.power.limit,clocks.gr,clocks.sm,clocks.mem,clocks.max.gr,clocks.max.sm,\
clocks.max.mem,pcie.link.gen.current,pcie.link.width.current,clocks_event_reasons.active,\
ecc.errors.corrected.volatile.total";

/// MiB are rounded up, each on its own: the 540.5 MiB reserved print as 541 and the
/// 70778.5 MiB free as 70779, so reserved, used and free add up to one more than the
/// total, as on the H100 80GB HBM3 of nvidia_gpu_exporter's internal/captures
/// (590.48.01: `Total 81559 MiB`, `Reserved 479 MiB`, `Used 0 MiB`, `Free 81081 MiB`).
#[test]
fn every_field_prints_as_nvidia_smi_prints_it() {
    let (sandbox, _daemon) = live();
    let (code, out, err) = query(&sandbox, &[&format!("--query-gpu={ALL}"), "--format=csv"]);
    assert_eq!(code, Some(0), "{err}");
    let expected = "\
index, name, uuid, pci.bus_id, driver_version, count, pstate, fan.speed [%], \
memory.total [MiB], memory.reserved [MiB], memory.used [MiB], memory.free [MiB], \
utilization.gpu [%], utilization.memory [%], utilization.encoder [%], \
utilization.decoder [%], temperature.gpu, power.draw [W], power.limit [W], \
enforced.power.limit [W], clocks.current.graphics [MHz], clocks.current.sm [MHz], \
clocks.current.memory [MHz], clocks.max.graphics [MHz], clocks.max.sm [MHz], \
clocks.max.memory [MHz], pcie.link.gen.current, pcie.link.width.current, \
clocks_event_reasons.active, ecc.errors.corrected.volatile.total
0, NVIDIA H100 80GB HBM3, GPU-11111111-2222-3333-4444-555555555555, 00000000:1B:00.0, \
550.54.15, 2, P0, [N/A], 81559 MiB, 541 MiB, 10240 MiB, 70779 MiB, 45 %, 12 %, 0 %, 7 %, \
41, 123.46 W, 700.00 W, 700.00 W, 1755 MHz, 1755 MHz, 2619 MHz, 1980 MHz, 1980 MHz, \
2619 MHz, 5, 16, 0x0000000000000004, 3
1, NVIDIA A100-SXM4-40GB, GPU-77777777-2222-3333-4444-555555555555, 00000000:1C:00.0, \
550.54.15, 2, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], \
[N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], 1410 MHz, 1410 MHz, 1215 MHz, [N/A], \
[N/A], [N/A], [N/A]
";
    assert_eq!(out, expected);
}

#[test]
fn noheader_and_nounits_give_bare_values_as_scripts_parse_them() {
    let (sandbox, _daemon) = live();
    let fields = "--query-gpu=index,memory.used,memory.total,utilization.gpu,power.draw,clocks.sm";
    let (code, out, _) = query(&sandbox, &[fields, "--format=csv,noheader,nounits"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        "0, 10240, 81559, 45, 123.46, 1755\n1, [N/A], [N/A], [N/A], [N/A], [N/A]\n"
    );
    // nounits keeps the units in the header, as nvidia-smi does.
    let (_, out, _) = query(
        &sandbox,
        &["--query-gpu", "memory.used", "--format", "csv,nounits"],
    );
    assert_eq!(out, "memory.used [MiB]\n10240\n[N/A]\n");
    let (_, out, _) = query(
        &sandbox,
        &["--query-gpu=gpu_name,gpu_bus_id", "--format=csv,noheader"],
    );
    assert_eq!(
        out,
        "NVIDIA H100 80GB HBM3, 00000000:1B:00.0\nNVIDIA A100-SXM4-40GB, 00000000:1C:00.0\n"
    );
}

#[test]
fn id_selects_gpus_by_index_uuid_or_bus_id_in_the_order_given() {
    let (sandbox, _daemon) = live();
    let q = ["--query-gpu=index,count", "--format=csv,noheader"];
    for id in [
        "1,0",
        "GPU-77777777-2222-3333-4444-555555555555,0",
        "0000:1c:00.0,00000000:1B:00.0",
    ] {
        let (code, out, err) = query(&sandbox, &[q[0], q[1], "-i", id]);
        assert_eq!(
            (code, out.as_str()),
            (Some(0), "1, 2\n0, 2\n"),
            "-i {id}: {err}"
        );
    }
    let (code, out, _) = query(&sandbox, &[q[0], q[1], "--id=0"]);
    assert_eq!((code, out.as_str()), (Some(0), "0, 2\n"));
    let (code, out, err) = query(&sandbox, &[q[0], q[1], "-i", "7"]);
    assert_eq!(code, Some(2));
    assert_eq!(out, "");
    assert_eq!(err, "gpupeek: no GPU matches id \"7\" (GPUs: 0,1)\n");
}

#[test]
fn an_unknown_field_or_format_is_a_one_line_usage_error() {
    let (sandbox, _daemon) = live();
    let (code, out, err) = query(
        &sandbox,
        &["--query-gpu=index,cuda_version", "--format=csv"],
    );
    assert_eq!(code, Some(2));
    assert_eq!(out, "");
    assert_eq!(
        err,
        "gpupeek: Field \"cuda_version\" is not a valid field to query.\n"
    );
    let (code, _, err) = query(&sandbox, &["--query-gpu=index", "--format=xml"]);
    assert_eq!(code, Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, _, err) = query(&sandbox, &["--format=csv"]);
    assert_eq!(code, Some(2), "--query-gpu is required: {err}");
}

#[test]
fn timestamp_is_local_time_with_milliseconds() {
    let (sandbox, _daemon) = live();
    let (code, out, _) = query(
        &sandbox,
        &[
            "--query-gpu=timestamp,index",
            "--format=csv,noheader",
            "-i",
            "0",
        ],
    );
    assert_eq!(code, Some(0));
    let (stamp, rest) = out.split_once(", ").unwrap();
    assert_eq!(rest, "0\n");
    let shape: String = stamp
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert_eq!(shape, "9999/99/99 99:99:99.999", "{stamp}");
}

#[test]
fn without_a_daemon_query_fails_like_every_client() {
    let sandbox = Sandbox::new("query-nodaemon");
    let (code, out, err) = query(&sandbox, &["--query-gpu=index", "--format=csv"]);
    assert_eq!(code, Some(3), "{err}");
    assert_eq!(out, "");
}
