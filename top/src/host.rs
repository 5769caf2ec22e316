//! The host's summary line: CPU use since the last update, memory and load average, from
//! the reader's own `/proc` (what `top` shows; nothing the daemon publishes).

use std::path::{Path, PathBuf};

/// One reading of the host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Host {
    /// CPU busy since the previous reading, percent of all CPUs.
    pub cpu_pct: Option<f64>,
    /// CPUs the kernel counts.
    pub cpus: usize,
    /// Memory total and available, bytes.
    pub mem: Option<(u64, u64)>,
    /// 1, 5 and 15 minute load averages.
    pub load: Option<[f64; 3]>,
}

/// Reads `/proc` (or a test's stand-in), keeping the CPU counters between readings.
#[derive(Debug)]
pub struct HostReader {
    root: PathBuf,
    last_cpu: Option<(u64, u64)>,
}

impl HostReader {
    /// A reader of `root` (normally `/proc`).
    pub fn new(root: &Path) -> Self {
        HostReader {
            root: root.to_owned(),
            last_cpu: None,
        }
    }

    /// Reads the host now.
    pub fn read(&mut self) -> Host {
        let text = |name: &str| std::fs::read_to_string(self.root.join(name)).ok();
        let mut host = Host::default();
        if let Some(stat) = text("stat") {
            host.cpus = stat
                .lines()
                .filter(|l| {
                    l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)
                })
                .count();
            if let Some((busy, total)) = cpu_counters(&stat) {
                if let Some((b0, t0)) = self.last_cpu {
                    let dt = total.saturating_sub(t0);
                    if dt > 0 {
                        host.cpu_pct = Some(100.0 * busy.saturating_sub(b0) as f64 / dt as f64);
                    }
                }
                self.last_cpu = Some((busy, total));
            }
        }
        host.mem = text("meminfo").and_then(|m| {
            let field = |name: &str| {
                m.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                    .map(|kib| kib * 1024)
            };
            Some((field("MemTotal:")?, field("MemAvailable:")?))
        });
        host.load = text("loadavg").and_then(|l| {
            let mut it = l.split_whitespace().map(|v| v.parse::<f64>().ok());
            Some([it.next()??, it.next()??, it.next()??])
        });
        host
    }
}

/// Busy and total jiffies from `/proc/stat`'s first line.
fn cpu_counters(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is counted in user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_memory_and_load_from_proc() {
        let dir = std::env::temp_dir().join(format!("gpupeek-top-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stat = |busy: u64, idle: u64| {
            format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 0 0 1\ncpu1 1 0 0 1\nintr 5\n")
        };
        std::fs::write(dir.join("stat"), stat(100, 900)).unwrap();
        std::fs::write(
            dir.join("meminfo"),
            "MemTotal: 1024 kB\nMemFree: 10 kB\nMemAvailable: 512 kB\n",
        )
        .unwrap();
        std::fs::write(dir.join("loadavg"), "0.50 0.25 0.10 1/100 42\n").unwrap();
        let mut r = HostReader::new(&dir);
        let first = r.read();
        assert_eq!(first.cpu_pct, None, "no rate from one reading");
        assert_eq!(first.cpus, 2);
        assert_eq!(first.mem, Some((1 << 20, 1 << 19)));
        assert_eq!(first.load, Some([0.5, 0.25, 0.1]));
        std::fs::write(dir.join("stat"), stat(150, 950)).unwrap();
        assert_eq!(r.read().cpu_pct, Some(50.0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
