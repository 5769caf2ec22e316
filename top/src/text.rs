//! Text cut and padded to a width in terminal columns: a wide character (CJK, most
//! emoji) is never split, and a cut string ends in `…`.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Columns `s` takes.
pub fn width(s: &str) -> usize {
    s.width()
}

/// `s` cut to at most `cols` columns (ending in `…` when cut), not padded.
pub fn cut(s: &str, cols: usize) -> String {
    if s.width() <= cols {
        return s.to_owned();
    }
    if cols == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > cols - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// `s` cut to `cols` columns and padded with spaces to exactly `cols` on the right.
pub fn left(s: &str, cols: usize) -> String {
    let mut out = cut(s, cols);
    let w = out.width();
    out.extend(std::iter::repeat_n(' ', cols.saturating_sub(w)));
    out
}

/// `s` cut to `cols` columns and padded with spaces to exactly `cols` on the left.
pub fn right(s: &str, cols: usize) -> String {
    let out = cut(s, cols);
    let w = out.width();
    let mut padded: String = std::iter::repeat_n(' ', cols.saturating_sub(w)).collect();
    padded.push_str(&out);
    padded
}

/// Bytes as `12.3G`, `512M`, `40K` (powers of 1024), at most 6 columns.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v >= 100.0 {
        format!("{v:.0}{}", UNITS[unit])
    } else {
        format!("{v:.1}{}", UNITS[unit])
    }
}

/// A duration in seconds as `59s`, `59:59`, `23:59:59` or `12d03h`.
pub fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if secs >= 3600 {
        format!("{h}:{m:02}:{s:02}")
    } else if secs >= 60 {
        format!("{m}:{s:02}")
    } else {
        format!("{s}s")
    }
}

/// Eight levels of a sparkline, lowest first.
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of percentages, one column per value, the newest last, `cols` columns
/// (the newest that fit, right-aligned). A missing value (the GPU was asleep, lost or
/// not answering) is a blank, never a full bar.
pub fn spark(values: &[Option<f64>], cols: usize) -> String {
    let shown = &values[values.len().saturating_sub(cols)..];
    let mut out: String = std::iter::repeat_n(' ', cols - shown.len()).collect();
    for v in shown {
        out.push(match v {
            None => ' ',
            Some(p) => LEVELS[((p.clamp(0.0, 100.0) / 100.0) * 7.0).round() as usize],
        });
    }
    out
}

/// A bar of `cols` columns filled to `pct` percent; blank when unknown.
pub fn bar(pct: Option<f64>, cols: usize) -> String {
    let Some(p) = pct else {
        return " ".repeat(cols);
    };
    let full = ((p.clamp(0.0, 100.0) / 100.0) * cols as f64).round() as usize;
    let mut out = "█".repeat(full);
    out.push_str(&"░".repeat(cols - full));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_characters_are_never_split() {
        // Each CJK character and the emoji take two columns.
        assert_eq!(cut("训练任务", 5), "训练…");
        assert_eq!(width(&left("训练任务", 6)), 6);
        assert_eq!(left("训练任务", 6), "训练… ");
        assert_eq!(left("🚀🚀🚀", 4), "🚀… ");
        assert_eq!(right("ab", 4), "  ab");
        assert_eq!(left("abc", 3), "abc");
        assert_eq!(left("abcd", 3), "ab…");
        assert_eq!(cut("abcd", 0), "");
    }

    #[test]
    fn a_missing_sample_is_a_gap_not_a_full_bar() {
        assert_eq!(spark(&[Some(0.0), None, Some(100.0)], 5), "  ▁ █");
        assert_eq!(spark(&[Some(50.0); 10], 3).chars().count(), 3);
        assert_eq!(bar(None, 4), "    ");
        assert_eq!(bar(Some(50.0), 4), "██░░");
    }

    #[test]
    fn numbers_fit_their_columns() {
        assert_eq!(bytes(80 << 30), "80.0G");
        assert_eq!(bytes(512 << 20), "512M");
        assert_eq!(bytes(100), "100B");
        assert_eq!(duration(59), "59s");
        assert_eq!(duration(3599), "59:59");
        assert_eq!(duration(3600 * 5 + 7), "5:00:07");
        assert_eq!(duration(86_400 * 12 + 3600 * 3), "12d03h");
    }
}
