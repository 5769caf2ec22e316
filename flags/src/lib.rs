//! gpupeek's flag tables: each flag of `gpupeek` and `gpupeekd` is declared once, as a
//! [`Flag`] in a [`Command`]'s table, and everything about it derives from that entry:
//! parsing ([`Parser`]), the `--help` text ([`help`]), the OPTIONS lists of the man
//! pages ([`man`]) and the bash, zsh and fish completion scripts ([`complete`]).
//!
//! Parsing follows Python's argparse, because gpupeek takes gpustat's flags and its users'
//! habits: `--flag=value` and `--flag value`, `-xVALUE`, `-x=VALUE` and `-x VALUE`,
//! bundled switches (`-cup`, `-cupP draw`), a unique prefix of a long flag (`--show-pow`),
//! and flags whose value is optional (gpustat's `nargs='?'`): a bare `-P` takes the
//! flag's default, and the next argument is its value unless it looks like a flag (it
//! starts with `-` and is not a negative number), so `-P ''` gives the empty value. A
//! flag given twice keeps its last value. Arguments are split by lexopt, which knows no
//! flag; the table decides what each one means.
//!
//! A word that is not a flag's value stops [`Parser::parse`] and is handed back, so a
//! program can treat it as a command name and go on parsing the rest with that command's
//! table: global flags (`--shm`) may then come before or after the command.

pub mod complete;
pub mod help;
pub mod man;

use std::ffi::OsString;

/// Whether a flag takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// A switch: no value.
    Switch,
    /// A value is required; the name shown for it in `--help` and the man page.
    Value(&'static str),
    /// A value may follow (argparse's `nargs='?'`): its name, and the value meant when
    /// the flag is given bare.
    Optional(&'static str, &'static str),
}

/// What a shell should offer for a flag's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// Nothing in particular.
    Any,
    /// One of these words (also listed in `--help`'s text where the flag's help says so).
    Choices(&'static [&'static str]),
    /// A file name.
    File,
    /// A directory name.
    Dir,
}

/// What there is to say about a flag: its names, value and documentation.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Long name without the dashes, e.g. `show-power`.
    pub long: &'static str,
    /// Short name, e.g. `P`.
    pub short: Option<char>,
    /// Other long names meaning the same flag, e.g. `interval` for `watch`.
    pub aliases: &'static [&'static str],
    /// Its value, if any.
    pub arity: Arity,
    /// What completion offers for its value.
    pub values: Values,
    /// One line (wrapped as needed) for `--help`: lower case, no final full stop.
    pub help: &'static str,
    /// The man page's paragraph for it, in roff (man(7)); empty: the help line,
    /// capitalised, as a sentence.
    pub man: &'static str,
}

impl Spec {
    /// A switch with this long name and help; the other fields are set with struct
    /// update syntax.
    pub const fn switch(long: &'static str, help: &'static str) -> Spec {
        Spec {
            long,
            short: None,
            aliases: &[],
            arity: Arity::Switch,
            values: Values::Any,
            help,
            man: "",
        }
    }

    /// `--long` and, when there is one, `-s`, in the order `--help` lists them.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.short.map(|c| format!("-{c}")).into_iter().collect();
        names.push(format!("--{}", self.long));
        names.extend(self.aliases.iter().map(|a| format!("--{a}")));
        names
    }
}

/// A flag of an argument type `A`: what it is, and what giving it does to `A`.
pub struct Flag<A> {
    /// Names, value and documentation.
    pub spec: Spec,
    /// Applies the flag: a switch gets `""`, a flag with an optional value its default
    /// when given bare. An error is a message for the user, naming the bad value.
    pub apply: fn(&mut A, &str) -> Result<(), String>,
}

/// A program or subcommand: its flags and the text around them in `--help`.
pub struct Command<A: 'static> {
    /// `gpupeek`, or a subcommand's `gpupeek query`.
    pub name: &'static str,
    /// The usage lines, without "Usage: ".
    pub usage: &'static str,
    /// What it does, one paragraph.
    pub about: &'static str,
    /// Its flags (`-h`/`--help` is implied).
    pub flags: &'static [Flag<A>],
    /// Text after the option list in `--help` (notes, examples); may be empty.
    pub after: &'static str,
}

impl<A> Command<A> {
    /// The specs of its flags, for the documentation generators.
    pub fn specs(&self) -> Vec<&'static Spec> {
        self.flags.iter().map(|f| &f.spec).collect()
    }
}

/// Why a command line cannot be parsed: one line for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<lexopt::Error> for Error {
    fn from(e: lexopt::Error) -> Self {
        Error(e.to_string())
    }
}

/// How [`Parser::parse`] stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every argument was read.
    End,
    /// `-h` or `--help` was given.
    Help,
    /// A word that is no flag's value (a command name, or a stray argument).
    Word(String),
}

/// A command line being parsed, one command's table at a time.
pub struct Parser {
    inner: lexopt::Parser,
    seen: Vec<&'static str>,
}

impl Parser {
    /// A parser of `args`, the arguments after the program name.
    pub fn new(args: impl IntoIterator<Item = String>) -> Parser {
        Parser {
            inner: lexopt::Parser::from_args(args),
            seen: Vec::new(),
        }
    }

    /// The long names of the flags given so far, in order.
    pub fn seen(&self) -> &[&'static str] {
        &self.seen
    }

    /// The arguments not read yet, as given: after a [`Stop::Word`], what follows that
    /// word (a command's own arguments, to hand to another program).
    pub fn rest(&mut self) -> Result<Vec<String>, Error> {
        self.inner.raw_args()?.map(utf8).collect()
    }

    /// Reads flags of `command` into `args` until the end, `--help`, or a word that is no
    /// flag's value. After `--`, everything is a word.
    pub fn parse<A>(&mut self, command: &Command<A>, args: &mut A) -> Result<Stop, Error> {
        while let Some(arg) = self.inner.next()? {
            let (flag, shown) = match arg {
                lexopt::Arg::Short('h') => return Ok(Stop::Help),
                lexopt::Arg::Short(c) => (find_short(command, c)?, format!("-{c}")),
                // The implied `--help` by its whole name, whatever flags begin with it.
                lexopt::Arg::Long("help") => return Ok(Stop::Help),
                lexopt::Arg::Long(name) => match find_long(command, name) {
                    // A prefix of both `--help` and one flag's name is ambiguous.
                    Ok(flag)
                        if !name.is_empty() && "help".starts_with(name) && !exact(flag, name) =>
                    {
                        return Err(Error(format!(
                            "ambiguous option --{name}: --help, --{}",
                            flag.spec.long
                        )))
                    }
                    Ok(flag) => (flag, format!("--{}", flag.spec.long)),
                    // `--help`, or a prefix of it no flag shares.
                    Err(_) if !name.is_empty() && "help".starts_with(name) => {
                        return Ok(Stop::Help)
                    }
                    Err(e) => return Err(e),
                },
                lexopt::Arg::Value(word) => return Ok(Stop::Word(utf8(word)?)),
            };
            let value = self.value_of(&flag.spec, &shown)?;
            self.seen.push(flag.spec.long);
            (flag.apply)(args, &value).map_err(|e| Error(format!("{shown}: {e}")))?;
        }
        Ok(Stop::End)
    }

    /// The value `spec`'s flag takes here: attached (`-Pdraw`, `--id=0`), the next
    /// argument, or none, by the rules in the module doc.
    fn value_of(&mut self, spec: &Spec, shown: &str) -> Result<String, Error> {
        let (name, default) = match spec.arity {
            Arity::Switch => return Ok(String::new()),
            Arity::Value(name) => (name, None),
            Arity::Optional(name, default) => (name, Some(default)),
        };
        if let Some(attached) = self.inner.optional_value() {
            return utf8(attached);
        }
        let next = self
            .inner
            .try_raw_args()
            .and_then(|mut raw| raw.next_if(|next| !looks_like_flag(next)));
        match (next, default) {
            (Some(value), _) => utf8(value),
            (None, Some(default)) => Ok(default.to_owned()),
            (None, None) => Err(Error(format!("{shown} needs a value ({name})"))),
        }
    }
}

/// argparse's test for an argument that cannot be a value: it starts with `-`, is not
/// `-` alone and is not a negative number (`-1`, `-.5`, `-1.5`).
fn looks_like_flag(arg: &std::ffi::OsStr) -> bool {
    let Some(arg) = arg.to_str() else {
        return false;
    };
    let Some(rest) = arg.strip_prefix('-') else {
        return false;
    };
    if rest.is_empty() {
        return false;
    }
    let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let negative = digits(int)
        && digits(frac)
        && if rest.contains('.') {
            !frac.is_empty()
        } else {
            !int.is_empty()
        };
    !negative
}

fn utf8(arg: OsString) -> Result<String, Error> {
    arg.into_string()
        .map_err(|arg| Error(format!("argument {arg:?} is not valid UTF-8")))
}

fn find_short<A>(command: &Command<A>, c: char) -> Result<&Flag<A>, Error> {
    command
        .flags
        .iter()
        .find(|f| f.spec.short == Some(c))
        .ok_or_else(|| Error(format!("unknown option -{c} (see {} --help)", command.name)))
}

/// Whether `name` is one of `flag`'s whole names.
fn exact<A>(flag: &Flag<A>, name: &str) -> bool {
    flag.spec.long == name || flag.spec.aliases.contains(&name)
}

/// The flag named `name` or, as argparse allows, by a prefix of one flag's names only.
fn find_long<'a, A>(command: &'a Command<A>, name: &str) -> Result<&'a Flag<A>, Error> {
    let names = |f: &Flag<A>| std::iter::once(f.spec.long).chain(f.spec.aliases.iter().copied());
    if let Some(flag) = command.flags.iter().find(|f| names(f).any(|n| n == name)) {
        return Ok(flag);
    }
    let candidates: Vec<&Flag<A>> = command
        .flags
        .iter()
        .filter(|f| names(f).any(|n| n.starts_with(name)))
        .collect();
    match candidates[..] {
        [flag] => Ok(flag),
        [] => Err(Error(format!(
            "unknown option --{name} (see {} --help)",
            command.name
        ))),
        _ => {
            let list: Vec<String> = candidates
                .iter()
                .map(|f| format!("--{}", f.spec.long))
                .collect();
            Err(Error(format!(
                "ambiguous option --{name}: {}",
                list.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests;
