//! gpustat's own argparse parser is the specification: each command line below goes to
//! gpustat 1.1.1's `main()` with its `parse_args` intercepted, and what gpustat
//! understood (or that it refused) must be what [`super::parse`] understands, field by
//! field.
//!
//! gpustat comes from the virtual environment scripts/test makes (target/gpustat-venv,
//! or the one whose `gpustat` `$GPUPEEK_GPUSTAT` names). Without it the test is skipped
//! with a message, except under CI (`CI` set), where it must be there.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::{parse, Invocation, Power};

/// Every form compared: gpustat's flags alone and bundled, values attached, following,
/// missing and empty, prefixes, and mistakes. Not `--print-completion`: gpustat has it
/// only when the optional shtab package is installed, and offers bash, zsh and tcsh
/// where gpupeek offers bash, zsh and fish.
const FORMS: &[&[&str]] = &[
    &[],
    &["-c"],
    &["-cup"],
    &["-cufP"],
    &["-cupP", "draw"],
    &["-cP", "limit"],
    &["-Pdraw"],
    &["-Plimit,draw"],
    &["-Pdraw,limit"],
    &["-P", ""],
    &["-P"],
    &["-P", "limit"],
    &["-P=draw"],
    &["-P", "-c"],
    &["--show-power=draw,limit"],
    &["--show-power", ""],
    &["--show-power="],
    &["--show-power"],
    &["-e"],
    &["-eenc"],
    &["-edec"],
    &["-e", "enc,dec"],
    &["-e", ""],
    &["-e", "-P"],
    &["--show-codec=dec"],
    &["-a"],
    &["-a", "-P", ""],
    &["-F"],
    &["--show-fan"],
    &["--show-fan-speed"],
    &["-f"],
    &["-u", "-p"],
    &["--id", "0"],
    &["--id=0,1"],
    &["--no-header"],
    &["--no-h"],
    &["--no-p"],
    &["--json"],
    &["--gpuname-width", "12"],
    &["--gpuname-width=0"],
    &["--color"],
    &["--force-color"],
    &["--no-color"],
    &["--no-processes"],
    &["-i"],
    &["-i", "2"],
    &["-i2"],
    &["-i", "0.5", "-c"],
    &["-ci", "3"],
    &["--interval"],
    &["--watch", "3"],
    &["--interval=0.5"],
    &["--show-cmd", "--show-user", "--show-pid"],
    &["-P", "draw", "-P", "limit"],
    &["-v"],
    &["--version"],
    // Refused by both.
    &["-e", "dec,enc"],
    &["-e", "mp4"],
    &["-P", "watts"],
    &["-Pc"],
    &["--gpuname-width", "-1"],
    &["--gpuname-width", "x"],
    &["--color", "--no-color"],
    &["-i", "x"],
    &["--id"],
    &["--bogus"],
    &["-x"],
    &["-cx"],
    &["stray"],
    &["--json=x"],
    &["--show-c"],
];

/// Reads each argv (a JSON list of lists on stdin) with gpustat's parser; prints a JSON
/// list of {"args": meaning} or {"exit": status}.
const PROBE: &str = r#"
import argparse, contextlib, io, json, sys
import gpustat.cli

class Parsed(Exception):
    pass

parse_args = argparse.ArgumentParser.parse_args
def intercept(self, args=None, namespace=None):
    raise Parsed(vars(parse_args(self, args, namespace)))
argparse.ArgumentParser.parse_args = intercept

def meaning(ns):
    codec, power = ns["show_codec"] or "", ns["show_power"] or ""
    interval = 1.0 if ns["interval"] is None else float(ns["interval"])
    return {
        "show_cmd": ns["show_cmd"], "show_user": ns["show_user"], "show_pid": ns["show_pid"],
        "show_fan_speed": ns["show_fan_speed"], "show_full_cmd": ns["show_full_cmd"],
        "show_all": ns["show_all"], "json": ns["json"], "no_processes": ns["no_processes"],
        "header": ns["show_header"], "force_color": ns["force_color"],
        "no_color": ns["no_color"], "id": ns["id"], "gpuname_width": ns["gpuname_width"],
        "enc": "enc" in codec, "dec": "dec" in codec,
        "power": bool(power), "power_limit": "limit" in power, "interval": interval,
    }

results = []
for argv in json.load(sys.stdin):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            gpustat.cli.main("gpustat", *argv)
        results.append({"exit": 0})
    except Parsed as parsed:
        results.append({"args": meaning(parsed.args[0])})
    except SystemExit as e:
        results.append({"exit": e.code or 0})
print(json.dumps(results))
"#;

/// The python of gpustat's virtual environment, if there is one.
fn python() -> Option<PathBuf> {
    let venv = match std::env::var_os("GPUPEEK_GPUSTAT") {
        Some(gpustat) => PathBuf::from(gpustat).parent()?.to_path_buf(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/gpustat-venv/bin"),
    };
    let python = venv.join("python");
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI needs gpustat 1.1.1 in {} (scripts/test makes it)",
        venv.display()
    );
    eprintln!(
        "skipped: no gpustat in {} (scripts/test --no-run makes it)",
        venv.display()
    );
    None
}

/// What gpupeek understood, in the probe's terms.
fn gpupeek(argv: &[&str]) -> Value {
    let args = match parse(argv.iter().map(|s| s.to_string()).collect()) {
        Ok(Invocation::Main(args)) => args,
        Ok(Invocation::Print(_)) => return json!({"exit": 0}),
        Ok(other) => panic!("{argv:?}: {other:?}"),
        Err(_) => return json!({"exit": 2}),
    };
    let codec = args.show_codec.unwrap_or_default();
    let id = args.id.as_ref().map(|ids| {
        ids.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    });
    json!({"args": {
        "show_cmd": args.show_cmd, "show_user": args.show_user, "show_pid": args.show_pid,
        "show_fan_speed": args.show_fan_speed, "show_full_cmd": args.show_full_cmd,
        "show_all": args.show_all, "json": args.json, "no_processes": args.no_processes,
        "header": !args.no_header, "force_color": args.color, "no_color": args.no_color,
        "id": id, "gpuname_width": args.gpuname_width,
        "enc": codec.enc, "dec": codec.dec,
        "power": args.show_power.is_some(),
        "power_limit": args.show_power == Some(Power::DrawLimit),
        "interval": args.watch.unwrap_or(0.0),
    }})
}

#[test]
fn gpustats_option_forms_parse_as_gpustat_parses_them() {
    let Some(python) = python() else {
        return;
    };
    let mut child = Command::new(python)
        .args(["-c", PROBE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::to_string(FORMS).unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the gpustat probe failed");
    let theirs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(theirs.len(), FORMS.len());
    let mut differ = Vec::new();
    for (argv, theirs) in FORMS.iter().zip(&theirs) {
        let ours = gpupeek(argv);
        if &ours != theirs {
            differ.push(format!("{argv:?}:\n  gpustat {theirs}\n  gpupeek {ours}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
