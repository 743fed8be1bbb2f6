//! Unit tests of the address classification, the address filter and the escape hatch.

use super::*;

fn reason(ip: &str) -> Option<Reason> {
    classify_ip(ip.parse().unwrap()).map(|r| r.reason)
}

#[test]
fn public_addresses_pass() {
    for ip in [
        "93.184.216.34",
        "8.8.8.8",
        "1.1.1.1",
        "172.32.0.1",
        "100.128.0.1",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ] {
        assert_eq!(reason(ip), None, "{ip}");
    }
}

#[test]
fn special_addresses_are_refused_with_their_reason() {
    let table = [
        ("127.0.0.1", Reason::Loopback),
        ("127.255.255.254", Reason::Loopback),
        ("0.0.0.0", Reason::Unspecified),
        ("0.1.2.3", Reason::Reserved),
        ("10.1.2.3", Reason::Private),
        ("172.31.255.255", Reason::Private),
        ("192.168.0.1", Reason::Private),
        ("169.254.1.1", Reason::LinkLocal),
        ("169.254.169.254", Reason::Metadata),
        ("168.63.129.16", Reason::Metadata),
        ("100.64.0.1", Reason::Cgnat),
        ("100.127.255.255", Reason::Cgnat),
        ("255.255.255.255", Reason::Broadcast),
        ("224.0.0.1", Reason::Multicast),
        ("192.0.2.1", Reason::Documentation),
        ("198.51.100.1", Reason::Documentation),
        ("203.0.113.1", Reason::Documentation),
        ("198.18.0.1", Reason::Reserved),
        ("240.0.0.1", Reason::Reserved),
        ("::", Reason::Unspecified),
        ("::1", Reason::Loopback),
        ("fc00::1", Reason::UniqueLocal),
        ("fd12:3456::1", Reason::UniqueLocal),
        ("fd00:ec2::254", Reason::Metadata),
        ("fe80::1", Reason::LinkLocal),
        ("fec0::1", Reason::Private),
        ("ff02::1", Reason::Multicast),
        ("2001:db8::1", Reason::Documentation),
        ("2001::1", Reason::Reserved),
        ("100::1", Reason::Reserved),
        ("::ffff:127.0.0.1", Reason::Loopback),
        ("::ffff:10.0.0.1", Reason::Private),
        ("::ffff:169.254.169.254", Reason::Metadata),
        ("::127.0.0.1", Reason::Loopback),
        ("::8.8.8.8", Reason::Reserved),
        ("64:ff9b::7f00:1", Reason::Loopback),
        ("64:ff9b::a00:1", Reason::Private),
        ("2002:7f00:1::", Reason::Loopback),
        ("2002:c0a8:101::1", Reason::Private),
    ];
    for (ip, want) in table {
        assert_eq!(reason(ip), Some(want), "{ip}");
    }
}

#[test]
fn filtering_keeps_only_allowed_addresses() {
    let addrs: Vec<IpAddr> = vec![
        "10.0.0.1".parse().unwrap(),
        "93.184.216.34".parse().unwrap(),
        "127.0.0.1".parse().unwrap(),
    ];
    let kept = filter_addrs("mixed.test", &addrs).unwrap();
    assert_eq!(kept, vec!["93.184.216.34:0".parse().unwrap()]);
    let err = filter_addrs("bad.test", &addrs[2..]).unwrap_err();
    assert_eq!(err.reason, Reason::Loopback);
    let err = filter_addrs("empty.test", &[]).unwrap_err();
    assert_eq!(err.reason, Reason::Unresolvable);
}

#[test]
fn the_escape_hatch_admits_only_literal_loopback_on_listed_ports() {
    let policy = SsrfPolicy {
        allow_loopback_ports: vec![8080],
        ..SsrfPolicy::default()
    };
    let ok = |u: &str| policy.check_url(&Url::parse(u).unwrap());
    assert!(ok("http://127.0.0.1:8080/x").is_ok());
    assert!(ok("http://[::1]:8080/x").is_ok());
    assert!(ok("http://127.1:8080/x").is_ok());
    assert_eq!(
        ok("http://127.0.0.1:8081/").unwrap_err().reason,
        Reason::Loopback
    );
    assert_eq!(
        ok("http://127.0.0.1/").unwrap_err().reason,
        Reason::Loopback
    );
    assert_eq!(
        ok("http://127.0.0.2:8080/").unwrap_err().reason,
        Reason::Loopback
    );
    assert_eq!(
        ok("http://localhost:8080/").unwrap_err().reason,
        Reason::LocalhostName
    );
    assert_eq!(
        ok("http://10.0.0.1:8080/").unwrap_err().reason,
        Reason::Private
    );
    assert_eq!(
        ok("http://example.com:8080/").unwrap_err().reason,
        Reason::Port
    );
    // Without the hatch, the same URL is refused.
    let strict = SsrfPolicy::default();
    let url = Url::parse("http://127.0.0.1:8080/").unwrap();
    assert_eq!(strict.check_url(&url).unwrap_err().reason, Reason::Loopback);
}
