//! An HTTP `CONNECT` proxy asked for the API server's address, for a cluster with a
//! `tls-server-name`.
//!
//! The URLs of such a cluster name the `tls-server-name` (the certificate is checked
//! against it and it is the SNI), which only the agent's resolver knows how to reach
//! ([`super::api`]'s `ServerName`). A proxy must then be asked for the address that
//! resolver gives. ureq 3.5's own `ConnectProxyConnector` writes that address as
//! `CONNECT ADDR:PORT:PORT` (a socket address with the port again), which no proxy
//! takes; [`Tunnel`] takes its place in the agent's chain and writes `CONNECT ADDR:PORT`
//! (`[ADDR]:PORT` for IPv6), trying each address the resolver gave in turn, where ureq
//! tries only the first. The leg to the proxy is made by the agent's own chain (TCP,
//! then TLS for an `https://` proxy), and the tunnel says it is not TLS, so that the
//! chain's TLS connector then speaks TLS to the server through it.

use std::fmt;
use std::io::Write;
use std::net::SocketAddr;

use base64::Engine;
use ureq::config::{AutoHeaderValue, Config};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, NextTimeout, RustlsConnector, SocksConnector,
    TcpConnector, Transport, TransportAdapter,
};
use ureq::ProxyProtocol;

/// Longest proxy answer head read.
const MAX_HEAD: usize = 16 * 1024;

/// The connector chain of an agent with a `tls-server-name`: ureq's default (SOCKS,
/// TCP, rustls) with [`Tunnel`] for its `CONNECT` step. `direct` is the agent's
/// configuration without its proxy, for the leg to the proxy.
pub fn chain(direct: Config) -> impl Connector {
    ().chain(SocksConnector::default())
        .chain(Tunnel { direct })
        .chain(TcpConnector::default())
        .chain(RustlsConnector::default())
}

/// The `CONNECT` step (see the module's documentation).
pub struct Tunnel {
    direct: Config,
}

impl fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tunnel").finish_non_exhaustive()
    }
}

impl<In: Transport> Connector<In> for Tunnel {
    type Out = Either<In, Box<dyn Transport>>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if let Some(transport) = chained {
            return Ok(Some(Either::A(transport)));
        }
        let Some(proxy) = details.config.proxy().filter(|p| {
            matches!(p.protocol(), ProxyProtocol::Http | ProxyProtocol::Https)
                && !p.is_no_proxy(details.uri)
        }) else {
            return Ok(None);
        };
        let addrs = details
            .resolver
            .resolve(proxy.uri(), &self.direct, details.timeout)?;
        let leg = ConnectionDetails {
            uri: proxy.uri(),
            addrs,
            config: &self.direct,
            request_level: details.request_level,
            resolver: details.resolver,
            now: details.now,
            timeout: details.timeout,
            current_time: details.current_time.clone(),
            run_connector: details.run_connector.clone(),
            register_shutdown: details.register_shutdown.clone(),
        };
        let authorization = (proxy.username().is_some() || proxy.password().is_some()).then(|| {
            let pair = format!(
                "{}:{}",
                proxy.username().unwrap_or_default(),
                proxy.password().unwrap_or_default()
            );
            base64::engine::general_purpose::STANDARD.encode(pair)
        });
        let mut failed = None;
        for target in details.addrs.iter() {
            let transport = (details.run_connector)(&leg)?;
            match open(transport, target, authorization.as_deref(), details) {
                Ok(tunnel) => return Ok(Some(Either::B(Box::new(Tunneled(tunnel))))),
                Err(e) => failed = Some(e),
            }
        }
        Err(failed.unwrap_or_else(|| {
            ureq::Error::ConnectProxyFailed("no address of the server to ask for".into())
        }))
    }
}

/// Asks the proxy at the end of `transport` for `target`: the transport, past the
/// proxy's answer, once it has said 200.
fn open(
    transport: Box<dyn Transport>,
    target: &SocketAddr,
    authorization: Option<&str>,
    details: &ConnectionDetails,
) -> Result<Box<dyn Transport>, ureq::Error> {
    let mut w = TransportAdapter::new(transport, details.current_time.clone());
    w.set_timeout(details.timeout);
    // A socket address is `ADDR:PORT`, `[ADDR]:PORT` for IPv6: the authority form.
    write!(w, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n")?;
    if let AutoHeaderValue::Provided(agent) = details.config.user_agent() {
        write!(w, "User-Agent: {agent}\r\n")?;
    }
    if let Some(credentials) = authorization {
        write!(w, "Proxy-Authorization: Basic {credentials}\r\n")?;
    }
    write!(w, "\r\n")?;
    w.flush()?;
    let mut transport = w.into_inner();
    let head = loop {
        let input = transport.buffers().input();
        if let Some(end) = input.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if input.len() > MAX_HEAD {
            return Err(refused("an answer head too long"));
        }
        if !transport.await_input(details.timeout)? {
            return Err(refused("no answer"));
        }
    };
    let status = status_of(&transport.buffers().input()[..head]);
    transport.buffers().input_consume(head);
    match status {
        Some(200) => Ok(transport),
        Some(code) => Err(refused(&format!("{code} for {target}"))),
        None => Err(refused("an answer that is not HTTP")),
    }
}

/// The status code of an HTTP/1 answer head.
fn status_of(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\n').next()?;
    let mut words = std::str::from_utf8(line).ok()?.split_whitespace();
    words.next()?.starts_with("HTTP/1.").then_some(())?;
    words.next()?.parse().ok()
}

fn refused(what: &str) -> ureq::Error {
    ureq::Error::ConnectProxyFailed(format!("the proxy answered {what}"))
}

/// The tunnel: the transport to the proxy, which is the server's from here on and not
/// yet TLS to it (even when the leg to an `https://` proxy is).
#[derive(Debug)]
struct Tunneled(Box<dyn Transport>);

impl Transport for Tunneled {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.0.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.0.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.0.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.0.is_open()
    }

    fn is_tls(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxys_status_is_read_from_its_first_line() {
        assert_eq!(
            status_of(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Some(200)
        );
        assert_eq!(
            status_of(b"HTTP/1.0 407 Proxy Auth\r\nX: y\r\n\r\n"),
            Some(407)
        );
        assert_eq!(status_of(b"SSH-2.0-OpenSSH\r\n\r\n"), None);
        assert_eq!(status_of(b"HTTP/1.1 abc\r\n\r\n"), None);
    }
}
