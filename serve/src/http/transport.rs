//! A connection's byte stream: the TCP socket itself, or TLS over it (rustls), behind one
//! non-blocking read/write interface so the server's state machine is the same for both.
//!
//! With TLS, reading drives the handshake: each read feeds what arrived to rustls and
//! tries to send what it wants sent (handshake messages, alerts). Bytes rustls could not
//! send yet because the socket was full stay queued in it; [`Transport::wants_write`]
//! tells the server to wait for the socket to become writable, and [`Transport::flush`]
//! sends them. A TLS error closes the connection.

use std::io::{self, ErrorKind, Read, Write};
use std::net::Shutdown;

use mio::net::TcpStream;
use rustls::ServerConnection;

/// A connection's stream.
pub enum Transport {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS.
    Tls(Box<ServerConnection>, TcpStream),
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, e)
}

/// Sends what `c` has queued until done or the socket is full (`WouldBlock`).
fn flush(c: &mut ServerConnection, s: &mut TcpStream) -> io::Result<()> {
    while c.wants_write() {
        match c.write_tls(s) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`flush`], a full socket being no error (the server waits for it to drain).
fn flush_some(c: &mut ServerConnection, s: &mut TcpStream) -> io::Result<()> {
    match flush(c, s) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
        other => other,
    }
}

impl Transport {
    /// The socket, to register with the poll.
    pub fn socket(&mut self) -> &mut TcpStream {
        match self {
            Transport::Plain(s) | Transport::Tls(_, s) => s,
        }
    }

    /// Whether TLS has bytes queued for the socket.
    pub fn wants_write(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(c, _) => c.wants_write(),
        }
    }

    /// Sends what TLS has queued, as far as the socket takes it: `WouldBlock` when some
    /// is left.
    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(c, s) => flush(c, s),
        }
    }

    /// Reads request bytes: `Ok(0)` at the end of the stream, `WouldBlock` when none
    /// have arrived.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (c, s) = match self {
            Transport::Plain(s) => return s.read(buf),
            Transport::Tls(c, s) => (c, s),
        };
        loop {
            match c.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if c.read_tls(s)? == 0 {
                return Ok(0);
            }
            let processed = c.process_new_packets().map_err(tls_error);
            // Send what the handshake (or an alert about a failure) needs sent.
            flush_some(c, s)?;
            processed?;
        }
    }

    /// Writes response bytes: how many were taken, or `WouldBlock`.
    pub fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let (c, s) = match self {
            Transport::Plain(s) => return s.write(data),
            Transport::Tls(c, s) => (c, s),
        };
        flush(c, s)?;
        let n = c.writer().write(data)?;
        flush_some(c, s)?;
        if n == 0 && !data.is_empty() {
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Keeps the kernel's send buffer for this socket small (64 KiB, not the megabytes
    /// it grows to on its own), so that what a slow reader leaves unread is bounded by
    /// the server's own queue rather than hidden in the kernel. Best effort.
    pub fn small_send_buffer(&mut self) {
        let _ = nix::sys::socket::setsockopt(
            &*self.socket(),
            nix::sys::socket::sockopt::SndBuf,
            &(64 * 1024),
        );
    }

    /// Ends the sending side once everything is sent: TLS's close_notify, then a TCP
    /// half-close.
    pub fn shutdown(&mut self) {
        if let Transport::Tls(c, _) = self {
            c.send_close_notify();
            let _ = self.flush();
        }
        let _ = self.socket().shutdown(Shutdown::Write);
    }
}
