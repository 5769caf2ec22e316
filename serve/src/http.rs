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
//!
//! With TLS ([`Server::tls`]) each connection speaks it through rustls ([`transport`]);
//! the handshake falls under the same deadline. A body is gzip-compressed when the
//! request's `Accept-Encoding` allows it; [`Server::headers`] are added to every response.
//!
//! A GET answered `text/event-stream` becomes a server-sent-events stream ([`stream`]):
//! it outlives the deadline, does not count against the connections, and gets each
//! event [`Server::run_with_events`] is given; at most [`Limits::streams`] at once.

use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use rustls::{ServerConfig, ServerConnection};

mod message;
mod stream;
mod transport;

use message::{encode, find, parse, plain};
pub use stream::EVENT_STREAM;
use transport::Transport;

/// The bounds the server keeps to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once.
    pub connections: usize,
    /// How long a connection may live, from its accept.
    pub deadline: Duration,
    /// Longest request head (request line and headers).
    pub head_bytes: usize,
    /// Event streams open at once (beyond `connections`).
    pub streams: usize,
    /// Bytes a stream may have queued unsent before it is closed.
    pub backlog: usize,
    /// A stream silent this long gets a comment, so proxies keep it and a gone client
    /// is noticed.
    pub keepalive: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 64,
            deadline: Duration::from_secs(10),
            head_bytes: 8192,
            streams: 16,
            backlog: 256 * 1024,
            keepalive: Duration::from_secs(15),
        }
    }
}

/// What the handler is asked.
pub struct Request<'a> {
    /// The method, as sent (`GET`, `HEAD`, ...).
    pub method: &'a str,
    /// The target's path, without the query.
    pub path: &'a str,
    /// The `Authorization` header's value.
    pub authorization: Option<&'a str>,
    /// Whether `Accept-Encoding` allows gzip.
    pub gzip: bool,
}

/// What the handler answers.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body (left out, but counted in `Content-Length`, for HEAD).
    pub body: String,
    /// More headers (`WWW-Authenticate`).
    pub extra: Vec<(&'static str, String)>,
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
    /// TLS, when serving HTTPS.
    tls: Option<Arc<ServerConfig>>,
    /// Headers added to every response.
    headers: Arc<[(String, String)]>,
    /// The wake-up of [`Server::waker`], once made.
    waker: Option<Arc<Waker>>,
}

const LISTENER: Token = Token(0);
const RETRY_ACCEPT: Duration = Duration::from_millis(100);

struct Conn {
    stream: Transport,
    accepted: Instant,
    head: Vec<u8>,
    state: State,
}

enum State {
    Reading,
    Writing {
        out: Vec<u8>,
        written: usize,
    },
    Draining,
    /// An event stream: what is queued for it.
    Streaming(stream::Queue),
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
            tls: None,
            headers: Arc::new([]),
            waker: None,
        })
    }

    /// Serves HTTPS with `config`.
    pub fn tls(mut self, config: Arc<ServerConfig>) -> Server {
        self.tls = Some(config);
        self
    }

    /// Adds `headers` to every response.
    pub fn headers(mut self, headers: Vec<(String, String)>) -> Server {
        self.headers = headers.into();
        self
    }

    /// The address it listens on (the port chosen when asked for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves forever, answering each request with `handler`; after each wake-up of
    /// [`Server::waker`], while a stream is open, sends every stream what `publish` gives.
    pub fn run_with_events(
        &mut self,
        mut handler: impl FnMut(&Request) -> Response,
        mut publish: impl FnMut() -> Option<Vec<u8>>,
    ) -> std::io::Result<()> {
        let mut events = Events::with_capacity(256);
        loop {
            self.turn(&mut events, &mut handler, &mut publish)?;
        }
    }

    /// Waits for the next events (or deadline) and handles them.
    fn turn(
        &mut self,
        events: &mut Events,
        handler: &mut impl FnMut(&Request) -> Response,
        publish: &mut impl FnMut() -> Option<Vec<u8>>,
    ) -> std::io::Result<()> {
        match self.poll.poll(events, self.timeout(Instant::now())) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        let mut woken = false;
        for event in events.iter() {
            match event.token() {
                LISTENER => self.accept_all(),
                stream::WAKER => woken = true,
                Token(t) => self.service(t - 1, handler),
            }
        }
        if woken && self.streams() > 0 {
            if let Some(event) = publish() {
                self.broadcast(&event);
            }
        }
        if self.accept_pending {
            self.accept_all();
        }
        self.expire(Instant::now());
        self.keep_alive(Instant::now());
        Ok(())
    }

    /// Until the nearest deadline, or the accept retry; `None` with nothing to wait for.
    fn timeout(&self, now: Instant) -> Option<Duration> {
        let nearest = self
            .conns
            .iter()
            .flatten()
            .filter(|c| !c.streaming())
            .map(|c| (c.accepted + self.limits.deadline).saturating_duration_since(now))
            .min();
        let retry = self.accept_pending.then_some(RETRY_ACCEPT);
        let keepalive = self.next_keepalive(now);
        nearest.into_iter().chain(retry).chain(keepalive).min()
    }

    fn accept_all(&mut self) {
        self.accept_pending = false;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => self.add(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if out_of_descriptors(&e) => {
                    if !self.close_oldest(true) {
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
        let open = self.conns.iter().flatten().filter(|c| !c.streaming());
        if open.count() >= self.limits.connections {
            self.close_oldest(false);
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
        let stream = match &self.tls {
            None => Transport::Plain(stream),
            Some(config) => match ServerConnection::new(config.clone()) {
                Ok(tls) => Transport::Tls(Box::new(tls), stream),
                Err(_) => return,
            },
        };
        self.conns[slot] = Some(Conn {
            stream,
            accepted: Instant::now(),
            head: Vec::new(),
            state: State::Reading,
        });
    }

    /// Closes the connection accepted first (an event stream only if `streams_too`);
    /// false when there is none.
    fn close_oldest(&mut self, streams_too: bool) -> bool {
        let oldest = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (c, i)))
            .filter(|(c, _)| streams_too || !c.streaming())
            .map(|(c, i)| (c.accepted, i))
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
            let _ = self.poll.registry().deregister(conn.stream.socket());
        }
    }

    fn expire(&mut self, now: Instant) {
        for slot in 0..self.conns.len() {
            let expired = self.conns[slot]
                .as_ref()
                .is_some_and(|c| !c.streaming() && now >= c.accepted + self.limits.deadline);
            if expired {
                self.close(slot);
            }
        }
    }

    /// Moves connection `slot` on as far as its socket allows.
    fn service(&mut self, slot: usize, handler: &mut impl FnMut(&Request) -> Response) {
        let full = self.streams() >= self.limits.streams;
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        if conn.streaming() {
            self.pump(slot);
            return;
        }
        let headers = &self.headers;
        let keep = match conn.stream.flush() {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Progress::Close,
            _ => Progress::Continue,
        }
        .and_then(|| match conn.state {
            State::Reading => conn.read_request(self.limits.head_bytes, full, headers, handler),
            _ => Progress::Continue,
        })
        .and_then(|| conn.write_response())
        .and_then(|| conn.drain());
        if matches!(keep, Progress::Close) {
            self.close(slot);
            return;
        }
        if conn.streaming() {
            conn.stream.small_send_buffer();
            self.pump(slot);
            return;
        }
        let interest = match conn.state {
            State::Writing { .. } => Interest::WRITABLE,
            _ if conn.stream.wants_write() => Interest::READABLE | Interest::WRITABLE,
            _ => Interest::READABLE,
        };
        let token = Token(slot + 1);
        if self
            .poll
            .registry()
            .reregister(conn.stream.socket(), token, interest)
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
    fn streaming(&self) -> bool {
        matches!(self.state, State::Streaming(_))
    }

    /// Reads what has arrived; once the head is complete (or too long, or malformed),
    /// turns the answer into bytes to write.
    fn read_request(
        &mut self,
        max: usize,
        streams_full: bool,
        headers: &[(String, String)],
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
            let (response, method, gzip) = match end.filter(|&e| e + 4 <= max) {
                Some(end) => match parse(&self.head[..end]) {
                    Some(r) => (handler(&r), r.method, r.gzip),
                    None => (plain(400, "bad request\n"), "", false),
                },
                None => (plain(431, "request head too large\n"), "", false),
            };
            let head = method == "HEAD";
            if method == "GET" && stream::is_stream(&response) {
                if !streams_full {
                    self.state = State::Streaming(stream::Queue::new(
                        stream::head(&response, headers),
                        Instant::now(),
                    ));
                    return Progress::Continue;
                }
                let busy = plain(503, "too many event streams open; try again later\n");
                let out = encode(&busy, false, false, headers);
                self.state = State::Writing { out, written: 0 };
                return Progress::Continue;
            }
            let out = encode(&response, head, gzip, headers);
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
        match self.stream.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Continue,
            Err(_) => return Progress::Close,
        }
        self.stream.shutdown();
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
            // Raw bytes: whatever the client still sends is discarded unread.
            match self.stream.socket().read(&mut buf) {
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

#[cfg(test)]
mod tests;
