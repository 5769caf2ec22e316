//! gpupeekd's prompt file (`--prompt-file`, `--prompt-format`): the same text as
//! `gpupeek --format` for the same records, following changes within a tick or two,
//! replaced atomically (a reader in a tight loop never sees a partial line), never
//! written through a planted symlink, a stopped daemon's line that cannot pass for
//! values (written by `--prompt-stopped` for a daemon that was killed), and a bad
//! template refused in one line before anything is created.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use gpupeek_e2e::{
    assert_one_line_failure, run_with_watchdog, stderr, stdout, wait_for, Daemon, Sandbox,
};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;
const TEMPLATE: &str = "GPU {util!70,90}% {mem_used:GiB:.1}/{mem_total:GiB:.0}G {max.temp}C \
                        [{each ' | '}{index}:{name}{end}] {power:W:.1}W";

/// Two GPUs; the first one `util` percent busy.
fn two_gpus(util: u32) -> Value {
    json!({"gpus": [
        {"name": "NVIDIA H100", "memory_total_bytes": 80 * GIB, "memory_used_bytes": 10 * GIB,
         "utilization_gpu_pct": util, "utilization_memory_pct": 1, "temperature_c": 41,
         "power_usage_mw": 123_400},
        {"name": "NVIDIA A100", "memory_total_bytes": 40 * GIB, "memory_used_bytes": 30 * GIB,
         "utilization_gpu_pct": 95, "utilization_memory_pct": 1, "temperature_c": 85,
         "power_usage_mw": 250_000}
    ]})
}

fn prompt_path(sb: &Sandbox) -> PathBuf {
    sb.dir.join("run/prompt")
}

/// A daemon writing the prompt file with `flags` (after `--prompt-file PATH`).
fn start(sb: &Sandbox, interval: &str, flags: &[&str]) -> Daemon {
    std::fs::create_dir_all(sb.dir.join("run")).unwrap();
    let path = prompt_path(sb);
    let mut all = vec!["--prompt-file", path.to_str().unwrap()];
    all.extend_from_slice(flags);
    sb.start_daemon_with(interval, &all)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn prompt_file_holds_what_gpupeek_format_prints_and_follows_changes_within_two_ticks() {
    let sb = Sandbox::new("pf-same");
    sb.write_scenario(&two_gpus(45));
    let daemon = start(&sb, "100ms", &["--prompt-format", TEMPLATE]);
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 1);
    let client = stdout(&sb.client(&["--format", TEMPLATE]));
    assert_eq!(
        client,
        "GPU 70% 40.0/120G 85C [0:NVIDIA H100 | 1:NVIDIA A100] 373.4W\n"
    );
    assert_eq!(read(&prompt_path(&sb)), client);
    let meta = std::fs::metadata(prompt_path(&sb)).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o644
    );

    sb.write_scenario(&two_gpus(5));
    // Tick n+1 may have sampled before the change; tick n+2 started after it, and
    // wrote the file before tick n+3 published.
    sb.let_ticks_pass(&daemon, 3);
    let client = stdout(&sb.client(&["--format", TEMPLATE]));
    assert!(client.starts_with("GPU 50% "), "{client}");
    assert_eq!(read(&prompt_path(&sb)), client);
}

#[test]
fn default_template_matches_gpupeeks_prompt_outputs_without_colour() {
    let sb = Sandbox::new("pf-default");
    sb.write_scenario(&two_gpus(45));
    let daemon = start(&sb, "100ms", &[]);
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 1);
    let starship = stdout(&sb.client(&["--output", "starship"]));
    assert_eq!(starship, "70% 40.0G\n");
    assert_eq!(read(&prompt_path(&sb)), starship);
}

#[test]
fn prompt_file_says_the_gpus_are_asleep_as_gpupeek_format_does() {
    let sb = Sandbox::new("pf-asleep");
    sb.write_scenario(&json!({"gpus": [{"name": "NVIDIA RTX 4060",
        "pci_bus_id": "00000000:01:00.0", "utilization_gpu_pct": 0}]}));
    sb.add_sysfs_gpu("0000:01:00.0", "suspended", "auto");
    let daemon = start(&sb, "100ms", &["--prompt-format", TEMPLATE]);
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 1);
    let client = stdout(&sb.client(&["--format", TEMPLATE]));
    assert_eq!(client, "GPU asleep\n");
    assert_eq!(read(&prompt_path(&sb)), client);
}

#[test]
fn a_reader_in_a_tight_loop_never_sees_an_empty_or_partial_line_at_100_hz() {
    let sb = Sandbox::new("pf-atomic");
    sb.write_scenario(&two_gpus(0));
    let daemon = start(&sb, "10ms", &["--prompt-format", "{0.util}% of {count}"]);
    sb.wait_live(&daemon);
    let path = prompt_path(&sb);
    wait_for("the prompt file", &daemon, || path.exists());
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, path) = (Arc::clone(&stop), path.clone());
        std::thread::spawn(move || {
            let (mut reads, mut seen) = (0u64, std::collections::BTreeSet::new());
            while !stop.load(Ordering::Relaxed) || reads < 1000 {
                let text = std::fs::read_to_string(&path).expect("the file always exists");
                let ok = text
                    .strip_suffix("% of 2\n")
                    .is_some_and(|n| n.parse::<u32>().is_ok());
                assert!(ok, "read {text:?} after {reads} good reads");
                seen.insert(text);
                reads += 1;
            }
            seen.len()
        })
    };
    // Keep the line changing: the first GPU's utilisation steps through 0..100.
    for step in 0..60u32 {
        sb.write_scenario(&two_gpus(step % 100));
        sb.let_ticks_pass(&daemon, 2);
    }
    stop.store(true, Ordering::Relaxed);
    let distinct = reader.join().expect("no torn read");
    assert!(
        distinct > 10,
        "the file hardly changed: {distinct} lines seen"
    );
}

#[test]
fn a_symlink_at_the_target_or_temporary_name_is_replaced_and_its_pointee_untouched() {
    let sb = Sandbox::new("pf-symlink");
    sb.write_scenario(&two_gpus(45));
    std::fs::create_dir_all(sb.dir.join("run")).unwrap();
    let victim = sb.dir.join("victim");
    let temp_victim = sb.dir.join("temp-victim");
    std::fs::write(&victim, "precious\n").unwrap();
    std::fs::write(&temp_victim, "also precious\n").unwrap();
    let path = prompt_path(&sb);
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    std::os::unix::fs::symlink(&temp_victim, sb.dir.join("run/.prompt.tmp")).unwrap();
    let daemon = start(&sb, "100ms", &[]);
    sb.wait_live(&daemon);
    wait_for("a regular prompt file", &daemon, || {
        std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file())
    });
    assert_eq!(read(&path), "70% 40.0G\n");
    assert_eq!(read(&victim), "precious\n");
    assert_eq!(read(&temp_victim), "also precious\n");
    assert!(
        !sb.dir.join("run/.prompt.tmp").exists(),
        "temporary left over"
    );
}

/// A daemon with the default template whose prompt file holds its first line; the file.
fn writing_default_line(tag: &str) -> (Sandbox, Daemon, PathBuf) {
    let sb = Sandbox::new(tag);
    sb.write_scenario(&two_gpus(45));
    let daemon = start(&sb, "100ms", &[]);
    sb.wait_live(&daemon);
    let path = prompt_path(&sb);
    wait_for("the prompt file", &daemon, || read(&path) == "70% 40.0G\n");
    (sb, daemon, path)
}

#[test]
fn a_clean_stop_leaves_a_line_that_cannot_pass_for_values() {
    let (_sb, mut daemon, path) = writing_default_line("pf-stop");
    daemon.signal(Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(), Some(0));
    assert_eq!(read(&path), "gpupeekd stopped\n");
}

#[test]
fn prompt_stopped_replaces_a_killed_daemons_last_line_and_touches_no_segment() {
    let (sb, mut daemon, path) = writing_default_line("pf-killed");
    daemon.signal(Signal::SIGKILL);
    daemon.wait_exit();
    assert_eq!(
        read(&path),
        "70% 40.0G\n",
        "a killed daemon cannot say it stopped"
    );
    std::fs::remove_file(sb.shm_path()).unwrap();

    // What the unit's ExecStopPost runs (with the same environment as the daemon).
    let mut cmd = sb.daemon_command("100ms");
    cmd.arg("--prompt-file").arg(&path).arg("--prompt-stopped");
    let out = run_with_watchdog(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert_eq!(read(&path), "gpupeekd stopped\n");
    assert!(
        !sb.shm_path().exists(),
        "--prompt-stopped created a segment"
    );
    assert!(
        !sb.dir.join("run/.prompt.tmp").exists(),
        "temporary left over"
    );

    // A file it cannot write: exit 5, why in one line.
    let missing = sb.dir.join("missing/prompt");
    let mut cmd = sb.daemon_command("100ms");
    cmd.arg("--prompt-file")
        .arg(&missing)
        .arg("--prompt-stopped");
    let out = run_with_watchdog(cmd);
    assert_one_line_failure(&out, 5, "--prompt-stopped into a missing directory");
    assert!(
        stderr(&out).contains("cannot write prompt file"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn write_failures_are_logged_once_and_never_stop_publishing() {
    let sb = Sandbox::new("pf-fail");
    sb.write_scenario(&two_gpus(45));
    let missing = sb.dir.join("missing/prompt");
    let daemon = sb.start_daemon_with("20ms", &["--prompt-file", missing.to_str().unwrap()]);
    sb.wait_live(&daemon);
    sb.let_ticks_pass(&daemon, 10);
    let warnings = |log: &str| log.matches("cannot write prompt file").count();
    assert_eq!(warnings(&daemon.log()), 1, "{}", daemon.log());
    std::fs::create_dir(sb.dir.join("missing")).unwrap();
    wait_for("the prompt file", &daemon, || missing.exists());
    assert_eq!(read(&missing), "70% 40.0G\n");
    wait_for("the recovery logged", &daemon, || {
        daemon.log().contains("written again")
    });
}

#[test]
fn a_bad_prompt_template_is_a_one_line_usage_error_before_anything_is_created() {
    let sb = Sandbox::new("pf-bad");
    sb.write_scenario(&two_gpus(45));
    let path = prompt_path(&sb);
    for (flags, what) in [
        (vec!["--prompt-format", "{util!a}"], "bad --prompt-format"),
        (vec!["--prompt-format", "{nope}"], "bad --prompt-format"),
        (
            vec!["--prompt-format", "{util}", "--prompt-file", "/"],
            "names no file",
        ),
    ] {
        let mut cmd = sb.daemon_command("100ms");
        if flags.len() == 2 {
            cmd.arg("--prompt-file").arg(&path);
        }
        cmd.args(&flags);
        let out = run_with_watchdog(cmd);
        assert_one_line_failure(&out, 2, &format!("{flags:?}"));
        assert!(String::from_utf8_lossy(&out.stderr).contains(what));
        assert!(!path.exists() && !sb.shm_path().exists(), "{flags:?}");
    }
    let mut cmd = sb.daemon_command("100ms");
    cmd.args(["--prompt-format", "{util}"]);
    assert_one_line_failure(&run_with_watchdog(cmd), 2, "--prompt-format alone");
}

#[test]
fn sparklines_in_the_prompt_file_draw_the_same_samples_as_gpupeek_format() {
    const SPARK: &str = "{util:spark4} {each ' '}{mem_used:spark3}{end}";
    let sb = Sandbox::new("pf-spark");
    sb.write_scenario(&two_gpus(0));
    let daemon = start(&sb, "100ms", &["--prompt-format", SPARK]);
    sb.wait_live(&daemon);
    let written = || sb.segment().history(0).unwrap().unwrap().written;
    // The first sample after a change may still have been sampled before it: wait for
    // two more after it.
    for util in [0, 100] {
        sb.write_scenario(&two_gpus(util));
        let now = written();
        wait_for("three more history samples", &daemon, || {
            written() >= now + 3
        });
    }
    // Compare right after a tick that did not append (the file and the rings agree).
    let (file, client) = (0..5)
        .find_map(|_| {
            let before = written();
            sb.let_ticks_pass(&daemon, 1);
            let file = read(&prompt_path(&sb));
            let client = stdout(&sb.client(&["--format", SPARK]));
            (written() == before).then_some((file, client))
        })
        .expect("the rings kept changing under the comparison");
    assert_eq!(file, client);
    // GPU 0 went from 0 % to 100 % while GPU 1 stayed at 95 %: the mean climbs from
    // 47.5 % to 97.5 % (the second bar may be either).
    let bars: Vec<char> = file.chars().take(5).collect();
    assert_eq!(
        (bars[0], bars[2], bars[3], bars[4]),
        ('▅', '█', '█', ' '),
        "{file}"
    );
    // Memory: 10 of 80 GiB and 30 of 40 GiB.
    assert!(file.ends_with(" ▂▂▂ ▇▇▇\n"), "{file}");
}
