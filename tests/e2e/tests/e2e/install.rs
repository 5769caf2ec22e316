//! `scripts/install` (what `make install` runs): every file in its usual place under
//! PREFIX and DESTDIR, the units pointing at the installed binaries and passing
//! `systemd-analyze verify`, and an uninstall that removes exactly what was installed.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use gpupeek_e2e::{bins, repo, run_with_watchdog, stderr, stdout, top_bin, Sandbox};

/// Runs scripts/install with these settings and the binaries under test.
fn install(env: &[(&str, &Path)], extra: &[&str]) -> std::process::Output {
    let bin_dir = bins().client.parent().unwrap().to_owned();
    let mut cmd = Command::new(repo().join("scripts/install"));
    cmd.arg("--bin-dir").arg(bin_dir).args(extra);
    cmd.env_remove("DESTDIR").env_remove("PREFIX");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_with_watchdog(cmd);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    out
}

/// Every file below `root`, relative to it.
fn files(root: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.insert(format!("/{}", path.strip_prefix(root).unwrap().display()));
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn install_into_destdir_puts_each_file_in_place_and_uninstall_removes_them_all() {
    // gpupeek-top is installed when it was built: build it, so it is.
    top_bin();
    let sandbox = Sandbox::new("install");
    let dest = sandbox.dir.join("dest");
    let env = [("DESTDIR", dest.as_path()), ("PREFIX", Path::new("/usr"))];
    install(&env, &[]);

    let mut expected: BTreeSet<String> = [
        "/usr/sbin/gpupeekd",
        "/usr/bin/gpupeek",
        "/usr/bin/gpupeek-serve",
        "/usr/bin/gpupeek-top",
        "/usr/bin/gpupeek-plot",
        "/usr/bin/gpupeek-fleet",
        "/usr/lib/systemd/system/gpupeekd.service",
        "/usr/lib/systemd/system/gpupeek-exporter.service",
        "/usr/share/doc/gpupeek/README.md",
        "/usr/share/gpupeek/install-manifest",
        "/usr/share/bash-completion/completions/gpupeek",
        "/usr/share/bash-completion/completions/gpupeekd",
        "/usr/share/zsh/site-functions/_gpupeek",
        "/usr/share/zsh/site-functions/_gpupeekd",
        "/usr/share/fish/vendor_completions.d/gpupeek.fish",
        "/usr/share/fish/vendor_completions.d/gpupeekd.fish",
    ]
    .map(String::from)
    .into();
    for entry in std::fs::read_dir(repo().join("man")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(section @ ("1" | "5" | "8")) = name.rsplit('.').next() {
            expected.insert(format!("/usr/share/man/man{section}/{name}"));
        }
    }
    let contrib = repo().join("contrib");
    for file in files(&contrib) {
        expected.insert(format!("/usr/share/gpupeek/contrib{file}"));
    }
    let got = files(&dest);
    assert_eq!(got, expected);

    for bin in [
        "usr/sbin/gpupeekd",
        "usr/bin/gpupeek",
        "usr/bin/gpupeek-top",
    ] {
        assert_eq!(mode(&dest.join(bin)), 0o755, "{bin}");
        let out = run_with_watchdog({
            let mut c = Command::new(dest.join(bin));
            c.arg("--version");
            c
        });
        assert!(
            out.status.success() && stdout(&out).contains("0."),
            "{bin} --version"
        );
    }
    assert_eq!(
        mode(&dest.join("usr/lib/systemd/system/gpupeekd.service")),
        0o644
    );
    let unit =
        std::fs::read_to_string(dest.join("usr/lib/systemd/system/gpupeekd.service")).unwrap();
    assert!(
        unit.contains(
            "\nExecStart=/usr/sbin/gpupeekd --foreground --prompt-file /run/gpupeek/prompt\n"
        ),
        "{unit}"
    );
    assert!(
        unit.contains(
            "\nExecStopPost=-/usr/sbin/gpupeekd --prompt-file /run/gpupeek/prompt --prompt-stopped\n"
        ),
        "the line a killed daemon cannot write goes to the same file: {unit}"
    );
    assert!(unit.contains("\nType=notify\n"), "{unit}");
    let exporter =
        std::fs::read_to_string(dest.join("usr/lib/systemd/system/gpupeek-exporter.service"))
            .unwrap();
    assert!(
        exporter.contains("\nExecStart=/usr/bin/gpupeek-serve --listen"),
        "{exporter}"
    );
    // The installed gpupeek runs the gpupeek-serve installed next to it, whose own check
    // of --listen answers (exit 2, where a missing gpupeek-serve is 11).
    assert_eq!(mode(&dest.join("usr/bin/gpupeek-serve")), 0o755);
    let out = run_with_watchdog({
        let mut c = Command::new(dest.join("usr/bin/gpupeek"));
        c.args(["serve", "--listen", "not-an-address"])
            .env("PATH", &sandbox.dir);
        c
    });
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad --listen"), "{}", stderr(&out));

    let manifest =
        std::fs::read_to_string(dest.join("usr/share/gpupeek/install-manifest")).unwrap();
    let listed: BTreeSet<String> = manifest.lines().map(String::from).collect();
    let mut without_manifest = expected.clone();
    without_manifest.remove("/usr/share/gpupeek/install-manifest");
    assert_eq!(listed, without_manifest);

    install(&env, &["--uninstall"]);
    assert_eq!(files(&dest), BTreeSet::new());
    assert!(!dest.join("usr/share/gpupeek").exists());
}

#[test]
fn installed_units_pass_systemd_analyze_verify() {
    // Debian's systemd package ships systemd-analyze; CI's machines have it.
    if !Path::new("/usr/bin/systemd-analyze").exists()
        && !Path::new("/bin/systemd-analyze").exists()
    {
        eprintln!(
            "SKIPPED: systemd-analyze not found (install the systemd package to run this test)"
        );
        return;
    }
    let sandbox = Sandbox::new("install-verify");
    // No DESTDIR, so that ExecStart names binaries that exist, as verify checks.
    let prefix = sandbox.dir.join("prefix");
    install(&[("PREFIX", prefix.as_path())], &[]);
    let units = prefix.join("lib/systemd/system");
    let out = run_with_watchdog({
        let mut c = Command::new("systemd-analyze");
        // The man pages are checked by the test above, not against this machine's MANPATH.
        c.args(["verify", "--man=no"])
            .arg(units.join("gpupeekd.service"))
            .arg(units.join("gpupeek-exporter.service"));
        c
    });
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        out.status.success() && said.is_empty(),
        "systemd-analyze verify:\n{said}"
    );
}

#[test]
fn install_refuses_missing_binaries_and_relative_paths() {
    let sandbox = Sandbox::new("install-bad");
    let run = |args: &[&str], prefix: &str| {
        let mut cmd = Command::new(repo().join("scripts/install"));
        cmd.args(args)
            .env("PREFIX", prefix)
            .env("DESTDIR", &sandbox.dir);
        run_with_watchdog(cmd)
    };
    let out = run(&["--bin-dir", sandbox.dir.to_str().unwrap()], "/usr");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("build first"), "{}", stderr(&out));
    // Every program but the last one there: refused before anything is installed.
    let partial = sandbox.dir.join("partial");
    std::fs::create_dir_all(&partial).unwrap();
    for bin in [
        "gpupeekd",
        "gpupeek",
        "gpupeek-serve",
        "gpupeek-top",
        "gpupeek-plot",
    ] {
        std::fs::copy("/bin/true", partial.join(bin)).unwrap();
    }
    let out = run(&["--bin-dir", partial.to_str().unwrap()], "/usr");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("gpupeek-fleet not found"),
        "{}",
        stderr(&out)
    );
    assert!(!sandbox.dir.join("usr").exists(), "nothing installed");
    let out = run(&[], "usr/local");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(&["--uninstall"], "/nowhere");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("nothing to uninstall"),
        "{}",
        stderr(&out)
    );
}
