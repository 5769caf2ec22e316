//! Fixed-size, NUL-padded string fields: encoding for the writer, safe decoding for readers.
//!
//! Every string in the segment may be hostile (a process's command name is chosen by its
//! owner), so decoding stops at the first NUL, replaces invalid UTF-8, and replaces
//! control characters with `?` so that no terminal escape sequence survives.

/// Copies `s` into `dst`, truncated on a character boundary so that a NUL always
/// terminates it, and zero-fills the rest.
pub fn encode(dst: &mut [u8], s: &str) {
    dst.fill(0);
    let max = dst.len().saturating_sub(1);
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    dst[..end].copy_from_slice(&s.as_bytes()[..end]);
}

/// Decodes a NUL-padded field into a printable string.
pub fn decode(src: &[u8]) -> String {
    let end = src.iter().position(|&b| b == 0).unwrap_or(src.len());
    printable(&src[..end])
}

fn printable(bytes: &[u8]) -> String {
    printable_str(&String::from_utf8_lossy(bytes)).into_owned()
}

/// `s` with each control character (C0 and C1: what starts a terminal escape sequence,
/// a newline) replaced by `?`, as every field decoded from a segment is; borrowed when it
/// has none. For text a reader gets from elsewhere (another host's answer, a label).
pub fn printable_str(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect::<String>()
        .into()
}

/// Copies a raw command line (`/proc/PID/cmdline`: arguments each followed by a NUL) into
/// `dst`, keeping a terminating NUL and not splitting a UTF-8 sequence, and zero-fills the
/// rest. Returns the length of the whole command line without its trailing NULs, which
/// is larger than what was kept when it was truncated.
pub fn encode_argv(dst: &mut [u8], raw: &[u8]) -> u32 {
    dst.fill(0);
    let len = raw.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    let mut end = len.min(dst.len().saturating_sub(1));
    if end < len {
        // Back off to the start of a UTF-8 sequence so the cut leaves no partial character.
        while end > 0 && (raw[end] & 0xC0) == 0x80 {
            end -= 1;
        }
    }
    dst[..end].copy_from_slice(&raw[..end]);
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Decodes a command line stored by [`encode_argv`] into printable arguments. `len` is
/// the recorded length of the whole command line; when the stored copy is shorter, the
/// last argument ends in `…`. Returns no arguments for an empty command line.
pub fn decode_argv(src: &[u8], len: u32) -> Vec<String> {
    let stored = src.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    if stored == 0 {
        return Vec::new();
    }
    let mut args: Vec<String> = src[..stored].split(|&b| b == 0).map(printable).collect();
    if (len as usize) > stored {
        if let Some(last) = args.last_mut() {
            last.push('…');
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_truncates_on_a_char_boundary_and_keeps_a_terminator() {
        let mut buf = [0xffu8; 6];
        encode(&mut buf, "héllo!");
        assert_eq!(&buf, b"h\xc3\xa9ll\0");
        assert_eq!(decode(&buf), "héll");
    }

    #[test]
    fn argv_round_trips_and_marks_truncation() {
        let mut buf = [0xffu8; 16];
        assert_eq!(encode_argv(&mut buf, b"python\0train.py\0\0"), 15);
        assert_eq!(decode_argv(&buf, 15), ["python", "train.py"]);

        let mut small = [0u8; 10];
        let len = encode_argv(&mut small, "python\0t\u{e9}s\0".as_bytes());
        assert_eq!(len, 11);
        // 9 bytes fit; the cut would split "é", so it keeps 8 and marks the cut.
        assert_eq!(decode_argv(&small, len), ["python", "t…"]);
        assert_eq!(decode_argv(&[0u8; 8], 0), Vec::<String>::new());
        assert_eq!(decode_argv(b"a\x1b[2J\0b\0\0", 7), ["a?[2J", "b"]);
    }

    #[test]
    fn decode_neutralises_terminal_escapes_and_bad_utf8() {
        assert_eq!(decode(b"\x1b[31mevil\x07\0junk"), "?[31mevil?");
        assert_eq!(decode(b"a\xffb"), "a\u{fffd}b");
    }
}
