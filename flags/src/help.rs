//! `--help`: the usage, what the command does, then one entry per flag of its table in
//! table order (names, value, help wrapped to 80 columns), then its notes.

use crate::{Arity, Command, Spec};

/// Width of the names column; longer names put the help on the next line.
const NAMES: usize = 24;
/// Width of the whole text.
const WIDTH: usize = 80;

/// The `--help` text of `command`.
pub fn render<A>(command: &Command<A>) -> String {
    let mut out = format!(
        "Usage: {}\n\n{}\n\nOptions:\n",
        command.usage, command.about
    );
    let help = Spec {
        short: Some('h'),
        ..Spec::switch("help", "print this help and exit")
    };
    for spec in command.flags.iter().map(|f| &f.spec).chain([&help]) {
        out.push_str(&entry(spec));
    }
    if !command.after.is_empty() {
        out.push('\n');
        out.push_str(command.after.trim_end());
        out.push('\n');
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
    let names = names_and_value(spec);
    let mut out = format!("  {names}");
    let indent = " ".repeat(NAMES);
    let mut column = out.len();
    if column + 2 > NAMES {
        out.push('\n');
        out.push_str(&indent);
    } else {
        out.push_str(&" ".repeat(NAMES - column));
    }
    column = NAMES;
    for word in spec.help.split_whitespace() {
        if column > NAMES && column + 1 + word.len() > WIDTH {
            out.push('\n');
            out.push_str(&indent);
            column = NAMES;
        }
        if column > NAMES {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word.len();
    }
    out.push('\n');
    out
}
