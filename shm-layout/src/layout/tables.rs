//! The ABI's named numbers as tables: every bit set (validity bits, kinds, flags) and
//! every state enum is declared once, through the macros here, as Rust constants *and* as
//! a table that can be walked.
//!
//! The tables are what the C and Python readers' layout sections are generated from
//! (`cargo run -p gpupeek-shm --example gen-readers`); the constants are what Rust code
//! uses. Both come from the same declaration, so they cannot disagree. A bit's `fields`
//! name the record fields it says are valid; each name is checked at compile time to be a
//! field of the record.

/// One named bit of a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bit {
    /// The constant's name, e.g. `"MEMORY"`.
    pub name: &'static str,
    /// Bit index: the constant is `1 << bit`.
    pub bit: u32,
    /// The record fields this bit says are valid (empty for kinds and flags).
    pub fields: &'static [&'static str],
}

/// A bit set: which record field holds it and its bits, in bit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitSet {
    /// The Rust module of its constants, e.g. `"gpu_valid"`.
    pub module: &'static str,
    /// The record holding it, e.g. `"GpuRecord"`.
    pub record: &'static str,
    /// The field of that record, e.g. `"valid"`.
    pub field: &'static str,
    /// Width of the field in bits (16, 32 or 64).
    pub width: u32,
    /// Every bit, in bit order.
    pub bits: &'static [Bit],
}

impl BitSet {
    /// The bit that says `field` is valid, if one does.
    pub fn bit_of(&self, field: &str) -> Option<u32> {
        self.bits
            .iter()
            .find(|b| b.fields.contains(&field))
            .map(|b| b.bit)
    }
}

/// One value of a state enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// The Rust variant, e.g. `"NotResponding"`.
    pub ident: &'static str,
    /// Its raw value in the segment.
    pub raw: u32,
    /// Its lower-case name in JSON, messages and the Python reader, e.g. `"not responding"`.
    pub name: &'static str,
}

/// A state enum: which record field holds it and its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnumTable {
    /// The Rust type, e.g. `"GpuState"`.
    pub ty: &'static str,
    /// The record holding it, e.g. `"GpuRecord"`.
    pub record: &'static str,
    /// The field of that record, a `u32`, e.g. `"state"`.
    pub field: &'static str,
    /// Every value, in raw order.
    pub variants: &'static [Variant],
}

/// Declares a bit set: a module of `1 << n` constants plus `SET`, its [`BitSet`].
macro_rules! bit_set {
    (
        $(#[$doc:meta])*
        pub mod $module:ident: $int:ty, in $record:ident . $field:ident {
            $( $(#[$bdoc:meta])* $name:ident = $bit:literal $([$($covers:ident),+])? ),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        pub mod $module {
            $( $(#[$bdoc])* pub const $name: $int = 1 << $bit; )+

            /// Every bit of this set as a table (what the readers are generated from).
            pub const SET: $crate::layout::BitSet = $crate::layout::BitSet {
                module: stringify!($module),
                record: stringify!($record),
                field: stringify!($field),
                width: <$int>::BITS,
                bits: &[$($crate::layout::Bit {
                    name: stringify!($name),
                    bit: $bit,
                    fields: &[$($(stringify!($covers)),+)?],
                }),+],
            };
        }
        // Every field named above exists, and the set's field has the set's type.
        const _: fn(&$record) = |r| {
            let _: &$int = &r.$field;
            $($($( let _ = &r.$covers; )+)?)+
        };
        // Bits are declared in order, each once.
        const _: () = {
            let bits = [$($bit),+];
            let mut i = 1;
            while i < bits.len() {
                assert!(bits[i - 1] < bits[i], "bits out of order or repeated");
                i += 1;
            }
        };
    };
}

/// Declares a state enum stored as a `u32`, with `from_raw`, `name` and `TABLE`.
macro_rules! state_enum {
    (
        $(#[$doc:meta])*
        pub enum $ty:ident in $record:ident . $field:ident {
            $( $(#[$vdoc:meta])* $variant:ident = $raw:literal => $name:literal ),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u32)]
        pub enum $ty {
            $( $(#[$vdoc])* $variant = $raw, )+
        }

        impl $ty {
            /// Every value as a table (what the readers are generated from).
            pub const TABLE: $crate::layout::EnumTable = $crate::layout::EnumTable {
                ty: stringify!($ty),
                record: stringify!($record),
                field: stringify!($field),
                variants: &[$($crate::layout::Variant {
                    ident: stringify!($variant),
                    raw: $raw,
                    name: $name,
                }),+],
            };

            /// Decodes the raw word; unknown values are `None`.
            pub fn from_raw(raw: u32) -> Option<Self> {
                match raw {
                    $( $raw => Some(Self::$variant), )+
                    _ => None,
                }
            }

            /// Lower-case name used in JSON, on the command line and in messages.
            pub fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $name, )+
                }
            }
        }

        // The record's field exists and holds the raw `u32`.
        const _: fn(&$record) = |r| {
            let _: &u32 = &r.$field;
        };
    };
}
