//! Where the two listeners bind. By default a port on every address family the host has
//! (`[::]` with IPV6_V6ONLY off, which takes IPv4 too, or `0.0.0.0` on a host without IPv6), so
//! that single-stack IPv6, single-stack IPv4 and dual-stack clusters all reach the pod; an
//! address given explicitly is bound exactly as given. Never falls back silently on any other
//! error: a port in use or a forbidden port stops the server with the address in the message.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

/// A listener's address as configured: `:PORT` for the port on every address family (what Go's
/// `net.Listen("tcp", ":8443")` does), or `HOST:PORT` for exactly that address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenAddr {
    AllFamilies { port: u16 },
    Exact(SocketAddr),
}

impl FromStr for ListenAddr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(port) = text.strip_prefix(':') {
            return port
                .parse()
                .map(|port| ListenAddr::AllFamilies { port })
                .map_err(|_| format!("{port:?} is not a port number"));
        }
        text.parse().map(ListenAddr::Exact).map_err(|_| {
            format!(
                "{text:?} is neither HOST:PORT (0.0.0.0:8443, [::1]:8443) nor :PORT (every address family)"
            )
        })
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::AllFamilies { port } => write!(f, ":{port}"),
            ListenAddr::Exact(addr) => addr.fmt(f),
        }
    }
}

/// How many connections the kernel queues before they are accepted. Connections wait there
/// when every connection slot is taken (see `https.rs`), so it is larger than std's 128.
const BACKLOG: i32 = 1024;

/// Binds the listener. Must be called inside the tokio runtime.
pub(crate) fn bind(addr: ListenAddr) -> io::Result<TcpListener> {
    match addr {
        ListenAddr::Exact(addr) => listen(addr, None),
        ListenAddr::AllFamilies { port } => {
            match listen(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)), Some(false)) {
                Err(error) if means_no_ipv6(&error) => {
                    tracing::info!(%error, port, "no IPv6 on this host: listening on IPv4 only");
                    listen(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)), None)
                }
                bound => bound,
            }
        }
    }
}

/// Why a listener could not be opened; `flag` names it (`--listen`, `--metrics-listen`).
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {addr} ({flag})")]
    Bind {
        addr: ListenAddr,
        flag: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the address {flag} is bound to")]
    BoundAddress {
        flag: &'static str,
        #[source]
        source: io::Error,
    },
}

/// Binds the listener that `flag` configures, and reads the address it got (the port, for 0).
pub(crate) fn bind_flag(
    addr: ListenAddr,
    flag: &'static str,
) -> Result<(TcpListener, SocketAddr), ListenError> {
    let listener = bind(addr).map_err(|source| ListenError::Bind { addr, flag, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ListenError::BoundAddress { flag, source })?;
    Ok((listener, bound))
}

fn listen(addr: SocketAddr, only_v6: Option<bool>) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(only_v6) = only_v6 {
        socket.set_only_v6(only_v6)?;
    }
    // As std and tokio do on Unix: a restarted server can bind while old connections linger
    // in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// The errors a host without IPv6 gives for an IPv6 socket: the kernel has no IPv6 at all
/// (`ipv6.disable=1`: EAFNOSUPPORT), or no IPv6 address to bind (EADDRNOTAVAIL).
fn means_no_ipv6(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::AddrNotAvailable
        || matches!(
            error.raw_os_error(),
            Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT | libc::EADDRNOTAVAIL)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_written() {
        let cases = [
            (":8443", Ok(ListenAddr::AllFamilies { port: 8443 })),
            (":0", Ok(ListenAddr::AllFamilies { port: 0 })),
            (
                "0.0.0.0:8443",
                Ok(ListenAddr::Exact("0.0.0.0:8443".parse().unwrap())),
            ),
            (
                "[::]:8080",
                Ok(ListenAddr::Exact("[::]:8080".parse().unwrap())),
            ),
            ("[::1]:1", Ok(ListenAddr::Exact("[::1]:1".parse().unwrap()))),
            (":http", Err("\"http\" is not a port number")),
            (":65536", Err("\"65536\" is not a port number")),
            (
                "localhost:8443",
                Err(
                    "\"localhost:8443\" is neither HOST:PORT (0.0.0.0:8443, [::1]:8443) nor :PORT (every address family)",
                ),
            ),
        ];
        for (text, want) in cases {
            let got = text.parse::<ListenAddr>();
            assert_eq!(got, want.map_err(str::to_owned), "{text}");
            if let Ok(addr) = got {
                assert_eq!(addr.to_string(), text);
            }
        }
    }

    #[test]
    fn only_missing_ipv6_falls_back_to_ipv4() {
        for (errno, falls_back) in [
            (libc::EAFNOSUPPORT, true),
            (libc::EPROTONOSUPPORT, true),
            (libc::EADDRNOTAVAIL, true),
            (libc::EADDRINUSE, false),
            (libc::EACCES, false),
            (libc::EMFILE, false),
        ] {
            let error = io::Error::from_raw_os_error(errno);
            assert_eq!(means_no_ipv6(&error), falls_back, "{error}");
        }
    }
}
