//! The SSRF guard: which URLs and which addresses the web tools may reach.
//!
//! Two checks, both applied to every request and to every redirect hop:
//!
//! - [`SsrfPolicy::check_url`] runs before a request is built: only `http`/`https`, a host, a
//!   permitted port, no credentials, no `localhost` names, and — because reqwest does not call a
//!   resolver for IP literals — the literal address itself goes through [`classify_ip`]. The `url`
//!   crate has already normalised the host, so `2130706433`, `0x7f000001`, `017700000001` and
//!   `127.1` all arrive here as `127.0.0.1`.
//! - [`GuardedResolver`] is the client's `reqwest::dns::Resolve`: it looks a name up, drops every
//!   address [`classify_ip`] refuses, and hands reqwest only the addresses it checked, so the
//!   connection goes to a checked address. There is no second lookup between the check and the
//!   dial, which is what closes DNS rebinding (the flaw of the system this library replaces).
//!
//! **Test escape hatch.** [`SsrfPolicy::allow_loopback_ports`] is empty by default. A port listed
//! there admits a *literal* loopback host (`127.0.0.1` or `[::1]`, however it is spelled) on that
//! port only; names that resolve to loopback, and every other loopback port, stay refused. Tests
//! use it to reach a fake backend on `127.0.0.1:PORT`; an operator may use it for a search backend
//! on the same host. It never widens anything else.
//!
//! This module does not send requests; [`super::client`] does.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use url::{Host, Url};

mod ranges;

pub use ranges::classify_ip;

/// Why a URL or an address was refused. Each reason has a stable snake_case [`Reason::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The URL does not parse.
    InvalidUrl,
    /// A scheme other than `http` or `https`.
    Scheme,
    /// The URL has no host.
    NoHost,
    /// A port that is not allowed.
    Port,
    /// The URL carries a user name or password.
    Credentials,
    /// `localhost` or a `*.localhost` name.
    LocalhostName,
    /// A loopback address (127.0.0.0/8, ::1).
    Loopback,
    /// A private address (10/8, 172.16/12, 192.168/16, fec0::/10).
    Private,
    /// A link-local address (169.254/16, fe80::/10).
    LinkLocal,
    /// Carrier-grade NAT space (100.64/10).
    Cgnat,
    /// An IPv6 unique local address (fc00::/7).
    UniqueLocal,
    /// A cloud metadata endpoint (169.254.169.254, fd00:ec2::254, …).
    Metadata,
    /// An unspecified address (0.0.0.0, ::).
    Unspecified,
    /// The IPv4 broadcast address.
    Broadcast,
    /// A multicast address (224/4, ff00::/8).
    Multicast,
    /// A documentation range (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20).
    Documentation,
    /// Any other special-purpose range (0/8, 240/4, benchmarking, Teredo, non-global IPv6, …).
    Reserved,
    /// The name did not resolve to any address the guard allows.
    Unresolvable,
    /// A redirect chain longer than the policy allows.
    TooManyRedirects,
    /// A redirect without a usable `Location`.
    BadRedirect,
    /// A response whose content type is not on the allow-list.
    ContentType,
}

impl Reason {
    /// The stable code.
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidUrl => "invalid_url",
            Self::Scheme => "scheme",
            Self::NoHost => "no_host",
            Self::Port => "port",
            Self::Credentials => "credentials",
            Self::LocalhostName => "localhost_name",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link_local",
            Self::Cgnat => "cgnat",
            Self::UniqueLocal => "unique_local",
            Self::Metadata => "metadata",
            Self::Unspecified => "unspecified",
            Self::Broadcast => "broadcast",
            Self::Multicast => "multicast",
            Self::Documentation => "documentation",
            Self::Reserved => "reserved",
            Self::Unresolvable => "unresolvable",
            Self::TooManyRedirects => "too_many_redirects",
            Self::BadRedirect => "bad_redirect",
            Self::ContentType => "content_type",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A refusal: the reason and a sentence about the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct Refusal {
    /// Why.
    pub reason: Reason,
    /// What exactly was refused.
    pub detail: String,
}

impl Refusal {
    /// A refusal for `reason`.
    pub fn new(reason: Reason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

/// What the web tools may reach and how much they may take.
#[derive(Debug, Clone, PartialEq)]
pub struct SsrfPolicy {
    /// Ports a URL may name (the scheme's default counts as named). Default: 80 and 443.
    pub allowed_ports: Vec<u16>,
    /// **Test escape hatch, empty by default.** Ports on which a *literal* loopback host
    /// (`127.0.0.1`, `[::1]`) is admitted; see the module documentation.
    pub allow_loopback_ports: Vec<u16>,
    /// The most redirects followed; each hop is checked like the first request. Default: 5.
    pub max_redirects: usize,
    /// The most bytes of a response body read. Default: 2 MiB.
    pub max_response_bytes: usize,
    /// The longest a whole request may take, redirects included (the call's own deadline also
    /// applies). Default: 20 s.
    pub timeout: Duration,
    /// The longest connecting may take. Default: 5 s.
    pub connect_timeout: Duration,
}

impl Default for SsrfPolicy {
    fn default() -> Self {
        Self {
            allowed_ports: vec![80, 443],
            allow_loopback_ports: Vec::new(),
            max_redirects: 5,
            max_response_bytes: 2 * 1024 * 1024,
            timeout: Duration::from_secs(20),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl SsrfPolicy {
    /// Checks a URL before a request to it is built: scheme, host (names and literal
    /// addresses), port and credentials.
    pub fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(Refusal::new(
                Reason::Scheme,
                format!("scheme `{scheme}` is not http or https"),
            ));
        }
        let host = url
            .host()
            .ok_or_else(|| Refusal::new(Reason::NoHost, "the URL has no host"))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| Refusal::new(Reason::Port, "the URL has no port"))?;
        let mut loopback_escape = false;
        match host {
            Host::Domain(name) => check_name(name)?,
            Host::Ipv4(ip) => loopback_escape = self.check_literal(IpAddr::V4(ip), port)?,
            Host::Ipv6(ip) => loopback_escape = self.check_literal(IpAddr::V6(ip), port)?,
        }
        if !loopback_escape && !self.allowed_ports.contains(&port) {
            return Err(Refusal::new(
                Reason::Port,
                format!("port {port} is not allowed"),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::new(
                Reason::Credentials,
                "URLs with a user name or password are not fetched",
            ));
        }
        Ok(())
    }

    /// Checks a literal address; `Ok(true)` when it is admitted through the loopback escape
    /// hatch (which then also stands in for the port check).
    fn check_literal(&self, ip: IpAddr, port: u16) -> Result<bool, Refusal> {
        match classify_ip(ip) {
            None => Ok(false),
            Some(refusal)
                if refusal.reason == Reason::Loopback
                    && is_plain_loopback(ip)
                    && self.allow_loopback_ports.contains(&port) =>
            {
                Ok(true)
            }
            Some(refusal) => Err(refusal),
        }
    }
}

/// `127.0.0.1` or `::1` exactly: the only addresses the escape hatch admits.
fn is_plain_loopback(ip: IpAddr) -> bool {
    ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
}

/// Names refused without a lookup: `localhost` (RFC 6761 reserves the whole `.localhost` tree)
/// and well-known metadata names.
fn check_name(name: &str) -> Result<(), Refusal> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(Refusal::new(
            Reason::LocalhostName,
            format!("`{name}` names this machine"),
        ));
    }
    if name == "metadata.google.internal" || name == "metadata" {
        return Err(Refusal::new(
            Reason::Metadata,
            format!("`{name}` is a cloud metadata endpoint"),
        ));
    }
    Ok(())
}

/// A boxed lookup future.
pub type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

/// Turns a host name into addresses. The default asks the system resolver; tests and
/// embedders may plug in their own (a fake table, hickory-resolver, …).
pub trait Lookup: Send + Sync {
    /// The addresses of `host`.
    fn lookup(&self, host: &str) -> LookupFuture;
}

/// The system resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// The resolver the guarded client connects through: it returns only addresses that
/// [`classify_ip`] allows, and a [`Refusal`] when none is left.
#[derive(Clone)]
pub struct GuardedResolver {
    lookup: Arc<dyn Lookup>,
}

impl fmt::Debug for GuardedResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedResolver").finish_non_exhaustive()
    }
}

impl GuardedResolver {
    /// A resolver over `lookup`.
    pub fn new(lookup: Arc<dyn Lookup>) -> Self {
        Self { lookup }
    }

    /// Looks `host` up and keeps the allowed addresses (port 0: reqwest fills in the URL's).
    pub async fn resolve_checked(&self, host: &str) -> Result<Vec<SocketAddr>, Refusal> {
        check_name(host)?;
        let addrs = self.lookup.lookup(host).await.map_err(|e| {
            Refusal::new(
                Reason::Unresolvable,
                format!("`{host}` did not resolve: {e}"),
            )
        })?;
        filter_addrs(host, &addrs)
    }
}

/// Keeps the allowed addresses; refuses when none is left, naming the first refusal.
pub fn filter_addrs(host: &str, addrs: &[IpAddr]) -> Result<Vec<SocketAddr>, Refusal> {
    let mut first_refusal = None;
    let mut allowed = Vec::new();
    for ip in addrs {
        match classify_ip(*ip) {
            None => allowed.push(SocketAddr::new(*ip, 0)),
            Some(refusal) => {
                first_refusal.get_or_insert(refusal);
            }
        }
    }
    if !allowed.is_empty() {
        return Ok(allowed);
    }
    Err(match first_refusal {
        Some(r) => Refusal::new(r.reason, format!("`{host}` resolves to {}", r.detail)),
        None => Refusal::new(Reason::Unresolvable, format!("`{host}` has no addresses")),
    })
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = this.resolve_checked(&host).await?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests;
