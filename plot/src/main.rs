//! `gpupeek-plot`: charts of gpupeekd's history of the GPUs, `gpupeek plot`'s program.
//! It reads the window through the `gpupeek` library ([`gpupeek::plotting`], which reads
//! the segment through the model: no driver call, no sampling of its own), then draws it
//! as a PNG or SVG file ([`image`], plotters) or in the terminal ([`term`]); [`shape`]
//! decides what both show.
//!
//! It is a program of its own so that the one-shot `gpupeek` links neither plotters nor
//! a font (docs/PERFORMANCE.md). Its flags are `gpupeek plot`'s, from the library's
//! table: `gpupeek plot` parses them, then executes this program.
//!
//! Exit status: gpupeek's (gpupeek(1)): 0 drawn, 2 bad usage, 3 to 10 the daemon or the
//! segment, 9 a file that cannot be written, 12 no sample in the window.

mod image;
mod shape;
mod term;
#[cfg(test)]
mod testing;

use std::io::IsTerminal;

use gpupeek::plotting::{self, Args, Exit, Image, EXIT_NO_HISTORY, EXIT_OS};

fn main() -> std::process::ExitCode {
    let result = plotting::command_line().and_then(|args| match args {
        None => Ok(()),
        Some(args) => run(args),
    });
    plotting::exit_status(result).into()
}

fn run(args: Args) -> Result<(), Exit> {
    let window = plotting::load(args.shm.as_deref(), args.since, args.id.as_deref())?;
    let metrics = match &args.metrics {
        Some(m) => m.clone(),
        None => window.metrics_with_values(),
    };
    if metrics.is_empty() {
        return Err(Exit::new(
            EXIT_NO_HISTORY,
            format!(
                "nothing to draw in the last {}: every sample is a gap (the GPUs were \
                 asleep, lost or not answering)",
                plotting::since_text(args.since)
            ),
        ));
    }
    let panels = shape::panels(&window, &metrics);
    let Some((path, kind)) = &args.output else {
        let tty = std::io::stdout().is_terminal();
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let size = plotting::terminal_size();
        let opts = term::Options {
            width: args
                .width
                .map_or_else(|| size.map_or(80, |s| s.cols), |w| w as usize),
            height: args
                .height
                .map_or_else(|| term::default_height(panels.len()), |h| h as usize),
            color: tty && !args.no_color && !no_color_env,
        };
        return plotting::write_stdout(&term::render(&window, &panels, opts));
    };
    let (dw, dh) = image::default_size(panels.len());
    let size = (args.width.unwrap_or(dw), args.height.unwrap_or(dh));
    let bytes = match kind {
        Image::Svg => image::svg(&window, &panels, size).map(String::into_bytes),
        Image::Png => image::png(&window, &panels, size),
    }
    .map_err(|e| Exit::new(EXIT_OS, e))?;
    std::fs::write(path, bytes).map_err(|e| Exit::new(EXIT_OS, format!("cannot write {path}: {e}")))
}
