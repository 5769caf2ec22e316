//! `--help`: the usage, what the command does, then one entry per flag of its table in
//! table order (names, value, help wrapped to 80 columns), then its notes.

use crate::{Arity, Command, Spec};

/// Width of the names column; longer names put the help on the next line.
const NAMES: usize = 24;
/// Width of the whole text.
const WIDTH: usize = 80;

/// The `--help` text of `command`.
pub fn render<A>(command: &Command<A>) -> String {
    let mut out = format!("Usage: {}\n\n", command.usage);
    out.push_str(&wrap(command.about, 0));
    out.push_str("\nOptions:\n");
    let help = Spec {
        short: Some('h'),
        ..Spec::switch("help", "print this help and exit")
    };
    for spec in command.flags.iter().map(|f| &f.spec).chain([&help]) {
        out.push_str(&entry(spec));
    }
    // Notes: a paragraph on one line is wrapped, one laid out in lines is kept.
    for paragraph in command
        .after
        .trim_end()
        .split("\n\n")
        .filter(|p| !p.is_empty())
    {
        out.push('\n');
        if paragraph.contains('\n') {
            out.push_str(paragraph);
            out.push('\n');
        } else {
            out.push_str(&wrap(paragraph, 0));
        }
    }
    out
}

/// The names of a flag as `--help` and the man page show them, with its value:
/// `-P, --show-power [WHAT]`.
pub fn names_and_value(spec: &Spec) -> String {
    let mut text = spec.names().join(", ");
    match spec.arity {
        Arity::Switch => {}
        Arity::Value(name) => text += &format!(" {name}"),
        Arity::Optional(name, _) => text += &format!(" [{name}]"),
    }
    text
}

fn entry(spec: &Spec) -> String {
    let names = format!("  {}", names_and_value(spec));
    let help = wrap(spec.help, NAMES);
    if names.len() + 2 > NAMES {
        format!("{names}\n{help}")
    } else {
        // `wrap` indents the first line too; the names take that place.
        format!("{names:NAMES$}{}", help.get(NAMES..).unwrap_or("\n"))
    }
}

/// `text` in lines of at most 80 columns, each indented by `indent` spaces and ending in
/// a newline.
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut column = 0;
    for word in text.split_whitespace() {
        if column > indent && column + 1 + word.len() > WIDTH {
            out.push('\n');
            column = 0;
        }
        if column == 0 {
            out.push_str(&" ".repeat(indent));
            column = indent;
        } else {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word.len();
    }
    out.push('\n');
    out
}
