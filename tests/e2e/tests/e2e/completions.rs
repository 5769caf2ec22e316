//! The completion scripts `--print-completion` writes load in bash, zsh and fish and
//! complete for real, through each shell's own machinery: bash's `complete -F` function
//! with `COMP_WORDS`, zsh's compsys in an interactive shell on a pseudo-terminal (zpty,
//! pressing Tab), fish's `complete -C`.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpupeek_e2e::{bins, run_with_watchdog, stderr, stdout, tool, Sandbox};

/// The script `program --print-completion shell` prints, saved in the sandbox.
fn script(sb: &Sandbox, program: &Path, shell: &str) -> PathBuf {
    let mut cmd = Command::new(program);
    cmd.args(["--print-completion", shell]);
    let out = run_with_watchdog(cmd);
    assert!(out.status.success(), "{shell}: {}", stderr(&out));
    let name = program.file_name().unwrap().to_str().unwrap();
    let path = sb.dir.join(format!("{name}.{shell}"));
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// Runs `shell args...` and returns its non-empty output lines; it must succeed quietly.
fn lines(shell: &Path, args: &[&str]) -> Vec<String> {
    let mut cmd = Command::new(shell);
    cmd.args(args);
    let out = run_with_watchdog(cmd);
    assert!(
        out.status.success() && stderr(&out).is_empty(),
        "{args:?}: {}",
        stderr(&out)
    );
    stdout(&out)
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// What each shell must offer: a command line, and words among the candidates.
const CASES: &[(&str, &[&str])] = &[
    ("gpupeek --sh", &["--shm", "--show-power", "--show-cmd"]),
    ("gpupeek -P ", &["draw", "limit,draw"]),
    ("gpupeek -o ", &["waybar", "tmux"]),
    ("gpupeek --print-completion ", &["bash", "zsh", "fish"]),
    ("gpupeek query --q", &["--query-gpu"]),
    ("gpupeek --shm x met", &["metrics"]),
    ("gpupeekd --nvml-t", &["--nvml-timeout"]),
    ("gpupeekd --process-info ", &["auto", "basic"]),
];

fn check(shell: &str, line: &str, offered: &[String], want: &[&str]) {
    for word in want {
        // fish adds "\tdescription".
        assert!(
            offered.iter().any(|o| o.split('\t').next() == Some(*word)),
            "{shell}: completing {line:?} offers {offered:?}, not {word}"
        );
    }
}

fn scripts(sb: &Sandbox, shell: &str) -> [PathBuf; 2] {
    [
        script(sb, &bins().client, shell),
        script(sb, &bins().daemon, shell),
    ]
}

#[test]
fn bash_completes_flags_values_and_commands() {
    let Some(bash) = tool("bash", "bash") else {
        return;
    };
    let sb = Sandbox::new("complete-bash");
    let [client, daemon] = scripts(&sb, "bash");
    for (line, want) in CASES {
        let words: Vec<&str> = line.split(' ').collect();
        let program = words[0];
        let array: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let code = format!(
            "source {} && source {} && COMP_WORDS=({}) && COMP_CWORD={} && _{program} && \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            client.display(),
            daemon.display(),
            array.join(" "),
            words.len() - 1
        );
        let offered = lines(&bash, &["--norc", "--noprofile", "-c", &code]);
        check("bash", line, &offered, want);
    }
}

/// Types a line and Tab into an interactive `zsh -f` on a pseudo-terminal, with compinit
/// and SCRIPT loaded, and prints every word compsys adds (compadd is wrapped to print
/// them; the markers are split in the source so the terminal's echo cannot match).
const ZSH_CAPTURE: &str = r#"
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z 'PROMPT= RPROMPT= ; unsetopt zle_bracketed_paste; autoload -U compinit; compinit -u -D'
zpty -w z "source ${(q)1}"
zpty -w z 'compadd() {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
    typeset -a __hits; builtin compadd -A __hits "$@"
    local h; for h in $__hits; do print -r -- "<h""it>$h"; done
}'
zpty -w z 'comppostfuncs=(__done); __done() { print -r -- "<do""ne>"; exit }'
zpty -w -n z "$2"$'\t'
local line
while zpty -r z line; do
    [[ $line == *'<done>'* ]] && break
    [[ $line == *'<hit>'* ]] && print -r -- "${${line##*<hit>}%$'\r'}"
done
zpty -d z
"#;

#[test]
fn zsh_completes_flags_values_and_commands() {
    let Some(zsh) = tool("zsh", "zsh") else {
        return;
    };
    let sb = Sandbox::new("complete-zsh");
    let [client, daemon] = scripts(&sb, "zsh");
    let capture = sb.dir.join("capture.zsh");
    std::fs::write(&capture, ZSH_CAPTURE).unwrap();
    for (line, want) in CASES {
        let script = if line.starts_with("gpupeekd") {
            &daemon
        } else {
            &client
        };
        let offered = lines(
            &zsh,
            &[
                "-f",
                capture.to_str().unwrap(),
                script.to_str().unwrap(),
                line,
            ],
        );
        check("zsh", line, &offered, want);
    }
    // Loading it as compinit does, from $fpath, registers it too.
    let dir = sb.dir.join("fpath");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&client, dir.join("_gpupeek")).unwrap();
    let code = format!(
        "fpath=({} $fpath); autoload -U compinit; compinit -u -D; print -r -- $_comps[gpupeek]",
        dir.display()
    );
    assert_eq!(lines(&zsh, &["-f", "-c", &code]), ["_gpupeek"]);
}

#[test]
fn fish_completes_flags_values_and_commands() {
    let Some(fish) = tool("fish", "fish") else {
        return;
    };
    let sb = Sandbox::new("complete-fish");
    let [client, daemon] = scripts(&sb, "fish");
    for (line, want) in CASES {
        let code = format!(
            "source {}; source {}; complete -C '{line}'",
            client.display(),
            daemon.display()
        );
        let offered = lines(&fish, &["--no-config", "-c", &code]);
        check("fish", line, &offered, want);
    }
}
