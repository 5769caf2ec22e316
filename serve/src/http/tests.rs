use std::io::{Read, Write};
use std::net::TcpStream;

use super::*;
use mio::Waker;

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

/// A server whose `/events` is a stream, sent an event `id: N` at each wake-up of its
/// waker; a new stream's first event has the id the next wake-up will send (as when a
/// publish reaches a new stream before the broadcast). Its address and the waker.
fn start_streams(limits: Limits) -> (SocketAddr, Arc<Waker>) {
    let mut server = Server::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
    let addr = server.local_addr().unwrap();
    let waker = server.waker().unwrap();
    std::thread::spawn(move || {
        let n = std::cell::Cell::new(0u64);
        server.run_with_events(
            |r| Response {
                status: 200,
                content_type: if r.path == "/events" {
                    EVENT_STREAM
                } else {
                    "text/plain"
                },
                body: if r.path == "/events" {
                    format!("id: {}\ndata: first\n\n", n.get() + 1)
                } else {
                    "plain".into()
                },
                extra: Vec::new(),
            },
            || {
                n.set(n.get() + 1);
                Some(format!("id: {0}\ndata: {0}\n\n", n.get()).into_bytes())
            },
        )
    });
    (addr, waker)
}

/// Reads from `stream` until `want` has arrived (or the read timeout).
fn read_until(stream: &mut TcpStream, want: &str) -> String {
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while !got.contains(want) {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    got
}

#[test]
fn a_stream_outlives_the_deadline_and_gets_keep_alive_comments() {
    let (addr, _waker) = start_streams(Limits {
        deadline: Duration::from_millis(100),
        keepalive: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut stream = connect(addr);
    stream.write_all(b"GET /events HTTP/1.1\r\n\r\n").unwrap();
    let got = read_until(&mut stream, ": keep-alive\n\n");
    assert!(got.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"));
    assert!(!got.contains("Content-Length"), "{got}");
    assert!(got.contains("\r\n\r\nid: 1\ndata: first\n\n"), "{got}");
    let got = read_until(&mut stream, ": keep-alive\n\n");
    assert!(
        got.contains(": keep-alive"),
        "a second one, after the deadline: {got}"
    );
}

#[test]
fn each_wake_up_sends_one_event_to_every_stream_and_never_an_id_twice() {
    let (addr, waker) = start_streams(Limits::default());
    let mut a = connect(addr);
    a.write_all(b"GET /events HTTP/1.1\r\n\r\n").unwrap();
    assert!(read_until(&mut a, "data: first\n\n").contains("id: 1\ndata: first\n\n"));
    // Event 1 came with the stream: the broadcast of 1 is not sent again, 2 is.
    waker.wake().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut b = connect(addr);
    b.write_all(b"GET /events HTTP/1.1\r\n\r\n").unwrap();
    assert!(read_until(&mut b, "data: first\n\n").contains("id: 2\ndata: first\n\n"));
    waker.wake().unwrap();
    let got = read_until(&mut a, "data: 2\n\n");
    assert!(!got.contains("data: 1\n"), "{got}");
    assert!(got.contains("id: 2\ndata: 2\n\n"), "{got}");
    waker.wake().unwrap();
    let got = read_until(&mut b, "data: 3\n\n");
    assert!(
        !got.contains("data: 2\n") && got.contains("id: 3\ndata: 3\n\n"),
        "{got}"
    );
    // A HEAD is an ordinary answer, not a stream.
    let head = exchange(addr, b"HEAD /events HTTP/1.1\r\n\r\n");
    assert!(head.contains("Content-Length:"), "{head}");
}

#[test]
fn streams_past_the_limit_get_503_and_plain_requests_still_pass() {
    let (addr, _waker) = start_streams(Limits {
        streams: 1,
        ..Limits::default()
    });
    let mut one = connect(addr);
    one.write_all(b"GET /events HTTP/1.1\r\n\r\n").unwrap();
    read_until(&mut one, "data: first\n\n");
    let refused = exchange(addr, b"GET /events HTTP/1.1\r\n\r\n");
    assert!(
        refused.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{refused}"
    );
    assert!(exchange(addr, b"GET / HTTP/1.1\r\n\r\n").ends_with("plain"));
}
