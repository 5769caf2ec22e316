//! The kubeconfig user's credential plugin (`users[].user.exec`), run as kubectl runs it
//! (`client.authentication.k8s.io/v1` and `v1beta1`): the command with its `args`, its
//! `env` added to ours, `KUBERNETES_EXEC_INFO` holding an `ExecCredential` whose `spec`
//! says it is not interactive (and names the cluster, with `provideClusterInfo`), and
//! standard input closed. A command with a `/` is relative to the kubeconfig's
//! directory; one without is looked up in `PATH`.
//!
//! Its standard output is an `ExecCredential` of the same apiVersion whose `status`
//! holds a bearer `token`, or a client certificate and key (PEM), and maybe an
//! `expirationTimestamp`: the credential is kept until then (for the program's life
//! without one), then the plugin runs again; so it does when the API server refuses the
//! credential (401, see [`Plugin::forget`]). Never interactive: a plugin that must ask
//! (`interactiveMode: Always`) is refused when the kubeconfig is read; one that fails,
//! answers nothing usable or runs past [`PLUGIN_TIMEOUT`] is one line that names it,
//! with the last line it wrote to standard error (and its `installHint` when it is not
//! installed).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use serde::Deserialize;

/// The longest a plugin may run (cloud plugins start an interpreter and may make a
/// request or two of their own).
pub const PLUGIN_TIMEOUT: Duration = Duration::from_secs(20);

/// The apiVersions of the credential protocol a plugin may speak (`v1alpha1` was
/// removed in Kubernetes 1.24).
const API_VERSIONS: [&str; 2] = [
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
];

/// A kubeconfig user's `exec` entry, as written.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct Spec {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<Vec<EnvVar>>,
    #[serde(rename = "installHint")]
    install_hint: Option<String>,
    #[serde(rename = "provideClusterInfo")]
    provide_cluster_info: bool,
    #[serde(rename = "interactiveMode")]
    interactive_mode: Option<String>,
}

#[derive(Deserialize, Debug)]
struct EnvVar {
    name: String,
    #[serde(default)]
    value: String,
}

/// The cluster as `provideClusterInfo` gives it to the plugin.
pub struct Cluster<'a> {
    /// The server's URL.
    pub server: &'a str,
    /// The certificate authority's PEM, if the kubeconfig names one.
    pub ca: Option<&'a [u8]>,
    /// `insecure-skip-tls-verify`.
    pub insecure: bool,
    /// `tls-server-name`, if given.
    pub tls_server_name: Option<&'a str>,
    /// `proxy-url`, if given.
    pub proxy_url: Option<&'a str>,
}

/// What a plugin answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The bearer token.
    pub token: Option<String>,
    /// A client certificate chain and its key, PEM.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// When it stops being good, if the plugin said.
    expires: Option<SystemTime>,
}

/// A user's credential plugin, and the credential it last gave.
#[derive(Debug)]
pub struct Plugin {
    api_version: String,
    /// The command as written, for messages.
    name: String,
    command: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    install_hint: Option<String>,
    /// `KUBERNETES_EXEC_INFO`.
    info: String,
    /// How long it may run ([`PLUGIN_TIMEOUT`] but in tests).
    timeout: Duration,
    kept: Mutex<Option<Credential>>,
}

impl Plugin {
    /// The plugin `spec` describes, in the kubeconfig of directory `dir`, for `cluster`;
    /// `Err` says what is wrong with the entry.
    pub fn new(spec: Spec, dir: &Path, cluster: &Cluster) -> Result<Plugin, String> {
        let name = spec
            .command
            .filter(|c| !c.is_empty())
            .ok_or("the exec plugin has no command")?;
        let api_version = spec.api_version.unwrap_or_default();
        if !API_VERSIONS.contains(&api_version.as_str()) {
            return Err(format!(
                "exec plugin {name}: apiVersion {api_version:?} is not one of {}",
                API_VERSIONS.join(", ")
            ));
        }
        if spec.interactive_mode.as_deref() == Some("Always") {
            return Err(format!(
                "exec plugin {name} needs a terminal (interactiveMode: Always), which gpupeek \
                 fleet does not give it: run it by hand (or kubectl) first, or use a context \
                 whose user has a token"
            ));
        }
        let command = if name.contains('/') {
            dir.join(&name)
        } else {
            PathBuf::from(&name)
        };
        let mut exec_info = serde_json::json!({
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": false},
        });
        if spec.provide_cluster_info {
            let mut c = serde_json::json!({
                "server": cluster.server,
                "insecure-skip-tls-verify": cluster.insecure,
            });
            if let Some(ca) = cluster.ca {
                c["certificate-authority-data"] =
                    base64::engine::general_purpose::STANDARD.encode(ca).into();
            }
            if let Some(name) = cluster.tls_server_name {
                c["tls-server-name"] = name.into();
            }
            if let Some(proxy) = cluster.proxy_url {
                c["proxy-url"] = proxy.into();
            }
            exec_info["spec"]["cluster"] = c;
        }
        Ok(Plugin {
            api_version,
            name,
            command,
            args: spec.args.unwrap_or_default(),
            env: spec
                .env
                .unwrap_or_default()
                .into_iter()
                .map(|e| (e.name, e.value))
                .collect(),
            install_hint: spec.install_hint.filter(|h| !h.trim().is_empty()),
            info: exec_info.to_string(),
            timeout: PLUGIN_TIMEOUT,
            kept: Mutex::new(None),
        })
    }

    /// The credential: the one kept while it is good, else the plugin's answer now.
    pub fn credential(&self) -> Result<Credential, String> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let now = SystemTime::now();
        if let Some(c) = kept.as_ref().filter(|c| c.expires.is_none_or(|t| now < t)) {
            return Ok(c.clone());
        }
        let fresh = self.run()?;
        *kept = Some(fresh.clone());
        Ok(fresh)
    }

    /// The API server refused the credential: the next request runs the plugin again.
    pub fn forget(&self) {
        *self.kept.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Runs the plugin once: its credential, or the one line that says why none.
    fn run(&self) -> Result<Credential, String> {
        let name = &self.name;
        let mut child = Command::new(&self.command)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("KUBERNETES_EXEC_INFO", &self.info)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    let hint = self
                        .install_hint
                        .as_deref()
                        .map(|h| format!(" ({})", one_line(h)))
                        .unwrap_or_default();
                    format!("exec plugin {name} is not installed{hint}")
                }
                _ => format!("cannot run exec plugin {name}: {e}"),
            })?;
        // Read on threads of their own, so that a full pipe never stalls the plugin.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "exec plugin {name} did not answer within {} s",
                        self.timeout.as_secs_f64()
                    ));
                }
                Err(e) => return Err(format!("exec plugin {name}: {e}")),
            }
        };
        // A plugin that left a child holding its pipes open is not waited for.
        let stdout = out.join().unwrap_or_default();
        let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
        let said = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| format!(": {}", one_line(l)))
            .unwrap_or_default();
        if !status.success() {
            return Err(format!("exec plugin {name} failed ({status}){said}"));
        }
        parse(&self.api_version, &stdout).map_err(|e| format!("exec plugin {name}: {e}"))
    }
}

/// `text` on one line, at most 200 characters.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &joined[..at]),
        None => joined,
    }
}

#[derive(Deserialize)]
struct Answer {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    status: Option<Status>,
}

#[derive(Deserialize)]
struct Status {
    token: Option<String>,
    #[serde(rename = "clientCertificateData")]
    cert: Option<String>,
    #[serde(rename = "clientKeyData")]
    key: Option<String>,
    #[serde(rename = "expirationTimestamp")]
    expires: Option<String>,
}

/// A plugin's standard output, which must be an `ExecCredential` of `api_version`.
fn parse(api_version: &str, stdout: &[u8]) -> Result<Credential, String> {
    let answer: Answer = serde_json::from_slice(stdout).map_err(|e| {
        let start: String = String::from_utf8_lossy(stdout).chars().take(40).collect();
        format!("its output is not an ExecCredential ({e}): {start:?}")
    })?;
    if answer.kind.as_deref() != Some("ExecCredential") {
        return Err(format!(
            "it answered kind {:?}, not ExecCredential",
            answer.kind.unwrap_or_default()
        ));
    }
    let said = answer.api_version.unwrap_or_default();
    if said != api_version {
        return Err(format!(
            "it answered apiVersion {said:?}, but the kubeconfig asks for {api_version:?}"
        ));
    }
    let status = answer.status.ok_or("its ExecCredential has no status")?;
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let client_cert = match (nonempty(status.cert), nonempty(status.key)) {
        (Some(cert), Some(key)) => Some((cert.into_bytes(), key.into_bytes())),
        (None, None) => None,
        _ => return Err("it gave a client certificate without its key, or a key alone".into()),
    };
    let token = nonempty(status.token);
    if token.is_none() && client_cert.is_none() {
        return Err("its ExecCredential has neither a token nor a client certificate".into());
    }
    let expires = match nonempty(status.expires) {
        None => None,
        Some(t) => Some(
            chrono::DateTime::parse_from_rfc3339(&t)
                .map(SystemTime::from)
                .map_err(|e| format!("expirationTimestamp {t:?} is not RFC 3339 ({e})"))?,
        ),
    };
    Ok(Credential {
        token,
        client_cert,
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "client.authentication.k8s.io/v1";

    fn spec(yaml: &str) -> Spec {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn cluster() -> Cluster<'static> {
        Cluster {
            server: "https://k8s:6443",
            ca: Some(b"CA"),
            insecure: false,
            tls_server_name: Some("k8s.internal"),
            proxy_url: None,
        }
    }

    #[test]
    fn an_exec_credential_gives_a_token_or_a_certificate_and_its_expiry() {
        let c = parse(
            V1,
            br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
                 "status":{"token":"t0k","expirationTimestamp":"2030-01-02T03:04:05Z"}}"#,
        )
        .unwrap();
        assert_eq!(c.token.as_deref(), Some("t0k"));
        assert_eq!(c.client_cert, None);
        let at = c.expires.unwrap().duration_since(SystemTime::UNIX_EPOCH);
        assert_eq!(at.unwrap().as_secs(), 1_893_553_445);
        let c = parse(
            V1,
            br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
                 "status":{"clientCertificateData":"CERT","clientKeyData":"KEY"}}"#,
        )
        .unwrap();
        assert_eq!(c.client_cert, Some((b"CERT".to_vec(), b"KEY".to_vec())));
        assert_eq!((c.token, c.expires), (None, None));
    }

    #[test]
    fn an_answer_that_is_not_a_usable_exec_credential_says_why() {
        let v1 = |status: &str| {
            format!(
                r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"{status}}}"#
            )
        };
        for (out, says) in [
            (
                "Unable to locate credentials".to_owned(),
                "not an ExecCredential",
            ),
            (r#"{"kind":"Status"}"#.into(), "kind \"Status\""),
            (
                v1(r#","status":{"token":"t"}"#).replace("/v1\"", "/v1beta1\""),
                "apiVersion \"client.authentication.k8s.io/v1beta1\"",
            ),
            (v1(""), "no status"),
            (v1(r#","status":{}"#), "neither a token nor"),
            (v1(r#","status":{"token":""}"#), "neither a token nor"),
            (
                v1(r#","status":{"clientCertificateData":"C"}"#),
                "without its key",
            ),
            (
                v1(r#","status":{"token":"t","expirationTimestamp":"tomorrow"}"#),
                "not RFC 3339",
            ),
        ] {
            let e = parse(V1, out.as_bytes()).unwrap_err();
            assert!(e.contains(says), "{out}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn the_entry_is_checked_and_the_plugin_told_the_cluster_when_it_asks() {
        let dir = Path::new("/kube");
        let p = Plugin::new(
            spec(
                "apiVersion: client.authentication.k8s.io/v1beta1\ncommand: bin/token\n\
                 args: [--x]\nenv: [{name: A, value: b}]\nprovideClusterInfo: true\n",
            ),
            dir,
            &cluster(),
        )
        .unwrap();
        assert_eq!(p.command, Path::new("/kube/bin/token"));
        assert_eq!(p.env, [("A".to_owned(), "b".to_owned())]);
        let info: serde_json::Value = serde_json::from_str(&p.info).unwrap();
        assert_eq!(info["kind"], "ExecCredential");
        assert_eq!(info["apiVersion"], "client.authentication.k8s.io/v1beta1");
        assert_eq!(info["spec"]["interactive"], false);
        assert_eq!(info["spec"]["cluster"]["server"], "https://k8s:6443");
        assert_eq!(
            info["spec"]["cluster"]["certificate-authority-data"],
            "Q0E="
        );
        assert_eq!(info["spec"]["cluster"]["tls-server-name"], "k8s.internal");
        assert!(info["spec"]["cluster"].get("proxy-url").is_none(), "{info}");
        // A bare name is looked up in PATH; no cluster unless asked for.
        let p = Plugin::new(
            spec("apiVersion: client.authentication.k8s.io/v1\ncommand: aws\n"),
            dir,
            &cluster(),
        )
        .unwrap();
        assert_eq!(p.command, Path::new("aws"));
        assert!(!p.info.contains("cluster"), "{}", p.info);
        for (yaml, says) in [
            ("command: aws\n", "apiVersion \"\" is not one of"),
            (
                "apiVersion: client.authentication.k8s.io/v1alpha1\ncommand: aws\n",
                "v1alpha1\" is not one of",
            ),
            (
                "apiVersion: client.authentication.k8s.io/v1\n",
                "has no command",
            ),
            (
                "apiVersion: client.authentication.k8s.io/v1\ncommand: login\n\
                 interactiveMode: Always\n",
                "needs a terminal",
            ),
        ] {
            let e = Plugin::new(spec(yaml), dir, &cluster()).unwrap_err();
            assert!(e.contains(says), "{yaml}: {e}");
        }
    }

    /// A plugin that is a shell script in `dir`, printing `body` (its stdout) after
    /// counting its runs in `dir/runs`.
    fn script(dir: &Path, body: &str) -> Plugin {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("plugin");
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho run >> '{}/runs'\n{body}\n", dir.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Plugin::new(
            spec("apiVersion: client.authentication.k8s.io/v1\ncommand: ./plugin\n"),
            dir,
            &cluster(),
        )
        .unwrap()
    }

    fn runs(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("runs")).map_or(0, |s| s.lines().count())
    }

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpupeek-exec-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_credential_is_kept_until_it_expires_or_is_refused() {
        let dir = temp("keep");
        let p = script(
            &dir,
            r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"abc"}}'"#,
        );
        assert_eq!(p.credential().unwrap().token.as_deref(), Some("abc"));
        assert_eq!(p.credential().unwrap().token.as_deref(), Some("abc"));
        assert_eq!(runs(&dir), 1, "kept: it has no expiry");
        p.forget();
        p.credential().unwrap();
        assert_eq!(runs(&dir), 2, "run again once refused");

        let expired = script(
            &dir,
            r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"old","expirationTimestamp":"2001-01-01T00:00:00Z"}}'"#,
        );
        expired.credential().unwrap();
        expired.credential().unwrap();
        assert_eq!(runs(&dir), 4, "an expired credential is asked for again");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_or_missing_plugin_is_one_line_with_what_it_said() {
        let dir = temp("fail");
        let p = script(
            &dir,
            "echo 'An error occurred (ExpiredToken)' >&2\nexit 255",
        );
        let e = p.credential().unwrap_err();
        assert_eq!(
            e,
            "exec plugin ./plugin failed (exit status: 255): An error occurred (ExpiredToken)"
        );
        let p = Plugin::new(
            spec(
                "apiVersion: client.authentication.k8s.io/v1\ncommand: gpupeek-no-such-plugin\n\
                 installHint: |\n  Install it\n  from the vendor\n",
            ),
            &dir,
            &cluster(),
        )
        .unwrap();
        assert_eq!(
            p.credential().unwrap_err(),
            "exec plugin gpupeek-no-such-plugin is not installed (Install it from the vendor)"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_plugin_gets_its_env_and_the_exec_info_and_no_stdin() {
        let dir = temp("env");
        let body = format!(
            r#"read -r line && exit 3
printf '%s' "$A" > '{0}/a'
printf '%s' "$KUBERNETES_EXEC_INFO" > '{0}/info'
echo '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"t"}}}}'"#,
            dir.display()
        );
        let mut p = script(&dir, &body);
        p.env = vec![("A".into(), "b".into())];
        p.credential().unwrap();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("a"), "b");
        assert_eq!(read("info"), p.info);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_plugin_that_does_not_answer_in_time_is_killed_and_said() {
        let dir = temp("hang");
        let mut p = script(&dir, "exec sleep 30");
        p.timeout = Duration::from_millis(200);
        let e = p.credential().unwrap_err();
        assert_eq!(e, "exec plugin ./plugin did not answer within 0.2 s");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
