//! The man pages' option lists: each flag of a table as a `.TP` entry in man(7), its tag
//! the flag's names and value, its paragraph the flag's `man` text (or its help line as
//! a sentence). The pages keep everything else hand-written; [`splice`] puts a list
//! between the marker comments of a page:
//!
//! ```text
//! .\" generated: gpupeek options (do not edit: see man/README.md)
//! .\" end generated: gpupeek options
//! ```

use crate::{Arity, Spec};

/// The `.TP` entries of `specs`, in order, each line ending in a newline.
pub fn options(specs: &[&Spec]) -> String {
    let mut out = String::new();
    for spec in specs {
        out.push_str(".TP\n");
        out.push_str(&tag(spec));
        out.push('\n');
        if spec.man.is_empty() {
            out.push_str(&sentence(spec.help));
        } else {
            out.push_str(spec.man.trim());
        }
        out.push('\n');
    }
    out
}

/// `.BR \-P ", " \-\-show\-power " [\fIwhat\fP]"`.
fn tag(spec: &Spec) -> String {
    let names: Vec<String> = spec.names().iter().map(|n| n.replace('-', "\\-")).collect();
    let value = match spec.arity {
        Arity::Switch => None,
        Arity::Value(name) => Some(format!("\" \\fI{}\\fP\"", name.to_lowercase())),
        Arity::Optional(name, _) => Some(format!("\" [\\fI{}\\fP]\"", name.to_lowercase())),
    };
    if names.len() == 1 && value.is_none() {
        return format!(".B {}", names[0]);
    }
    let mut words = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            words.push("\", \"".to_owned());
        }
        words.push(name.clone());
    }
    words.extend(value);
    format!(".BR {}", words.join(" "))
}

/// A help line as a roff sentence: capitalised, escaped, with a full stop, in lines of
/// at most 78 bytes.
fn sentence(help: &str) -> String {
    let mut chars = help.chars();
    let first = chars.next().map(|c| c.to_uppercase().collect::<String>());
    let text = format!("{}{}.", first.unwrap_or_default(), chars.as_str());
    let mut lines: Vec<String> = Vec::new();
    for word in escape(&text).split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= 78 => {
                line.push(' ');
                line.push_str(word);
            }
            // A line must not start with a control character.
            _ if word.starts_with(['.', '\'']) => lines.push(format!("\\&{word}")),
            _ => lines.push(word.to_owned()),
        }
    }
    lines.join("\n")
}

/// Plain text as roff: backslashes and hyphens escaped, no line starting with a control
/// character.
pub fn escape(text: &str) -> String {
    let text = text.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with(['.', '\'']) {
        format!("\\&{text}")
    } else {
        text
    }
}

/// `page` with the lines between the markers of `key` replaced by `body`; an error when
/// the page lacks the markers.
pub fn splice(page: &str, key: &str, body: &str) -> Result<String, String> {
    let begin = format!(".\\\" generated: {key}");
    let end = format!(".\\\" end generated: {key}\n");
    let start = page
        .find(&begin)
        .and_then(|at| page[at..].find('\n').map(|nl| at + nl + 1))
        .ok_or_else(|| format!("no line starting {begin:?}"))?;
    let stop = page[start..]
        .find(&end)
        .map(|at| start + at)
        .ok_or_else(|| format!("no line {:?} after {begin:?}", end.trim_end()))?;
    Ok(format!("{}{body}{}", &page[..start], &page[stop..]))
}
