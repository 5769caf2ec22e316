//! Where the Kubernetes API server is and who we are to it, found as kubectl finds them:
//! `--kubeconfig`, else the existing files of `$KUBECONFIG` merged as kubectl merges them
//! (the first file to set `current-context`, or to name a context, a cluster or a user,
//! wins; each file's relative names are relative to its own directory), else
//! `~/.kube/config`, else, inside a pod, its service account
//! (`KUBERNETES_SERVICE_HOST`/`_PORT` and
//! `/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}`).
//!
//! From a kubeconfig, the current context's (or `--context`'s) cluster and user: the
//! server, its certificate authority (`certificate-authority` file or
//! `certificate-authority-data`) or `insecure-skip-tls-verify`; the user's `token` or
//! `tokenFile`, `client-certificate(-data)` and `client-key(-data)`, or `username` and
//! `password`; and whom it acts as (`as`, `as-uid`, `as-groups`, `as-user-extra`: the
//! `Impersonate-*` headers kubectl sends). A relative file name is relative to the
//! kubeconfig's directory, as kubectl resolves it. A user's `exec` credential plugin is
//! run as kubectl runs it (see [`super::exec`]); an `auth-provider` (removed from
//! kubectl in 1.26) is refused with one line.
//! The cluster's `tls-server-name` (the name its certificate is checked against, and
//! sent as SNI) and `proxy-url` (`http`, `https` or `socks5`, the proxy the API server
//! is reached through; without one, the environment's, see
//! [`crate::source::agent_config`]) are used as kubectl uses them, together too (the
//! proxy is then asked for the server's address, see [`super::tunnel`]).
//! Not read: the context's `namespace` (`--namespace` is the DaemonSet's, `gpupeek`,
//! whatever the context).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;

use super::exec::{self, Plugin};
use schema::{File, User};

mod schema;

/// How to reach and authenticate to the API server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from (the kubeconfig's path and context, or "in-cluster"), for
    /// messages.
    pub origin: String,
    /// The server's URL (`https://HOST:PORT`, maybe with a path prefix).
    pub server: String,
    /// The certificate authority's PEM, when given (else the built-in web roots).
    pub ca: Option<Vec<u8>>,
    /// Whether the server's certificate is not verified.
    pub insecure: bool,
    /// `tls-server-name`: the name the server's certificate is checked against (and
    /// the SNI), when not the URL's host.
    pub tls_server_name: Option<String>,
    /// `proxy-url`: the proxy the API server is reached through, as given.
    pub proxy_url: Option<String>,
    /// The bearer token.
    pub token: Option<Token>,
    /// Basic authentication's user name and password.
    pub basic: Option<(String, String)>,
    /// A client certificate chain and its key, PEM.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// The user's credential plugin, whose token or client certificate take the place of
    /// the others.
    pub exec: Option<Arc<Plugin>>,
    /// The `Impersonate-*` headers of the user's `as` fields, sent with every request.
    pub impersonate: Vec<(String, String)>,
}

/// A bearer token: as given, or read from a file at each request (service-account
/// tokens are rotated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// The token itself.
    Literal(String),
    /// A file holding it.
    File(PathBuf),
}

impl Token {
    /// The token's text.
    pub fn read(&self) -> Result<String, String> {
        match self {
            Token::Literal(t) => Ok(t.clone()),
            Token::File(path) => std::fs::read_to_string(path)
                .map(|t| t.trim().to_owned())
                .map_err(|e| format!("cannot read the token file {}: {e}", path.display())),
        }
    }
}

/// What the lookup reads from the environment (the process's, or a test's).
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `$KUBECONFIG`.
    pub kubeconfig: Option<String>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$KUBERNETES_SERVICE_HOST`.
    pub service_host: Option<String>,
    /// `$KUBERNETES_SERVICE_PORT`.
    pub service_port: Option<String>,
    /// The service account's directory.
    pub account_dir: PathBuf,
}

/// Where a pod's service account is mounted.
pub const ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

impl Env {
    /// This process's environment.
    pub fn from_process() -> Env {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Env {
            kubeconfig: var("KUBECONFIG"),
            home: var("HOME").map(PathBuf::from),
            service_host: var("KUBERNETES_SERVICE_HOST"),
            service_port: var("KUBERNETES_SERVICE_PORT"),
            account_dir: PathBuf::from(ACCOUNT_DIR),
        }
    }
}

/// The API server and credentials: from `explicit` (`--kubeconfig`), else as the module
/// says; `context` is `--context`.
pub fn load(explicit: Option<&str>, context: Option<&str>, env: &Env) -> Result<Config, String> {
    if let Some(path) = explicit {
        return from_files(&[PathBuf::from(path)], context);
    }
    let files: Vec<PathBuf> = match &env.kubeconfig {
        Some(list) => list
            .split(':')
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect(),
        None => env
            .home
            .iter()
            .map(|h| h.join(".kube/config"))
            .filter(|p| p.exists())
            .collect(),
    };
    if !files.is_empty() {
        return from_files(&files, context);
    }
    if let (Some(host), Some(port)) = (&env.service_host, &env.service_port) {
        if context.is_some() {
            return Err("--context needs a kubeconfig, and there is none (in-cluster)".into());
        }
        return Ok(in_cluster(host, port, &env.account_dir));
    }
    let looked = match &env.kubeconfig {
        Some(list) => format!("$KUBECONFIG ({list})"),
        None => "~/.kube/config".into(),
    };
    Err(format!(
        "no kubeconfig: none in {looked}, no --kubeconfig, and not in a pod \
         (KUBERNETES_SERVICE_HOST is not set)"
    ))
}

/// The pod's service account.
fn in_cluster(host: &str, port: &str, dir: &Path) -> Config {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let ca = std::fs::read(dir.join("ca.crt")).ok();
    Config {
        origin: "in-cluster service account".into(),
        server: format!("https://{host}:{port}"),
        ca,
        insecure: false,
        tls_server_name: None,
        proxy_url: None,
        token: Some(Token::File(dir.join("token"))),
        basic: None,
        client_cert: None,
        exec: None,
        impersonate: Vec::new(),
    }
}

/// One kubeconfig file, read: its entries, and the directory its relative names are in.
struct Loaded {
    file: File,
    dir: PathBuf,
}

/// The kubeconfig files at `paths`, merged as kubectl merges them: its `context` or
/// current context.
pub fn from_files(paths: &[PathBuf], context: Option<&str>) -> Result<Config, String> {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let shown = shown.join(":");
    let mut files = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new(".")).to_owned();
        let file = parse_file(&text, &path.display().to_string())?;
        files.push(Loaded { file, dir });
    }
    resolve(files, &shown, context)
}

/// The entries of the kubeconfig `text`, read from `shown`.
fn parse_file(text: &str, shown: &str) -> Result<File, String> {
    if text.trim().is_empty() {
        return Ok(File::default());
    }
    serde_yaml::from_str(text).map_err(|e| format!("kubeconfig {shown}: not a kubeconfig ({e})"))
}

/// Takes from `files` the first entry of the list `of` picks that `is` the one: the
/// first file to name an entry wins, as kubectl merges; with that file's directory.
fn first<T>(
    files: &mut [Loaded],
    of: fn(&mut File) -> &mut Option<Vec<T>>,
    is: impl Fn(&T) -> bool,
) -> Option<(T, PathBuf)> {
    files.iter_mut().find_map(|loaded| {
        let list = of(&mut loaded.file).as_mut()?;
        let at = list.iter().position(&is)?;
        Some((list.swap_remove(at), loaded.dir.clone()))
    })
}

/// The API server and credentials of `context` (or the current context) in the merged
/// `files`, read from `shown`.
fn resolve(mut files: Vec<Loaded>, shown: &str, context: Option<&str>) -> Result<Config, String> {
    let bad = |why: String| format!("kubeconfig {shown}: {why}");
    let current = files
        .iter()
        .find_map(|l| l.file.current_context.clone().filter(|c| !c.is_empty()));
    let name = match context.map(str::to_owned).or(current) {
        Some(name) if !name.is_empty() => name,
        _ => return Err(bad("no current-context (give --context NAME)".into())),
    };
    let (ctx, _) = first(&mut files, |f| &mut f.contexts, |c| c.name == name)
        .ok_or_else(|| bad(format!("no context named {name:?}")))?;
    let ctx = ctx.context.unwrap_or_default();
    let cluster_name = ctx
        .cluster
        .ok_or_else(|| bad(format!("context {name:?} names no cluster")))?;
    let (cluster, cluster_dir) = first(&mut files, |f| &mut f.clusters, |c| c.name == cluster_name)
        .ok_or_else(|| bad(format!("no cluster named {cluster_name:?}")))?;
    let cluster = cluster.cluster.unwrap_or_default();
    let (user, dir) = match &ctx.user {
        None => (User::default(), cluster_dir.clone()),
        Some(user_name) => {
            let (user, dir) = first(&mut files, |f| &mut f.users, |u| &u.name == user_name)
                .ok_or_else(|| bad(format!("no user named {user_name:?}")))?;
            (user.user.unwrap_or_default(), dir)
        }
    };
    let user_name = ctx.user.as_deref().unwrap_or_default();
    let impersonate = user
        .impersonate()
        .map_err(|e| bad(format!("user {user_name:?}: {e}")))?;
    if let Some(provider) = &user.auth_provider {
        let provider = provider.name.as_deref().unwrap_or("?");
        return Err(bad(format!(
            "user {user_name:?} gets its credentials from the auth-provider plugin \
             {provider}, which kubectl dropped in 1.26 and gpupeek fleet does not support: \
             use its exec plugin (e.g. gke-gcloud-auth-plugin, kubelogin) or a token"
        )));
    }
    let server = cluster
        .server
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad(format!("cluster {cluster_name:?} has no server")))?;
    if !(server.starts_with("https://") || server.starts_with("http://")) {
        return Err(bad(format!(
            "cluster {cluster_name:?}'s server {server:?} is not an http:// or https:// URL"
        )));
    }
    let tls_server_name = cluster.tls_server_name.filter(|n| !n.is_empty());
    let proxy_url = cluster.proxy_url.filter(|p| !p.is_empty());
    if let Some(proxy) = &proxy_url {
        // kubectl's schemes; anything else (or none) it refuses.
        let scheme = proxy.split_once("://").map(|(s, _)| s);
        if !matches!(scheme, Some("http" | "https" | "socks5")) {
            return Err(bad(format!(
                "cluster {cluster_name:?}'s proxy-url {proxy:?} is not an http://, https:// \
                 or socks5:// URL"
            )));
        }
    }
    let read = |data: &Option<String>, file: &Option<String>, dir: &Path, what: &str| {
        let data = data.as_deref().filter(|d| !d.is_empty());
        let file = file.as_deref().filter(|f| !f.is_empty());
        match (data, file) {
            (Some(data), _) => base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map(Some)
                .map_err(|e| bad(format!("{what}-data is not base64 ({e})"))),
            (None, Some(file)) => {
                let path = dir.join(file);
                std::fs::read(&path)
                    .map(Some)
                    .map_err(|e| bad(format!("cannot read {what} {}: {e}", path.display())))
            }
            (None, None) => Ok(None),
        }
    };
    let ca = read(
        &cluster.ca_data,
        &cluster.ca_file,
        &cluster_dir,
        "certificate-authority",
    )?;
    let exec = match user.exec {
        None => None,
        Some(spec) => {
            let on = exec::Cluster {
                server: &server,
                ca: ca.as_deref(),
                insecure: cluster.insecure,
                tls_server_name: tls_server_name.as_deref(),
                proxy_url: proxy_url.as_deref(),
            };
            let plugin = Plugin::new(spec, &dir, &on)
                .map_err(|e| bad(format!("user {user_name:?}: {e}")))?;
            Some(Arc::new(plugin))
        }
    };
    let cert = read(&user.cert_data, &user.cert_file, &dir, "client-certificate")?;
    let key = read(&user.key_data, &user.key_file, &dir, "client-key")?;
    let client_cert = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => return Err(bad("a client-certificate without a client-key".into())),
        (None, Some(_)) => return Err(bad("a client-key without a client-certificate".into())),
    };
    let token = match (user.token.filter(|t| !t.is_empty()), user.token_file) {
        (Some(token), _) => Some(Token::Literal(token)),
        (None, Some(file)) if !file.is_empty() => Some(Token::File(dir.join(file))),
        _ => None,
    };
    let basic = match (user.username, user.password) {
        (Some(u), Some(p)) if !u.is_empty() => Some((u, p)),
        _ => None,
    };
    if token.is_some() && basic.is_some() {
        return Err(bad(format!(
            "user {user_name:?} has both a token and a username and password: give one"
        )));
    }
    Ok(Config {
        origin: format!("kubeconfig {shown}, context {name}"),
        server: server.trim_end_matches('/').to_owned(),
        ca,
        insecure: cluster.insecure,
        tls_server_name,
        proxy_url,
        token,
        basic,
        client_cert,
        exec,
        impersonate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeconfig's `text` (read from `shown`, whose relative file names are relative
    /// to `dir`).
    fn parse(text: &str, shown: &str, dir: &Path, context: Option<&str>) -> Result<Config, String> {
        let file = parse_file(text, shown)?;
        let dir = dir.to_owned();
        resolve(vec![Loaded { file, dir }], shown, context)
    }

    const CONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: prod
clusters:
  - name: prod-cluster
    cluster:
      server: https://10.0.0.1:6443/
      certificate-authority: certs/ca.pem
  - name: lab-cluster
    cluster:
      server: http://127.0.0.1:8001
      certificate-authority-data: Q0EgUEVN
      insecure-skip-tls-verify: true
contexts:
  - name: prod
    context: {cluster: prod-cluster, user: admin, namespace: default}
  - name: lab
    context: {cluster: lab-cluster, user: alice}
  - name: cloud
    context: {cluster: lab-cluster, user: gke}
  - name: aws
    context: {cluster: lab-cluster, user: eks}
  - name: anonymous
    context: {cluster: lab-cluster}
users:
  - name: admin
    user:
      client-certificate: /abs/admin.crt
      client-key-data: S0VZ
      tokenFile: token
  - name: alice
    user: {username: alice, password: secret}
  - name: gke
    user:
      auth-provider: {name: gcp}
  - name: eks
    user:
      exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, args: [eks, get-token]}
"#;

    fn parse_in(dir: &Path, context: Option<&str>) -> Result<Config, String> {
        parse(CONFIG, "cfg", dir, context)
    }

    #[test]
    fn the_current_context_picks_the_cluster_and_user_and_files_are_relative_to_the_config() {
        let dir = std::env::temp_dir().join(format!("gpupeek-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("certs")).unwrap();
        std::fs::write(dir.join("certs/ca.pem"), "CA FILE").unwrap();
        // client-certificate is absolute: not found, named in the error.
        let err = parse_in(&dir, None).unwrap_err();
        assert!(err.contains("/abs/admin.crt"), "{err}");
        let text = CONFIG.replace("/abs/admin.crt", "admin.crt");
        std::fs::write(dir.join("admin.crt"), "CERT").unwrap();
        let c = parse(&text, "cfg", &dir, None).unwrap();
        assert_eq!(c.server, "https://10.0.0.1:6443");
        assert_eq!(c.ca.as_deref(), Some(&b"CA FILE"[..]));
        assert!(!c.insecure);
        // Data beats file; the key is data (base64 of "KEY"), the cert a relative file.
        assert_eq!(c.client_cert, Some((b"CERT".to_vec(), b"KEY".to_vec())));
        assert_eq!(c.token, Some(Token::File(dir.join("token"))));
        assert_eq!(c.basic, None);
        assert_eq!(c.origin, "kubeconfig cfg, context prod");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A user's `as` fields are the `Impersonate-*` headers client-go sends; groups, a
    /// uid or extras without a user to act as, one line.
    #[test]
    fn a_users_as_fields_are_its_impersonation_headers() {
        let with = |user: &str| {
            let text = format!(
                "current-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
                 clusters: [{{name: k, cluster: {{server: 'https://k:6443'}}}}]\n\
                 users: [{{name: u, user: {user}}}]\n"
            );
            parse(&text, "cfg", Path::new("/"), None).map(|c| c.impersonate)
        };
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(with("{token: t}").unwrap(), []);
        assert_eq!(
            with(
                "{token: t, as: ops, as-uid: '42', as-groups: [sre, 'gpu admins'], \
                 as-user-extra: {'scopes/x%y': [a, b]}}"
            )
            .unwrap(),
            pairs(&[
                ("Impersonate-User", "ops"),
                ("Impersonate-Uid", "42"),
                ("Impersonate-Group", "sre"),
                ("Impersonate-Group", "gpu admins"),
                ("Impersonate-Extra-scopes%2Fx%25y", "a"),
                ("Impersonate-Extra-scopes%2Fx%25y", "b"),
            ])
        );
        let err = with("{token: t, as-groups: [sre]}").unwrap_err();
        assert!(err.contains("without as"), "{err}");
        assert!(err.contains("user \"u\""), "{err}");
    }

    #[test]
    fn another_context_is_chosen_by_name_and_data_fields_are_base64() {
        let c = parse_in(Path::new("/nonexistent"), Some("lab")).unwrap();
        assert_eq!(c.server, "http://127.0.0.1:8001");
        assert_eq!(c.ca.as_deref(), Some(&b"CA PEM"[..]));
        assert!(c.insecure);
        assert_eq!(c.basic, Some(("alice".into(), "secret".into())));
        assert_eq!(c.token, None);
        assert_eq!(c.client_cert, None);
        let c = parse_in(Path::new("/nonexistent"), Some("anonymous")).unwrap();
        assert_eq!((c.token, c.basic, c.client_cert), (None, None, None));
        assert!(c.exec.is_none());
    }

    #[test]
    fn a_user_with_an_exec_plugin_gets_it_and_a_bad_exec_entry_is_one_line() {
        let c = parse_in(Path::new("/nonexistent"), Some("aws")).unwrap();
        assert!(c.exec.is_some());
        assert_eq!((c.token, c.basic), (None, None));
        let text = CONFIG.replace("client.authentication.k8s.io/v1,", "x/v1,");
        let e = parse(&text, "cfg", Path::new("/"), Some("aws")).unwrap_err();
        assert!(
            e.starts_with("kubeconfig cfg: user \"eks\": exec plugin aws: apiVersion \"x/v1\""),
            "{e}"
        );
    }

    #[test]
    fn plugins_missing_names_and_garbage_are_one_line_errors() {
        let err = |ctx: Option<&str>, text: &str| parse(text, "cfg", Path::new("/"), ctx);
        for (ctx, text, says) in [
            (Some("cloud"), CONFIG, "auth-provider plugin gcp"),
            (Some("nope"), CONFIG, "no context named \"nope\""),
            (None, "clusters: []\n", "no current-context"),
            (None, "", "no current-context"),
            (
                None,
                "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n",
                "no cluster named \"c\"",
            ),
            (None, "- just\n- a list\n", "not a kubeconfig"),
            (
                None,
                "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n\
                 clusters: [{name: c, cluster: {server: 'localhost:6443'}}]\n",
                "not an http:// or https:// URL",
            ),
            (
                None,
                "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n\
                 clusters: [{name: c, cluster: {server: 'https://h'}}]\n\
                 users: [{name: u, user: {client-certificate-data: 'QQ=='}}]\n",
                "without a client-key",
            ),
            (
                None,
                "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n\
                 clusters: [{name: c, cluster: {server: 'https://h'}}]\n\
                 users: [{name: u, user: {token: t, username: u, password: p}}]\n",
                "both a token and a username",
            ),
        ] {
            let e = err(ctx, text).unwrap_err();
            assert!(e.contains(says), "{ctx:?}: {e}");
            assert!(e.starts_with("kubeconfig cfg: "), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    /// `KUBECONFIG=a:b`, as kubectl merges it: the first file to set current-context or
    /// to name an entry wins, and each entry's relative names are its own file's.
    #[test]
    fn the_files_of_kubeconfig_are_merged_as_kubectl_merges_them() {
        let dir = std::env::temp_dir().join(format!("gpupeek-kubemerge-{}", std::process::id()));
        for sub in ["a", "b"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(dir.join("a/token"), "A-TOKEN").unwrap();
        std::fs::write(dir.join("b/ca.pem"), "B CA").unwrap();
        // a: the user (a token file of its own directory), the current context, and a
        // cluster named as b's, which wins.
        std::fs::write(
            dir.join("a/config"),
            "current-context: prod\n\
             users: [{name: me, user: {tokenFile: token}}]\n\
             clusters: [{name: lab, cluster: {server: 'https://a-lab'}}]\n",
        )
        .unwrap();
        // b: the contexts and clusters (a CA file of its own directory), another
        // current-context and a user of the same name, which lose.
        std::fs::write(
            dir.join("b/config"),
            "current-context: lab\n\
             contexts: [{name: prod, context: {cluster: prod, user: me}},\n  \
             {name: lab, context: {cluster: lab, user: me}}]\n\
             clusters: [{name: prod, cluster: {server: 'https://b-prod', \
             certificate-authority: ca.pem}},\n  {name: lab, cluster: {server: 'https://b-lab'}}]\n\
             users: [{name: me, user: {token: b-token}}]\n",
        )
        .unwrap();
        let files = [dir.join("a/config"), dir.join("b/config")];
        let c = from_files(&files, None).unwrap();
        assert_eq!(c.server, "https://b-prod");
        assert_eq!(c.ca.as_deref(), Some(&b"B CA"[..]));
        assert_eq!(c.token, Some(Token::File(dir.join("a/token"))));
        assert_eq!(
            c.origin,
            format!(
                "kubeconfig {0}/a/config:{0}/b/config, context prod",
                dir.display()
            )
        );
        let c = from_files(&files, Some("lab")).unwrap();
        assert_eq!(
            c.server, "https://a-lab",
            "a's cluster of the same name wins"
        );
        let env = Env {
            kubeconfig: Some(format!(
                "{0}/missing:{0}/a/config:{0}/b/config",
                dir.display()
            )),
            ..Env::default()
        };
        assert_eq!(load(None, None, &env).unwrap().server, "https://b-prod");
        let e = from_files(&files, Some("nope")).unwrap_err();
        assert!(e.contains("no context named \"nope\""), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kubeconfig_is_looked_for_as_kubectl_does_then_in_cluster() {
        let dir = std::env::temp_dir().join(format!("gpupeek-kubelookup-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("home/.kube")).unwrap();
        std::fs::create_dir_all(dir.join("sa")).unwrap();
        std::fs::write(dir.join("sa/ca.crt"), "SA CA").unwrap();
        let one = "current-context: a\ncontexts: [{name: a, context: {cluster: a}}]\n\
                   clusters: [{name: a, cluster: {server: 'https://one'}}]\n";
        let two = one.replace("https://one", "https://two");
        std::fs::write(dir.join("one"), one).unwrap();
        std::fs::write(dir.join("two"), &two).unwrap();
        std::fs::write(dir.join("home/.kube/config"), two.replace("two", "home")).unwrap();
        let mut env = Env {
            kubeconfig: Some(format!("{0}/missing:{0}/one:{0}/two", dir.display())),
            home: Some(dir.join("home")),
            service_host: Some("fd00::1".into()),
            service_port: Some("443".into()),
            account_dir: dir.join("sa"),
        };
        let server = |env: &Env| load(None, None, env).map(|c| c.server);
        let explicit = dir.join("two");
        let explicit = load(Some(explicit.to_str().unwrap()), None, &env).unwrap();
        assert_eq!(explicit.server, "https://two");
        // The first file of $KUBECONFIG that exists.
        assert_eq!(server(&env).unwrap(), "https://one");
        env.kubeconfig = Some(format!("{}/missing", dir.display()));
        let c = load(None, None, &env).unwrap();
        assert_eq!(c.server, "https://[fd00::1]:443", "in-cluster");
        assert_eq!(c.ca.as_deref(), Some(&b"SA CA"[..]));
        assert_eq!(c.token, Some(Token::File(dir.join("sa/token"))));
        env.kubeconfig = None;
        assert_eq!(server(&env).unwrap(), "https://home");
        env.home = Some(dir.join("nohome"));
        env.service_host = None;
        let e = server(&env).unwrap_err();
        assert!(e.starts_with("no kubeconfig"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
