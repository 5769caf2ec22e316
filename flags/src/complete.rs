//! Shell completion scripts for bash, zsh and fish, written from the flag tables: every
//! flag by all its names, the words a value may be (choices, files, directories), and
//! the subcommands with their own flags.

use crate::{Arity, Spec, Values};

/// A program's flags, and its subcommands' (none for gpupeekd).
pub struct Tree<'a> {
    /// The program's name, the command being completed.
    pub program: &'a str,
    /// Flags before (or without) a subcommand.
    pub top: Vec<&'a Spec>,
    /// Each subcommand: its name, one line about it, and its flags.
    pub commands: Vec<(&'a str, &'a str, Vec<&'a Spec>)>,
}

/// A shell [`script`] can be written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// bash, through `complete -F`.
    Bash,
    /// zsh, through compsys's `_arguments`.
    Zsh,
    /// fish, through `complete`.
    Fish,
}

impl Shell {
    /// Every shell, in the order `--print-completion` lists them.
    pub const ALL: [(&'static str, Shell); 3] = [
        ("bash", Shell::Bash),
        ("zsh", Shell::Zsh),
        ("fish", Shell::Fish),
    ];

    /// The shell named `name`.
    pub fn from_name(name: &str) -> Option<Shell> {
        Shell::ALL.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }

    /// `--print-completion`'s value: the shell, or the one-line error for a flag's
    /// `apply`.
    pub fn parse(name: &str) -> Result<Shell, String> {
        Shell::from_name(name)
            .ok_or_else(|| format!("no completion for {name:?}: use bash, zsh or fish"))
    }
}

/// `--print-completion SHELL`, as every command of the project spells it.
pub const PRINT_COMPLETION: crate::Spec = crate::Spec {
    arity: crate::Arity::Value("SHELL"),
    values: crate::Values::Choices(&["bash", "zsh", "fish"]),
    man: r"Print the completion script for
.IR shell :
.BR bash ,
.B zsh
or
.BR fish ,
written from the same table as this page's options (see
.BR FILES ).",
    ..crate::Spec::switch(
        "print-completion",
        "print the completion script for bash, zsh or fish and exit",
    )
};

/// The completion script of `tree` for `shell`.
pub fn script(shell: Shell, tree: &Tree) -> String {
    match shell {
        Shell::Bash => bash(tree),
        Shell::Zsh => zsh(tree),
        Shell::Fish => fish(tree),
    }
}

fn header(tree: &Tree, shell: &str) -> String {
    format!(
        "# {shell} completion for {p}, generated from its flag table by `{p} \
         --print-completion {shell}`.\n",
        p = tree.program
    )
}

/// Every context: "" for the program itself, then each subcommand.
fn contexts<'a>(tree: &'a Tree) -> Vec<(&'a str, &'a [&'a Spec])> {
    std::iter::once(("", &tree.top[..]))
        .chain(tree.commands.iter().map(|(n, _, s)| (*n, &s[..])))
        .collect()
}

fn bash(tree: &Tree) -> String {
    let f = format!("_{}", tree.program);
    let names: Vec<&str> = tree.commands.iter().map(|c| c.0).collect();
    let mut out = header(tree, "bash");
    out += &format!("{f}() {{\n");
    out += "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i\n";
    out +=
        "    if [[ $prev == = && $COMP_CWORD -gt 1 ]]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi\n";
    if !names.is_empty() {
        out += "    for ((i = 1; i < COMP_CWORD; i++)); do\n";
        out += &format!(
            "        case ${{COMP_WORDS[i]}} in {}) cmd=${{COMP_WORDS[i]}}; break ;; esac\n",
            names.join(" | ")
        );
        out += "    done\n";
    }
    out += "    local flags\n    case $cmd in\n";
    for (name, specs) in contexts(tree) {
        let mut words: Vec<String> = specs.iter().flat_map(|s| s.names()).collect();
        words.extend(["-h".into(), "--help".into()]);
        let pattern = if name.is_empty() { "''" } else { name };
        out += &format!("    {pattern}) flags='{}' ;;\n", words.join(" "));
    }
    out += "    esac\n    case $cmd:$prev in\n";
    for (name, specs) in contexts(tree) {
        for spec in specs.iter().filter(|s| s.arity != Arity::Switch) {
            let pattern: Vec<String> = spec.names().iter().map(|n| format!("{name}:{n}")).collect();
            let reply = match spec.values {
                Values::Any => "COMPREPLY=()".to_owned(),
                Values::Choices(words) => {
                    format!(
                        "COMPREPLY=($(compgen -W '{}' -- \"$cur\"))",
                        words.join(" ")
                    )
                }
                Values::File => "COMPREPLY=($(compgen -f -- \"$cur\"))".to_owned(),
                Values::Dir => "COMPREPLY=($(compgen -d -- \"$cur\"))".to_owned(),
            };
            // An optional value gives way to a flag being typed.
            let guard = match spec.arity {
                Arity::Optional(..) => "[[ $cur == -* ]] || ",
                _ => "",
            };
            out += &format!(
                "    {}) {guard}{{ {reply}; return; }} ;;\n",
                pattern.join(" | ")
            );
        }
    }
    out += "    esac\n";
    out += "    if [[ $cur == -* ]]; then\n";
    out += "        COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n";
    if !names.is_empty() {
        out += "    elif [[ -z $cmd ]]; then\n";
        out += &format!(
            "        COMPREPLY=($(compgen -W '{}' -- \"$cur\"))\n",
            names.join(" ")
        );
    }
    out += "    fi\n}\n";
    out += &format!("complete -F {f} {}\n", tree.program);
    out
}

/// Text inside a zsh `[description]` in a single-quoted word.
fn zsh_text(help: &str) -> String {
    let words: Vec<&str> = help.split_whitespace().collect();
    words
        .join(" ")
        .replace('\\', "\\\\")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace(':', "\\:")
        .replace('\'', "'\\''")
}

fn zsh_spec(name: &str, spec: &Spec) -> String {
    let long = name.starts_with("--");
    let action = match spec.values {
        Values::Any => " ".to_owned(),
        Values::Choices(words) => format!("({})", words.join(" ")),
        Values::File => "_files".to_owned(),
        Values::Dir => "_files -/".to_owned(),
    };
    let help = zsh_text(spec.help);
    match spec.arity {
        Arity::Switch => format!("'{name}[{help}]'"),
        Arity::Value(v) => {
            let join = if long { "=" } else { "+" };
            format!("'{name}{join}[{help}]:{}:{action}'", v.to_lowercase())
        }
        Arity::Optional(v, _) => {
            let join = if long { "=" } else { "+" };
            format!("'{name}{join}[{help}]::{}:{action}'", v.to_lowercase())
        }
    }
}

fn zsh(tree: &Tree) -> String {
    let f = format!("_{}", tree.program);
    let names: Vec<&str> = tree.commands.iter().map(|c| c.0).collect();
    let mut out = format!("#compdef {}\n", tree.program);
    out += &header(tree, "zsh");
    out += &format!("{f}() {{\n");
    out += "    local cmd= w\n";
    if !names.is_empty() {
        out += "    for w in ${words[2,CURRENT-1]}; do\n";
        out += &format!(
            "        case $w in ({}) cmd=$w; break ;; esac\n",
            names.join("|")
        );
        out += "    done\n";
    }
    out += "    case $cmd in\n";
    for (name, specs) in contexts(tree) {
        let pattern = if name.is_empty() { "''" } else { name };
        out += &format!("    {pattern})\n        _arguments -s -S \\\n");
        for spec in specs {
            for n in spec.names() {
                out += &format!("            {} \\\n", zsh_spec(&n, spec));
            }
        }
        out += "            '(- *)'{-h,--help}'[print the help and exit]' \\\n";
        if name.is_empty() && !names.is_empty() {
            out += &format!("            '1:command:({})'\n", names.join(" "));
        } else if !name.is_empty() {
            out += &format!("            '1:command:({name})'\n");
        } else {
            out += "            \n";
        }
        out += "        ;;\n";
    }
    out += "    esac\n}\n";
    out += &format!(
        "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n    {f} \"$@\"\nelse\n    \
         compdef {f} {}\nfi\n",
        tree.program
    );
    out
}

/// A word in single quotes for fish.
fn fish_quote(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    format!(
        "'{}'",
        words.join(" ").replace('\\', "\\\\").replace('\'', "\\'")
    )
}

fn fish(tree: &Tree) -> String {
    let p = tree.program;
    let names: Vec<&str> = tree.commands.iter().map(|c| c.0).collect();
    let mut out = header(tree, "fish");
    out += &format!("complete -c {p} -f\n");
    let outside = format!("not __fish_seen_subcommand_from {}", names.join(" "));
    for (name, about, _) in &tree.commands {
        out += &format!(
            "complete -c {p} -n '{outside}' -a {name} -d {}\n",
            fish_quote(about)
        );
    }
    for (name, specs) in contexts(tree) {
        let condition = match (name.is_empty(), names.is_empty()) {
            (_, true) => String::new(),
            (true, false) => format!(" -n '{outside}'"),
            (false, false) => format!(" -n '__fish_seen_subcommand_from {name}'"),
        };
        for spec in specs {
            let mut line = format!("complete -c {p}{condition}");
            if let Some(c) = spec.short {
                line += &format!(" -s {c}");
            }
            for long in std::iter::once(&spec.long).chain(spec.aliases) {
                line += &format!(" -l {long}");
            }
            if let Arity::Value(_) = spec.arity {
                line += match spec.values {
                    Values::Any => " -x".to_owned(),
                    Values::Choices(words) => format!(" -x -a {}", fish_quote(&words.join(" "))),
                    Values::File => " -r -F".to_owned(),
                    Values::Dir => " -x -a '(__fish_complete_directories)'".to_owned(),
                }
                .as_str();
            }
            line += &format!(" -d {}\n", fish_quote(spec.help));
            out += &line;
            // fish has no optional values: offer them right after the flag.
            if let (Arity::Optional(..), Values::Choices(words)) = (spec.arity, spec.values) {
                out += &format!(
                    "complete -c {p} -n '__fish_prev_arg_in {}' -a {}\n",
                    spec.names().join(" "),
                    fish_quote(&words.join(" "))
                );
            }
        }
        out += &format!("complete -c {p}{condition} -s h -l help -d 'print the help and exit'\n");
    }
    out
}
