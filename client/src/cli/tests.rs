//! gpustat's forms, global flags in any position, and the files generated from the
//! tables (gpupeek(1)'s option lists, contrib/completions/).

use super::*;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn main_args(args: &[&str]) -> Args {
    match parse(strings(args)) {
        Ok(Invocation::Main(args)) => *args,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn error(args: &[&str]) -> String {
    match parse(strings(args)) {
        Err(e) => e,
        Ok(other) => panic!("{args:?} parsed: {other:?}"),
    }
}

const BOTH: Option<Codec> = Some(Codec {
    enc: true,
    dec: true,
});

#[test]
fn gpustats_optional_values_attach_follow_or_default() {
    assert_eq!(main_args(&["-Pdraw"]).show_power, Some(Power::Draw));
    assert_eq!(
        main_args(&["-Plimit,draw"]).show_power,
        Some(Power::DrawLimit)
    );
    assert_eq!(
        main_args(&["-P", "limit"]).show_power,
        Some(Power::DrawLimit)
    );
    assert_eq!(main_args(&["-P"]).show_power, Some(Power::DrawLimit));
    assert_eq!(main_args(&["-P", ""]).show_power, None, "'' shows no power");
    assert_eq!(main_args(&["--show-power="]).show_power, None);
    assert_eq!(
        main_args(&["-eenc"]).show_codec,
        Some(Codec {
            enc: true,
            dec: false
        })
    );
    assert_eq!(main_args(&["-e", "-c"]).show_codec, BOTH);
    assert_eq!(main_args(&["--show-codec=enc,dec"]).show_codec, BOTH);
    assert_eq!(main_args(&["-i"]).watch, Some(1.0));
    assert_eq!(main_args(&["--interval", "0.5"]).watch, Some(0.5));
    assert_eq!(main_args(&["-i2"]).watch, Some(2.0));
}

#[test]
fn bundles_end_in_a_flag_that_may_take_the_next_value() {
    let args = main_args(&["-cufP"]);
    assert!(args.show_cmd && args.show_user && args.show_full_cmd);
    assert_eq!(args.show_power, Some(Power::DrawLimit));
    let args = main_args(&["-cupP", "draw"]);
    assert!(args.show_cmd && args.show_user && args.show_pid);
    assert_eq!(args.show_power, Some(Power::Draw));
    assert_eq!(main_args(&["-cPdraw"]).show_power, Some(Power::Draw));
}

#[test]
fn gpustats_long_names_and_prefixes_are_accepted() {
    assert!(main_args(&["--show-fan"]).show_fan_speed);
    assert!(main_args(&["--full-process-info"]).show_full_cmd);
    assert!(main_args(&["--color"]).color && main_args(&["--force-color"]).color);
    assert!(main_args(&["--no-h"]).no_header);
    assert_eq!(
        main_args(&["--id=0,2"]).id,
        Some(vec![
            crate::select::Select::Gpu(0),
            crate::select::Select::Gpu(2)
        ])
    );
    assert_eq!(
        main_args(&["--gpuname-width", "20"]).gpuname_width,
        Some(20)
    );
}

#[test]
fn bad_values_and_conflicts_are_one_line_errors() {
    for (args, says) in [
        (&["-e", "mp4"][..], "bad codec \"mp4\""),
        (&["-e", "dec,enc"], "bad codec"),
        (&["-P", "watts", "-c"], "bad power field \"watts\""),
        (&["--id", "x"], "bad GPU id \"x\": use an index"),
        (&["--gpuname-width", "-1"], "bad width"),
        (&["--gpuname-width", "1001"], "0 to 1000"),
        (&["-i", "soon"], "bad interval"),
        (&["--bogus"], "unknown option --bogus"),
        (&["-cx"], "unknown option -x"),
        (&["--color", "--no-color"], "not allowed"),
        (&["stray"], "unexpected argument \"stray\""),
        (&["--print-completion", "tcsh"], "bash, zsh or fish"),
        (
            &["--json", "query"],
            "--json is not an option of `gpupeek query`",
        ),
        (&["metrics", "--json"], "unknown option --json"),
        (&["query", "--format=csv"], "query needs --query-gpu"),
        (&["serve", "extra"], "unexpected argument \"extra\""),
    ] {
        let err = error(args);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains('\n'), "{args:?}: {err}");
    }
}

#[test]
fn shm_may_come_before_or_after_a_command() {
    for args in [
        &["--shm", "x", "metrics"][..],
        &["metrics", "--shm", "x"],
        &["--shm=y", "metrics", "--shm=x"],
    ] {
        match parse(strings(args)) {
            Ok(Invocation::Metrics(m)) => assert_eq!(m.shm.as_deref(), Some("x"), "{args:?}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
    match parse(strings(&[
        "--shm",
        "x",
        "query",
        "--query-gpu=index",
        "-i",
        "0",
    ])) {
        Ok(Invocation::Query(q)) => {
            assert_eq!((q.shm.as_deref(), q.id.as_deref()), (Some("x"), Some("0")));
            assert_eq!((q.query_gpu.as_str(), q.format.as_str()), ("index", "csv"));
        }
        other => panic!("{other:?}"),
    }
    // serve hands its arguments on to gpupeek-serve, a --shm before it first.
    for (args, argv) in [
        (
            &["serve", "--listen=127.0.0.1:0", "--shm", "s"][..],
            &["--listen=127.0.0.1:0", "--shm", "s"][..],
        ),
        (&["--shm", "x", "serve"], &["--shm=x"]),
        (
            &["--shm=-x", "serve", "--shm", "s"],
            &["--shm=-x", "--shm", "s"],
        ),
    ] {
        match parse(strings(args)) {
            Ok(Invocation::Serve(given)) => assert_eq!(given, argv, "{args:?}"),
            other => panic!("{args:?}: {other:?}"),
        }
        let Ok(Ok(serve)) = crate::serve::parse(strings(argv)) else {
            panic!("{argv:?}")
        };
        assert_eq!(
            serve.shm.as_deref(),
            Some(argv.last().unwrap().trim_start_matches("--shm="))
        );
    }
}

#[test]
fn help_version_and_completions_are_printed() {
    let print = |args: &[&str]| match parse(strings(args)) {
        Ok(Invocation::Print(text)) => text,
        other => panic!("{args:?}: {other:?}"),
    };
    let help = print(&["--help"]);
    assert!(help.contains("  -P, --show-power [WHAT]"), "{help}");
    assert!(help.contains("Commands (each has its own --help"), "{help}");
    assert!(help.contains("Status bars and prompts:"), "{help}");
    assert!(print(&["metrics", "-h"]).starts_with("Usage: gpupeek metrics"));
    let query = print(&["--shm", "x", "query", "--help"]);
    assert!(query.starts_with("Usage: gpupeek query"), "{query}");
    assert!(
        query.contains("--help-query-gpu (nvidia-smi's names"),
        "{query}"
    );
    assert!(print(&["query", "--help-query-gpu"]).contains("\"utilization.gpu\"\n"));
    assert!(print(&["-v"]).starts_with("gpupeek "));
    assert!(print(&["--print-completion", "bash"]).contains("complete -F _gpupeek gpupeek"));
    assert!(print(&["--print-completion=zsh"]).starts_with("#compdef gpupeek"));
    assert!(print(&["--print-completion", "fish"]).contains("-l show-power"));
}

#[test]
fn every_output_kind_offered_for_completion_parses() {
    for kind in flags::OUTPUT_KINDS {
        assert!(outputs::Kind::parse(kind).is_ok(), "{kind}");
    }
}

#[test]
fn show_all_is_gpustats_set() {
    let mut args = main_args(&["-a"]);
    args.expand_show_all();
    assert!(args.show_cmd && args.show_user && args.show_pid && args.show_fan_speed);
    assert_eq!(args.show_power, Some(Power::DrawLimit));
    assert_eq!(args.show_codec, BOTH);
    assert!(!args.show_full_cmd, "gpustat's -a leaves out -f");
}

#[test]
fn json_by_user_and_watch_do_not_mix_with_one_line_outputs() {
    assert_eq!(
        main_args(&["--follow", "--json"]).table_flag_with_line_output(),
        Some("--json")
    );
    assert_eq!(main_args(&["--follow"]).table_flag_with_line_output(), None);
    assert_eq!(main_args(&["--json"]).table_flag_with_line_output(), None);
    assert_eq!(
        main_args(&["-o", "waybar", "-i", "1"]).table_flag_with_line_output(),
        Some("--watch")
    );
}

/// The repository's root (the client crate is one level down).
fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `path` must hold `text`; with `GPUPEEK_WRITE_GENERATED=1` it is written instead.
pub fn check_generated(path: &std::path::Path, text: &str) {
    if std::env::var_os("GPUPEEK_WRITE_GENERATED").is_some() {
        std::fs::write(path, text).unwrap();
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == text,
        "{} differs from what the flag tables generate: run \
         `GPUPEEK_WRITE_GENERATED=1 cargo test -p gpupeek -p gpupeekd generated` and commit it",
        path.display()
    );
}

#[test]
fn generated_man_page_option_lists_are_the_flag_tables() {
    use gpupeek_flags::man::{options, splice};
    let path = repo().join("man/gpupeek.1");
    let mut page = std::fs::read_to_string(&path).unwrap();
    for (key, specs) in [
        ("gpupeek options", MAIN.specs()),
        ("query options", commands::QUERY.specs()),
        ("metrics options", commands::METRICS.specs()),
        ("serve options", commands::SERVE.specs()),
        ("history options", commands::HISTORY.specs()),
        ("fleet options", commands::FLEET.specs()),
    ] {
        page = splice(&page, key, &options(&specs)).unwrap();
    }
    check_generated(&path, &page);
    let path = repo().join("man/gpupeek-top.1");
    let page = std::fs::read_to_string(&path).unwrap();
    let page = splice(&page, "top options", &options(&commands::TOP.specs())).unwrap();
    check_generated(&path, &page);
    let path = repo().join("man/gpupeek-plot.1");
    let page = std::fs::read_to_string(&path).unwrap();
    let page = splice(&page, "plot options", &options(&commands::PLOT.specs())).unwrap();
    check_generated(&path, &page);
}

#[test]
fn generated_completion_scripts_are_the_flag_tables() {
    let dir = repo().join("contrib/completions");
    for (file, shell) in [
        ("gpupeek.bash", Shell::Bash),
        ("_gpupeek", Shell::Zsh),
        ("gpupeek.fish", Shell::Fish),
    ] {
        check_generated(&dir.join(file), &completion(shell));
    }
}

/// Every sequence of up to three of these words parses or fails with one line; none
/// panics (the parser sees hostile input too).
#[test]
fn no_short_command_line_panics_or_gets_a_multi_line_error() {
    const WORDS: &[&str] = &[
        "-c",
        "-P",
        "",
        "draw",
        "-Pdraw",
        "--shm",
        "x",
        "query",
        "metrics",
        "--",
        "-",
        "-1",
        "--show-p=",
        "-e",
        "-i",
        "-cupP",
        "--id",
        "0,x",
        "--query-gpu=i",
        "--help",
        "-h",
        "--print-completion",
        "=",
        "--=",
        "-=",
        "é",
        "-é",
        "--no-color",
        "--color",
    ];
    let mut argvs: Vec<Vec<&str>> = vec![vec![]];
    for _ in 0..3 {
        let longer: Vec<Vec<&str>> = argvs
            .iter()
            .filter(|argv| argv.len() == argvs.last().unwrap().len())
            .flat_map(|argv| WORDS.iter().map(move |w| [&argv[..], &[*w]].concat()))
            .collect();
        argvs.extend(longer);
    }
    let mut lines = 0;
    for argv in &argvs {
        if let Err(e) = parse(strings(argv)) {
            assert!(!e.contains('\n') && !e.is_empty(), "{argv:?}: {e:?}");
        }
        lines += 1;
    }
    assert!(lines > 20_000);
}
