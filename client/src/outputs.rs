//! One-line outputs for status bars and prompts (`--format`, `--output`), each in its
//! host program's own protocol:
//!
//! - `text`: the template, thresholded values in ANSI colour on a terminal;
//! - `waybar`: one JSON object per line (`return-type: json`): `text`, `tooltip`,
//!   `class`, `percentage`, `alt`; text and tooltip are Pango-escaped;
//! - `polybar`: `%{F#rrggbb}`…`%{F-}` around thresholded values;
//! - `tmux`: `#[fg=…]`…`#[fg=default]`, `#` doubled;
//! - `i3blocks`: i3bar JSON (`full_text`, `short_text`, `color`), for `format=json`;
//! - `i3status-rust`: the custom block's JSON (`icon`, `state`, `text`, `short_text`);
//! - `bash`: colours between `\x01`/`\x02` (readline's invisible-text markers, which
//!   work in a `$(…)` or `$VAR` inside `PS1`), `zsh`/`p10k`: `%{…%}` and `%` doubled,
//!   `fish`: plain ANSI, `starship`: plain text (starship styles it).
//!
//! The class / level of a line: `ok`, `warning` or `critical` from the thresholds in the
//! template; `suspended` when every selected GPU is asleep; `not_responding` (level
//! critical) when the driver is not answering for a selected GPU: the line then says
//! "GPU not responding" when no selected GPU is awake, else ends in
//! `[GPU 1 not responding]`, since aggregates skip the hung GPU; `released` (level ok,
//! grey) when the daemon is alive but has let go of the driver on an operator's request
//! (GPU reset, MIG change); `stopped` when the daemon is not running or not responding;
//! `error` for anything else (NVML error, bad segment).

use gpupeek_model::Model;
use gpupeek_shm::{History, Liveness, Snapshot};

use crate::select::{self, Select};
use crate::template::{self, Data, Level, Markup, Template};
use crate::{Exit, EXIT_NO_DAEMON, EXIT_NVML, EXIT_RELEASED, EXIT_STALE, EXIT_USAGE};

/// The class of a line when a selected GPU's driver is not responding.
const NOT_RESPONDING: &str = "not_responding";

/// The class of the line for a daemon that let go of the driver on request.
const RELEASED: &str = "released";

/// Appended to `gpupeek --help`.
pub const HELP: &str = r#"
Status bars and prompts:
  --format TEMPLATE   one line from TEMPLATE, e.g. '{util}% {mem_used:GiB:.1}G'
  -o, --output KIND   text, waybar, polybar, tmux, i3blocks, i3status-rust, bash, zsh,
                      fish, starship or p10k (each in its program's protocol)
  --follow            keep running: a line per daemon update (no polling)
  Template: {FIELD}, {GPU.FIELD} (e.g. {0.mem_used}), {sum|max|min|mean.FIELD},
  {GPU.giID.FIELD} for a MIG GPU instance (e.g. {0.gi13.mem_used}; --id 0.gi13 or
  --id MIG-... shows one instance), {FIELD:UNIT:.PREC} (e.g. {mem_used:GiB:.1}),
  thresholds {FIELD!WARN,CRIT} (or !<WARN,CRIT when lower is worse) that colour the
  value and set the class,
  {each " | "}...{end} to repeat per GPU, {{ and }} for braces, {FIELD:spark} (or
  :sparkN) for the last 10 (N) history samples as bars (util, util_mem, mem_used,
  mem_pct, power, power_pct, temp). Fields: index, name,
  uuid, pci_bus_id, state, util, util_mem, util_enc, util_dec, mem_used, mem_free,
  mem_total, mem_reserved, mem_pct, temp, fan, power, power_limit, power_pct, energy,
  clock_gr, clock_sm, clock_mem, clock_gr_max, clock_sm_max, clock_mem_max, pstate,
  pcie_tx, pcie_rx, pcie_gen, pcie_width, ecc_corrected, ecc_uncorrected, procs,
  xid_errors, xid_last, count, driver. Units: B KiB MiB GiB TiB KB MB GB TB auto | mW W kW | C F | MHz GHz |
  mJ J kJ Wh kWh | KB/s MB/s GB/s.
"#;

/// Where the line goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Plain text (ANSI colours on a terminal).
    Text,
    /// waybar custom module, `return-type: json`.
    Waybar,
    /// polybar `custom/script`.
    Polybar,
    /// tmux `status-right` / `status-left`.
    Tmux,
    /// i3blocks with `format=json`.
    I3blocks,
    /// i3status-rust custom block with `json = true`.
    I3statusRust,
    /// bash `PS1`.
    Bash,
    /// zsh `PROMPT` (with `prompt_subst`).
    Zsh,
    /// fish `fish_prompt`.
    Fish,
    /// starship `[custom.gpu]`.
    Starship,
    /// powerlevel10k custom segment.
    P10k,
}

const KINDS: &[(&str, Kind)] = &[
    ("text", Kind::Text),
    ("waybar", Kind::Waybar),
    ("polybar", Kind::Polybar),
    ("tmux", Kind::Tmux),
    ("i3blocks", Kind::I3blocks),
    ("i3status-rust", Kind::I3statusRust),
    ("bash", Kind::Bash),
    ("zsh", Kind::Zsh),
    ("fish", Kind::Fish),
    ("starship", Kind::Starship),
    ("p10k", Kind::P10k),
    ("powerlevel10k", Kind::P10k),
];

impl Kind {
    /// Parses `--output`.
    pub fn parse(s: &str) -> Result<Kind, String> {
        KINDS
            .iter()
            .find(|(name, _)| *name == s)
            .map(|&(_, kind)| kind)
            .ok_or_else(|| {
                let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
                format!("unknown --output \"{s}\": use one of {}", names.join(", "))
            })
    }

    fn is_prompt(self) -> bool {
        matches!(
            self,
            Kind::Bash | Kind::Zsh | Kind::Fish | Kind::Starship | Kind::P10k
        )
    }

    /// The template used when `--format` is not given.
    pub fn default_template(self) -> &'static str {
        if self.is_prompt() {
            "{util!70,90}% {mem_used:GiB:.1}G"
        } else {
            "GPU {util!70,90}% {mem_used:GiB:.1}/{mem_total:GiB:.0}G {temp!80,90}°C"
        }
    }

    fn markup(self, ansi: bool) -> Box<dyn Markup> {
        match self {
            Kind::Fish => Box::new(Ansi(None)),
            Kind::Text if ansi => Box::new(Ansi(None)),
            Kind::Bash => Box::new(Ansi(Some(("\x01", "\x02")))),
            Kind::Zsh => Box::new(Zsh),
            Kind::P10k => Box::new(Percent),
            Kind::Tmux => Box::new(Tmux),
            Kind::Polybar => Box::new(Polybar),
            Kind::Waybar => Box::new(Pango),
            _ => Box::new(template::Plain),
        }
    }
}

/// How to render, decided once.
pub struct Renderer {
    kind: Kind,
    template: Template,
    markup: Box<dyn Markup>,
    asleep: String,
    /// waybar's tooltip and percentage templates, parsed once (a follower renders a line
    /// per update).
    waybar: Option<Waybar>,
}

impl Renderer {
    /// Parses the template (or the kind's default); a bad one is a usage error that
    /// points at the column.
    pub fn new(
        kind: Kind,
        format: Option<&str>,
        asleep: Option<&str>,
        ansi: bool,
    ) -> Result<Self, Exit> {
        let source = format.unwrap_or(kind.default_template());
        let template =
            Template::parse(source).map_err(|e| Exit::new(EXIT_USAGE, e.describe(source)))?;
        let default_asleep = if kind.is_prompt() {
            ""
        } else {
            template::ASLEEP_TEXT
        };
        Ok(Renderer {
            kind,
            template,
            markup: kind.markup(ansi),
            asleep: asleep.unwrap_or(default_asleep).to_owned(),
            waybar: (kind == Kind::Waybar).then(Waybar::new),
        })
    }

    /// How many of the newest history samples per GPU the template's sparklines draw
    /// (0: none, so the rings need not be read).
    pub fn history(&self) -> usize {
        self.template.sparkline_width()
    }

    /// Whether this output prints a line (rather than only an error) when the daemon
    /// is down.
    pub fn shows_down(&self) -> bool {
        self.kind != Kind::Text
    }

    /// The line (with its newline) for the GPUs `ids` (all when `None`) of a live
    /// snapshot, with the history rings its sparklines draw (see [`Self::history`]); an
    /// unknown id is a usage error.
    pub fn live(
        &self,
        snap: &Snapshot,
        history: &[(u32, History)],
        ids: Option<&[Select]>,
    ) -> Result<String, Exit> {
        let model = Model::new(snap);
        let gpus = select::gpus(&model, ids).map_err(|e| Exit::new(EXIT_USAGE, e))?;
        let mig = template::MigGpu::all(&model);
        let data = Data {
            gpus: &gpus,
            status: model.status,
            history,
            mig: &mig,
        };
        if template::all_asleep(&gpus) {
            let text = self.markup.escape(&self.asleep);
            return Ok(self.finish(&text, "suspended", Level::Ok, &data));
        }
        if template::none_responding(&gpus) {
            let text = self.markup.escape(template::NOT_RESPONDING_TEXT);
            let text = self.markup.paint(Level::Critical, &text);
            return Ok(self.finish(&text, NOT_RESPONDING, Level::Critical, &data));
        }
        let mut rendered = self.template.render(&data, self.markup.as_ref());
        if template::note_not_responding(&gpus, self.markup.as_ref(), &mut rendered.text) {
            return Ok(self.finish(&rendered.text, NOT_RESPONDING, Level::Critical, &data));
        }
        Ok(self.finish(&rendered.text, rendered.level.name(), rendered.level, &data))
    }

    /// The line for a daemon that cannot be read (`exit` says why).
    pub fn down(&self, exit: &Exit) -> String {
        let (class, what) = match exit.code {
            EXIT_NO_DAEMON if exit.daemon == Some(Liveness::Starting) => ("stopped", "starting"),
            EXIT_NO_DAEMON => ("stopped", "no daemon"),
            EXIT_STALE => ("stopped", "daemon not responding"),
            EXIT_NVML => ("error", "NVML error"),
            // Alive and let go of the driver on purpose: neither down nor failing.
            EXIT_RELEASED => (RELEASED, "released"),
            _ => ("error", "error"),
        };
        if self.kind.is_prompt() {
            return "\n".to_owned();
        }
        let text = self.markup.escape(&format!("GPU: {what}"));
        let status = gpupeek_shm::StatusRecord::default();
        let data = Data {
            gpus: &[],
            status: gpupeek_model::Status::new(&status),
            history: &[],
            mig: &[],
        };
        let level = match class {
            "error" => Level::Critical,
            RELEASED => Level::Ok,
            _ => Level::Warning,
        };
        let mut line = self.finish(&text, class, level, &data);
        if self.kind == Kind::Waybar {
            // The tooltip says what to do about it.
            let mut doc: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            doc["tooltip"] = pango_escape(&exit.message).into();
            line = doc.to_string() + "\n";
        }
        line
    }

    /// Wraps the text in the output's protocol.
    fn finish(&self, text: &str, class: &str, level: Level, data: &Data) -> String {
        let json = |v: serde_json::Value| v.to_string() + "\n";
        match self.kind {
            Kind::Waybar => json(serde_json::json!({
                "text": text,
                "tooltip": self.waybar.as_ref().map(|w| w.tooltip(data)).unwrap_or_default(),
                "class": class,
                "percentage": self.waybar.as_ref().map_or(0, |w| w.percentage(data)),
                "alt": class,
            })),
            Kind::I3blocks => {
                let mut v = serde_json::json!({"full_text": text, "short_text": text});
                if let Some(c) = colour(level, class) {
                    v["color"] = c.into();
                }
                json(v)
            }
            Kind::I3statusRust => json(serde_json::json!({
                "icon": "gpu",
                "state": match (class, level) {
                    ("suspended" | RELEASED, _) => "Idle",
                    (_, Level::Critical) => "Critical",
                    (_, Level::Warning) => "Warning",
                    _ => "Info",
                },
                "text": text,
                "short_text": text,
            })),
            _ => format!("{text}\n"),
        }
    }
}

/// The `#rrggbb` of a level (none for a plain ok line).
fn colour(level: Level, class: &str) -> Option<&'static str> {
    match (level, class) {
        (_, "suspended" | RELEASED) => Some("#888888"),
        (Level::Critical, _) => Some("#ff5555"),
        (Level::Warning, _) => Some("#f0c674"),
        (Level::Ok, _) => None,
    }
}

/// waybar's extras: the tooltip, a line per GPU (one that is not `ok`, i.e. asleep, lost
/// or in error, has no values to show, only its state); and the percentage, what `{util}`
/// shows, so a GPU that does not report utilisation does not count as 0 %.
struct Waybar {
    ok: Template,
    other: Template,
    percentage: Template,
}

impl Waybar {
    const OK: &str = "GPU {index} {name}: {util}% · {mem_used:GiB:.1}/{mem_total:GiB:.1} GiB · {temp}°C · {power} W";
    const OTHER: &str = "GPU {index} {name}: {state}";
    const PERCENTAGE: &str = "{util}";

    fn new() -> Waybar {
        let parse = |src| Template::parse(src).unwrap_or_else(|_| unreachable!("{src}"));
        Waybar {
            ok: parse(Self::OK),
            other: parse(Self::OTHER),
            percentage: parse(Self::PERCENTAGE),
        }
    }

    /// 0 to 100; 0 when no GPU reports utilisation.
    fn percentage(&self, data: &Data) -> u64 {
        self.percentage
            .first_number(data)
            .map_or(0, |pct| pct.clamp(0.0, 100.0) as u64)
    }

    fn tooltip(&self, data: &Data) -> String {
        let mut out = String::new();
        for (i, g) in data.gpus.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let one = [*g];
            let d = Data {
                gpus: &one,
                status: data.status,
                history: &[],
                mig: &[],
            };
            let t = if g.is_current() {
                &self.ok
            } else {
                &self.other
            };
            t.render_into(&d, &Pango, &mut out);
        }
        out
    }
}

/// ANSI colours, optionally between invisible-text markers.
struct Ansi(Option<(&'static str, &'static str)>);

impl Markup for Ansi {
    fn paint(&self, level: Level, text: &str) -> String {
        let sgr = match level {
            Level::Ok => return text.to_owned(),
            Level::Warning => "\x1b[33m",
            Level::Critical => "\x1b[31m",
        };
        let (open, close) = self.0.unwrap_or(("", ""));
        format!("{open}{sgr}{close}{text}{open}\x1b[0m{close}")
    }
}

/// zsh prompt escapes.
struct Zsh;

impl Markup for Zsh {
    fn paint(&self, level: Level, text: &str) -> String {
        match level {
            Level::Ok => text.to_owned(),
            Level::Warning => format!("%F{{yellow}}{text}%f"),
            Level::Critical => format!("%F{{red}}{text}%f"),
        }
    }
    fn escape(&self, text: &str) -> String {
        text.replace('%', "%%")
    }
}

/// Plain text for a program that runs prompt expansion on it (powerlevel10k).
struct Percent;

impl Markup for Percent {
    fn paint(&self, _: Level, text: &str) -> String {
        text.to_owned()
    }
    fn escape(&self, text: &str) -> String {
        text.replace('%', "%%")
    }
}

/// tmux style directives.
struct Tmux;

impl Markup for Tmux {
    fn paint(&self, level: Level, text: &str) -> String {
        match level {
            Level::Ok => text.to_owned(),
            Level::Warning => format!("#[fg=yellow]{text}#[fg=default]"),
            Level::Critical => format!("#[fg=red]{text}#[fg=default]"),
        }
    }
    fn escape(&self, text: &str) -> String {
        text.replace('#', "##")
    }
}

/// polybar format tags.
struct Polybar;

impl Markup for Polybar {
    fn paint(&self, level: Level, text: &str) -> String {
        match colour(level, "") {
            Some(c) => format!("%{{F{c}}}{text}%{{F-}}"),
            None => text.to_owned(),
        }
    }
}

/// Pango markup (waybar): escaped text, the class carries the colour.
struct Pango;

impl Markup for Pango {
    fn paint(&self, _: Level, text: &str) -> String {
        text.to_owned()
    }
    fn escape(&self, text: &str) -> String {
        pango_escape(text)
    }
}

fn pango_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `gpupeek --format/--output/--follow`: one line, or a line per update.
///
/// With an output other than `text`, a daemon that is down is a line in the output's
/// protocol (class `stopped` or `error`; nothing for a prompt) and exit status 0, so the
/// bar shows it instead of hiding the module; `text` keeps the usual error and status.
pub fn run(args: &crate::cli::Args) -> Result<(), Exit> {
    if let Some(flag) = args.table_flag_with_line_output() {
        return Err(Exit::new(
            EXIT_USAGE,
            format!("{flag} does not go with --format, --output or --follow, which print one line"),
        ));
    }
    let kind = match &args.output {
        Some(o) => Kind::parse(o).map_err(|e| Exit::new(EXIT_USAGE, e))?,
        None => Kind::Text,
    };
    let painter = crate::style::Painter::new(
        args.color,
        args.no_color,
        std::io::IsTerminal::is_terminal(&std::io::stdout()),
    );
    let renderer = Renderer::new(
        kind,
        args.format.as_deref(),
        args.asleep.as_deref(),
        painter.enabled(),
    )?;
    let name = gpupeek_shm::resolve_name(args.shm.as_deref());
    if args.follow {
        return crate::follow::run(&renderer, &name, args.id.as_deref());
    }
    match crate::live::live_segment(&name) {
        Ok((segment, snap)) => {
            let history = segment.histories(&snap, renderer.history());
            crate::write_stdout(&renderer.live(&snap, &history, args.id.as_deref())?)
        }
        Err(exit) if exit.code == EXIT_USAGE || !renderer.shows_down() => Err(exit),
        Err(exit) => crate::write_stdout(&renderer.down(&exit)),
    }
}

#[cfg(test)]
#[path = "outputs/tests.rs"]
mod tests;
