//! The man pages cannot drift: every flag `--help` lists is in the matching page and
//! every flag a page names exists; gpupeek-shm(5)'s field tables are the Rust layout;
//! `mandoc -T lint` finds nothing to say about any page; and its `jq` examples work.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpupeek_e2e::{bins, repo, run_with_watchdog, stderr, stdout, tool, top_bin, Sandbox};

fn page(name: &str) -> String {
    let source = std::fs::read_to_string(repo().join("man").join(name)).unwrap();
    // What a reader sees: roff's escaped hyphens are hyphens.
    source.replace("\\-", "-")
}

fn help(program: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args).arg("--help");
    let out = run_with_watchdog(cmd);
    assert!(out.status.success(), "{args:?} --help: {}", stderr(&out));
    stdout(&out)
}

/// Every `--long-flag` named anywhere in `text`.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for (at, _) in text.match_indices("--") {
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let name = name.trim_end_matches('-');
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            flags.insert(format!("--{name}"));
        }
    }
    flags
}

/// The flags `--help` lists in its Options section (long and short), without `--help`.
fn listed_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Options:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        // Option lines start "  -"; wrapped descriptions are indented further.
        .filter_map(|l| l.strip_prefix("  ").filter(|l| l.starts_with('-')))
        .flat_map(|l| {
            // "-P, --show-power [WHAT]  help": the names, without the value's.
            let names = l.split("  ").next().unwrap();
            names
                .split(", ")
                .filter_map(|n| n.split(' ').next())
                .filter(|n| n.starts_with('-') && *n != "--help")
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Checks `man` against the `--help` texts of one program (and its subcommands).
fn check_flags(man_name: &str, helps: &[String]) {
    let man = page(man_name);
    let mut listed = BTreeSet::new();
    let mut known = BTreeSet::from(["--help".to_owned()]);
    for help in helps {
        listed.extend(listed_flags(help));
        known.extend(long_flags(help));
    }
    assert!(listed.len() > 3, "no flags parsed from --help: {helps:?}");
    for flag in &listed {
        let documented = man.match_indices(flag.as_str()).any(|(at, _)| {
            !man[at + flag.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
        });
        assert!(documented, "{man_name} does not document {flag}");
        known.insert(flag.clone());
    }
    let unknown: Vec<_> = long_flags(&man).difference(&known).cloned().collect();
    assert!(
        unknown.is_empty(),
        "{man_name} names flags --help does not: {unknown:?}"
    );
}

#[test]
fn gpupeekd_page_documents_exactly_the_flags_of_its_help() {
    check_flags("gpupeekd.8", &[help(&bins().daemon, &[])]);
    let man = page("gpupeekd.8");
    for topic in [
        "hidepid",
        "auto",
        "basic",
        "none",
        "RUNTIME POWER MANAGEMENT",
        "ALERTS",
        "READY=1",
        "EXIT STATUS",
        "gpupeekd-NAME.lock",
        "/dev/shm/gpupeek",
    ] {
        assert!(man.contains(topic), "gpupeekd.8 lacks {topic}");
    }
}

#[test]
fn gpupeek_top_page_documents_exactly_the_flags_and_keys_of_its_help() {
    check_flags("gpupeek-top.1", &[help(top_bin(), &[])]);
    let man = page("gpupeek-top.1");
    for topic in [
        "NO_COLOR",
        "GPUPEEK_SHM",
        "EXIT STATUS",
        "KEYS",
        "SIGKILL",
        "F9",
    ] {
        assert!(man.contains(topic), "gpupeek-top.1 lacks {topic}");
    }
}

#[test]
fn gpupeek_plot_page_documents_exactly_the_flags_of_its_help() {
    check_flags("gpupeek-plot.1", &[help(&bins().client, &["plot"])]);
    let man = page("gpupeek-plot.1");
    for topic in [
        "NO_COLOR",
        "GPUPEEK_SHM",
        "EXIT STATUS",
        "DejaVu",
        "braille",
    ] {
        assert!(man.contains(topic), "gpupeek-plot.1 lacks {topic}");
    }
}

#[test]
fn gpupeek_page_documents_exactly_the_flags_of_its_help_and_subcommands() {
    let client = &bins().client;
    let helps: Vec<String> = [
        &[][..],
        &["query"],
        &["metrics"],
        &["serve"],
        &["history"],
        &["fleet"],
    ]
    .iter()
    .map(|sub| help(client, sub))
    .collect();
    check_flags("gpupeek.1", &helps);
    let man = page("gpupeek.1");
    // Every query field `--help-query-gpu` lists is in the page (FIELDS).
    let out = Command::new(client)
        .args(["query", "--help-query-gpu"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let list = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = list
        .lines()
        .filter(|l| l.starts_with('"'))
        .flat_map(|l| l.split(" or "))
        .map(|n| n.trim_matches('"'))
        .collect();
    assert!(names.len() > 30, "{list}");
    for field in names {
        assert!(man.contains(field), "gpupeek.1 lacks query field {field}");
    }
    for topic in [
        "NO_COLOR",
        "GPUPEEK_SHM",
        "EXIT STATUS",
        "memory.used",
        "host_pid",
    ] {
        assert!(man.contains(topic), "gpupeek.1 lacks {topic}");
    }
}

/// The rows of gpupeek-shm(5)'s field tables, in `pin::describe()`'s format.
#[test]
fn shm_page_field_tables_are_the_pinned_layout() {
    let man = std::fs::read_to_string(repo().join("man/gpupeek-shm.5")).unwrap();
    let mut described = String::new();
    let mut in_record = false;
    for line in man.lines() {
        if let Some(title) = line.strip_prefix(".SS ") {
            // ".SS ProcRecord (640 bytes in 1.1, 128 in 1.0)"
            let mut words = title.split([' ', '(']).filter(|w| !w.is_empty());
            let (name, size) = (words.next().unwrap(), words.next().unwrap_or(""));
            in_record = size.parse::<usize>().is_ok();
            if in_record {
                described.push_str(&format!("{name} size={size}\n"));
            }
            continue;
        }
        let cells: Vec<&str> = line.split('|').collect();
        if in_record && cells.len() >= 3 && cells[0].parse::<usize>().is_ok() {
            let (offset, size) = (cells[0].parse::<usize>().unwrap(), cells[1]);
            let size: usize = size.parse().unwrap();
            described.push_str(&format!("  {offset:4} {size:3} {}\n", cells[2]));
        }
    }
    assert_eq!(described, gpupeek_shm::pin::describe());
}

/// Each row of gpupeek-shm(5)'s field tables as (record, field, type, meaning), the
/// meaning of a `T{`...`T}` cell joined into one line.
fn shm_page_rows() -> Vec<(String, String, String, String)> {
    let man = std::fs::read_to_string(repo().join("man/gpupeek-shm.5")).unwrap();
    let (mut rows, mut record) = (Vec::new(), String::new());
    let mut lines = man.lines();
    while let Some(line) = lines.next() {
        if let Some(title) = line.strip_prefix(".SS ") {
            record = title.split(' ').next().unwrap().to_owned();
            continue;
        }
        let cells: Vec<&str> = line.split('|').collect();
        if cells.len() == 5 && cells[0].parse::<usize>().is_ok() {
            let mut meaning = cells[4].to_owned();
            if meaning == "T{" {
                meaning = lines.by_ref().take_while(|l| *l != "T}").collect();
            }
            rows.push((record.clone(), cells[2].into(), cells[3].into(), meaning));
        }
    }
    rows
}

/// The type column is the Rust field's type, and a field's `[bit N]` is the validity bit
/// shm-layout declares for it (none where it declares none), so the page cannot keep a
/// bit the readers' generated tables have dropped, or miss one they have.
#[test]
fn shm_page_field_types_and_validity_bits_are_the_rust_ones() {
    use gpupeek_shm::layout::BIT_SETS;
    let rows = shm_page_rows();
    let mut checked = 0;
    for record in gpupeek_shm::pin::RECORDS {
        let masks: Vec<_> = BIT_SETS
            .iter()
            .filter(|s| s.record == record.name && s.field.starts_with("valid"))
            .collect();
        for field in record.fields {
            let row = rows
                .iter()
                .find(|r| r.0 == record.name && r.1 == field.name)
                .unwrap_or_else(|| panic!("{}.{} has no row", record.name, field.name));
            assert_eq!(row.2, field.ty.name(), "{}.{}", record.name, field.name);
            let note = row.3.rfind('[').map(|i| &row.3[i + 1..]);
            // "[bit N]" (or "[valid bit N]") is a bit of `valid`, "[valid2 bit N]" of
            // `valid2`, "[valid3 bit N]" of `valid3`, "[valid4 bit N]" of `valid4`.
            let documented = note.and_then(|n| {
                let (mask, n) = if let Some(rest) = n.strip_prefix("valid2 ") {
                    ("valid2", rest)
                } else if let Some(rest) = n.strip_prefix("valid3 ") {
                    ("valid3", rest)
                } else if let Some(rest) = n.strip_prefix("valid4 ") {
                    ("valid4", rest)
                } else {
                    ("valid", n.trim_start_matches("valid "))
                };
                let rest = n.strip_prefix("bit ")?;
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                Some((mask, digits.parse::<u32>().unwrap()))
            });
            let declared = masks
                .iter()
                .find_map(|s| s.bit_of(field.name).map(|bit| (s.field, bit)));
            assert_eq!(
                documented, declared,
                "{}.{}: {}",
                record.name, field.name, row.3
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} rows found");
}

#[test]
fn mandoc_lint_finds_nothing_in_any_page() {
    let Some(mandoc) = tool("mandoc", "mandoc") else {
        return;
    };
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("man"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "1" || e == "5" || e == "8")
        })
        .collect();
    pages.sort();
    assert_eq!(pages.len(), 5, "{pages:?}");
    let mut cmd = Command::new(mandoc);
    cmd.args(["-T", "lint", "-W", "all"]).args(&pages);
    let out = run_with_watchdog(cmd);
    assert_eq!(
        (out.status.code(), stdout(&out), stderr(&out)),
        (Some(0), String::new(), String::new())
    );
}

/// The `jq` filters of the page's `gpupeek --json | jq '...'` examples.
fn jq_examples(man: &str) -> Vec<String> {
    man.lines()
        .filter_map(|l| l.split_once("| jq \\(aq")?.1.split_once("\\(aq"))
        .map(|(filter, _)| filter.to_owned())
        .collect()
}

#[test]
fn the_pages_jq_examples_pick_values_out_of_real_json() {
    let Some(jq) = tool("jq", "jq") else {
        return;
    };
    let filters = jq_examples(&page("gpupeek.1"));
    assert!(!filters.is_empty(), "gpupeek.1 has no jq example");
    let sb = Sandbox::new("manjq");
    sb.write_scenario(&serde_json::json!({"gpus": [{
        "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "pci_bus_id": "00000000:18:00.0",
        "memory_total_bytes": 85520809984u64, "memory_used_bytes": 1u64 << 30,
        "utilization_gpu_pct": 45, "temperature_c": 41
    }]}));
    let daemon = sb.start_daemon("50ms");
    sb.wait_live(&daemon);
    let json = sb.client(&["--json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let json_file = sb.dir.join("gpupeek.json");
    std::fs::write(&json_file, &json.stdout).unwrap();
    for filter in filters {
        let mut cmd = Command::new(&jq);
        cmd.arg(&filter).arg(&json_file);
        let out = run_with_watchdog(cmd);
        assert!(out.status.success(), "jq {filter}: {}", stderr(&out));
        let values = stdout(&out);
        assert!(
            !values.trim().is_empty() && !values.contains("null"),
            "jq {filter} gives {values:?}"
        );
    }
}
