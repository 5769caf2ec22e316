//! The fork-free prompt snippets (contrib/prompt/gpupeek-file.*) in real interactive
//! shells: each is sourced, several prompts are drawn, and `strace -f -e trace=process`
//! must show no clone, fork, vfork or execve beyond the shell's own start, while the
//! prompt shows the line gpupeekd wrote. The control: the forking snippet
//! (`$(gpupeek --output bash)`) under the same harness shows a fork and an exec of
//! gpupeek per prompt, so the check can fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use gpupeek_e2e::{bins, run_with_watchdog, stderr, tool, wait_for, Daemon, Sandbox};
use serde_json::json;

const GIB: u64 = 1 << 30;
const LINE: &str = "70% 40.0G";

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib")
        .join(path)
}

/// A daemon writing its prompt file (the default template) for two GPUs.
fn live(tag: &str) -> (Sandbox, Daemon, PathBuf) {
    let sb = Sandbox::new(tag);
    sb.write_scenario(&json!({"gpus": [
        {"name": "NVIDIA H100", "memory_total_bytes": 80 * GIB, "memory_used_bytes": 10 * GIB,
         "utilization_gpu_pct": 45, "utilization_memory_pct": 1, "temperature_c": 41},
        {"name": "NVIDIA A100", "memory_total_bytes": 40 * GIB, "memory_used_bytes": 30 * GIB,
         "utilization_gpu_pct": 95, "utilization_memory_pct": 1, "temperature_c": 85}
    ]}));
    let file = sb.dir.join("prompt");
    let daemon = sb.start_daemon_with("200ms", &["--prompt-file", file.to_str().unwrap()]);
    sb.wait_live(&daemon);
    wait_for("the prompt file", &daemon, || file.exists());
    (sb, daemon, file)
}

/// What strace saw: process-creating calls, and execve calls after the shell's own.
struct Trace {
    forks: usize,
    execs: Vec<String>,
    /// The shell's stdout and stderr (where it draws its prompts).
    output: String,
}

/// Runs `shell args` under strace with `input` on its stdin (a pipe from a file), the
/// gpupeek under test first on PATH and the sandbox's segment and prompt file in the
/// environment.
fn traced(sb: &Sandbox, file: &Path, shell: &Path, args: &[&str], input: &str) -> Trace {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let strace = tool("strace", "strace").expect("checked by the caller");
    let (log, input_file) = (
        sb.dir.join(format!("strace-{n}.log")),
        sb.dir.join(format!("input-{n}")),
    );
    std::fs::write(&input_file, input).unwrap();
    let bin_dir = bins().client.parent().unwrap().to_path_buf();
    let path = std::env::join_paths([bin_dir, "/usr/bin".into(), "/bin".into()]).unwrap();
    let mut cmd = Command::new("sh");
    // `exec`: the shell becomes strace, so the trace holds nothing of sh.
    cmd.args(["-c", "exec \"$@\" <\"$0\""])
        .arg(&input_file)
        .arg(strace)
        .args(["-f", "-e", "trace=process", "-o"]);
    cmd.arg(&log)
        .arg(shell)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &sb.dir)
        .env("TERM", "dumb")
        .env("GPUPEEK_SHM", &sb.shm)
        .env("GPUPEEK_PROMPT_FILE", file)
        .current_dir(contrib(""));
    let out = run_with_watchdog(cmd);
    assert!(out.status.success(), "{shell:?}: {}", stderr(&out));
    let trace = std::fs::read_to_string(&log).unwrap();
    let calls = |name: &str| -> Vec<String> {
        trace
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|c| c.starts_with(name))
            })
            .map(str::to_owned)
            .collect()
    };
    let forks = ["clone(", "clone3(", "fork(", "vfork("]
        .iter()
        .map(|c| calls(c).len())
        .sum();
    let mut execs = calls("execve(");
    assert!(!execs.is_empty(), "strace saw no execve:\n{trace}");
    execs.remove(0); // strace starting the shell
    Trace {
        forks,
        execs,
        output: String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out),
    }
}

/// Five prompts after the snippet is sourced (commands are builtins).
fn session(snippet: &str, show: &str) -> String {
    format!("source prompt/{snippet}\n:\n:\n{show}\n:\nexit\n")
}

#[test]
fn bash_prompt_snippet_draws_the_line_without_forking() {
    let Some(bash) = tool("bash", "bash").filter(|_| tool("strace", "strace").is_some()) else {
        return;
    };
    let (sb, _daemon, file) = live("nofork-bash");
    let args = ["--norc", "--noprofile", "-i"];
    let t = traced(&sb, &file, &bash, &args, &session("gpupeek-file.bash", ":"));
    assert_eq!((t.forks, &t.execs), (0, &vec![]), "{}", t.output);
    let prompts = t.output.matches(&format!("{LINE} ")).count();
    assert!(
        prompts >= 5,
        "the prompt showed the line {prompts} times:\n{}",
        t.output
    );

    // Control: the forking snippet, same harness, forks and runs gpupeek per prompt.
    let t = traced(&sb, &file, &bash, &args, &session("gpupeek.bash", ":"));
    assert!(t.forks >= 5, "{} forks:\n{}", t.forks, t.output);
    assert!(t.execs.iter().filter(|e| e.contains("gpupeek")).count() >= 5);
}

#[test]
fn zsh_prompt_snippet_draws_the_line_without_forking() {
    let Some(zsh) = tool("zsh", "zsh").filter(|_| tool("strace", "strace").is_some()) else {
        return;
    };
    let (sb, _daemon, file) = live("nofork-zsh");
    // Without a terminal zsh draws no right prompt: print its expansion instead.
    let show = r#"x=${(e)RPROMPT}; print -r -- "right prompt: ${(%)x}""#;
    let args = ["-f", "-i"];
    let t = traced(&sb, &file, &zsh, &args, &session("gpupeek-file.zsh", show));
    assert_eq!((t.forks, &t.execs), (0, &vec![]), "{}", t.output);
    assert!(
        t.output.contains(&format!("right prompt: {LINE}\n")),
        "{}",
        t.output
    );

    let t = traced(&sb, &file, &zsh, &args, &session("gpupeek.zsh", show));
    assert!(t.forks >= 1, "{} forks:\n{}", t.forks, t.output);
    assert!(
        t.execs.iter().any(|e| e.contains("gpupeek")),
        "{}",
        t.output
    );
}

#[test]
fn fish_right_prompt_snippet_prints_the_line_without_forking() {
    let Some(fish) = tool("fish", "fish").filter(|_| tool("strace", "strace").is_some()) else {
        return;
    };
    let (sb, _daemon, file) = live("nofork-fish");
    let calls = "source prompt/gpupeek-file.fish; for i in 1 2 3; fish_right_prompt; echo; end";
    let t = traced(&sb, &file, &fish, &["--no-config", "-c", calls], "");
    assert_eq!((t.forks, &t.execs), (0, &vec![]), "{}", t.output);
    assert_eq!(t.output, format!("{LINE}\n{LINE}\n{LINE}\n"));

    let calls = "source prompt/gpupeek.fish; for i in 1 2 3; fish_right_prompt; echo; end";
    let t = traced(&sb, &file, &fish, &["--no-config", "-c", calls], "");
    assert!(
        t.execs.iter().any(|e| e.contains("gpupeek")),
        "{}",
        t.output
    );
}
