//! `fake-kube-api SLICES [TOKEN]`: a FAKE Kubernetes API server on a loopback port, for
//! `scripts/demo-fleet --kubernetes`, so that `gpupeek fleet --kubernetes` can be tried
//! on one machine. It answers a GET of any namespace's EndpointSliceList
//! (`/apis/discovery.k8s.io/v1/namespaces/NS/endpointslices`, whatever the query) with
//! the file SLICES, read again at each request; any other path with the API's 404
//! `Status`; and, when TOKEN is given, a request without `Authorization: Bearer TOKEN`
//! with its 401 `Status`. It says `fake-kube-api: listening at http://127.0.0.1:PORT`
//! on its standard error, and serves until it is killed. The tests' fake API server
//! (tests/e2e, `fake_kube_api.rs`) is the one that models the API's paging and errors.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (slices, token) = match args.as_slice() {
        [slices] => (PathBuf::from(slices), None),
        [slices, token] => (PathBuf::from(slices), Some(token.clone())),
        _ => {
            eprintln!("usage: fake-kube-api SLICES [TOKEN]");
            return ExitCode::from(2);
        }
    };
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("fake-kube-api: cannot listen on 127.0.0.1: {e}");
            return ExitCode::from(1);
        }
    };
    match listener.local_addr() {
        Ok(addr) => eprintln!("fake-kube-api: listening at http://{addr}"),
        Err(e) => {
            eprintln!("fake-kube-api: {e}");
            return ExitCode::from(1);
        }
    }
    for stream in listener.incoming().flatten() {
        let (slices, token) = (slices.clone(), token.clone());
        std::thread::spawn(move || serve(stream, &slices, token.as_deref()));
    }
    ExitCode::SUCCESS
}

/// Answers the requests of one connection until the client closes it.
fn serve(stream: TcpStream, slices: &Path, token: Option<&str>) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(stream);
    loop {
        let mut request = String::new();
        if lines.read_line(&mut request).map_or(true, |n| n == 0) {
            return;
        }
        let mut authorization = None;
        loop {
            let mut header = String::new();
            if lines.read_line(&mut header).map_or(true, |n| n == 0) {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("authorization") {
                    authorization = Some(value.trim().to_owned());
                }
            }
        }
        let mut words = request.split_whitespace();
        let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let path = target.split('?').next().unwrap_or("");
        let (status, body) = answer(method, path, authorization.as_deref(), slices, token);
        let reason = match status {
            200 => "OK",
            401 => "Unauthorized",
            404 => "Not Found",
            _ => "Method Not Allowed",
        };
        let head = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(body.as_bytes()).is_err() {
            return;
        }
    }
}

/// The status and body for a request of `method` `path`.
fn answer(
    method: &str,
    path: &str,
    authorization: Option<&str>,
    slices: &Path,
    token: Option<&str>,
) -> (u16, String) {
    let status = |code: u16, reason: &str, message: &str| {
        let body = format!(
            "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\
             \"message\":\"{message}\",\"reason\":\"{reason}\",\"code\":{code}}}"
        );
        (code, body)
    };
    if let Some(token) = token {
        if authorization != Some(&format!("Bearer {token}")) {
            return status(401, "Unauthorized", "Unauthorized");
        }
    }
    if method != "GET" {
        return status(405, "MethodNotAllowed", "only GET");
    }
    let listed = path
        .strip_prefix(SLICES)
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(namespace, rest)| !namespace.is_empty() && rest == "endpointslices");
    if !listed {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    match std::fs::read_to_string(slices) {
        Ok(text) => (200, text),
        Err(e) => {
            let why = format!("cannot read {}: {e}", slices.display());
            status(404, "NotFound", &why.replace(['"', '\\'], "'"))
        }
    }
}
