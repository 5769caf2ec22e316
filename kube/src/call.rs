//! One unary gRPC call, `v1.PodResourcesLister/List`, over the kubelet's unix socket:
//! HTTP/2 with prior knowledge (as gRPC speaks it), the request a length-prefixed message,
//! the answer a length-prefixed message and `grpc-status` in the trailers (or, for an
//! error with no message, in the headers).

use std::path::Path;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use prost::Message;

use crate::api::{ListPodResourcesRequest, ListPodResourcesResponse};

/// Where the kubelet serves the pod-resources API.
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// The gRPC method's path.
pub const METHOD: &str = "/v1.PodResourcesLister/List";

/// The largest answer read: the kubelet's own limit on what it sends (16 MiB).
const MAX_MESSAGE: usize = 16 << 20;

/// Why a call failed.
#[derive(Debug)]
pub enum Error {
    /// The socket could not be connected to (absent, refused, no permission).
    Connect(std::io::Error),
    /// No complete answer within the deadline.
    Timeout(Duration),
    /// The peer does not speak gRPC as expected.
    Protocol(String),
    /// The kubelet answered with a gRPC error.
    Status {
        /// gRPC status code.
        code: u32,
        /// Its message, percent-decoded as far as it is ASCII.
        message: String,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Connect(e) => write!(f, "cannot connect: {e}"),
            Error::Timeout(d) => write!(f, "no answer within {} ms", d.as_millis()),
            Error::Protocol(why) => write!(f, "not a pod-resources answer: {why}"),
            Error::Status { code, message } => write!(f, "gRPC status {code}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<h2::Error> for Error {
    fn from(e: h2::Error) -> Self {
        match e.get_io() {
            Some(io) => Error::Protocol(format!("connection: {io}")),
            None => Error::Protocol(e.to_string()),
        }
    }
}

/// Calls `List` on the kubelet at `socket`, giving up after `timeout`. Runs a
/// single-threaded runtime for the call's duration; never call it from async code.
pub fn list(socket: &Path, timeout: Duration) -> Result<ListPodResourcesResponse, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(Error::Connect)?;
    runtime.block_on(async {
        tokio::time::timeout(timeout, call(socket))
            .await
            .unwrap_or(Err(Error::Timeout(timeout)))
    })
}

async fn call(socket: &Path) -> Result<ListPodResourcesResponse, Error> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(Error::Connect)?;
    let (client, connection) = h2::client::handshake(stream).await?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let result = request(client).await;
    driver.abort();
    result
}

async fn request(
    client: h2::client::SendRequest<Bytes>,
) -> Result<ListPodResourcesResponse, Error> {
    let mut client = client.ready().await?;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost{METHOD}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .map_err(|e| Error::Protocol(e.to_string()))?;
    let (response, mut send) = client.send_request(request, false)?;
    send.send_data(frame(&ListPodResourcesRequest {}), true)?;
    let response = response.await?;
    let (head, mut body) = response.into_parts();
    if head.status != http::StatusCode::OK {
        return Err(Error::Protocol(format!("HTTP status {}", head.status)));
    }
    // A "trailers-only" answer: an error, its status in the headers.
    status(&head.headers)?;
    let mut data = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        if data.len() + chunk.len() > MAX_MESSAGE + 5 {
            return Err(Error::Protocol(format!(
                "answer over {} MiB",
                MAX_MESSAGE >> 20
            )));
        }
        data.extend_from_slice(&chunk);
    }
    match body.trailers().await? {
        Some(trailers) if trailers.contains_key("grpc-status") => status(&trailers)?,
        _ if head.headers.contains_key("grpc-status") => {}
        _ => return Err(Error::Protocol("no grpc-status".into())),
    }
    let message = unframe(data.freeze())?;
    ListPodResourcesResponse::decode(message).map_err(|e| Error::Protocol(e.to_string()))
}

/// `message` with gRPC's prefix: not compressed, its length (big-endian u32).
pub(crate) fn frame(message: &impl Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut out = BytesMut::with_capacity(5 + body.len());
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out.freeze()
}

/// The one message of a unary answer.
pub(crate) fn unframe(mut data: Bytes) -> Result<Bytes, Error> {
    if data.len() < 5 {
        return Err(Error::Protocol(format!(
            "{} bytes, not a message",
            data.len()
        )));
    }
    let compressed = data.get_u8();
    let len = data.get_u32() as usize;
    if compressed != 0 {
        return Err(Error::Protocol("compressed message".into()));
    }
    if len != data.len() {
        return Err(Error::Protocol(format!(
            "message of {len} bytes in {} bytes",
            data.len()
        )));
    }
    Ok(data)
}

/// `Err` for a `grpc-status` other than 0 (OK) in `headers`.
fn status(headers: &http::HeaderMap) -> Result<(), Error> {
    let Some(code) = headers.get("grpc-status") else {
        return Ok(());
    };
    let code: u32 = code
        .to_str()
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| Error::Protocol(format!("grpc-status {code:?}")))?;
    if code == 0 {
        return Ok(());
    }
    let message = headers
        .get("grpc-message")
        .map(|m| percent_decode(&String::from_utf8_lossy(m.as_bytes())))
        .unwrap_or_default();
    Err(Error::Status { code, message })
}

/// gRPC percent-encodes `grpc-message`.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(percent_decode("no%20such%20pod"), "no such pod");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%4"), "%4");
    }

    #[test]
    fn a_message_must_fill_its_frame() {
        let framed = frame(&ListPodResourcesRequest {});
        assert_eq!(&framed[..], [0, 0, 0, 0, 0]);
        assert!(unframe(Bytes::from_static(&[0, 0, 0, 0, 2, 1])).is_err());
        assert!(unframe(Bytes::from_static(&[1, 0, 0, 0, 0])).is_err());
        assert!(unframe(Bytes::from_static(&[0, 0])).is_err());
    }
}
