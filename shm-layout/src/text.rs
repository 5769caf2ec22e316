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
    String::from_utf8_lossy(&src[..end])
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
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
    fn decode_neutralises_terminal_escapes_and_bad_utf8() {
        assert_eq!(decode(b"\x1b[31mevil\x07\0junk"), "?[31mevil?");
        assert_eq!(decode(b"a\xffb"), "a\u{fffd}b");
    }
}
