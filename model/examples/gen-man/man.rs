//! The generated blocks of `man/gpupeek.1`, rendered from the field table: the template
//! field list and the FIELDS section. Shared by the `gen-man`
//! example and its drift test (`tests/man.rs`).

use gpupeek_model::fields::{Tier, FIELDS};
use gpupeek_shm::layout::{gpu_valid, gpu_valid2, gpu_valid3, gpu_valid4};

/// How to regenerate.
pub const COMMAND: &str = "cargo run -p gpupeek-model --example gen-man -- --write";

/// The page the blocks live in, relative to the repository root.
pub const PAGE: &str = "man/gpupeek.1";

/// One generated block: everything from the line holding `begin` to the line holding
/// `end`, both kept.
pub struct Block {
    /// The begin marker (a roff comment).
    pub begin: String,
    /// The end marker (a roff comment naming the block).
    pub end: String,
    /// The whole block, markers included, with its final newline.
    pub text: String,
}

/// Every generated block of the page.
pub fn blocks() -> Vec<Block> {
    vec![
        block("template-fields", &template_fields()),
        block("field-table", &field_table()),
    ]
}

fn block(name: &str, body: &str) -> Block {
    let begin = format!(".\\\" generated: {name}");
    let end = format!(".\\\" end generated: {name}");
    Block {
        text: format!(
            "{begin}\n.\\\" from the field table by gen-man: see man/README.md\n{body}{end}\n"
        ),
        begin,
        end,
    }
}

/// Replaces `block` in `page`.
pub fn splice(page: &str, block: &Block) -> Result<String, String> {
    let start = page
        .find(&block.begin)
        .ok_or_else(|| format!("{PAGE}: no line {:?}", block.begin))?;
    let end = page[start..]
        .find(&block.end)
        .map(|i| start + i + block.end.len())
        .ok_or_else(|| format!("{PAGE}: no {:?} after {:?}", block.end, block.begin))?;
    let end = page[end..].find('\n').map_or(page.len(), |i| end + i + 1);
    Ok(format!("{}{}{}", &page[..start], block.text, &page[end..]))
}

/// Words joined by ", " and filled into lines of at most 78 characters.
fn fill(words: &[String], last: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for (i, w) in words.iter().enumerate() {
        let piece = if i + 1 == words.len() {
            format!("{w}{last}")
        } else {
            format!("{w},")
        };
        if !line.is_empty() && line.len() + 1 + piece.len() > 78 {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&piece);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

fn template_fields() -> String {
    let names: Vec<String> = FIELDS
        .iter()
        .filter(|f| f.template)
        .map(|f| f.name.to_owned())
        .collect();
    format!("Fields:\n{}", fill(&names, ","))
}

fn field_table() -> String {
    let mut out = String::new();
    for f in FIELDS {
        out.push_str(&format!(".TP\n.B {}\n", f.name));
        let about = format!("{} ({}).", capitalised(f.about), f.unit.name());
        let words: Vec<String> = about.split(' ').map(str::to_owned).collect();
        out.push_str(&fill_words(&words));
        if f.tier == Tier::Identity {
            out.push_str("Known in every GPU state.\n");
        }
        let bits: Vec<&str> = gpu_valid::SET
            .bits
            .iter()
            .filter(|b| f.valid & (1 << b.bit) != 0)
            .chain(
                gpu_valid2::SET
                    .bits
                    .iter()
                    .filter(|b| f.valid2 & (1 << b.bit) != 0),
            )
            .chain(
                gpu_valid3::SET
                    .bits
                    .iter()
                    .filter(|b| f.valid3 & (1 << b.bit) != 0),
            )
            .chain(
                gpu_valid4::SET
                    .bits
                    .iter()
                    .filter(|b| f.valid4 & (1 << b.bit) != 0),
            )
            .map(|b| b.name)
            .collect();
        if !bits.is_empty() {
            out.push_str(&format!("Validity: {}.\n", bits.join(" and ")));
        }
        if !f.template {
            out.push_str("Not a template field.\n");
        }
        let smi: Vec<String> = f.smi.iter().map(|n| n.join(" or ")).collect();
        if !smi.is_empty() {
            let line = format!("nvidia-smi: {}.", smi.join(", "));
            let words: Vec<String> = line.split(' ').map(str::to_owned).collect();
            out.push_str(&fill_words(&words));
        }
        if let Some(key) = f.gpustat {
            out.push_str(&format!("JSON: {key}.\n"));
        }
        if let Some(p) = f.prom {
            let label = match p.label {
                "" => String::new(),
                l => format!("{{{l}}}"),
            };
            out.push_str(&format!("Prometheus: {}{label} ({}).\n", p.name, p.kind));
        }
    }
    out
}

/// Words joined by spaces and filled into lines of at most 78 characters.
fn fill_words(words: &[String]) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for w in words {
        if !line.is_empty() && line.len() + 1 + w.len() > 78 {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|first| first.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
