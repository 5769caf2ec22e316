//! The template parser: text, `{{`/`}}`, placeholders and `{each}` blocks, with errors
//! that carry the 1-based column of the offending character.

use crate::fields::Dim::{Bytes, Text};
use crate::fields::*;
use crate::{spark, Agg, Item, ParseError, Placeholder, Scope, Threshold};

pub(crate) fn err(column: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        column: column + 1,
        message: message.into(),
    }
}

/// Parses up to the end, or in a block up to its `{end}`; says whether `{end}` was seen.
pub(crate) fn parse_items(
    chars: &[char],
    pos: &mut usize,
    in_block: bool,
) -> Result<(Vec<Item>, bool), ParseError> {
    let mut items = Vec::new();
    let mut literal = String::new();
    while *pos < chars.len() {
        let c = chars[*pos];
        match c {
            '{' if chars.get(*pos + 1) == Some(&'{') => {
                literal.push('{');
                *pos += 2;
            }
            '}' if chars.get(*pos + 1) == Some(&'}') => {
                literal.push('}');
                *pos += 2;
            }
            '}' => return Err(err(*pos, "unmatched '}' (write '}}' for a literal brace)")),
            '{' => {
                let start = *pos;
                let close = chars[start..]
                    .iter()
                    .position(|&c| c == '}')
                    .map(|i| start + i)
                    .ok_or_else(|| err(start, "'{' is never closed"))?;
                let body: String = chars[start + 1..close].iter().collect();
                *pos = close + 1;
                if !literal.is_empty() {
                    items.push(Item::Text(std::mem::take(&mut literal)));
                }
                if body == "end" {
                    if in_block {
                        return Ok((items, true));
                    }
                    return Err(err(start, "{end} without {each}"));
                }
                if body == "each" || body.starts_with("each ") {
                    if in_block {
                        return Err(err(start, "{each} blocks cannot be nested"));
                    }
                    let sep = parse_separator(&body[4..], start + 5)?;
                    let (inner, closed) = parse_items(chars, pos, true)?;
                    if !closed {
                        return Err(err(start, "{each} is never closed with {end}"));
                    }
                    items.push(Item::Each { sep, body: inner });
                    continue;
                }
                items.push(Item::Value(parse_placeholder(&body, start + 1)?));
            }
            c => {
                literal.push(c);
                *pos += 1;
            }
        }
    }
    if !literal.is_empty() {
        items.push(Item::Text(literal));
    }
    Ok((items, false))
}

pub(crate) fn parse_separator(rest: &str, column: usize) -> Result<String, ParseError> {
    let rest = rest.trim();
    if rest.is_empty() {
        return Ok(String::new());
    }
    let quote = rest.chars().next().unwrap_or('"');
    if (quote == '"' || quote == '\'') && rest.len() >= 2 && rest.ends_with(quote) {
        return Ok(rest[1..rest.len() - 1].to_owned());
    }
    Err(err(
        column,
        "the separator of {each} must be quoted, e.g. {each \" | \"}",
    ))
}

pub(crate) fn parse_placeholder(body: &str, col: usize) -> Result<Placeholder, ParseError> {
    let (spec, threshold) = match body.split_once('!') {
        Some((spec, t)) => (spec, Some(parse_threshold(t, col + spec.len() + 1)?)),
        None => (body, None),
    };
    let mut parts = spec.split(':');
    let path = parts.next().unwrap_or_default();
    let (scope, name, name_col) = match path.split_once('.') {
        Some((s, rest)) => match rest.split_once('.').filter(|(gi, _)| gi.starts_with("gi")) {
            Some((gi, name)) => {
                let gi_col = col + s.len() + 1;
                (
                    parse_mig_scope(s, gi, col, gi_col)?,
                    name,
                    gi_col + gi.len() + 1,
                )
            }
            None => (parse_scope(s, col)?, rest, col + s.len() + 1),
        },
        None => (Scope::Natural, path, col),
    };
    if name.is_empty() {
        return Err(err(
            name_col,
            "empty placeholder: name a field, e.g. {util}",
        ));
    }
    let field = if let Some(g) = GLOBAL_FIELDS.iter().find(|f| f.name == name) {
        if scope != Scope::Natural {
            return Err(err(
                col,
                format!("{name} is about all GPUs and takes no scope"),
            ));
        }
        g
    } else {
        template_fields().find(|f| f.name == name).ok_or_else(|| {
            let known: Vec<&str> = field_names().collect();
            err(
                name_col,
                format!("unknown field \"{name}\" (fields: {})", known.join(", ")),
            )
        })?
    };
    let mut placeholder = Placeholder {
        scope,
        field,
        unit: None,
        precision: None,
        threshold,
        spark: None,
    };
    let mut part_col = col + path.len() + 1;
    for part in parts {
        if let Some(digits) = part.strip_prefix('.') {
            let p: usize =
                digits.parse().ok().filter(|&p| p <= 9).ok_or_else(|| {
                    err(part_col, format!("bad precision \"{part}\": use .0 to .9"))
                })?;
            placeholder.precision = Some(p);
        } else if let Some(width) = part.strip_prefix("spark") {
            placeholder.spark = Some(parse_spark(name, width, part_col)?);
        } else if part == "auto" && field.unit == Bytes {
            placeholder.unit = Some(&AUTO);
        } else {
            let found = UNITS.iter().find(|u| u.name == part && u.dim == field.unit);
            placeholder.unit = Some(found.ok_or_else(|| {
                let fits: Vec<&str> = UNITS
                    .iter()
                    .filter(|u| u.dim == field.unit)
                    .map(|u| u.name)
                    .collect();
                let hint = if fits.is_empty() {
                    "it has no units".to_owned()
                } else {
                    format!("use one of {}", fits.join(", "))
                };
                err(
                    part_col,
                    format!("\"{part}\" is not a unit of {name}: {hint}"),
                )
            })?);
        }
        part_col += part.len() + 1;
    }
    if placeholder.spark.is_some()
        && (placeholder.unit.is_some()
            || placeholder.precision.is_some()
            || placeholder.threshold.is_some())
    {
        return Err(err(
            col,
            format!("a sparkline ({name}:spark) takes no unit, precision or threshold"),
        ));
    }
    if placeholder.threshold.is_some() && matches!(field.unit, Text) {
        return Err(err(
            col,
            format!("{name} is text and cannot have a threshold"),
        ));
    }
    Ok(placeholder)
}

/// `0.gi13`: GPU instance 13 of GPU 0.
fn parse_mig_scope(gpu: &str, gi: &str, col: usize, gi_col: usize) -> Result<Scope, ParseError> {
    let Scope::Gpu(index) = parse_scope(gpu, col)? else {
        return Err(err(
            col,
            "a MIG instance is of one GPU: write {0.gi1.FIELD}",
        ));
    };
    let id = gi[2..].parse().map_err(|_| {
        err(
            gi_col,
            format!("bad MIG scope \"{gi}\": use gi and a GPU instance id, e.g. gi1"),
        )
    })?;
    Ok(Scope::Mig(index, id))
}

pub(crate) fn parse_scope(s: &str, col: usize) -> Result<Scope, ParseError> {
    Ok(match s {
        "sum" => Scope::Agg(Agg::Sum),
        "max" => Scope::Agg(Agg::Max),
        "min" => Scope::Agg(Agg::Min),
        "mean" | "avg" => Scope::Agg(Agg::Mean),
        _ => Scope::Gpu(s.parse().map_err(|_| {
            err(
                col,
                format!("bad scope \"{s}\": use a GPU index, sum, max, min or mean"),
            )
        })?),
    })
}

pub(crate) fn parse_threshold(t: &str, col: usize) -> Result<Threshold, ParseError> {
    let (below, rest) = match t.strip_prefix('<') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let bad = || {
        err(
            col,
            format!("bad threshold \"!{t}\": use !WARN or !WARN,CRIT (e.g. !70,90)"),
        )
    };
    let mut numbers = rest.split(',').map(|n| n.trim().parse::<f64>());
    let warn = numbers.next().and_then(Result::ok).ok_or_else(bad)?;
    let crit = match numbers.next() {
        None => None,
        Some(n) => Some(n.map_err(|_| bad())?),
    };
    if numbers.next().is_some() || !warn.is_finite() || crit.is_some_and(|c| !c.is_finite()) {
        return Err(bad());
    }
    if let Some(c) = crit.filter(|&c| if below { c > warn } else { c < warn }) {
        let side = if below { "at or below" } else { "at or above" };
        return Err(err(
            col,
            format!("bad threshold \"!{t}\": critical {c} must be {side} warning {warn}"),
        ));
    }
    Ok(Threshold { below, warn, crit })
}

/// The width of `spark` + `digits` for `field`: the default when no digits are given.
fn parse_spark(field: &str, digits: &str, col: usize) -> Result<usize, ParseError> {
    if spark::getter(field).is_none() {
        return Err(err(
            col,
            format!(
                "{field} has no history to draw: sparklines are kept for {}",
                spark::FIELDS
            ),
        ));
    }
    if digits.is_empty() {
        return Ok(spark::DEFAULT_WIDTH);
    }
    digits
        .parse()
        .ok()
        .filter(|w| (1..=spark::MAX_WIDTH).contains(w))
        .ok_or_else(|| {
            err(
                col,
                format!(
                    "bad sparkline width \"spark{digits}\": use spark1 to spark{}",
                    spark::MAX_WIDTH
                ),
            )
        })
}
