//! The parsing rules of the module doc, on a small table.

use super::*;

#[derive(Debug, Default, PartialEq)]
struct A {
    c: bool,
    u: bool,
    power: Option<String>,
    id: Option<String>,
    watch: Option<String>,
}

const FLAGS: &[Flag<A>] = &[
    Flag {
        spec: Spec {
            short: Some('c'),
            ..Spec::switch("show-cmd", "command")
        },
        apply: |a, _| {
            a.c = true;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            short: Some('u'),
            ..Spec::switch("show-user", "user")
        },
        apply: |a, _| {
            a.u = true;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            short: Some('P'),
            arity: Arity::Optional("WHAT", "draw,limit"),
            ..Spec::switch("show-power", "power")
        },
        apply: |a, v| {
            a.power = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("IDS"),
            ..Spec::switch("id", "ids")
        },
        apply: |a, v| match v {
            "bad" => Err(format!("bad id {v:?}")),
            _ => {
                a.id = Some(v.to_owned());
                Ok(())
            }
        },
    },
    Flag {
        spec: Spec {
            short: Some('i'),
            aliases: &["interval"],
            arity: Arity::Optional("SECS", "1"),
            ..Spec::switch("watch", "watch")
        },
        apply: |a, v| {
            a.watch = Some(v.to_owned());
            Ok(())
        },
    },
];

const CMD: Command<A> = Command {
    name: "test",
    usage: "test [options]",
    about: "a test",
    flags: FLAGS,
    after: "",
};

fn parse(args: &[&str]) -> Result<(A, Stop), Error> {
    let mut a = A::default();
    let mut p = Parser::new(args.iter().map(|s| s.to_string()));
    let stop = p.parse(&CMD, &mut a)?;
    Ok((a, stop))
}

fn power(args: &[&str]) -> Option<String> {
    parse(args).unwrap().0.power
}

#[test]
fn optional_values_attach_follow_or_default_as_in_argparse() {
    assert_eq!(power(&["-P"]).as_deref(), Some("draw,limit"));
    assert_eq!(power(&["-Pdraw"]).as_deref(), Some("draw"));
    assert_eq!(power(&["-P=draw"]).as_deref(), Some("draw"));
    assert_eq!(power(&["-P", "limit"]).as_deref(), Some("limit"));
    assert_eq!(power(&["-P", ""]).as_deref(), Some(""));
    assert_eq!(power(&["--show-power="]).as_deref(), Some(""));
    assert_eq!(power(&["--show-power", "draw"]).as_deref(), Some("draw"));
    assert_eq!(power(&["-P", "-c"]).as_deref(), Some("draw,limit"));
    assert_eq!(power(&["-P", "--", "x"]).as_deref(), Some("draw,limit"));
}

#[test]
fn switches_bundle_and_the_last_letter_may_take_a_value() {
    let (a, _) = parse(&["-cuP", "draw"]).unwrap();
    assert!(a.c && a.u);
    assert_eq!(a.power.as_deref(), Some("draw"));
    let (a, _) = parse(&["-cPlimit"]).unwrap();
    assert!(a.c && !a.u);
    assert_eq!(a.power.as_deref(), Some("limit"));
}

#[test]
fn negative_numbers_are_values_other_dashed_words_are_flags() {
    assert_eq!(parse(&["-i", "-1"]).unwrap().0.watch.as_deref(), Some("-1"));
    assert_eq!(
        parse(&["-i", "-.5"]).unwrap().0.watch.as_deref(),
        Some("-.5")
    );
    assert_eq!(parse(&["-i", "-c"]).unwrap().0.watch.as_deref(), Some("1"));
    assert!(parse(&["--id", "--watch"])
        .unwrap_err()
        .0
        .contains("needs a value"));
    assert_eq!(parse(&["--id", "-3"]).unwrap().0.id.as_deref(), Some("-3"));
    assert_eq!(parse(&["--id", "-"]).unwrap().0.id.as_deref(), Some("-"));
}

#[test]
fn a_unique_prefix_or_alias_names_a_long_flag() {
    assert_eq!(
        parse(&["--show-p"]).unwrap().0.power.as_deref(),
        Some("draw,limit")
    );
    assert_eq!(
        parse(&["--interval=2"]).unwrap().0.watch.as_deref(),
        Some("2")
    );
    assert_eq!(
        parse(&["--inter", "2"]).unwrap().0.watch.as_deref(),
        Some("2")
    );
    let err = parse(&["--show"]).unwrap_err().0;
    assert!(
        err.contains("ambiguous") && err.contains("--show-cmd"),
        "{err}"
    );
}

#[test]
fn bad_input_is_a_one_line_error_naming_the_flag() {
    for (args, says) in [
        (&["--bogus"][..], "unknown option --bogus"),
        (&["-x"], "unknown option -x"),
        (&["-cx"], "unknown option -x"),
        (&["--show-cmd=yes"], "--show-cmd"),
        (&["--id"], "--id needs a value"),
        (&["--id", "bad"], "--id: bad id \"bad\""),
    ] {
        let err = parse(args).unwrap_err().0;
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains('\n'), "{args:?}: {err}");
    }
}

#[test]
fn a_word_stops_parsing_and_help_is_reported() {
    let mut a = A::default();
    let mut p = Parser::new(["-c", "query", "-u"].map(String::from));
    assert_eq!(p.parse(&CMD, &mut a), Ok(Stop::Word("query".into())));
    assert_eq!(p.parse(&CMD, &mut a), Ok(Stop::End));
    assert!(a.c && a.u);
    assert_eq!(p.seen(), ["show-cmd", "show-user"]);
    assert_eq!(parse(&["--help"]).unwrap().1, Stop::Help);
    assert_eq!(parse(&["-ch"]).unwrap().1, Stop::Help);
    assert_eq!(parse(&["--", "-c"]).unwrap().1, Stop::Word("-c".into()));
}

#[test]
fn the_rest_after_a_word_is_handed_on_as_given() {
    let mut a = A::default();
    let mut p = Parser::new(["-c", "serve", "--id=x", "-h", "--", "word"].map(String::from));
    assert_eq!(p.parse(&CMD, &mut a), Ok(Stop::Word("serve".into())));
    assert_eq!(p.rest().unwrap(), ["--id=x", "-h", "--", "word"]);
    assert_eq!(p.parse(&CMD, &mut a), Ok(Stop::End));
    assert!(a.c && a.id.is_none());
}

#[test]
fn help_by_its_whole_name_wins_over_a_flag_that_begins_with_it() {
    const FLAGS: &[Flag<A>] = &[Flag {
        spec: Spec::switch("help-query-gpu", "fields"),
        apply: |a, _| {
            a.c = true;
            Ok(())
        },
    }];
    let cmd = Command {
        flags: FLAGS,
        ..CMD
    };
    let run = |argv: &[&str]| {
        let mut a = A::default();
        let stop = Parser::new(argv.iter().map(|s| s.to_string())).parse(&cmd, &mut a);
        stop.map(|stop| (stop, a.c))
    };
    assert_eq!(run(&["--help"]), Ok((Stop::Help, false)));
    assert_eq!(run(&["--help-query-gpu"]), Ok((Stop::End, true)));
    assert_eq!(run(&["--help-q"]), Ok((Stop::End, true)));
    assert_eq!(
        run(&["--hel"]),
        Err(Error(
            "ambiguous option --hel: --help, --help-query-gpu".into()
        ))
    );
}

#[test]
fn help_lists_every_flag_with_its_value() {
    let text = help::render(&CMD);
    assert!(
        text.contains("  -P, --show-power [WHAT]\n                        power\n"),
        "{text}"
    );
    assert!(
        text.contains("  -i, --watch, --interval [SECS]\n"),
        "{text}"
    );
    assert!(text.contains("  --id IDS              ids\n"), "{text}");
    assert!(
        text.contains("  -h, --help            print this help"),
        "{text}"
    );
}

#[test]
fn man_entries_escape_hyphens_and_name_values_in_italics() {
    let text = man::options(&CMD.specs());
    assert!(
        text.contains(".TP\n.BR \\-c \", \" \\-\\-show\\-cmd\nCommand.\n"),
        "{text}"
    );
    assert!(
        text.contains(".BR \\-P \", \" \\-\\-show\\-power \" [\\fIwhat\\fP]\"\n"),
        "{text}"
    );
    assert!(text.contains(".BR \\-\\-id \" \\fIids\\fP\"\n"), "{text}");
}

#[test]
fn splice_replaces_only_between_the_markers() {
    let page = "a\n.\\\" generated: x\nold\n.\\\" end generated: x\nb\n";
    assert_eq!(
        man::splice(page, "x", "new\n").unwrap(),
        "a\n.\\\" generated: x\nnew\n.\\\" end generated: x\nb\n"
    );
    assert!(man::splice(page, "y", "").is_err());
}

#[test]
fn a_flag_without_help_or_a_command_without_about_still_renders() {
    const BARE: Command<A> = Command {
        name: "bare",
        usage: "bare",
        about: "",
        flags: &[Flag {
            spec: Spec::switch("quiet", ""),
            apply: |_, _| Ok(()),
        }],
        after: "",
    };
    let text = help::render(&BARE);
    assert!(text.contains("\n  --quiet "), "{text}");
    assert!(man::options(&BARE.specs()).contains(".B \\-\\-quiet\n"));
}
