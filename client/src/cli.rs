//! Command-line flags of `gpupeek`, following gpustat's where gpustat has one.
//!
//! argh parses the flags; [`normalize`] first rewrites the gpustat habits argh does not
//! know: `--flag=value` (argparse takes it), bundled short switches (`-cup`) and the
//! optional values of `-e`/`--show-codec`, `-P`/`--show-power` (a bare `-P` means
//! `draw,limit`) and `-i`/`--watch`.

use argh::FromArgs;

/// gpupeek: show NVIDIA GPU status from gpupeekd's shared memory, gpustat-style, without
/// a single driver call.
#[derive(FromArgs, Debug, Default)]
pub struct Args {
    /// show the command name of each process
    #[argh(switch, short = 'c')]
    pub show_cmd: bool,

    /// show the user name of each process
    #[argh(switch, short = 'u')]
    pub show_user: bool,

    /// show the pid of each process
    #[argh(switch, short = 'p')]
    pub show_pid: bool,

    /// show fan speed
    #[argh(switch, short = 'F')]
    pub show_fan_speed: bool,

    /// show a line per process with its CPU use, host memory, running time, GPU (SM)
    /// utilisation and full command line (also --full-process-info)
    #[argh(switch, short = 'f')]
    pub show_full_cmd: bool,

    /// show GPUs, processes, GPU memory and utilisation per user instead of per GPU
    #[argh(switch)]
    pub by_user: bool,

    /// show encoder/decoder utilisation: "enc", "dec" or "enc,dec" (bare -e: both)
    #[argh(option, short = 'e', from_str_fn(parse_codec))]
    pub show_codec: Option<Codec>,

    /// show power draw, and the limit: "draw" or "draw,limit" (bare -P: both)
    #[argh(option, short = 'P', from_str_fn(parse_power))]
    pub show_power: Option<Power>,

    /// show everything: -c -u -p -F -e -P
    #[argh(switch, short = 'a')]
    pub show_all: bool,

    /// only these GPUs, by index, in this order, e.g. --id 0,2
    #[argh(option, from_str_fn(parse_ids))]
    pub id: Option<Vec<u32>>,

    /// after the utilisation, say whether the GPU is really working: thermal,
    /// power-capped, hw-slowdown, starved, idle-holding or healthy (thresholds:
    /// $GPUPEEK_VERDICT_THRESHOLDS, e.g. "busy=80,starved=30,idle=300,idle_mem=1024")
    #[argh(switch, short = 'V')]
    pub verdict: bool,

    /// do not print the header line
    #[argh(switch)]
    pub no_header: bool,

    /// do not print processes
    #[argh(switch)]
    pub no_processes: bool,

    /// print gpustat-compatible JSON
    #[argh(switch)]
    pub json: bool,

    /// width of the GPU name column, 0 to 1000 (default: the longest name)
    #[argh(option, from_str_fn(parse_width))]
    pub gpuname_width: Option<usize>,

    /// force colour even when stdout is not a terminal
    #[argh(switch)]
    pub color: bool,

    /// same as --color (gpustat's spelling)
    #[argh(switch)]
    pub force_color: bool,

    /// never colour
    #[argh(switch)]
    pub no_color: bool,

    /// shared-memory segment name (default: $GPUPEEK_SHM, else "gpupeek")
    #[argh(option)]
    pub shm: Option<String>,

    /// print one line from this template instead of the table (see below)
    #[argh(option)]
    pub format: Option<String>,

    /// print a line for a status bar or prompt: text, waybar, polybar, tmux, i3blocks,
    /// i3status-rust, bash, zsh, fish, starship or p10k
    #[argh(option, short = 'o')]
    pub output: Option<String>,

    /// keep running and print a line at each daemon update (streaming bar modules)
    #[argh(switch)]
    pub follow: bool,

    /// text shown when every selected GPU is asleep (default: "GPU asleep" in bars,
    /// nothing in prompts)
    #[argh(option)]
    pub asleep: Option<String>,

    /// redraw every SECS seconds (0.01 to 86400; bare -i: 1) with utilisation
    /// sparklines, until q or Ctrl-C (also --interval, as gpustat)
    #[argh(option, short = 'i')]
    pub watch: Option<f64>,

    /// print the version and exit
    #[argh(switch, short = 'v')]
    pub version: bool,
}

/// Which codec columns to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Codec {
    /// Encoder.
    pub enc: bool,
    /// Decoder.
    pub dec: bool,
}

/// Which power columns to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// Draw only.
    Draw,
    /// Draw and limit.
    DrawLimit,
}

fn parse_codec(s: &str) -> Result<Codec, String> {
    let mut codec = Codec::default();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part {
            "enc" => codec.enc = true,
            "dec" => codec.dec = true,
            _ => return Err(format!("bad codec {part:?}: use enc, dec or enc,dec")),
        }
    }
    Ok(codec)
}

fn parse_power(s: &str) -> Result<Power, String> {
    let mut limit = false;
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part {
            "draw" => {}
            "limit" => limit = true,
            _ => return Err(format!("bad power field {part:?}: use draw or draw,limit")),
        }
    }
    Ok(if limit { Power::DrawLimit } else { Power::Draw })
}

fn parse_ids(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|id| {
            id.trim()
                .parse()
                .map_err(|_| format!("bad GPU index {id:?} in --id"))
        })
        .collect()
}

/// Widest accepted `--gpuname-width`: far beyond any GPU name, far below what
/// formatting can pad to.
pub const MAX_NAME_WIDTH: usize = 1000;

fn parse_width(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(width) if width <= MAX_NAME_WIDTH => Ok(width),
        _ => Err(format!(
            "bad width {s:?}: use a number from 0 to {MAX_NAME_WIDTH}"
        )),
    }
}

/// Short switches that may be bundled (`-cup`).
const BUNDLEABLE: &str = "cupfFavV";

/// Rewrites gpustat-style arguments into the form argh parses.
pub fn normalize(args: &[String]) -> Vec<String> {
    let args = crate::commands::split_equals(args);
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut iter = args.iter().peekable();
    while let Some(arg) = iter.next() {
        let optional = match arg.as_str() {
            "-e" | "--show-codec" => Some(("enc,dec", is_word as fn(&str) -> bool)),
            "-P" | "--show-power" => Some(("draw,limit", is_word as fn(&str) -> bool)),
            "-i" | "--watch" | "--interval" => Some(("1", is_seconds as fn(&str) -> bool)),
            _ => None,
        };
        if let Some((default, accepts)) = optional {
            out.push(if arg == "--interval" {
                "--watch".to_owned()
            } else {
                arg.clone()
            });
            if !iter.peek().is_some_and(|next| accepts(next)) {
                out.push(default.to_owned());
            }
            continue;
        }
        if arg == "--full-process-info" {
            out.push("--show-full-cmd".to_owned());
            continue;
        }
        let bundle = arg.strip_prefix('-').filter(|rest| {
            rest.len() > 1 && !rest.starts_with('-') && rest.chars().all(|c| BUNDLEABLE.contains(c))
        });
        match bundle {
            Some(letters) => out.extend(letters.chars().map(|c| format!("-{c}"))),
            None => out.push(arg.clone()),
        }
        if arg == "--" {
            out.extend(iter.cloned());
            break;
        }
    }
    out
}

/// gpupeek takes no positional argument, so a word after `-e` or `-P` can only be meant
/// as its value: a wrong one gets the flag's own error ("bad codec"), not "Unrecognized
/// argument".
fn is_word(s: &str) -> bool {
    !s.starts_with('-')
}

/// Any number is taken as `-i`'s value, so `-i 0` or `-i -1` gets the interval's own
/// error rather than "Unrecognized argument".
fn is_seconds(s: &str) -> bool {
    s.parse::<f64>().is_ok()
}

impl Args {
    /// A flag of the table view given with `--format`, `--output` or `--follow`, which
    /// print a one-line output instead and would silently ignore it.
    pub fn table_flag_with_line_output(&self) -> Option<&'static str> {
        if self.format.is_none() && self.output.is_none() && !self.follow {
            return None;
        }
        [
            (self.json, "--json"),
            (self.by_user, "--by-user"),
            (self.watch.is_some(), "--watch"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// Applies `-a`.
    pub fn expand_show_all(&mut self) {
        if self.show_all {
            self.show_cmd = true;
            self.show_user = true;
            self.show_pid = true;
            self.show_fan_speed = true;
            self.show_codec = Some(Codec {
                enc: true,
                dec: true,
            });
            self.show_power = Some(Power::DrawLimit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    /// argh's error for `args` after [`normalize`].
    fn parse_error(args: &[&str]) -> String {
        let argv = norm(args);
        let strs: Vec<&str> = argv.iter().map(String::as_str).collect();
        match <Args as FromArgs>::from_args(&["gpupeek"], &strs) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => e.output,
        }
    }

    #[test]
    fn a_bad_codec_or_power_value_gets_the_flags_own_error() {
        assert!(parse_error(&["-e", "foo"]).contains("bad codec \"foo\""));
        assert!(parse_error(&["-P", "watts", "-c"]).contains("bad power field \"watts\""));
    }

    #[test]
    fn bundled_short_switches_are_split() {
        assert_eq!(norm(&["-cup"]), ["-c", "-u", "-p"]);
        assert_eq!(
            norm(&["-cupF", "--json"]),
            ["-c", "-u", "-p", "-F", "--json"]
        );
    }

    #[test]
    fn full_process_info_is_gpustats_show_full_cmd() {
        assert_eq!(norm(&["-cupf"]), ["-c", "-u", "-p", "-f"]);
        assert_eq!(norm(&["--full-process-info"]), ["--show-full-cmd"]);
    }

    #[test]
    fn show_all_is_gpustats_set() {
        let mut args = Args {
            show_all: true,
            ..Args::default()
        };
        args.expand_show_all();
        assert!(args.show_cmd && args.show_user && args.show_pid && args.show_fan_speed);
        assert_eq!(args.show_power, Some(Power::DrawLimit));
        assert!(!args.show_full_cmd, "gpustat's -a leaves out -f");
    }

    #[test]
    fn long_flags_take_their_value_after_an_equals_sign_as_argparse_does() {
        assert_eq!(
            norm(&["--id=0,1", "--shm=x", "--format={util}=%", "--watch=0.5"]),
            ["--id", "0,1", "--shm", "x", "--format", "{util}=%", "--watch", "0.5"]
        );
        assert_eq!(
            norm(&["--show-codec=dec", "-c"]),
            ["--show-codec", "dec", "-c"]
        );
    }

    #[test]
    fn json_by_user_and_watch_do_not_mix_with_one_line_outputs() {
        let line = |follow, json| Args {
            follow,
            json,
            ..Args::default()
        };
        assert_eq!(
            line(true, true).table_flag_with_line_output(),
            Some("--json")
        );
        assert_eq!(line(true, false).table_flag_with_line_output(), None);
        assert_eq!(line(false, true).table_flag_with_line_output(), None);
        let watch = Args {
            output: Some("waybar".into()),
            watch: Some(1.0),
            ..Args::default()
        };
        assert_eq!(watch.table_flag_with_line_output(), Some("--watch"));
    }

    #[test]
    fn unknown_letters_are_left_for_argh_to_reject() {
        assert_eq!(norm(&["-cx"]), ["-cx"]);
    }

    #[test]
    fn codec_and_power_values_are_optional() {
        assert_eq!(norm(&["-e"]), ["-e", "enc,dec"]);
        assert_eq!(norm(&["-e", "dec"]), ["-e", "dec"]);
        assert_eq!(norm(&["-P", "-c"]), ["-P", "draw,limit", "-c"]);
        assert_eq!(norm(&["--show-power", "draw"]), ["--show-power", "draw"]);
        assert_eq!(norm(&["-e", "foo"]), ["-e", "foo"], "for -e's own error");
        assert_eq!(norm(&["-P", "watts"]), ["-P", "watts"]);
        assert_eq!(norm(&["-i"]), ["-i", "1"]);
        assert_eq!(norm(&["-i", "0.5", "-c"]), ["-i", "0.5", "-c"]);
        assert_eq!(norm(&["--interval", "-c"]), ["--watch", "1", "-c"]);
        assert_eq!(norm(&["-i", "0"]), ["-i", "0"]);
        assert_eq!(norm(&["-i", "-1"]), ["-i", "-1"]);
    }

    #[test]
    fn value_parsers_reject_garbage_with_a_message() {
        assert!(parse_codec("mp4").unwrap_err().contains("mp4"));
        assert_eq!(parse_power("limit,draw"), Ok(Power::DrawLimit));
        assert_eq!(parse_ids("0, 2"), Ok(vec![0, 2]));
        assert!(parse_ids("0,x").is_err());
        assert_eq!(parse_width("1000"), Ok(1000));
        assert!(parse_width("1001").unwrap_err().contains("0 to 1000"));
    }
}
