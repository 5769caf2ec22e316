//! Text fields, borrowed from the record they were published in and decoded (NUL cut,
//! invalid UTF-8 and control characters replaced: see [`gpupeek_shm::text`]) only when
//! an output asks, so that decoding a snapshot into the model allocates nothing.

use std::fmt;

/// A NUL-padded string field of a record.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Text<'a>(&'a [u8]);

impl<'a> Text<'a> {
    /// The field's bytes, as published.
    pub fn new(field: &'a [u8]) -> Text<'a> {
        Text(field)
    }
    /// The printable string.
    pub fn decode(self) -> String {
        gpupeek_shm::text::decode(self.0)
    }
    /// The raw field, NUL padding included.
    pub fn field(self) -> &'a [u8] {
        self.0
    }
    /// True when the field holds no text.
    pub fn is_empty(self) -> bool {
        self.0.first().is_none_or(|&b| b == 0)
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.decode())
    }
}

impl fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.decode())
    }
}
