//! What sysfs says about NVIDIA GPUs without touching them: which PCI devices are NVIDIA
//! GPUs bound to the `nvidia` driver, and each one's runtime power-management state.
//!
//! Everything here reads attributes the PCI core keeps in memory (`vendor`, `class`, the
//! `driver` link, `power/runtime_status`, `power/control`, `power/autosuspend_delay_ms`,
//! `power/runtime_suspended_time`, `/sys/module/nvidia/version`): reading them never resumes a suspended device, unlike
//! any NVML call or a read of the device's config space. The root (normally `/sys`) is a
//! parameter so tests run on a fake tree.
//!
//! A status read is one `open`/`read`/`close` of a file whose path was built at
//! discovery, into a stack buffer: no allocation per tick.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// PCI vendor id of NVIDIA.
const NVIDIA_VENDOR: &str = "0x10de";
/// PCI base class of display controllers (VGA 0x0300, 3D 0x0302, other 0x0380).
const DISPLAY_CLASS: u32 = 0x03;

/// A PCI address: domain, bus, device, function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PciAddr {
    domain: u32,
    bus: u8,
    device: u8,
    function: u8,
}

impl PciAddr {
    /// Parses `DOMAIN:BUS:DEVICE.FUNCTION` in hex: sysfs's `0000:01:00.0` and NVML's
    /// `00000000:01:00.0` alike, in either case.
    pub fn parse(s: &str) -> Option<PciAddr> {
        let (domain, rest) = s.trim().split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let hex = |p: &str, max_len: usize| {
            if p.is_empty() || p.len() > max_len || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(p, 16).ok()
        };
        Some(PciAddr {
            domain: hex(domain, 8)?,
            bus: u8::try_from(hex(bus, 2)?).ok()?,
            device: u8::try_from(hex(device, 2)?).ok().filter(|&d| d < 32)?,
            function: u8::try_from(hex(function, 1)?).ok().filter(|&f| f < 8)?,
        })
    }
}

/// NVML's spelling, e.g. `00000000:01:00.0`, so identities read from sysfs and from NVML
/// look the same.
impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:08X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// `power/runtime_status` of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Powered and usable.
    Active,
    /// Runtime-suspended (powered down).
    Suspended,
    /// Being suspended.
    Suspending,
    /// Being resumed.
    Resuming,
    /// `unsupported` or `error`: runtime PM does not manage it.
    Unmanaged,
    /// The file could not be read or said something unknown.
    Unknown,
}

impl Status {
    fn parse(word: &str) -> Status {
        match word {
            "active" => Status::Active,
            "suspended" => Status::Suspended,
            "suspending" => Status::Suspending,
            "resuming" => Status::Resuming,
            "unsupported" | "error" => Status::Unmanaged,
            _ => Status::Unknown,
        }
    }

    /// Suspended, or on its way there.
    pub fn asleep(self) -> bool {
        matches!(self, Status::Suspended | Status::Suspending)
    }
}

/// The runtime-PM state of one GPU, as read this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Power {
    /// `power/runtime_status`.
    pub status: Status,
    /// `power/control` is `auto`: the kernel may suspend it (`on` means never).
    pub auto: bool,
}

/// One NVIDIA GPU found in sysfs.
#[derive(Debug)]
pub struct Gpu {
    /// Its PCI address.
    pub addr: PciAddr,
    status_path: PathBuf,
    control_path: PathBuf,
    delay_path: PathBuf,
    suspended_time_path: PathBuf,
}

impl Gpu {
    /// Reads its runtime-PM state; an error means the files could not be read.
    pub fn power(&self) -> io::Result<Power> {
        let mut buf = [0u8; 32];
        let status = Status::parse(read_word(&self.status_path, &mut buf)?);
        let auto = read_word(&self.control_path, &mut buf)? == "auto";
        Ok(Power { status, auto })
    }

    /// `power/runtime_suspended_time`: milliseconds spent runtime-suspended so far, a
    /// counter that shows a suspend even when it was over between two reads.
    pub fn suspended_time_ms(&self) -> Option<u64> {
        let mut buf = [0u8; 32];
        read_word(&self.suspended_time_path, &mut buf)
            .ok()?
            .parse()
            .ok()
    }

    /// `power/autosuspend_delay_ms`: how long the kernel waits, once the device is idle,
    /// before suspending it (0 when unreadable or negative).
    pub fn autosuspend_delay_ms(&self) -> u64 {
        let mut buf = [0u8; 32];
        read_word(&self.delay_path, &mut buf)
            .ok()
            .and_then(|w| w.parse::<i64>().ok())
            .map_or(0, |ms| ms.max(0) as u64)
    }
}

/// The NVIDIA GPUs bound to the `nvidia` driver under `root/bus/pci/devices`, sorted by
/// PCI address (the order in which NVML numbers them).
pub fn discover(root: &Path) -> io::Result<Vec<Gpu>> {
    let devices = root.join("bus/pci/devices");
    let mut gpus = Vec::new();
    for entry in std::fs::read_dir(&devices)? {
        let entry = entry?;
        let Some(addr) = entry.file_name().to_str().and_then(PciAddr::parse) else {
            continue;
        };
        let dir = entry.path();
        if is_nvidia_gpu(&dir) {
            gpus.push(Gpu {
                addr,
                status_path: dir.join("power/runtime_status"),
                control_path: dir.join("power/control"),
                delay_path: dir.join("power/autosuspend_delay_ms"),
                suspended_time_path: dir.join("power/runtime_suspended_time"),
            });
        }
    }
    gpus.sort_by_key(|g| g.addr);
    Ok(gpus)
}

/// NVIDIA vendor id, a display-controller class, and driven by `nvidia` (a GPU bound to
/// another driver, e.g. vfio-pci or nouveau, is not NVML's).
fn is_nvidia_gpu(dir: &Path) -> bool {
    let mut buf = [0u8; 32];
    let vendor = read_word(&dir.join("vendor"), &mut buf).is_ok_and(|v| v == NVIDIA_VENDOR);
    let display = read_word(&dir.join("class"), &mut buf)
        .ok()
        .and_then(|c| u32::from_str_radix(c.strip_prefix("0x")?, 16).ok())
        .is_some_and(|class| class >> 16 == DISPLAY_CLASS);
    let nvidia_driver = std::fs::read_link(dir.join("driver"))
        .is_ok_and(|target| target.file_name().is_some_and(|n| n == "nvidia"));
    vendor && display && nvidia_driver
}

/// The loaded nvidia kernel module's version (`/sys/module/nvidia/version`), which is
/// the driver version NVML would report.
pub fn driver_version(root: &Path) -> Option<String> {
    let mut buf = [0u8; 32];
    read_word(&root.join("module/nvidia/version"), &mut buf)
        .ok()
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// Reads a small sysfs attribute into `buf` and returns it without surrounding
/// whitespace (a value that is not UTF-8 reads as empty).
fn read_word<'b>(path: &Path, buf: &'b mut [u8; 32]) -> io::Result<&'b str> {
    let mut file = File::open(path)?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(std::str::from_utf8(&buf[..len]).unwrap_or("").trim())
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A fake sysfs tree in a temporary directory, removed on drop.
    pub struct FakeSys(pub PathBuf);

    impl FakeSys {
        pub fn new(tag: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("gpupeekd-sysfs-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("bus/pci/devices")).unwrap();
            std::fs::create_dir_all(dir.join("bus/pci/drivers/nvidia")).unwrap();
            FakeSys(dir)
        }

        /// Adds a PCI device; `driver` is the name of the driver it is bound to.
        pub fn device(&self, name: &str, vendor: &str, class: &str, driver: Option<&str>) {
            let dir = self.0.join("bus/pci/devices").join(name);
            std::fs::create_dir_all(dir.join("power")).unwrap();
            std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(dir.join("class"), format!("{class}\n")).unwrap();
            if let Some(driver) = driver {
                let target = self.0.join("bus/pci/drivers").join(driver);
                std::fs::create_dir_all(&target).unwrap();
                std::os::unix::fs::symlink(target, dir.join("driver")).unwrap();
            }
            self.power(name, "active", "auto");
        }

        /// Sets a device's `runtime_status` and `control`.
        pub fn power(&self, name: &str, status: &str, control: &str) {
            let dir = self.0.join("bus/pci/devices").join(name).join("power");
            std::fs::write(dir.join("runtime_status"), format!("{status}\n")).unwrap();
            std::fs::write(dir.join("control"), format!("{control}\n")).unwrap();
        }
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn pci_addresses_parse_in_both_spellings_and_print_as_nvml_does() {
        let sysfs = PciAddr::parse("0000:3b:00.0").unwrap();
        let nvml = PciAddr::parse("00000000:3B:00.0").unwrap();
        assert_eq!(sysfs, nvml);
        assert_eq!(sysfs.to_string(), "00000000:3B:00.0");
        for bad in [
            "",
            "0000:3b:00",
            "0000:3b:20.0",
            "0000:3b:00.8",
            "x:3b:00.0",
            "0000:100:00.0",
        ] {
            assert_eq!(PciAddr::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn discovery_finds_only_nvidia_gpus_on_the_nvidia_driver_in_address_order() {
        let sys = FakeSys::new("discover");
        sys.device("0000:02:00.0", "0x10de", "0x030200", Some("nvidia"));
        sys.device("0000:01:00.0", "0x10de", "0x030000", Some("nvidia"));
        sys.device("0000:01:00.1", "0x10de", "0x040300", Some("snd_hda_intel"));
        sys.device("0000:00:02.0", "0x8086", "0x030000", Some("i915"));
        sys.device("0000:03:00.0", "0x10de", "0x030200", Some("vfio-pci"));
        sys.device("0000:04:00.0", "0x10de", "0x030200", None);
        let gpus = discover(&sys.0).unwrap();
        let found: Vec<String> = gpus.iter().map(|g| g.addr.to_string()).collect();
        assert_eq!(found, ["00000000:01:00.0", "00000000:02:00.0"]);
    }

    #[test]
    fn power_state_reads_status_and_control() {
        let sys = FakeSys::new("power");
        sys.device("0000:01:00.0", "0x10de", "0x030200", Some("nvidia"));
        let gpu = &discover(&sys.0).unwrap()[0];
        let read = |status, control| {
            sys.power("0000:01:00.0", status, control);
            gpu.power().unwrap()
        };
        assert_eq!(
            read("suspended", "auto"),
            Power {
                status: Status::Suspended,
                auto: true
            }
        );
        assert_eq!(read("active", "on").status, Status::Active);
        assert!(!read("active", "on").auto);
        assert_eq!(read("unsupported", "auto").status, Status::Unmanaged);
        assert_eq!(read("gibberish", "auto").status, Status::Unknown);
        std::fs::remove_file(sys.0.join("bus/pci/devices/0000:01:00.0/power/control")).unwrap();
        assert!(gpu.power().is_err());
        assert_eq!(gpu.autosuspend_delay_ms(), 0);
    }

    #[test]
    fn a_missing_tree_is_an_error_and_the_driver_version_comes_from_the_module() {
        let sys = FakeSys::new("missing");
        assert!(discover(&sys.0.join("nowhere")).is_err());
        assert_eq!(driver_version(&sys.0), None);
        std::fs::create_dir_all(sys.0.join("module/nvidia")).unwrap();
        std::fs::write(sys.0.join("module/nvidia/version"), "550.54.15\n").unwrap();
        assert_eq!(driver_version(&sys.0).as_deref(), Some("550.54.15"));
    }
}
