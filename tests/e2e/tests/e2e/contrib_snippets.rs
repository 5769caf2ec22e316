//! Every status-bar and prompt snippet in contrib/ is run as its host program would run
//! it, against a real daemon on the fake NVML, and its output checked against that
//! program's protocol. tmux is the real thing: a `tmux -L` server with the snippet as its
//! config, whose status line is read back with `capture-pane` from a second server that
//! shows the first one's client.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpupeek_e2e::{bins, run_with_watchdog, stderr, stdout, tool, Daemon, Sandbox, WATCHDOG};
use serde_json::json;

const GIB: u64 = 1 << 30;

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(contrib(path)).unwrap()
}

/// A daemon on two GPUs: 45 % and 95 % busy, 40 of 120 GiB used, 85 °C at most.
fn live(tag: &str) -> (Sandbox, Daemon) {
    let sandbox = Sandbox::new(tag);
    sandbox.write_scenario(&json!({"gpus": [
        {"name": "NVIDIA H100", "memory_total_bytes": 80 * GIB, "memory_used_bytes": 10 * GIB,
         "utilization_gpu_pct": 45, "utilization_memory_pct": 1, "temperature_c": 41},
        {"name": "NVIDIA A100", "memory_total_bytes": 40 * GIB, "memory_used_bytes": 30 * GIB,
         "utilization_gpu_pct": 95, "utilization_memory_pct": 1, "temperature_c": 85}
    ]}));
    let daemon = sandbox.start_daemon("200ms");
    sandbox.wait_live(&daemon);
    (sandbox, daemon)
}

/// `PATH` with the gpupeek under test first, as if installed.
fn path_env() -> std::ffi::OsString {
    let dir = bins().client.parent().unwrap().to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest))).unwrap()
}

/// A shell command line as a host program runs it: `sh -c`, gpupeek on PATH, the
/// sandbox's segment in `GPUPEEK_SHM`.
fn shell(sandbox: &Sandbox, program: &str, line: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg("-c")
        .arg(line)
        .env("PATH", path_env())
        .env("GPUPEEK_SHM", &sandbox.shm)
        .current_dir(contrib(""));
    cmd
}

/// Runs a one-shot snippet command; returns stdout.
fn one_shot(sandbox: &Sandbox, line: &str) -> String {
    let out = run_with_watchdog(shell(sandbox, "sh", line));
    assert_eq!(out.status.code(), Some(0), "{line}: {}", stderr(&out));
    stdout(&out)
}

/// Runs a streaming snippet command and returns its first line (then stops it).
fn first_line(sandbox: &Sandbox, line: &str) -> String {
    let mut child = shell(sandbox, "sh", &format!("exec {line}"))
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = BufReader::new(out).read_line(&mut first);
        let _ = tx.send(first);
    });
    let first = rx.recv_timeout(WATCHDOG);
    let _ = child.kill();
    let _ = child.wait();
    first.expect("a line before the watchdog")
}

/// The value of `key = value` / `key=value` in an ini-style file (quotes removed).
fn ini_value(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| panic!("no {key} in snippet"))
}

/// Checks a TOML snippet with Python's tomllib (the reference parser at hand).
fn check_toml(path: &str) -> serde_json::Value {
    let Some(python) = tool("python3", "python3") else {
        return json!(null);
    };
    let out = run_with_watchdog({
        let mut cmd = Command::new(python);
        cmd.args([
            "-c",
            "import json,sys,tomllib; print(json.dumps(tomllib.load(open(sys.argv[1],'rb'))))",
        ])
        .arg(contrib(path));
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{path}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn waybar_module_streams_valid_json_with_the_documented_classes() {
    let (sandbox, _daemon) = live("cwaybar");
    let config = read("waybar/config.jsonc");
    let json_text: String = config
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let config: serde_json::Value = serde_json::from_str(&json_text).expect("valid JSONC");
    let module = &config["custom/gpu"];
    assert_eq!(module["return-type"], "json");
    let line = first_line(&sandbox, module["exec"].as_str().unwrap());
    let doc: serde_json::Value = serde_json::from_str(&line).unwrap();
    for key in doc.as_object().unwrap().keys() {
        assert!(["text", "alt", "tooltip", "class", "percentage"].contains(&key.as_str()));
    }
    assert_eq!(doc["text"], "GPU 70% 40.0/120G 85°C");
    // Every class the module can emit has a rule in the CSS snippet.
    let css = read("waybar/style.css");
    for class in ["warning", "critical", "suspended", "stopped", "error"] {
        assert!(css.contains(&format!("#custom-gpu.{class}")), "{class}");
    }
    assert!(css.contains(&format!("#custom-gpu.{}", doc["class"].as_str().unwrap())));
}

#[test]
fn polybar_module_streams_text_with_polybar_colour_tags() {
    let (sandbox, _daemon) = live("cpolybar");
    let ini = read("polybar/config.ini");
    assert!(ini.contains("[module/gpu]") && ini_value(&ini, "tail") == "true");
    assert_eq!(ini_value(&ini, "type"), "custom/script");
    let line = first_line(&sandbox, &ini_value(&ini, "exec"));
    assert_eq!(
        line,
        "GPU %{F#f0c674}70%{F-}% 40.0/120G %{F#f0c674}85%{F-}°C\n"
    );
}

#[test]
fn i3blocks_and_i3status_rust_blocks_stream_their_json() {
    let (sandbox, _daemon) = live("ci3");
    let conf = read("i3/i3blocks.conf");
    assert_eq!(ini_value(&conf, "interval"), "persist");
    assert_eq!(ini_value(&conf, "format"), "json");
    let doc: serde_json::Value =
        serde_json::from_str(&first_line(&sandbox, &ini_value(&conf, "command"))).unwrap();
    assert_eq!(doc["full_text"], "GPU 70% 40.0/120G 85°C");
    assert_eq!(doc["color"], "#f0c674");
    let toml = check_toml("i3/i3status-rust.toml");
    let command = ini_value(&read("i3/i3status-rust.toml"), "command");
    if !toml.is_null() {
        let block = &toml["block"][0];
        assert_eq!(
            (&block["block"], &block["json"]),
            (&json!("custom"), &json!(true))
        );
        assert_eq!(block["command"], command.as_str());
    }
    let doc: serde_json::Value = serde_json::from_str(&first_line(&sandbox, &command)).unwrap();
    assert_eq!(doc["state"], "Warning");
    assert_eq!(doc["text"], "GPU 70% 40.0/120G 85°C");
}

#[test]
fn starship_module_prints_plain_text() {
    let (sandbox, _daemon) = live("cstarship");
    let toml = check_toml("prompt/starship.toml");
    let command = ini_value(&read("prompt/starship.toml"), "command");
    if !toml.is_null() {
        assert_eq!(toml["custom"]["gpu"]["command"], command.as_str());
    }
    assert_eq!(one_shot(&sandbox, &command), "70% 40.0G\n");
}

#[test]
fn bash_prompt_expands_with_invisible_colour_markers() {
    let (sandbox, _daemon) = live("cbash");
    let out = run_with_watchdog(shell(
        &sandbox,
        "bash",
        "PS1='> '; source prompt/gpupeek.bash; printf %s \"${PS1@P}\"",
    ));
    assert_eq!(
        stdout(&out),
        "\x01\x1b[33m\x0270\x01\x1b[0m\x02% 40.0G > ",
        "{}",
        stderr(&out)
    );
}

#[test]
fn zsh_and_powerlevel10k_prompts_expand() {
    let Some(zsh) = tool("zsh", "zsh") else {
        return;
    };
    let (sandbox, _daemon) = live("czsh");
    let zsh = zsh.to_str().unwrap();
    let out = run_with_watchdog(shell(
        &sandbox,
        zsh,
        // prompt_subst: expansions first, then prompt escapes.
        "source prompt/gpupeek.zsh; x=${(e)RPROMPT}; print -rn -- ${(%)x}",
    ));
    assert_eq!(
        stdout(&out),
        "\x1b[33m70\x1b[39m% 40.0G",
        "{}",
        stderr(&out)
    );
    // powerlevel10k calls prompt_gpupeek; p10k's own `p10k segment` is stood in for
    // by a function that prints its arguments.
    let out = run_with_watchdog(shell(
        &sandbox,
        zsh,
        "p10k() { print -r -- \"$@\" }; source prompt/p10k.zsh; prompt_gpupeek",
    ));
    assert_eq!(
        stdout(&out),
        "segment -f 208 -t 70%% 40.0G\n",
        "{}",
        stderr(&out)
    );
}

#[test]
fn fish_right_prompt_prints_one_line_without_a_newline() {
    let Some(fish) = tool("fish", "fish") else {
        return;
    };
    let (sandbox, _daemon) = live("cfish");
    let out = run_with_watchdog(shell(
        &sandbox,
        fish.to_str().unwrap(),
        "source prompt/gpupeek.fish; fish_right_prompt",
    ));
    assert_eq!(stdout(&out), "\x1b[33m70\x1b[0m% 40.0G", "{}", stderr(&out));
}

/// A tmux server on a private socket, killed when dropped.
struct TmuxServer {
    tmux: PathBuf,
    socket: String,
}

impl TmuxServer {
    fn cmd(&self) -> Command {
        let mut cmd = Command::new(&self.tmux);
        cmd.arg("-L").arg(&self.socket);
        cmd
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

#[test]
fn tmux_status_line_shows_the_gpu_in_a_real_tmux() {
    let Some(tmux) = tool("tmux", "tmux") else {
        return;
    };
    let (sandbox, _daemon) = live("ctmux");
    let id = std::process::id();
    // The server under test, configured by the snippet alone.
    let inner = TmuxServer {
        tmux: tmux.clone(),
        socket: format!("gpupeek-test-{id}"),
    };
    let out = run_with_watchdog({
        let mut cmd = inner.cmd();
        cmd.arg("-f")
            .arg(contrib("tmux/gpupeek.tmux.conf"))
            .args(["new-session", "-d", "-x", "100", "-y", "5"])
            .env("PATH", path_env())
            .env("GPUPEEK_SHM", &sandbox.shm);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A second server whose pane is a client of the first: its pane shows the status line.
    let outer = TmuxServer {
        tmux: tmux.clone(),
        socket: format!("gpupeek-test-outer-{id}"),
    };
    let attach = format!("{} -L {} attach", tmux.display(), inner.socket);
    let out = run_with_watchdog({
        let mut cmd = outer.cmd();
        cmd.args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "5",
        ])
        .arg(attach)
        .env("TERM", "xterm-256color");
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let capture = |escapes: bool| {
        let out = run_with_watchdog({
            let mut cmd = outer.cmd();
            cmd.args(["capture-pane", "-p"]);
            if escapes {
                cmd.arg("-e");
            }
            cmd
        });
        stdout(&out).lines().last().unwrap_or_default().to_owned()
    };
    let deadline = Instant::now() + WATCHDOG;
    loop {
        let status = capture(false);
        if status.contains("GPU 70% 40.0/120G 85°C") {
            // tmux drew our #[fg=yellow] around the values past their thresholds.
            let coloured = capture(true);
            assert!(coloured.contains("\x1b[33m70\x1b["), "{coloured:?}");
            assert!(coloured.contains("\x1b[33m85\x1b["), "{coloured:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "status line never showed gpupeek: {status:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
