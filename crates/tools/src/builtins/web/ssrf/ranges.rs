//! The address classification of the SSRF guard: the IPv4 and IPv6 ranges that are refused
//! (loopback, private, link-local, metadata endpoints, …) and the IPv6 forms that embed an IPv4
//! address (mapped, NAT64, 6to4), each checked as the address they carry. It looks nothing up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use super::{Reason, Refusal};

const METADATA_V4: &[Ipv4Addr] = &[
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure IMDS, OpenStack, …
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(168, 63, 129, 16),   // Azure wire server (a public address)
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
];
const METADATA_V6: &[Ipv6Addr] = &[Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)];

/// A const IPv4 network; a prefix longer than 32 fails to compile.
const fn v4(octets: [u8; 4], prefix: u8) -> Ipv4Net {
    let [a, b, c, d] = octets;
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), prefix)
}

/// A const IPv6 network; a prefix longer than 128 fails to compile.
const fn v6(s: [u16; 8], prefix: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        prefix,
    )
}

const V4_RANGES: &[(Ipv4Net, Reason, &str)] = &[
    (
        v4([0, 0, 0, 0], 8),
        Reason::Reserved,
        "0.0.0.0/8 (this network)",
    ),
    (v4([127, 0, 0, 0], 8), Reason::Loopback, "127.0.0.0/8"),
    (v4([10, 0, 0, 0], 8), Reason::Private, "10.0.0.0/8"),
    (v4([172, 16, 0, 0], 12), Reason::Private, "172.16.0.0/12"),
    (v4([192, 168, 0, 0], 16), Reason::Private, "192.168.0.0/16"),
    (
        v4([169, 254, 0, 0], 16),
        Reason::LinkLocal,
        "169.254.0.0/16",
    ),
    (v4([100, 64, 0, 0], 10), Reason::Cgnat, "100.64.0.0/10"),
    (
        v4([192, 0, 0, 0], 24),
        Reason::Reserved,
        "192.0.0.0/24 (IETF protocol assignments)",
    ),
    (
        v4([192, 0, 2, 0], 24),
        Reason::Documentation,
        "192.0.2.0/24 (TEST-NET-1)",
    ),
    (
        v4([198, 51, 100, 0], 24),
        Reason::Documentation,
        "198.51.100.0/24 (TEST-NET-2)",
    ),
    (
        v4([203, 0, 113, 0], 24),
        Reason::Documentation,
        "203.0.113.0/24 (TEST-NET-3)",
    ),
    (
        v4([192, 88, 99, 0], 24),
        Reason::Reserved,
        "192.88.99.0/24 (6to4 relay anycast)",
    ),
    (
        v4([198, 18, 0, 0], 15),
        Reason::Reserved,
        "198.18.0.0/15 (benchmarking)",
    ),
    (v4([224, 0, 0, 0], 4), Reason::Multicast, "224.0.0.0/4"),
    (v4([240, 0, 0, 0], 4), Reason::Reserved, "240.0.0.0/4"),
];

const V6_RANGES: &[(Ipv6Net, Reason, &str)] = &[
    (
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        Reason::UniqueLocal,
        "fc00::/7",
    ),
    (
        v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        Reason::LinkLocal,
        "fe80::/10",
    ),
    (
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        Reason::Private,
        "fec0::/10 (site-local)",
    ),
    (
        v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),
        Reason::Multicast,
        "ff00::/8",
    ),
    (
        v6([0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32),
        Reason::Documentation,
        "2001:db8::/32",
    ),
    (
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        Reason::Documentation,
        "3fff::/20",
    ),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32),
        Reason::Reserved,
        "2001::/32 (Teredo)",
    ),
    (
        v6([0x2001, 0x0002, 0, 0, 0, 0, 0, 0], 48),
        Reason::Reserved,
        "2001:2::/48 (benchmarking)",
    ),
    (
        v6([0x2001, 0x0010, 0, 0, 0, 0, 0, 0], 28),
        Reason::Reserved,
        "2001:10::/28 (ORCHID)",
    ),
    (
        v6([0x0064, 0xff9b, 0x0001, 0, 0, 0, 0, 0], 48),
        Reason::Reserved,
        "64:ff9b:1::/48 (local-use NAT64)",
    ),
];

/// The global unicast block; everything outside it (other than the embeddings handled
/// explicitly) is refused as reserved.
const V6_GLOBAL: Ipv6Net = Ipv6Net::new_assert(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);
const V6_NAT64: Ipv6Net = Ipv6Net::new_assert(Ipv6Addr::new(0x0064, 0xff9b, 0, 0, 0, 0, 0, 0), 96);
const V6_6TO4: Ipv6Net = Ipv6Net::new_assert(Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16);

/// Why an address must not be connected to, or `None` when it may be.
pub fn classify_ip(ip: IpAddr) -> Option<Refusal> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Refusal> {
    if METADATA_V4.contains(&ip) {
        return Some(Refusal::new(
            Reason::Metadata,
            format!("{ip} is a cloud metadata endpoint"),
        ));
    }
    if ip.is_unspecified() {
        return Some(Refusal::new(
            Reason::Unspecified,
            format!("{ip} is unspecified"),
        ));
    }
    if ip.is_broadcast() {
        return Some(Refusal::new(
            Reason::Broadcast,
            format!("{ip} is the broadcast address"),
        ));
    }
    V4_RANGES
        .iter()
        .find(|(net, _, _)| net.contains(&ip))
        .map(|(_, reason, name)| Refusal::new(*reason, format!("{ip} is in {name}")))
}

fn classify_v6(ip: Ipv6Addr) -> Option<Refusal> {
    if METADATA_V6.contains(&ip) {
        return Some(Refusal::new(
            Reason::Metadata,
            format!("{ip} is a cloud metadata endpoint"),
        ));
    }
    if ip.is_unspecified() {
        return Some(Refusal::new(
            Reason::Unspecified,
            format!("{ip} is unspecified"),
        ));
    }
    if ip.is_loopback() {
        return Some(Refusal::new(Reason::Loopback, format!("{ip} is loopback")));
    }
    // An IPv6 address that carries an IPv4 address reaches that IPv4 address: judge the
    // embedded one. IPv4-compatible addresses are deprecated and refused even when the
    // embedded address is public.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4).map(|r| embedded(ip, "IPv4-mapped", v4, r));
    }
    let octets = ip.octets();
    if octets[..12].iter().all(|b| *b == 0) {
        let v4 = Ipv4Addr::new(octets[12], octets[13], octets[14], octets[15]);
        return Some(match classify_v4(v4) {
            Some(r) => embedded(ip, "IPv4-compatible", v4, r),
            None => Refusal::new(
                Reason::Reserved,
                format!("{ip} is a deprecated IPv4-compatible address"),
            ),
        });
    }
    if V6_NAT64.contains(&ip) {
        let v4 = Ipv4Addr::new(octets[12], octets[13], octets[14], octets[15]);
        return classify_v4(v4).map(|r| embedded(ip, "NAT64", v4, r));
    }
    if V6_6TO4.contains(&ip) {
        let v4 = Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5]);
        return classify_v4(v4).map(|r| embedded(ip, "6to4", v4, r));
    }
    if let Some((_, reason, name)) = V6_RANGES.iter().find(|(net, _, _)| net.contains(&ip)) {
        return Some(Refusal::new(*reason, format!("{ip} is in {name}")));
    }
    if !V6_GLOBAL.contains(&ip) {
        return Some(Refusal::new(
            Reason::Reserved,
            format!("{ip} is outside the global unicast block 2000::/3"),
        ));
    }
    None
}

fn embedded(ip: Ipv6Addr, kind: &str, v4: Ipv4Addr, inner: Refusal) -> Refusal {
    Refusal::new(
        inner.reason,
        format!("{ip} is {kind} and embeds {v4}: {}", inner.detail),
    )
}
