//! `gpupeek serve --web.config.file`: the Prometheus exporters' web configuration file
//! (prometheus/exporter-toolkit's format, as node_exporter takes it): TLS, basic
//! authentication with bcrypt hashes and extra response headers.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt       # paths are relative to this file's directory
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven
//!   client_ca_file: clients.crt
//!   min_version: TLS12          # TLS12 or TLS13
//! http_server_config:
//!   headers: {Strict-Transport-Security: max-age=31536000}
//! basic_auth_users:
//!   alice: $2y$10$...           # htpasswd -nBC 10 alice
//! ```
//!
//! An unknown key is an error, as in exporter-toolkit. What rustls cannot do is refused
//! with a message rather than ignored: TLS 1.0/1.1, `cipher_suites`,
//! `curve_preferences` (rustls picks safe ones), client certificates accepted without
//! verification (`RequestClientCert`, `RequireAnyClientCert`) and
//! `client_allowed_sans`. `prefer_server_cipher_suites` and `http2` are accepted and
//! have no effect (gpupeek serves HTTP/1.1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    http_server_config: Option<HttpFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// A loaded web configuration.
pub struct WebConfig {
    /// TLS, when `tls_server_config` is there.
    pub tls: Option<Arc<ServerConfig>>,
    /// Basic authentication, when `basic_auth_users` is there.
    pub auth: Option<BasicAuth>,
    /// `http_server_config.headers`.
    pub headers: Vec<(String, String)>,
}

impl WebConfig {
    /// Reads and checks the file at `path`; an error says what is wrong in one line.
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
        let file: File = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = file.tls_server_config.map(|t| tls(t, dir)).transpose()?;
        let mut headers = Vec::new();
        if let Some(http) = file.http_server_config {
            let _ = http.http2;
            for (name, value) in http.headers.unwrap_or_default() {
                let valid = |s: &str| !s.is_empty() && !s.contains(['\r', '\n', ':']);
                if !valid(&name) || value.contains(['\r', '\n']) {
                    return Err(format!("bad header {name:?}"));
                }
                headers.push((name, value));
            }
        }
        let auth = match file.basic_auth_users {
            None => None,
            Some(users) => Some(BasicAuth::new(users)?),
        };
        Ok(WebConfig { tls, auth, headers })
    }
}

fn unsupported(what: &str) -> String {
    format!("tls_server_config: {what} is not supported (gpupeek serve uses rustls)")
}

/// The TLS configuration `t` describes, its paths relative to `dir`.
fn tls(t: TlsFile, dir: &Path) -> Result<Arc<ServerConfig>, String> {
    if t.cipher_suites.is_some() {
        return Err(unsupported("cipher_suites"));
    }
    if t.curve_preferences.is_some() {
        return Err(unsupported("curve_preferences"));
    }
    if t.client_allowed_sans.is_some() {
        return Err(unsupported("client_allowed_sans"));
    }
    let _ = t.prefer_server_cipher_suites;
    let (Some(cert), Some(key)) = (t.cert_file, t.key_file) else {
        return Err("tls_server_config needs cert_file and key_file".into());
    };
    let (cert, key) = (dir.join(cert), dir.join(key));
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cert_file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("cert_file {}: no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| format!("key_file {}: {e}", key.display()))?;
    let versions = versions(t.min_version.as_deref(), t.max_version.as_deref())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| e.to_string())?;
    let auth_type = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let builder = match auth_type {
        "NoClientCert" | "" => builder.with_no_client_auth(),
        "VerifyClientCertIfGiven" | "RequireAndVerifyClientCert" => {
            let Some(ca) = t.client_ca_file else {
                return Err(format!("client_auth_type {auth_type} needs client_ca_file"));
            };
            let ca = dir.join(ca);
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(&ca)
                .map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?
            {
                let c = c.map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            let verifier = if auth_type == "VerifyClientCertIfGiven" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
        }
        "RequestClientCert" | "RequireAnyClientCert" => {
            return Err(unsupported(&format!(
                "client_auth_type {auth_type} (certificates accepted unverified)"
            )))
        }
        other => {
            return Err(format!(
                "tls_server_config: unknown client_auth_type {other:?}"
            ))
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("cert_file and key_file: {e}"))?;
    Ok(Arc::new(config))
}

/// The TLS versions from `min` to `max` (default TLS 1.2 to 1.3).
fn versions(
    min: Option<&str>,
    max: Option<&str>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let rank = |v: &str| match v {
        "TLS12" => Ok(0),
        "TLS13" => Ok(1),
        "TLS10" | "TLS11" => Err(unsupported(v)),
        other => Err(format!("tls_server_config: unknown TLS version {other:?}")),
    };
    let lo = min.map(rank).transpose()?.unwrap_or(0);
    let hi = max.map(rank).transpose()?.unwrap_or(1);
    let all = [&rustls::version::TLS12, &rustls::version::TLS13];
    let chosen: Vec<_> = (lo..=hi).filter_map(|i| all.get(i).copied()).collect();
    if chosen.is_empty() {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    Ok(chosen)
}

/// Users and their bcrypt hashes; successful credentials are remembered so a scraper
/// does not pay bcrypt's cost at every scrape.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    /// `Authorization` values that passed, newest last (at most [`REMEMBERED`]).
    passed: Vec<String>,
}

const REMEMBERED: usize = 16;

/// A bcrypt hash checked for unknown users, so that a wrong user name costs what a wrong
/// password does.
const DUMMY_HASH: &str = "$2y$10$CWCEbs7mt8QFrToJR9OcG.tduEKpx9SROhWnaDHQgQX4Q6hqWNASa";

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> Result<BasicAuth, String> {
        for (user, hash) in &users {
            if user.contains(':') {
                return Err(format!("basic_auth_users: user {user:?} has a colon"));
            }
            hash.parse::<bcrypt::HashParts>()
                .map_err(|e| format!("basic_auth_users: {user}: not a bcrypt hash: {e}"))?;
        }
        Ok(BasicAuth {
            users,
            passed: Vec::new(),
        })
    }

    /// Whether `authorization` (the header's value) names a user with its password.
    pub fn check(&mut self, authorization: Option<&str>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        if self.passed.iter().any(|p| p == value) {
            return true;
        }
        let Some(encoded) = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, v)| v.trim())
        else {
            return false;
        };
        let Some(decoded) = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|d| String::from_utf8(d).ok())
        else {
            return false;
        };
        let Some((user, password)) = decoded.split_once(':') else {
            return false;
        };
        let (hash, known) = match self.users.get(user) {
            Some(hash) => (hash.as_str(), true),
            None => (DUMMY_HASH, false),
        };
        let ok = bcrypt::verify(password, hash).unwrap_or(false) && known;
        if ok {
            if self.passed.len() == REMEMBERED {
                self.passed.remove(0);
            }
            self.passed.push(value.to_owned());
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> String {
        let raw = format!("{user}:{password}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    #[test]
    fn basic_auth_takes_the_right_password_only() {
        let users = BTreeMap::from([("alice".to_owned(), DUMMY_HASH.to_owned())]);
        let mut auth = BasicAuth::new(users).unwrap();
        assert!(auth.check(Some(&header("alice", "password"))));
        assert!(auth.check(Some(&header("alice", "password"))), "remembered");
        assert!(!auth.check(Some(&header("alice", "wrong"))));
        assert!(!auth.check(Some(&header("bob", "password"))));
        assert!(!auth.check(Some("Bearer x")));
        assert!(!auth.check(None));
    }

    #[test]
    fn a_bad_file_is_refused_with_a_reason() {
        let dir = std::env::temp_dir().join(format!("gpupeek-webconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("web.yml");
        let refused = |yaml: &str| {
            std::fs::write(&path, yaml).unwrap();
            WebConfig::load(&path).err().unwrap_or_default()
        };
        assert!(refused("basic_auth_user: {}\n").contains("unknown field"));
        assert!(refused("basic_auth_users: {a: plain}\n").contains("bcrypt"));
        assert!(refused("tls_server_config: {cert_file: x}\n").contains("key_file"));
        assert!(refused("tls_server_config: {cipher_suites: [A]}\n").contains("not supported"));
        assert!(
            refused("tls_server_config: {cert_file: nope, key_file: nope}\n").contains("cert_file")
        );
        std::fs::write(&path, "http_server_config: {headers: {X-A: b}}\n").unwrap();
        let ok = WebConfig::load(&path).unwrap();
        assert_eq!(ok.headers, [("X-A".to_owned(), "b".to_owned())]);
        assert!(ok.tls.is_none() && ok.auth.is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
