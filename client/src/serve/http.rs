//! The exporter's HTTP server: just enough HTTP/1.x for a scrape, with hard bounds on what
//! any number of clients can take.
//!
//! One thread and one mio poll. At most [`Limits::connections`] connections are open at
//! once: a new one closes the oldest, so idle connections can neither exhaust descriptors
//! nor starve a scraper (when the descriptor limit is lower, running out of descriptors
//! also closes the oldest). Each connection is closed [`Limits::deadline`] after it was
//! accepted, whatever it did or did not send. A request head longer than
//! [`Limits::head_bytes`] is answered 431, a malformed one 400. Every response carries
//! `Content-Length` and `Connection: close`; after writing it the server shuts down its
//! side and drains what the client still sends until it closes (or the deadline), so an
//! unread byte never turns the close into a reset that loses the response. No keep-alive,
//! no request bodies, no chunked encoding: a Prometheus scrape needs none of them.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

/// The bounds the server keeps to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once.
    pub connections: usize,
    /// How long a connection may live, from its accept.
    pub deadline: Duration,
    /// Longest request head (request line and headers).
    pub head_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 64,
            deadline: Duration::from_secs(10),
            head_bytes: 8192,
        }
    }
}

/// What the handler is asked.
pub struct Request<'a> {
    /// The method, as sent (`GET`, `HEAD`, ...).
    pub method: &'a str,
    /// The target's path, without the query.
    pub path: &'a str,
}

/// What the handler answers.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body (left out, but counted in `Content-Length`, for HEAD).
    pub body: String,
}

/// The listening server.
pub struct Server {
    poll: Poll,
    listener: TcpListener,
    limits: Limits,
    /// Connections by token − 1; `None` is a free slot.
    conns: Vec<Option<Conn>>,
    /// Accepting stopped for lack of descriptors with no connection left to close:
    /// retry after [`RETRY_ACCEPT`].
    accept_pending: bool,
}

const LISTENER: Token = Token(0);
const RETRY_ACCEPT: Duration = Duration::from_millis(100);

struct Conn {
    stream: TcpStream,
    accepted: Instant,
    head: Vec<u8>,
    state: State,
}

enum State {
    Reading,
    Writing { out: Vec<u8>, written: usize },
    Draining,
}

impl Server {
    /// Listens on `addr`.
    pub fn bind(addr: SocketAddr, limits: Limits) -> std::io::Result<Server> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(addr)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Server {
            poll,
            listener,
            limits,
            conns: Vec::new(),
            accept_pending: false,
        })
    }

    /// The address it listens on (the port chosen when asked for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves forever, answering each request with `handler`.
    pub fn run(&mut self, mut handler: impl FnMut(&Request) -> Response) -> std::io::Result<()> {
        let mut events = Events::with_capacity(256);
        loop {
            self.turn(&mut events, &mut handler)?;
        }
    }

    /// Waits for the next events (or deadline) and handles them.
    fn turn(
        &mut self,
        events: &mut Events,
        handler: &mut impl FnMut(&Request) -> Response,
    ) -> std::io::Result<()> {
        match self.poll.poll(events, self.timeout(Instant::now())) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        for event in events.iter() {
            match event.token() {
                LISTENER => self.accept_all(),
                Token(t) => self.service(t - 1, handler),
            }
        }
        if self.accept_pending {
            self.accept_all();
        }
        self.expire(Instant::now());
        Ok(())
    }

    /// Until the nearest deadline, or the accept retry; `None` with nothing to wait for.
    fn timeout(&self, now: Instant) -> Option<Duration> {
        let nearest = self
            .conns
            .iter()
            .flatten()
            .map(|c| (c.accepted + self.limits.deadline).saturating_duration_since(now))
            .min();
        let retry = self.accept_pending.then_some(RETRY_ACCEPT);
        nearest.into_iter().chain(retry).min()
    }

    fn accept_all(&mut self) {
        self.accept_pending = false;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => self.add(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if out_of_descriptors(&e) => {
                    if !self.close_oldest() {
                        self.accept_pending = true;
                        return;
                    }
                }
                // The client gave up before the accept (ECONNABORTED) and the like.
                Err(_) => {}
            }
        }
    }

    fn add(&mut self, mut stream: TcpStream) {
        if self.conns.iter().flatten().count() >= self.limits.connections {
            self.close_oldest();
        }
        let slot = match self.conns.iter().position(Option::is_none) {
            Some(slot) => slot,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        let token = Token(slot + 1);
        if self
            .poll
            .registry()
            .register(&mut stream, token, Interest::READABLE)
            .is_err()
        {
            return;
        }
        self.conns[slot] = Some(Conn {
            stream,
            accepted: Instant::now(),
            head: Vec::new(),
            state: State::Reading,
        });
    }

    /// Closes the connection accepted first; false when there is none.
    fn close_oldest(&mut self) -> bool {
        let oldest = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (c.accepted, i)))
            .min();
        match oldest {
            Some((_, slot)) => {
                self.close(slot);
                true
            }
            None => false,
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(mut conn) = self.conns[slot].take() {
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
    }

    fn expire(&mut self, now: Instant) {
        for slot in 0..self.conns.len() {
            let expired = self.conns[slot]
                .as_ref()
                .is_some_and(|c| now >= c.accepted + self.limits.deadline);
            if expired {
                self.close(slot);
            }
        }
    }

    /// Moves connection `slot` on as far as its socket allows.
    fn service(&mut self, slot: usize, handler: &mut impl FnMut(&Request) -> Response) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let keep = match conn.state {
            State::Reading => conn.read_request(self.limits.head_bytes, handler),
            _ => Progress::Continue,
        }
        .and_then(|| conn.write_response())
        .and_then(|| conn.drain());
        if matches!(keep, Progress::Close) {
            self.close(slot);
            return;
        }
        let interest = match conn.state {
            State::Writing { .. } => Interest::WRITABLE,
            _ => Interest::READABLE,
        };
        let token = Token(slot + 1);
        if self
            .poll
            .registry()
            .reregister(&mut conn.stream, token, interest)
            .is_err()
        {
            self.close(slot);
        }
    }
}

/// Whether a connection goes on after a step.
enum Progress {
    Continue,
    Close,
}

impl Progress {
    fn and_then(self, next: impl FnOnce() -> Progress) -> Progress {
        match self {
            Progress::Continue => next(),
            Progress::Close => Progress::Close,
        }
    }
}

impl Conn {
    /// Reads what has arrived; once the head is complete (or too long, or malformed),
    /// turns the answer into bytes to write.
    fn read_request(
        &mut self,
        max: usize,
        handler: &mut impl FnMut(&Request) -> Response,
    ) -> Progress {
        let mut buf = [0u8; 2048];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Progress::Close,
                Ok(n) => self.head.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Progress::Close,
            }
            let end = find(&self.head, b"\r\n\r\n");
            if end.is_none() && self.head.len() < max {
                continue;
            }
            let (response, head) = match end.filter(|&e| e + 4 <= max) {
                Some(end) => match parse(&self.head[..end]) {
                    Some(request) => (handler(&request), request.method == "HEAD"),
                    None => (plain(400, "bad request\n"), false),
                },
                None => (plain(431, "request head too large\n"), false),
            };
            let out = encode(&response, head);
            self.state = State::Writing { out, written: 0 };
            return Progress::Continue;
        }
    }

    /// Writes what the socket takes; once all is written, shuts down the sending side.
    fn write_response(&mut self) -> Progress {
        let State::Writing { out, written } = &mut self.state else {
            return Progress::Continue;
        };
        while *written < out.len() {
            match self.stream.write(&out[*written..]) {
                Ok(n) => *written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Progress::Close,
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        self.state = State::Draining;
        Progress::Continue
    }

    /// After the response: discards what the client still sends until it closes.
    fn drain(&mut self) -> Progress {
        if !matches!(self.state, State::Draining) {
            return Progress::Continue;
        }
        let mut buf = [0u8; 2048];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Progress::Close,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Progress::Close,
            }
        }
    }
}

fn out_of_descriptors(e: &std::io::Error) -> bool {
    use nix::errno::Errno;
    let code = e.raw_os_error();
    code == Some(Errno::EMFILE as i32) || code == Some(Errno::ENFILE as i32)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The request line of `head`: `METHOD SP TARGET SP HTTP/1.x`; `None` if malformed.
fn parse(head: &[u8]) -> Option<Request<'_>> {
    let head = std::str::from_utf8(head).ok()?;
    let line = head.split("\r\n").next()?;
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let valid = parts.next().is_none()
        && !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_uppercase())
        && target.starts_with('/')
        && version.starts_with("HTTP/1.");
    valid.then(|| Request {
        method,
        path: target.split('?').next().unwrap_or(target),
    })
}

fn plain(status: u16, body: &str) -> Response {
    Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.to_owned(),
    }
}

/// The response's bytes; `head_only` (HEAD) leaves the body out.
fn encode(response: &Response, head_only: bool) -> Vec<u8> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "",
    };
    let allow = if response.status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}\
         Connection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(response.body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests;
