//! ANSI styles, applied only when colour is on (a TTY without `NO_COLOR`, or forced).

/// SGR sequences gpustat uses, by name.
pub const RED: &str = "\x1b[31m";
/// Bold red.
pub const BOLD_RED: &str = "\x1b[1m\x1b[31m";
/// Green.
pub const GREEN: &str = "\x1b[32m";
/// Bold green.
pub const BOLD_GREEN: &str = "\x1b[1m\x1b[32m";
/// Yellow.
pub const YELLOW: &str = "\x1b[33m";
/// Bold yellow.
pub const BOLD_YELLOW: &str = "\x1b[1m\x1b[33m";
/// Blue.
pub const BLUE: &str = "\x1b[34m";
/// Magenta.
pub const MAGENTA: &str = "\x1b[35m";
/// Bold magenta.
pub const BOLD_MAGENTA: &str = "\x1b[1m\x1b[35m";
/// Cyan.
pub const CYAN: &str = "\x1b[36m";
/// Bold cyan.
pub const BOLD_CYAN: &str = "\x1b[1m\x1b[36m";
/// Bold white.
pub const BOLD_WHITE: &str = "\x1b[1m\x1b[37m";
/// Bold black (grey): gpustat's colour for user names and unknown values.
pub const BOLD_BLACK: &str = "\x1b[1m\x1b[30m";
/// Bold.
pub const BOLD: &str = "\x1b[1m";
/// 256-colour 24, a dark blue: gpustat's colour for command lines.
pub const DIM_BLUE: &str = "\x1b[38;5;24m";
/// gpustat's `normal` under `--force-color`: SGR 0 and the primary font, where the
/// terminal's own `sgr0` would end in `\x0f` or `\x1b(B`, which watch(1) prints as text
/// (gpustat issue #32).
const RESET: &str = "\x1b[0;10m";

/// gpustat's `normal`, for text that [`Painter::code`] opens with it.
pub const NORMAL: &str = RESET;

/// Whether to colour, decided once per run.
#[derive(Debug, Clone, Copy)]
pub struct Painter {
    enabled: bool,
}

impl Painter {
    /// Colour on `force`, off on `never` or `NO_COLOR`, else only on a terminal.
    pub fn new(force: bool, never: bool, stdout_is_tty: bool) -> Self {
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Painter {
            enabled: !never && (force || (stdout_is_tty && !no_color_env)),
        }
    }

    /// Whether colour is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `style` itself when colouring, else nothing: for lines written as gpustat writes
    /// them, a style opened and closed where it does.
    pub fn code<'a>(&self, style: &'a str) -> &'a str {
        if self.enabled {
            style
        } else {
            ""
        }
    }

    /// `text` wrapped in `style` and a reset, or plain.
    pub fn paint(&self, style: &str, text: impl std::fmt::Display) -> String {
        if self.enabled {
            format!("{style}{text}{RESET}")
        } else {
            text.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_colour_wraps_and_never_wins_over_force() {
        assert_eq!(
            Painter::new(true, false, false).paint(RED, "x"),
            "\x1b[31mx\x1b[0;10m"
        );
        assert_eq!(Painter::new(true, true, true).paint(RED, "x"), "x");
        assert_eq!(Painter::new(false, false, false).paint(RED, "x"), "x");
    }
}
