//! The keys of a kubeconfig file that `gpupeek fleet` reads (serde's view of the YAML),
//! and what a user entry's `as` fields send ([`User::impersonate`]). What they mean
//! together, merged across files, is [`super::resolve`]'s.

use serde::Deserialize;

use crate::kubernetes::exec;

/// A kubeconfig's keys that matter here.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct File {
    #[serde(rename = "current-context")]
    pub(super) current_context: Option<String>,
    pub(super) clusters: Option<Vec<NamedCluster>>,
    pub(super) contexts: Option<Vec<NamedContext>>,
    pub(super) users: Option<Vec<NamedUser>>,
}

#[derive(Deserialize)]
pub(super) struct NamedCluster {
    pub(super) name: String,
    #[serde(default)]
    pub(super) cluster: Option<Cluster>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Cluster {
    pub(super) server: Option<String>,
    #[serde(rename = "certificate-authority")]
    pub(super) ca_file: Option<String>,
    #[serde(rename = "certificate-authority-data")]
    pub(super) ca_data: Option<String>,
    #[serde(rename = "insecure-skip-tls-verify")]
    pub(super) insecure: bool,
    #[serde(rename = "tls-server-name")]
    pub(super) tls_server_name: Option<String>,
    #[serde(rename = "proxy-url")]
    pub(super) proxy_url: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct NamedContext {
    pub(super) name: String,
    #[serde(default)]
    pub(super) context: Option<Context>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Context {
    pub(super) cluster: Option<String>,
    pub(super) user: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct NamedUser {
    pub(super) name: String,
    #[serde(default)]
    pub(super) user: Option<User>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct User {
    pub(super) token: Option<String>,
    #[serde(rename = "tokenFile")]
    pub(super) token_file: Option<String>,
    #[serde(rename = "client-certificate")]
    pub(super) cert_file: Option<String>,
    #[serde(rename = "client-certificate-data")]
    pub(super) cert_data: Option<String>,
    #[serde(rename = "client-key")]
    pub(super) key_file: Option<String>,
    #[serde(rename = "client-key-data")]
    pub(super) key_data: Option<String>,
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
    pub(super) exec: Option<exec::Spec>,
    #[serde(rename = "auth-provider")]
    pub(super) auth_provider: Option<AuthProvider>,
    #[serde(rename = "as")]
    pub(super) act_as: Option<String>,
    #[serde(rename = "as-uid")]
    pub(super) act_as_uid: Option<String>,
    #[serde(rename = "as-groups")]
    pub(super) act_as_groups: Option<Vec<String>>,
    #[serde(rename = "as-user-extra")]
    pub(super) act_as_extra: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

impl User {
    /// The `Impersonate-*` headers of its `as` fields, as client-go sends them (an extra
    /// key's bytes that are not an HTTP token's, and `%`, percent-encoded), or why they
    /// cannot be sent.
    pub(super) fn impersonate(&self) -> Result<Vec<(String, String)>, String> {
        let mut headers = Vec::new();
        let user = self.act_as.as_deref().filter(|u| !u.is_empty());
        if let Some(user) = user {
            headers.push(("Impersonate-User".to_owned(), user.to_owned()));
        }
        if let Some(uid) = self.act_as_uid.as_deref().filter(|u| !u.is_empty()) {
            headers.push(("Impersonate-Uid".to_owned(), uid.to_owned()));
        }
        for group in self.act_as_groups.iter().flatten() {
            headers.push(("Impersonate-Group".to_owned(), group.clone()));
        }
        for (key, values) in self.act_as_extra.iter().flatten() {
            let key: String = key
                .bytes()
                .map(|b| match b {
                    // An HTTP token's bytes but `%`, as client-go escapes the key.
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
                    b'!' | b'#' | b'$' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_'
                    | b'`' | b'|' | b'~' => (b as char).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect();
            for value in values {
                headers.push((format!("Impersonate-Extra-{key}"), value.clone()));
            }
        }
        if user.is_none() && !headers.is_empty() {
            // The API server refuses groups, a uid or extras without a user.
            return Err(
                "as-uid, as-groups or as-user-extra without as (the user to act as)".into(),
            );
        }
        if headers.iter().any(|(_, v)| v.chars().any(char::is_control)) {
            return Err("an as field holds a control character".into());
        }
        Ok(headers)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct AuthProvider {
    pub(super) name: Option<String>,
}
