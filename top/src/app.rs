//! The monitor's state: the rows built from the last snapshot (read through the model
//! only), what is selected, sorted and filtered, and which dialog is open; and what each
//! key and mouse event does to it.

use std::collections::{HashMap, VecDeque};

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use gpupeek::monitor::{self, LocalProc};
use gpupeek_model::verdict::{self, Thresholds};
use gpupeek_model::{GpuState, Model};

use crate::host::Host;
use crate::source::Feed;

/// Per-process samples kept for the detail view (one per update this monitor saw).
const PROC_HISTORY: usize = 120;

/// One process's GPU memory (MiB) and SM % at one update.
pub type ProcSample = (Option<u64>, Option<u32>);

/// One GPU, as the panel shows it.
#[derive(Debug, Clone, Default)]
pub struct GpuRow {
    /// NVML index.
    pub index: u32,
    /// Product name.
    pub name: String,
    /// Health.
    pub state: Option<GpuState>,
    /// Utilisation, percent.
    pub util: Option<u32>,
    /// Memory used and total, bytes.
    pub mem: Option<(u64, u64)>,
    /// Temperature, °C.
    pub temp: Option<i32>,
    /// Fan, percent.
    pub fan: Option<u32>,
    /// Power draw and limit, watts.
    pub power: Option<f64>,
    /// Enforced power limit, watts.
    pub power_limit: Option<f64>,
    /// SM and memory clocks, MHz.
    pub clocks: (Option<u64>, Option<u64>),
    /// Performance state.
    pub pstate: Option<u32>,
    /// The verdict's word.
    pub verdict: Option<&'static str>,
    /// The daemon's history: utilisation, percent, oldest first.
    pub util_history: Vec<Option<f64>>,
    /// The daemon's history: memory used, percent of total, oldest first.
    pub mem_history: Vec<Option<f64>>,
}

impl GpuRow {
    /// What the GPU is instead of sampled, when it is not.
    pub fn trouble(&self) -> Option<&'static str> {
        match self.state {
            Some(GpuState::Ok) => None,
            Some(GpuState::Lost) => Some("GPU LOST"),
            Some(GpuState::Suspended) => Some("asleep (suspended)"),
            Some(GpuState::Idle) => Some("asleep (idle)"),
            Some(GpuState::NotResponding) => Some("driver not responding"),
            Some(GpuState::Error) | Some(GpuState::Empty) | None => Some("error"),
        }
    }
}

/// One process on one GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcRow {
    /// Pid as this reader knows it.
    pub pid: u32,
    /// Pid in the daemon's namespace (the row's identity).
    pub host_pid: u32,
    /// The pid to signal: `None` when the process is in a pid namespace this reader
    /// cannot address.
    pub signal_pid: Option<u32>,
    /// Owner's uid.
    pub uid: Option<u32>,
    /// Owner's name.
    pub user: String,
    /// NVML index of the GPU.
    pub gpu: u32,
    /// GPU memory, bytes.
    pub gpu_mem: Option<u64>,
    /// SM utilisation, percent.
    pub sm: Option<u32>,
    /// CPU, percent of one core.
    pub cpu: Option<f64>,
    /// Resident host memory, bytes.
    pub host_mem: Option<u64>,
    /// Running time, seconds.
    pub running: Option<u64>,
    /// Command (the command line, or the command name when it has none).
    pub command: String,
    /// Every argument, for the detail view.
    pub argv: Vec<String>,
    /// compute, graphics, ...
    pub kind: &'static str,
    /// Container runtime and id.
    pub container: Option<String>,
    /// Depth in the process tree (0 outside tree mode).
    pub depth: usize,
    /// Last child of its parent, in tree mode.
    pub last_child: bool,
}

impl ProcRow {
    /// Fills what the daemon withheld from what the reader's own `/proc` shows.
    fn fill_own(&mut self, own: &LocalProc, published_unix_ns: u64) {
        self.uid = Some(own.uid);
        self.user = own.user_name();
        let argv = own.argv();
        if self.argv.is_empty() && !argv.is_empty() {
            self.command = argv.join(" ");
            self.argv = argv;
        }
        self.host_mem = self.host_mem.or(own.rss_bytes);
        self.running = self.running.or(own
            .start_unix_ns
            .map(|start| published_unix_ns.saturating_sub(start) / 1_000_000_000));
    }
}

/// A column of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// Process id.
    Pid,
    /// Owner.
    User,
    /// GPU index.
    Gpu,
    /// GPU memory.
    GpuMem,
    /// SM utilisation.
    Sm,
    /// CPU.
    Cpu,
    /// Host memory.
    HostMem,
    /// Running time.
    Time,
    /// Command.
    Command,
}

impl Column {
    /// Every column, left to right.
    pub const ALL: [Column; 9] = [
        Column::Pid,
        Column::User,
        Column::Gpu,
        Column::GpuMem,
        Column::Sm,
        Column::Cpu,
        Column::HostMem,
        Column::Time,
        Column::Command,
    ];

    /// The header word.
    pub fn title(self) -> &'static str {
        match self {
            Column::Pid => "PID",
            Column::User => "USER",
            Column::Gpu => "GPU",
            Column::GpuMem => "GPU-MEM",
            Column::Sm => "SM%",
            Column::Cpu => "CPU%",
            Column::HostMem => "HOST-MEM",
            Column::Time => "TIME",
            Column::Command => "COMMAND",
        }
    }

    fn position(self) -> usize {
        Column::ALL.iter().position(|&c| c == self).unwrap_or(0)
    }

    /// Numbers sort largest first by default; names and ids smallest first.
    fn descending(self) -> bool {
        matches!(
            self,
            Column::GpuMem | Column::Sm | Column::Cpu | Column::HostMem | Column::Time
        )
    }
}

/// A signal `k` can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    /// SIGTERM.
    Term,
    /// SIGINT.
    Int,
    /// SIGKILL.
    Kill,
}

impl Sig {
    /// The nix signal.
    pub fn signal(self) -> nix::sys::signal::Signal {
        match self {
            Sig::Term => nix::sys::signal::Signal::SIGTERM,
            Sig::Int => nix::sys::signal::Signal::SIGINT,
            Sig::Kill => nix::sys::signal::Signal::SIGKILL,
        }
    }
}

/// The dialog over the screen, if any.
#[derive(Debug, Clone, PartialEq)]
pub enum Dialog {
    /// None.
    None,
    /// The key list.
    Help,
    /// One process's detail.
    Detail,
    /// Which signal to send to this process (pid to signal, its row).
    Signal(u32, Box<ProcRow>),
}

/// A line at the bottom: what happened last.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The text.
    pub text: String,
    /// An error (drawn as one).
    pub error: bool,
}

/// What the main loop does after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Redraw.
    Redraw,
    /// Nothing changed.
    Nothing,
    /// Quit.
    Quit,
}

/// The whole state.
#[derive(Debug)]
pub struct App {
    /// Host name, for the title.
    pub hostname: String,
    /// Driver and CUDA versions.
    pub versions: String,
    /// Wall-clock time of the last publish, ns since the epoch.
    pub published_unix_ns: u64,
    /// Why the daemon is not live, when it is not.
    pub down: Option<String>,
    /// Whether any snapshot has been seen.
    pub seen_any: bool,
    /// The GPUs.
    pub gpus: Vec<GpuRow>,
    /// Every process, unfiltered, unsorted.
    pub all: Vec<ProcRow>,
    /// The rows shown, filtered and sorted.
    pub rows: Vec<ProcRow>,
    /// The host line.
    pub host: Host,
    /// Index into `rows` of the selected row.
    pub selected: usize,
    /// First row shown.
    pub scroll: usize,
    /// Rows of the table visible at the last draw (for paging and the mouse).
    pub page: usize,
    /// Screen row of the table's first line at the last draw.
    pub table_top: u16,
    /// Sort column and whether reversed from its natural order.
    pub sort: Column,
    /// Reversed.
    pub reverse: bool,
    /// Filter text.
    pub filter: String,
    /// The filter is being typed.
    pub editing: bool,
    /// Only the reader's own processes.
    pub only_mine: bool,
    /// Tree view.
    pub tree: bool,
    /// Only this GPU.
    pub gpu_filter: Option<u32>,
    /// The open dialog.
    pub dialog: Dialog,
    /// The bottom line.
    pub message: Option<Message>,
    /// The reader's uid.
    pub my_uid: u32,
    /// Colours on.
    pub color: bool,
    /// Per (host pid, GPU) GPU memory (MiB) and SM samples, for the detail view.
    pub proc_history: HashMap<(u32, u32), VecDeque<ProcSample>>,
    /// Reads the parent of a pid (tree mode); `/proc` normally.
    pub parent_of: fn(u32) -> Option<u32>,
}

impl App {
    /// A fresh state.
    pub fn new(hostname: String, my_uid: u32, color: bool) -> App {
        App {
            hostname,
            versions: String::new(),
            published_unix_ns: 0,
            down: None,
            seen_any: false,
            gpus: Vec::new(),
            all: Vec::new(),
            rows: Vec::new(),
            host: Host::default(),
            selected: 0,
            scroll: 0,
            page: 10,
            table_top: 0,
            sort: Column::Gpu,
            reverse: false,
            filter: String::new(),
            editing: false,
            only_mine: false,
            tree: false,
            gpu_filter: None,
            dialog: Dialog::None,
            message: None,
            my_uid,
            color,
            proc_history: HashMap::new(),
            parent_of: proc_parent,
        }
    }

    /// Takes in what the daemon published (a feed without a snapshot keeps the last
    /// rows, marked by `down`).
    pub fn update(&mut self, feed: Feed, host: Host) {
        self.down = feed.down;
        self.host = host;
        let Some(snap) = feed.snapshot else {
            return;
        };
        self.seen_any = true;
        let model = Model::new(&snap);
        self.versions = match (model.status.driver_version, model.status.cuda_version()) {
            (Some(d), Some(c)) => format!("driver {d}  CUDA {c}"),
            (Some(d), None) => format!("driver {d}"),
            _ => String::new(),
        };
        self.published_unix_ns = model.status.published_unix_ns;
        let thresholds = Thresholds::current();
        self.gpus = model
            .gpus
            .iter()
            .map(|g| {
                let ring = feed.histories.iter().find(|(i, _)| *i == g.index);
                let samples: Vec<gpupeek_model::Sample> = ring
                    .map(|(_, h)| h.samples.iter().map(gpupeek_model::Sample::new).collect())
                    .unwrap_or_default();
                let total_mib = g.memory.map(|m| m.total.mib());
                GpuRow {
                    index: g.index,
                    name: g.name.map(|n| n.decode()).unwrap_or_else(|| "?".into()),
                    state: Some(g.state),
                    util: g.util_pct,
                    mem: g.memory.map(|m| (m.used.0, m.total.0)),
                    temp: g.temp_c,
                    fan: g.fan_pct,
                    power: g.power_draw.map(|p| p.watts()),
                    power_limit: g.power_limit.map(|p| p.watts()),
                    clocks: (g.clock.sm.map(|c| c.0), g.clock.mem.map(|c| c.0)),
                    pstate: g.pstate.map(|p| p.0),
                    verdict: verdict::judge(g, &thresholds).map(|v| v.name()),
                    util_history: samples.iter().map(|s| s.util_pct.map(f64::from)).collect(),
                    mem_history: samples
                        .iter()
                        .map(|s| {
                            let used = s.mem_used_mib?;
                            let total = total_mib.filter(|&t| t > 0)?;
                            Some(100.0 * f64::from(used) / total as f64)
                        })
                        .collect(),
                }
            })
            .collect();
        let my_ns = gpupeek_shm::procfs::pid_ns_inode(std::path::Path::new("/proc/self/ns/pid"));
        let published = model.status.published_unix_ns;
        self.all = model
            .processes
            .iter()
            .map(|p| {
                let signal_pid = p.pid_in(my_ns, model.pid_ns_inode);
                let pid = signal_pid.unwrap_or(p.pid);
                let argv = p.argv().unwrap_or_default();
                let name = p.command.map(|c| c.decode()).unwrap_or_default();
                let command = if argv.is_empty() {
                    if name.is_empty() {
                        "?".to_owned()
                    } else {
                        name
                    }
                } else {
                    argv.join(" ")
                };
                let mut row = ProcRow {
                    pid,
                    host_pid: p.pid,
                    signal_pid,
                    uid: p.user.map(|(uid, _)| uid),
                    user: p
                        .user
                        .map(|(uid, name)| {
                            let n = name.decode();
                            if n.is_empty() {
                                uid.to_string()
                            } else {
                                n
                            }
                        })
                        .unwrap_or_else(|| "?".into()),
                    gpu: p.gpu_index,
                    gpu_mem: p.gpu_mem.map(|b| b.0),
                    sm: p.gpu_util_pct.map(|u| u[0]),
                    cpu: p.cpu.map(|c| c.pct()),
                    host_mem: p.host_mem.map(|b| b.0),
                    running: p
                        .start_unix_ns
                        .map(|s| published.saturating_sub(s) / 1_000_000_000),
                    command,
                    argv,
                    kind: p.kind.name(),
                    container: p.container.map(|(rt, id, _)| format!("{rt} {id}")),
                    depth: 0,
                    last_child: false,
                };
                // A process whose owner the daemon withholds (its basic policy, the
                // default under hidepid) may still be the reader's own: its /proc shows
                // it, as ps would, and `u` must find it.
                if p.user.is_none() {
                    if let Some(own) = signal_pid.and_then(monitor::read_own_process) {
                        row.fill_own(&own, published);
                    }
                }
                row
            })
            .collect();
        // Per-process history for the detail view; gone processes are forgotten.
        let alive: std::collections::HashSet<(u32, u32)> =
            self.all.iter().map(|p| (p.host_pid, p.gpu)).collect();
        self.proc_history.retain(|k, _| alive.contains(k));
        for p in &self.all {
            let ring = self.proc_history.entry((p.host_pid, p.gpu)).or_default();
            if ring.len() == PROC_HISTORY {
                ring.pop_front();
            }
            ring.push_back((p.gpu_mem.map(|b| b >> 20), p.sm));
        }
        self.refresh();
    }

    /// Rebuilds `rows` from `all` (filter, sort, tree), keeping the selected process.
    pub fn refresh(&mut self) {
        let keep = self.current().map(|p| (p.host_pid, p.gpu));
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<ProcRow> = self
            .all
            .iter()
            .filter(|p| self.gpu_filter.is_none_or(|g| p.gpu == g))
            .filter(|p| !self.only_mine || p.uid == Some(self.my_uid))
            .filter(|p| {
                needle.is_empty()
                    || p.user.to_lowercase().contains(&needle)
                    || p.command.to_lowercase().contains(&needle)
                    || p.pid.to_string().contains(&needle)
            })
            .cloned()
            .collect();
        let (col, rev) = (self.sort, self.reverse);
        rows.sort_by(|a, b| {
            let o = compare(a, b, col);
            let o = if col.descending() { o.reverse() } else { o };
            let o = if rev { o.reverse() } else { o };
            o.then(a.gpu.cmp(&b.gpu)).then(a.pid.cmp(&b.pid))
        });
        if self.tree {
            rows = tree(rows, self.parent_of);
        }
        self.rows = rows;
        self.selected = keep
            .and_then(|k| self.rows.iter().position(|p| (p.host_pid, p.gpu) == k))
            .unwrap_or(self.selected)
            .min(self.rows.len().saturating_sub(1));
        self.keep_visible();
    }

    /// The selected process.
    pub fn current(&self) -> Option<&ProcRow> {
        self.rows.get(self.selected)
    }

    fn keep_visible(&mut self) {
        let page = self.page.max(1);
        if self.selected < self.scroll {
            self.scroll = self.selected;
        } else if self.selected >= self.scroll + page {
            self.scroll = self.selected + 1 - page;
        }
        self.scroll = self.scroll.min(self.rows.len().saturating_sub(page));
    }

    fn select(&mut self, to: isize) {
        let last = self.rows.len().saturating_sub(1) as isize;
        self.selected = to.clamp(0, last.max(0)) as usize;
        self.keep_visible();
    }

    fn say(&mut self, text: impl Into<String>, error: bool) {
        self.message = Some(Message {
            text: text.into(),
            error,
        });
    }

    /// Does what a terminal event asks.
    pub fn on_event(&mut self, ev: &TermEvent) -> Action {
        match ev {
            TermEvent::Key(k) if k.kind != KeyEventKind::Release => self.on_key(k),
            TermEvent::Mouse(m) => self.on_mouse(m),
            TermEvent::Resize(..) => Action::Redraw,
            _ => Action::Nothing,
        }
    }

    fn on_key(&mut self, k: &KeyEvent) -> Action {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(k.code, KeyCode::Char('c') | KeyCode::Char('q')) {
            return Action::Quit;
        }
        if self.editing {
            match k.code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) if !ctrl => self.filter.push(c),
                _ => return Action::Nothing,
            }
            self.refresh();
            return Action::Redraw;
        }
        match &self.dialog {
            Dialog::Signal(pid, row) => {
                let sig = match k.code {
                    KeyCode::Char('t') | KeyCode::Char('T') | KeyCode::Enter => Some(Sig::Term),
                    KeyCode::Char('i') | KeyCode::Char('I') => Some(Sig::Int),
                    KeyCode::Char('k') | KeyCode::Char('K') => Some(Sig::Kill),
                    KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('q') => None,
                    _ => return Action::Nothing,
                };
                let (pid, row) = (*pid, row.clone());
                self.dialog = Dialog::None;
                match sig {
                    Some(sig) => self.send(pid, &row, sig),
                    None => self.say("no signal sent", false),
                }
                return Action::Redraw;
            }
            Dialog::Help | Dialog::Detail => {
                if matches!(k.code, KeyCode::Char('q')) {
                    return Action::Quit;
                }
                self.dialog = Dialog::None;
                return Action::Redraw;
            }
            Dialog::None => {}
        }
        self.message = None;
        let page = self.page.max(1) as isize;
        let at = self.selected as isize;
        match k.code {
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => self.dialog = Dialog::Help,
            KeyCode::Up | KeyCode::Char('k') => self.select(at - 1),
            KeyCode::Down | KeyCode::Char('j') => self.select(at + 1),
            KeyCode::PageUp => self.select(at - page),
            KeyCode::PageDown => self.select(at + page),
            KeyCode::Home => self.select(0),
            KeyCode::End => self.select(isize::MAX / 2),
            KeyCode::Char('<') | KeyCode::Char(',') => {
                let i = self.sort.position();
                self.sort = Column::ALL[(i + Column::ALL.len() - 1) % Column::ALL.len()];
                self.refresh();
            }
            KeyCode::Char('>') | KeyCode::Char('.') => {
                self.sort = Column::ALL[(self.sort.position() + 1) % Column::ALL.len()];
                self.refresh();
            }
            KeyCode::Char('r') => {
                self.reverse = !self.reverse;
                self.refresh();
            }
            KeyCode::Char('/') => {
                self.editing = true;
            }
            KeyCode::Char('u') => {
                self.only_mine = !self.only_mine;
                self.refresh();
            }
            KeyCode::Char('t') => {
                self.tree = !self.tree;
                self.refresh();
            }
            KeyCode::Char('g') | KeyCode::Char('G') => {
                self.cycle_gpu(k.code == KeyCode::Char('G'));
                self.refresh();
            }
            KeyCode::Enter => {
                if self.current().is_some() {
                    self.dialog = Dialog::Detail;
                }
            }
            KeyCode::Char('K') | KeyCode::F(9) => self.ask_signal(),
            _ => return Action::Nothing,
        }
        Action::Redraw
    }

    fn cycle_gpu(&mut self, back: bool) {
        let mut ids: Vec<Option<u32>> = vec![None];
        ids.extend(self.gpus.iter().map(|g| Some(g.index)));
        let at = ids.iter().position(|&g| g == self.gpu_filter).unwrap_or(0);
        let n = ids.len();
        self.gpu_filter = ids[if back { (at + n - 1) % n } else { (at + 1) % n }];
    }

    fn on_mouse(&mut self, m: &MouseEvent) -> Action {
        if self.dialog != Dialog::None || self.editing {
            return Action::Nothing;
        }
        let at = self.selected as isize;
        match m.kind {
            MouseEventKind::ScrollDown => self.select(at + 3),
            MouseEventKind::ScrollUp => self.select(at - 3),
            MouseEventKind::Down(MouseButton::Left) => {
                let Some(line) = m.row.checked_sub(self.table_top) else {
                    return Action::Nothing;
                };
                let row = self.scroll + usize::from(line);
                if usize::from(line) >= self.page || row >= self.rows.len() {
                    return Action::Nothing;
                }
                self.select(row as isize);
            }
            _ => return Action::Nothing,
        }
        Action::Redraw
    }

    /// Opens the signal dialog for the selected process, when the kernel would let this
    /// user signal it (checked with signal 0); says why not otherwise.
    fn ask_signal(&mut self) {
        let Some(row) = self.current().cloned() else {
            self.say("no process selected", true);
            return;
        };
        let Some(pid) = row.signal_pid else {
            self.say(
                format!(
                    "cannot signal pid {}: it is in another pid namespace",
                    row.pid
                ),
                true,
            );
            return;
        };
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None) {
            Ok(()) => self.dialog = Dialog::Signal(pid, Box::new(row)),
            Err(e) => self.say(refusal(pid, &row, e), true),
        }
    }

    fn send(&mut self, pid: u32, row: &ProcRow, sig: Sig) {
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig.signal()) {
            Ok(()) => self.say(
                format!("sent {} to pid {pid}", sig.signal().as_str()),
                false,
            ),
            Err(e) => self.say(refusal(pid, row, e), true),
        }
    }
}

/// Why a signal to `pid` failed, in words.
fn refusal(pid: u32, row: &ProcRow, e: nix::errno::Errno) -> String {
    match e {
        nix::errno::Errno::EPERM => format!(
            "cannot signal pid {pid}: not permitted (it belongs to {}, you are uid {})",
            row.user,
            nix::unistd::getuid()
        ),
        nix::errno::Errno::ESRCH => format!("cannot signal pid {pid}: no such process"),
        e => format!("cannot signal pid {pid}: {}", e.desc()),
    }
}

fn compare(a: &ProcRow, b: &ProcRow, col: Column) -> std::cmp::Ordering {
    let f = |x: Option<f64>, y: Option<f64>| x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
    match col {
        Column::Pid => a.pid.cmp(&b.pid),
        Column::User => a.user.cmp(&b.user),
        Column::Gpu => a.gpu.cmp(&b.gpu),
        Column::GpuMem => a.gpu_mem.cmp(&b.gpu_mem),
        Column::Sm => a.sm.cmp(&b.sm),
        Column::Cpu => f(a.cpu, b.cpu),
        Column::HostMem => a.host_mem.cmp(&b.host_mem),
        Column::Time => a.running.cmp(&b.running),
        Column::Command => a.command.cmp(&b.command),
    }
}

/// The parent of `pid`, from `/proc/PID/stat`.
pub fn proc_parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from the last `)`.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `rows` (sorted) as a forest: each process under its nearest ancestor that is also
/// on a GPU (found through `parent_of`), siblings in sort order.
fn tree(rows: Vec<ProcRow>, parent_of: fn(u32) -> Option<u32>) -> Vec<ProcRow> {
    let pids: std::collections::HashSet<u32> = rows.iter().map(|r| r.pid).collect();
    let parent: Vec<Option<u32>> = rows
        .iter()
        .map(|r| {
            let mut at = r.pid;
            for _ in 0..64 {
                at = parent_of(at).filter(|&p| p > 1)?;
                if pids.contains(&at) && at != r.pid {
                    return Some(at);
                }
            }
            None
        })
        .collect();
    let mut out = Vec::with_capacity(rows.len());
    let mut placed = vec![false; rows.len()];
    fn place(
        i: usize,
        depth: usize,
        last: bool,
        rows: &[ProcRow],
        parent: &[Option<u32>],
        placed: &mut [bool],
        out: &mut Vec<ProcRow>,
    ) {
        if placed[i] {
            return;
        }
        placed[i] = true;
        let mut row = rows[i].clone();
        row.depth = depth;
        row.last_child = last;
        let pid = row.pid;
        out.push(row);
        let kids: Vec<usize> = (0..rows.len())
            .filter(|&j| parent[j] == Some(pid) && !placed[j])
            .collect();
        for (n, &j) in kids.iter().enumerate() {
            place(j, depth + 1, n + 1 == kids.len(), rows, parent, placed, out);
        }
    }
    for i in 0..rows.len() {
        let orphan = parent[i].is_none_or(|p| !rows.iter().any(|r| r.pid == p));
        if orphan {
            place(i, 0, false, &rows, &parent, &mut placed, &mut out);
        }
    }
    // Anything in a cycle (cannot happen with real parents) still shows.
    for i in 0..rows.len() {
        place(i, 0, false, &rows, &parent, &mut placed, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEvent;

    fn row(pid: u32, user: &str, uid: u32, gpu: u32, mem: u64, command: &str) -> ProcRow {
        ProcRow {
            pid,
            host_pid: pid,
            signal_pid: Some(pid),
            uid: Some(uid),
            user: user.into(),
            gpu,
            gpu_mem: Some(mem),
            command: command.into(),
            ..ProcRow::default()
        }
    }

    fn app() -> App {
        let mut a = App::new("h".into(), 1000, false);
        a.gpus = vec![
            GpuRow {
                index: 0,
                ..GpuRow::default()
            },
            GpuRow {
                index: 1,
                ..GpuRow::default()
            },
        ];
        a.all = vec![
            row(10, "alice", 1000, 0, 300, "python train.py"),
            row(20, "bob", 1001, 1, 100, "python eval.py"),
            row(30, "carol", 1002, 0, 200, "blender"),
        ];
        a.refresh();
        a
    }

    /// A snapshot of one GPU with one process, `pid`, whose owner and command line the
    /// daemon withheld (its basic policy).
    fn withheld(pid: u32) -> gpupeek_shm::Snapshot {
        use gpupeek_shm::layout::{gpu_valid as v, proc_valid as pv, DaemonState, GpuState};
        use gpupeek_shm::{GpuRecord, ProcRecord, StatusRecord};
        gpupeek_shm::Snapshot {
            header: Default::default(),
            status: StatusRecord {
                state: DaemonState::Live as u32,
                gpu_count: 1,
                period_ns: 1_000_000_000,
                ..StatusRecord::default()
            },
            gpus: vec![GpuRecord {
                state: GpuState::Ok as u32,
                valid: v::MEMORY,
                mem_total_bytes: 80 << 30,
                ..GpuRecord::default()
            }],
            processes: vec![ProcRecord {
                pid,
                valid: pv::GPU_MEMORY,
                gpu_mem_bytes: 1 << 30,
                ..ProcRecord::default()
            }],
            proc_overflow: 0,
            proc_head: Default::default(),
            text: Vec::new(),
            mig: Vec::new(),
            mig_overflow: 0,
            generation: 1,
            consistent: true,
        }
    }

    #[test]
    fn a_withheld_process_of_the_readers_own_is_filled_in_from_its_proc() {
        let me = std::process::id();
        let my_uid = nix::unistd::getuid().as_raw();
        let mut a = App::new("h".into(), my_uid, false);
        let feed = Feed {
            snapshot: Some(withheld(me)),
            histories: Vec::new(),
            down: None,
        };
        a.update(feed, Host::default());
        let row = a.all.iter().find(|r| r.host_pid == me).expect("our row");
        assert_eq!(row.uid, Some(my_uid));
        assert_ne!(row.user, "?");
        assert!(!row.argv.is_empty() && row.command != "?", "{row:?}");
        assert!(row.host_mem.is_some_and(|m| m > 0));
        // `u` (only mine) keeps it.
        key(&mut a, KeyCode::Char('u'));
        assert_eq!(a.rows.iter().map(|r| r.host_pid).collect::<Vec<_>>(), [me]);

        // A pid this reader cannot see stays withheld.
        let gone = u32::MAX - 1;
        let feed = Feed {
            snapshot: Some(withheld(gone)),
            histories: Vec::new(),
            down: None,
        };
        a.update(feed, Host::default());
        let row = a.all.iter().find(|r| r.host_pid == gone).expect("its row");
        assert_eq!((row.uid, row.user.as_str()), (None, "?"));
    }

    fn key(a: &mut App, code: KeyCode) -> Action {
        a.on_event(&TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
    }

    fn pids(a: &App) -> Vec<u32> {
        a.rows.iter().map(|r| r.pid).collect()
    }

    #[test]
    fn sorting_reversing_filtering_and_selection() {
        let mut a = app();
        assert_eq!(pids(&a), [10, 30, 20], "by GPU, then pid");
        key(&mut a, KeyCode::Char('>'));
        assert_eq!(a.sort, Column::GpuMem);
        assert_eq!(pids(&a), [10, 30, 20], "largest GPU memory first");
        key(&mut a, KeyCode::Char('r'));
        assert_eq!(pids(&a), [20, 30, 10]);
        key(&mut a, KeyCode::Char('<'));
        key(&mut a, KeyCode::Char('<'));
        assert_eq!(a.sort, Column::User);
        // The selection follows its process through a re-sort.
        key(&mut a, KeyCode::Down);
        let chosen = a.current().unwrap().pid;
        key(&mut a, KeyCode::Char('r'));
        assert_eq!(a.current().unwrap().pid, chosen);
        key(&mut a, KeyCode::End);
        assert_eq!(a.selected, 2);
        key(&mut a, KeyCode::Home);
        assert_eq!(a.selected, 0);
        // Incremental filter on user, command and pid.
        key(&mut a, KeyCode::Char('/'));
        for c in "py".chars() {
            key(&mut a, KeyCode::Char(c));
        }
        assert_eq!(a.rows.len(), 2);
        key(&mut a, KeyCode::Enter);
        assert!(!a.editing);
        key(&mut a, KeyCode::Char('/'));
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.rows.len(), 3, "Esc clears the filter");
        key(&mut a, KeyCode::Char('/'));
        key(&mut a, KeyCode::Char('3'));
        key(&mut a, KeyCode::Char('0'));
        assert_eq!(pids(&a), [30], "by pid");
        key(&mut a, KeyCode::Esc);
        key(&mut a, KeyCode::Char('u'));
        assert_eq!(pids(&a), [10], "only mine");
        key(&mut a, KeyCode::Char('u'));
        key(&mut a, KeyCode::Char('g'));
        assert_eq!(a.gpu_filter, Some(0));
        assert_eq!(a.rows.len(), 2);
        key(&mut a, KeyCode::Char('g'));
        assert_eq!(pids(&a), [20]);
        key(&mut a, KeyCode::Char('g'));
        assert_eq!(a.gpu_filter, None);
        assert_eq!(key(&mut a, KeyCode::Char('q')), Action::Quit);
    }

    #[test]
    fn signalling_a_process_this_user_may_not_signal_is_refused_in_words() {
        let mut a = app();
        // pid 1 belongs to root: as any user but root the kernel refuses even signal 0.
        a.all = vec![row(1, "root", 0, 0, 1, "init")];
        a.refresh();
        key(&mut a, KeyCode::Char('K'));
        if nix::unistd::getuid().is_root() {
            assert!(matches!(a.dialog, Dialog::Signal(1, _)));
            key(&mut a, KeyCode::Esc);
            assert_eq!(a.dialog, Dialog::None);
            assert_eq!(a.message.as_ref().unwrap().text, "no signal sent");
        } else {
            assert_eq!(a.dialog, Dialog::None);
            let m = a.message.as_ref().unwrap();
            assert!(m.error && m.text.contains("not permitted"), "{m:?}");
        }
    }

    #[test]
    fn a_click_selects_the_row_under_it_and_the_wheel_scrolls() {
        let mut a = app();
        a.table_top = 10;
        a.page = 5;
        let mouse = |kind, row| {
            TermEvent::Mouse(MouseEvent {
                kind,
                column: 3,
                row,
                modifiers: KeyModifiers::NONE,
            })
        };
        let click = MouseEventKind::Down(MouseButton::Left);
        assert_eq!(a.on_event(&mouse(click, 12)), Action::Redraw);
        assert_eq!(a.selected, 2);
        assert_eq!(
            a.on_event(&mouse(click, 9)),
            Action::Nothing,
            "above the table"
        );
        assert_eq!(
            a.on_event(&mouse(click, 13)),
            Action::Nothing,
            "below the last row"
        );
        assert_eq!(a.selected, 2);
        a.on_event(&mouse(MouseEventKind::ScrollUp, 0));
        assert_eq!(a.selected, 0);
        a.on_event(&mouse(MouseEventKind::ScrollDown, 0));
        assert_eq!(a.selected, 2, "three rows a notch, up to the last");
    }

    #[test]
    fn tree_puts_children_under_their_gpu_parent() {
        let mut a = app();
        fn parent(pid: u32) -> Option<u32> {
            match pid {
                20 => Some(15),
                15 => Some(10),
                30 => Some(10),
                _ => Some(1),
            }
        }
        a.parent_of = parent;
        key(&mut a, KeyCode::Char('t'));
        assert_eq!(pids(&a), [10, 30, 20]);
        let depth: Vec<usize> = a.rows.iter().map(|r| r.depth).collect();
        assert_eq!(depth, [0, 1, 1]);
        assert!(a.rows[2].last_child);
    }
}
