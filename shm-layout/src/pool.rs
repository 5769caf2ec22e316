//! The text pool (ABI 1.5): the whole command name and command line of each process,
//! which a [`ProcRecord`]'s fixed fields (`command`, 32 bytes; `cmdline`, 328) hold only
//! the start of.
//!
//! The pool is a byte region of its own (see [`crate::layout`]); the process table
//! head says where it is ([`ProcTableHead::text_pool_offset`], `text_pool_size_bytes`)
//! and how much of it this publish uses (`text_pool_used_bytes`), and the head's seqlock
//! covers it together with the slots. A slot's text starts at its `text_offset`:
//! `command_len` bytes of command name, then `cmdline_stored_len` bytes of command line
//! (arguments separated by NUL, no trailing NUL). Texts start on 8-byte boundaries.
//!
//! The writer fills a [`TextPool`] and hands its bytes to
//! [`crate::Publisher::write_processes`]; a reader looks a slot's text up with
//! [`full_text`], which treats every offset and length as hostile: a text that does not
//! lie inside the copied pool is not there, and the reader falls back to the fixed
//! fields. The fixed fields are always filled too, so a reader of ABI 1.4 or older,
//! which knows no pool, shows what it always did.

use std::collections::HashMap;

use crate::layout::{proc_valid, ProcRecord, ProcTableHead, MAX_TEXT_PER_PROCESS};

/// A pool being filled by the writer for one publish.
#[derive(Debug, Default)]
pub struct TextPool {
    bytes: Vec<u8>,
    capacity: usize,
    /// Per pid: where its last text went (offset, command length, command line
    /// length), so that a process on several GPUs is stored once.
    placed: HashMap<u32, (u32, u32, u32)>,
}

impl TextPool {
    /// An empty pool that holds at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        TextPool {
            bytes: Vec::new(),
            capacity,
            placed: HashMap::new(),
        }
    }

    /// Empties the pool for the next publish, which may hold `capacity` bytes (keeping
    /// its memory).
    pub fn clear(&mut self, capacity: usize) {
        self.bytes.clear();
        self.placed.clear();
        self.capacity = capacity;
    }

    /// The bytes to publish.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Puts `rec`'s whole command name and command line (`argv`, raw
    /// `/proc/PID/cmdline`, or `None` when the command line is withheld) in the pool
    /// and points `rec` at them, setting `FULL_COMMAND` (and `FULL_CMDLINE` with a
    /// command line). Slots of the same pid with the same text share one copy. Does
    /// nothing when the pool is full or the name is longer than
    /// [`MAX_TEXT_PER_PROCESS`]: the slot then has only its fixed fields.
    pub fn put(&mut self, rec: &mut ProcRecord, name: &str, argv: Option<&[u8]>) {
        let name = name.as_bytes();
        let stored = argv.map_or(&[][..], |raw| stored_argv(raw, MAX_TEXT_PER_PROCESS));
        let shared = self.placed.get(&rec.pid).copied().filter(|&(at, n, a)| {
            let at = at as usize;
            let (n, a) = (n as usize, a as usize);
            self.bytes[at..at + n] == *name && self.bytes[at + n..at + n + a] == *stored
        });
        let Some((offset, name_len, argv_len)) = shared.or_else(|| {
            let placed = self.append(name, stored)?;
            self.placed.insert(rec.pid, placed);
            Some(placed)
        }) else {
            return;
        };
        rec.text_offset = offset;
        rec.command_len = name_len;
        rec.valid |= proc_valid::FULL_COMMAND;
        if argv.is_some() {
            rec.cmdline_stored_len = argv_len;
            rec.valid |= proc_valid::FULL_CMDLINE;
        }
    }

    fn append(&mut self, name: &[u8], argv: &[u8]) -> Option<(u32, u32, u32)> {
        if name.len() > MAX_TEXT_PER_PROCESS {
            return None;
        }
        let start = self.bytes.len().next_multiple_of(8);
        let end = start + name.len() + argv.len();
        if end > self.capacity {
            return None;
        }
        self.bytes.resize(start, 0);
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(argv);
        Some((
            u32::try_from(start).ok()?,
            name.len() as u32,
            argv.len() as u32,
        ))
    }
}

/// The part of a raw command line the pool keeps: trailing NULs removed, at most `max`
/// bytes, cut at the start of a UTF-8 sequence so no partial character is kept.
fn stored_argv(raw: &[u8], max: usize) -> &[u8] {
    let len = raw.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    let mut end = len.min(max);
    if end < len {
        while end > 0 && (raw[end] & 0xC0) == 0x80 {
            end -= 1;
        }
    }
    &raw[..end]
}

/// A slot's whole text, as found in a snapshot's copy of the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FullText<'a> {
    /// The whole command name (raw bytes, not yet made printable).
    pub command: Option<&'a [u8]>,
    /// The command line, arguments separated by NUL (raw bytes), at most
    /// [`MAX_TEXT_PER_PROCESS`] of `cmdline_len`.
    pub cmdline: Option<&'a [u8]>,
}

/// `rec`'s text in `pool` (a snapshot's copy of the used part of the pool). Offsets and
/// lengths are hostile: anything outside `pool` is "not there".
pub fn full_text<'a>(pool: &'a [u8], rec: &ProcRecord) -> FullText<'a> {
    let has = |bit: u64| rec.valid & bit != 0;
    if !has(proc_valid::FULL_COMMAND) || !has(proc_valid::COMMAND) {
        return FullText::default();
    }
    let start = rec.text_offset as usize;
    let name_end = start.checked_add(rec.command_len as usize);
    let Some(command) = name_end.and_then(|end| pool.get(start..end)) else {
        return FullText::default();
    };
    let name_end = start + command.len();
    let cmdline = (has(proc_valid::FULL_CMDLINE) && has(proc_valid::CMDLINE))
        .then(|| {
            let end = name_end.checked_add(rec.cmdline_stored_len as usize)?;
            pool.get(name_end..end)
        })
        .flatten();
    FullText {
        command: Some(command),
        cmdline,
    }
}

/// Checks the pool fields of a process table head found in a mapping of `mapped_len`
/// bytes; returns the byte range of the pool in use, `None` when there is no pool.
pub fn used_range(
    head: &ProcTableHead,
    mapped_len: usize,
) -> Result<Option<std::ops::Range<usize>>, &'static str> {
    if head.text_pool_offset == 0 {
        return Ok(None);
    }
    let offset = usize::try_from(head.text_pool_offset).unwrap_or(usize::MAX);
    let size = head.text_pool_size_bytes as usize;
    let used = head.text_pool_used_bytes as usize;
    if offset % 8 != 0 || offset < size_of::<crate::layout::StaticHeader>() {
        return Err("text pool misaligned or overlapping the static header");
    }
    if used > size || offset.checked_add(size).is_none_or(|end| end > mapped_len) {
        return Err("text pool lies outside the segment");
    }
    Ok(Some(offset..offset + used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::proc_valid as pv;

    fn record(pid: u32) -> ProcRecord {
        ProcRecord {
            pid,
            valid: pv::COMMAND | pv::CMDLINE,
            ..Default::default()
        }
    }

    #[test]
    fn a_text_reads_back_whole_and_is_stored_once_per_pid() {
        let mut pool = TextPool::new(1024);
        let name = "a-command-name-well-past-thirty-one-bytes";
        let (mut a, mut b, mut c) = (record(7), record(7), record(8));
        pool.put(&mut a, name, Some(b"/bin/x\0--flag\0\0"));
        pool.put(&mut b, name, Some(b"/bin/x\0--flag\0"));
        pool.put(&mut c, "y", Some(b"y\0"));
        let text = full_text(pool.bytes(), &a);
        assert_eq!(text.command, Some(name.as_bytes()));
        assert_eq!(text.cmdline, Some(&b"/bin/x\0--flag"[..]));
        assert_eq!(full_text(pool.bytes(), &b), text);
        assert_eq!(a.text_offset, b.text_offset, "one copy");
        // The same pid with another text (a slot kept from before a rename) has its own.
        let mut renamed = record(7);
        pool.put(&mut renamed, "renamed", Some(b"renamed\0"));
        assert_eq!(
            full_text(pool.bytes(), &renamed).command,
            Some(&b"renamed"[..])
        );
        assert_eq!(c.text_offset % 8, 0);
        assert_eq!(full_text(pool.bytes(), &c).command, Some(&b"y"[..]));
    }

    #[test]
    fn a_withheld_command_line_has_no_pool_copy() {
        let mut pool = TextPool::new(1024);
        let mut rec = ProcRecord {
            valid: pv::COMMAND,
            ..record(1)
        };
        pool.put(&mut rec, "name", None);
        assert_eq!(rec.valid & pv::FULL_CMDLINE, 0);
        let text = full_text(pool.bytes(), &rec);
        assert_eq!((text.command, text.cmdline), (Some(&b"name"[..]), None));
    }

    #[test]
    fn a_full_pool_leaves_later_processes_with_their_fixed_fields() {
        let mut pool = TextPool::new(40);
        let (mut a, mut b) = (record(1), record(2));
        pool.put(&mut a, "first", Some(&[b'x'; 30]));
        pool.put(&mut b, "second", Some(&[b'y'; 30]));
        assert_ne!(a.valid & pv::FULL_COMMAND, 0);
        assert_eq!(b.valid & (pv::FULL_COMMAND | pv::FULL_CMDLINE), 0);
        assert_eq!(full_text(pool.bytes(), &b), FullText::default());
    }

    #[test]
    fn a_long_command_line_is_cut_on_a_character_boundary() {
        let mut raw = vec![b'a'; MAX_TEXT_PER_PROCESS - 1];
        raw.extend_from_slice("é and more".as_bytes());
        let mut pool = TextPool::new(1 << 20);
        let mut rec = record(1);
        pool.put(&mut rec, "a", Some(&raw));
        assert_eq!(rec.cmdline_stored_len as usize, MAX_TEXT_PER_PROCESS - 1);
    }

    #[test]
    fn hostile_offsets_and_lengths_are_not_there() {
        let pool = b"name\0arg".as_slice();
        let cases = [
            (u32::MAX, 4, 0),
            (0, u32::MAX, 0),
            (0, 4, u32::MAX),
            (5, 4, 0),
            (u32::MAX - 2, 4, 4),
        ];
        for (i, (offset, name_len, argv_len)) in cases.into_iter().enumerate() {
            let rec = ProcRecord {
                valid: pv::COMMAND | pv::CMDLINE | pv::FULL_COMMAND | pv::FULL_CMDLINE,
                text_offset: offset,
                command_len: name_len,
                cmdline_stored_len: argv_len,
                ..Default::default()
            };
            let text = full_text(pool, &rec);
            assert!(
                text.cmdline.is_none(),
                "case {i}: {text:?} must not reach past the pool"
            );
        }
    }

    #[test]
    fn hostile_pool_fields_in_the_head_are_refused() {
        let head = |offset, size, used| ProcTableHead {
            text_pool_offset: offset,
            text_pool_size_bytes: size,
            text_pool_used_bytes: used,
            ..Default::default()
        };
        assert_eq!(used_range(&head(0, 99, 99), 4096), Ok(None));
        assert_eq!(
            used_range(&head(1024, 512, 100), 4096),
            Ok(Some(1024..1124))
        );
        for h in [
            head(1028, 8, 8),
            head(8, 8, 8),
            head(1024, 8, 16),
            head(4000, 512, 0),
            head(u64::MAX - 7, 8, 0),
        ] {
            assert!(used_range(&h, 4096).is_err(), "{h:?}");
        }
    }
}
