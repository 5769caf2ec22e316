//! A frame fitted to the terminal `-i/--watch` draws on: each line cut to the width in
//! display columns (a wide character, CJK or emoji, is never split, and an escape
//! sequence is never cut), and the lines cut to the height from the bottom, the last
//! row saying how many were left out, so the header never scrolls away.

use std::os::fd::AsFd;

use unicode_width::UnicodeWidthChar;

/// A terminal's size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Columns.
    pub cols: usize,
    /// Rows.
    pub rows: usize,
}

/// The size of the terminal on standard output, asked anew at each call (a resize
/// changes it); `None` off a terminal or when it reports no size.
pub fn terminal_size() -> Option<Size> {
    let ws = rustix::termios::tcgetwinsize(std::io::stdout().as_fd()).ok()?;
    (ws.ws_col > 0 && ws.ws_row > 0).then_some(Size {
        cols: usize::from(ws.ws_col),
        rows: usize::from(ws.ws_row),
    })
}

/// The lines of `frame` fitted to `size`: each at most `size.cols` columns wide, and at
/// most `size.rows` of them, the last then saying `… N more`.
pub fn frame(frame: &str, size: Size) -> Vec<String> {
    let mut lines: Vec<String> = frame.lines().map(|l| line(l, size.cols)).collect();
    if lines.len() > size.rows {
        let kept = size.rows.saturating_sub(1);
        let more = lines.len() - kept;
        lines.truncate(kept);
        lines.push(line(&format!("… {more} more"), size.cols));
    }
    lines
}

/// `s` cut to at most `cols` display columns, ending in `…` when cut. Escape sequences
/// take no columns and are kept whole; a cut line that had any ends with a reset.
pub fn line(s: &str, cols: usize) -> String {
    if width(s) <= cols {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut used = 0;
    let mut styled = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            styled = true;
            out.push(c);
            escape_rest(&mut chars, &mut out);
            continue;
        }
        let w = c.width().unwrap_or(0);
        if used + w > cols.saturating_sub(1) {
            break;
        }
        out.push(c);
        used += w;
    }
    if cols > 0 {
        out.push('…');
    }
    if styled {
        out.push_str("\x1b[0m");
    }
    out
}

/// Display columns of `s`, escape sequences taking none.
pub fn width(s: &str) -> usize {
    let mut used = 0;
    let mut chars = s.chars().peekable();
    let mut sink = String::new();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            escape_rest(&mut chars, &mut sink);
            sink.clear();
        } else {
            used += c.width().unwrap_or(0);
        }
    }
    used
}

/// Copies the rest of an escape sequence whose ESC was just read: a CSI (`ESC [` up to
/// its final byte, `@` to `~`) or a two-character one.
fn escape_rest(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, out: &mut String) {
    match chars.next() {
        Some('[') => {
            out.push('[');
            for c in chars.by_ref() {
                out.push(c);
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        Some(c) => out.push(c),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_fits_is_kept_as_it_is() {
        assert_eq!(line("abc", 3), "abc");
        assert_eq!(line("\x1b[1mabc\x1b[0m", 3), "\x1b[1mabc\x1b[0m");
        assert_eq!(width("\x1b[1m\x1b[31m猫abc\x1b[0m"), 5);
    }

    #[test]
    fn a_long_line_is_cut_by_display_columns_with_an_ellipsis() {
        assert_eq!(line("abcdef", 4), "abc…");
        assert_eq!(width(&line("abcdef", 4)), 4);
        // A wide character that would straddle the edge is left out whole.
        assert_eq!(line("ab猫猫", 4), "ab…");
        assert_eq!(line("猫猫猫", 5), "猫猫…");
        assert_eq!(line("a🚀🚀", 4), "a🚀…");
        for cols in 0..12 {
            let cut = line("[0] 猫 GPU 🚀 util ▁▂▃▄", cols);
            assert!(width(&cut) <= cols, "{cols}: {cut:?}");
        }
    }

    #[test]
    fn escape_sequences_take_no_columns_and_are_never_cut() {
        let s = "\x1b[1m\x1b[31mab\x1b[0mcdef";
        let cut = line(s, 4);
        assert_eq!(cut, "\x1b[1m\x1b[31mab\x1b[0mc…\x1b[0m");
        assert_eq!(width(&cut), 4);
        // Cut right where a sequence starts: it is kept whole, then the reset.
        assert_eq!(line("ab\x1b[31mcdef", 3), "ab\x1b[31m…\x1b[0m");
    }

    #[test]
    fn more_lines_than_rows_keep_the_top_and_say_how_many_more() {
        let text = "head\n1\n2\n3\n4\n";
        let fitted = frame(text, Size { cols: 80, rows: 3 });
        assert_eq!(fitted, ["head", "1", "… 3 more"]);
        let fitted = frame(text, Size { cols: 80, rows: 5 });
        assert_eq!(fitted, ["head", "1", "2", "3", "4"]);
        let fitted = frame(text, Size { cols: 4, rows: 2 });
        assert_eq!(fitted, ["head", "… 4…"]);
    }
}
