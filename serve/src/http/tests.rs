use std::io::{Read, Write};
use std::net::TcpStream;

use super::*;

/// A server with `limits` answering "METHOD PATH" in a thread of its own; its address.
fn start(limits: Limits) -> SocketAddr {
    let mut server = Server::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
    let addr = server.local_addr().unwrap();
    std::thread::spawn(move || {
        server.run_with_events(
            |r| Response {
                status: 200,
                content_type: "text/plain",
                body: format!("{} {}", r.method, r.path),
                extra: Vec::new(),
            },
            || None,
        )
    });
    addr
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// Sends `request` and reads until the server closes.
fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = connect(addr);
    stream.write_all(request).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Whether the server closed `stream` (EOF) rather than leaving it open until the timeout.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0))
}

#[test]
fn a_get_is_answered_with_its_length_and_the_connection_closed() {
    let addr = start(Limits::default());
    let response = exchange(addr, b"GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(
        response,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\
         Connection: close\r\n\r\nGET /metrics"
    );
    let head = exchange(addr, b"HEAD / HTTP/1.0\r\n\r\n");
    assert!(
        head.ends_with("Content-Length: 6\r\nConnection: close\r\n\r\n"),
        "{head}"
    );
}

#[test]
fn a_request_sent_in_pieces_is_answered_once_complete() {
    let addr = start(Limits::default());
    let mut stream = connect(addr);
    stream.write_all(b"GET /me").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    stream.write_all(b"trics HTTP/1.1\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.ends_with("\r\n\r\nGET /metrics"), "{response}");
}

#[test]
fn malformed_and_oversized_request_heads_get_400_and_431() {
    let addr = start(Limits {
        head_bytes: 64,
        ..Limits::default()
    });
    for bad in [
        &b"garbage\r\n\r\n"[..],
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics SPDY/3\r\n\r\n",
        b"get /metrics HTTP/1.1\r\n\r\n",
        b"GET /a b HTTP/1.1\r\n\r\n",
        b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
    ] {
        let response = exchange(addr, bad);
        assert!(response.starts_with("HTTP/1.1 400 "), "{bad:?}: {response}");
    }
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "x".repeat(100));
    let response = exchange(addr, long.as_bytes());
    assert!(response.starts_with("HTTP/1.1 431 "), "{response}");
}

#[test]
fn a_connection_that_sends_nothing_is_closed_at_its_deadline() {
    let addr = start(Limits {
        deadline: Duration::from_millis(200),
        ..Limits::default()
    });
    let mut silent = connect(addr);
    assert!(closed_by_server(&mut silent));
    // One that sends half a request too.
    let mut slow = connect(addr);
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost:").unwrap();
    assert!(closed_by_server(&mut slow));
}

#[test]
fn beyond_the_connection_limit_the_oldest_is_closed_and_new_ones_are_answered() {
    let addr = start(Limits {
        connections: 2,
        ..Limits::default()
    });
    let mut idle: Vec<TcpStream> = (0..5).map(|_| connect(addr)).collect();
    let response = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(response.ends_with("GET /metrics"), "{response}");
    // The first three idle ones were closed to make room (the last two, or the
    // exchange's, hold the two slots).
    for stream in &mut idle[..3] {
        assert!(closed_by_server(stream));
    }
}
