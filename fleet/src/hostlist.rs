//! Slurm's hostlist expressions in hosts: `gpu-[001-004,010],cpu-01` is five hosts, so
//! that `gpupeek fleet "$SLURM_JOB_NODELIST"` reads a job's nodes as `pdsh -w` and
//! `clush -w` do. A comma outside brackets separates hosts; a bracket of numbers and
//! ranges (`[1-3,7]`) stands for each, zero-padded to its first number's width
//! (`[01-10]`); several brackets multiply. A bracket holding anything else (an IPv6
//! address: `[::1]:9477`) is left as it is.

/// At most this many hosts from one expression: a typo such as `node[1-1000000]` is an
/// error, not a million connections.
pub const MAX_HOSTS: usize = 65_536;

/// The hosts `spec` stands for, in order.
pub fn expand(spec: &str) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    let parts =
        split_outside_brackets(spec).ok_or_else(|| format!("bad host {spec:?}: unbalanced [ ]"))?;
    for part in parts {
        let mut names = vec![String::new()];
        let mut rest = part;
        while let Some((before, range, after)) = next_range(rest) {
            let numbers = numbers(range).map_err(|why| format!("bad host {spec:?}: {why}"))?;
            if names.len().saturating_mul(numbers.len()) > MAX_HOSTS {
                return Err(format!(
                    "host {spec:?} stands for more than {MAX_HOSTS} hosts"
                ));
            }
            names = names
                .iter()
                .flat_map(|name| numbers.iter().map(move |n| format!("{name}{before}{n}")))
                .collect();
            rest = after;
        }
        hosts.extend(names.into_iter().map(|name| name + rest));
        if hosts.len() > MAX_HOSTS {
            return Err(format!(
                "host {spec:?} stands for more than {MAX_HOSTS} hosts"
            ));
        }
    }
    Ok(hosts)
}

/// `spec`'s comma-separated parts, a comma inside `[ ]` not separating; `None` when
/// its brackets do not pair up.
fn split_outside_brackets(spec: &str) -> Option<Vec<&str>> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in spec.char_indices() {
        match c {
            '[' if depth == 0 => depth += 1,
            ']' if depth == 1 => depth -= 1,
            '[' | ']' => return None,
            ',' if depth == 0 => {
                parts.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&spec[start..]);
    (depth == 0).then_some(parts)
}

/// The first bracket of numbers and ranges in `s`: what comes before it, its content,
/// and what follows it.
fn next_range(s: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(open) = s[from..].find('[').map(|i| from + i) {
        let close = open + s[open..].find(']')?;
        let inside = &s[open + 1..close];
        let numeric = inside.chars().any(|c| c.is_ascii_digit())
            && inside
                .chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == '-');
        if numeric {
            return Some((&s[..open], inside, &s[close + 1..]));
        }
        from = close + 1;
    }
    None
}

/// The numbers of a bracket's content (`1-3,7`), as text of their width.
fn numbers(range: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in range.split(',') {
        let (lo, hi) = item.split_once('-').unwrap_or((item, item));
        let parse = |n: &str| {
            n.parse::<u64>()
                .map_err(|_| format!("[{range}]: {item:?} is not N or N-M"))
        };
        let (a, b) = (parse(lo)?, parse(hi)?);
        if a > b {
            return Err(format!("[{range}]: {item:?} counts down"));
        }
        if b - a >= MAX_HOSTS as u64 {
            return Err(format!("[{range}] stands for more than {MAX_HOSTS} hosts"));
        }
        let width = lo.len();
        out.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(spec: &str) -> Vec<String> {
        expand(spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
    }

    #[test]
    fn a_slurm_nodelist_is_its_nodes() {
        assert_eq!(
            hosts("gpu-[001-003,010],cpu-01"),
            ["gpu-001", "gpu-002", "gpu-003", "gpu-010", "cpu-01"]
        );
        assert_eq!(hosts("node[8-11]"), ["node8", "node9", "node10", "node11"]);
        assert_eq!(
            hosts("rack[1-2]-n[1,3]:9000"),
            [
                "rack1-n1:9000",
                "rack1-n3:9000",
                "rack2-n1:9000",
                "rack2-n3:9000"
            ]
        );
        assert_eq!(hosts("a,b"), ["a", "b"]);
        assert_eq!(
            hosts("https://gpu[1-2]:9477"),
            ["https://gpu1:9477", "https://gpu2:9477"]
        );
    }

    #[test]
    fn plain_hosts_and_ipv6_brackets_are_left_as_they_are() {
        for spec in [
            "gpu1",
            "gpu1:9477",
            "[::1]:9477",
            "http://[fe80::1]:9477",
            "::1",
        ] {
            assert_eq!(hosts(spec), [spec]);
        }
    }

    #[test]
    fn a_bad_range_is_an_error() {
        for spec in [
            "node[3-1]",
            "node[1-2-3]",
            "node[1-]",
            "node[1-100000]",
            "node[1-2",
            "node1-2]",
            "node[[1]]",
        ] {
            assert!(expand(spec).is_err(), "{spec}");
        }
        let many = "a[0-999]b[0-999]";
        assert!(
            expand(many).unwrap_err().contains("more than 65536"),
            "{many}"
        );
    }
}
