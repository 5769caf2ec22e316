//! Server-sent events: a GET whose handler answers `text/event-stream` keeps its
//! connection and gets every event the server is given, until the client leaves.
//!
//! The response head has no `Content-Length` (the body ends when the connection does)
//! and is never compressed. What a stream has not sent yet is queued in user space, on
//! top of a socket send buffer kept small ([`Transport::small_send_buffer`]); a client
//! that reads so slowly that more than [`Limits::backlog`] bytes are queued is closed,
//! not buffered for. A stream silent for [`Limits::keepalive`] gets a comment line, so
//! that proxies keep it open and a client that vanished is found out by the write.
//! Bytes the client sends on a stream are read and dropped; its end closes the stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Interest, Token, Waker};

#[cfg(doc)]
use super::{transport::Transport, Limits};
use super::{Conn, Response, Server, State};

/// The poll token of the server's waker.
pub(super) const WAKER: Token = Token(usize::MAX);

/// The content type that makes a response a stream.
pub const EVENT_STREAM: &str = "text/event-stream";

/// The comment sent to a silent stream.
const KEEPALIVE: &[u8] = b": keep-alive\n\n";

/// Whether `response` opens a stream.
pub(super) fn is_stream(response: &Response) -> bool {
    response.status == 200 && response.content_type == EVENT_STREAM
}

/// The head of a stream's response, and its first bytes (the handler's body).
pub(super) fn head(response: &Response, headers: &[(String, String)]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {EVENT_STREAM}\r\nCache-Control: no-cache\r\n\
         X-Accel-Buffering: no\r\n"
    );
    for (name, value) in response
        .extra
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .chain(headers.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    {
        out += &format!("{name}: {value}\r\n");
    }
    out += "Connection: close\r\n\r\n";
    let mut out = out.into_bytes();
    out.extend_from_slice(response.body.as_bytes());
    out
}

/// The last `id:` field in `bytes`.
fn last_id(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("id: ")?.parse().ok())
}

/// What a stream has queued.
pub(super) struct Queue {
    out: Vec<u8>,
    written: usize,
    /// When something was last queued.
    last: Instant,
    /// The id of the last event queued: the same event is not queued twice (a new
    /// stream's first event may be the one the next broadcast carries).
    id: Option<u64>,
}

impl Queue {
    pub(super) fn new(out: Vec<u8>, now: Instant) -> Queue {
        Queue {
            id: last_id(&out),
            out,
            written: 0,
            last: now,
        }
    }

    fn push(&mut self, bytes: &[u8], now: Instant) {
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        } else if self.written >= self.out.len() / 2 {
            self.out.drain(..self.written);
            self.written = 0;
        }
        self.out.extend_from_slice(bytes);
        self.last = now;
    }

    fn pending(&self) -> usize {
        self.out.len() - self.written
    }
}

impl Server {
    /// A waker for [`Server::run_with_events`]: each wake-up asks for an event. The same
    /// one on every call.
    pub fn waker(&mut self) -> std::io::Result<Arc<Waker>> {
        if let Some(waker) = &self.waker {
            return Ok(waker.clone());
        }
        let waker = Arc::new(Waker::new(self.poll.registry(), WAKER)?);
        self.waker = Some(waker.clone());
        Ok(waker)
    }

    /// Streams open now.
    pub(super) fn streams(&self) -> usize {
        self.conns
            .iter()
            .flatten()
            .filter(|c| c.streaming())
            .count()
    }

    /// Queues `event` on every stream that has not had an event of its id yet, and
    /// sends what each socket takes.
    pub(super) fn broadcast(&mut self, event: &[u8]) {
        let id = last_id(event);
        self.queue_where(event, |q| id.is_none() || q.id != id);
    }

    /// Queues a comment on every stream silent for the keep-alive interval.
    pub(super) fn keep_alive(&mut self, now: Instant) {
        let every = self.limits.keepalive;
        self.queue_where(KEEPALIVE, |q| now >= q.last + every);
    }

    /// Until the next keep-alive is due; `None` without streams.
    pub(super) fn next_keepalive(&self, now: Instant) -> Option<Duration> {
        self.conns
            .iter()
            .flatten()
            .filter_map(|c| match &c.state {
                State::Streaming(q) => {
                    Some((q.last + self.limits.keepalive).saturating_duration_since(now))
                }
                _ => None,
            })
            .min()
    }

    fn queue_where(&mut self, bytes: &[u8], due: impl Fn(&Queue) -> bool) {
        let now = Instant::now();
        for slot in 0..self.conns.len() {
            let over = match &mut self.conns[slot] {
                Some(Conn {
                    state: State::Streaming(q),
                    ..
                }) if due(q) => {
                    q.push(bytes, now);
                    q.id = last_id(bytes).or(q.id);
                    q.pending() > self.limits.backlog
                }
                _ => continue,
            };
            if over {
                self.close(slot);
            } else {
                self.pump(slot);
            }
        }
    }

    /// Moves stream `slot` on: sends what the socket takes, drops what the client sent,
    /// closes it when the client has gone.
    pub(super) fn pump(&mut self, slot: usize) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let alive = conn.stream_io();
        let interest = match &conn.state {
            State::Streaming(q) if q.pending() > 0 || conn.stream.wants_write() => {
                Interest::READABLE | Interest::WRITABLE
            }
            _ => Interest::READABLE,
        };
        let token = Token(slot + 1);
        let registered = self
            .poll
            .registry()
            .reregister(conn.stream.socket(), token, interest);
        if !alive || registered.is_err() {
            self.close(slot);
        }
    }
}

impl Conn {
    /// One round of a stream's I/O; false when it is over.
    fn stream_io(&mut self) -> bool {
        use std::io::ErrorKind::{Interrupted, WouldBlock};
        let State::Streaming(q) = &mut self.state else {
            return false;
        };
        let mut buf = [0u8; 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) if e.kind() == WouldBlock => break,
                Err(e) if e.kind() == Interrupted => {}
                Err(_) => return false,
            }
        }
        while q.pending() > 0 {
            match self.stream.write(&q.out[q.written..]) {
                Ok(0) => return false,
                Ok(n) => q.written += n,
                Err(e) if e.kind() == WouldBlock => break,
                Err(e) if e.kind() == Interrupted => {}
                Err(_) => return false,
            }
        }
        !matches!(self.stream.flush(), Err(e) if e.kind() != WouldBlock)
    }
}
