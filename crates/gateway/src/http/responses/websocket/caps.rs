//! Fair shares of the WebSocket mode: how many sockets may be open (in all, per key, per
//! tenant) and how many responses one key, and one tenant, may have in flight across their
//! sockets.
//!
//! An upgraded socket gives its HTTP connection slot back (`upgrade`): sockets are counted
//! here, under caps of their own, so no number of idle sockets can keep `/healthz`, the metrics
//! or another key's HTTP request waiting for a slot. A socket over a cap is refused at the
//! upgrade with a 429 before the `101`, so its client (Codex) falls back to HTTP; a
//! `response.create` over the key's in-flight cap gets an `error` event and the socket stays
//! usable.
//!
//! Counts are this process's (a balancer in front spreads sockets; each process holds its
//! own). Requests without a gateway key share one key's caps. *Bounded*: an entry exists only
//! while its count is above zero, and counts are bounded by the total cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::GatewayError;
use crate::platform::serve::limits::ServerLimits;

/// Seconds a refused client is told to wait.
const RETRY_AFTER_SECS: u64 = 5;

#[derive(Default)]
struct Counts {
    sockets: usize,
    by_key: HashMap<String, usize>,
    by_tenant: HashMap<String, usize>,
    responses_by_key: HashMap<String, usize>,
    responses_by_tenant: HashMap<String, usize>,
}

/// The process's WebSocket counts.
#[derive(Default)]
pub(crate) struct SocketCaps {
    counts: Mutex<Counts>,
}

/// One open socket's place under the caps, given back when dropped.
pub(crate) struct SocketPass {
    caps: Arc<SocketCaps>,
    key: String,
    tenant: String,
}

/// One response in flight on a key's sockets, given back when dropped.
pub(crate) struct ResponsePass {
    caps: Arc<SocketCaps>,
    key: String,
    tenant: String,
}

impl SocketCaps {
    /// A place for one more socket of `key` (of `tenant`), or the 429 that refuses it.
    pub(crate) fn open(
        self: &Arc<Self>,
        limits: &ServerLimits,
        key: &str,
        tenant: &str,
    ) -> Result<SocketPass, GatewayError> {
        let mut counts = self.counts();
        let of_key = counts.by_key.get(key).copied().unwrap_or(0);
        let of_tenant = counts.by_tenant.get(tenant).copied().unwrap_or(0);
        let refusal = if counts.sockets >= limits.max_websockets {
            Some(format!(
                "this gateway has {} WebSockets open, its limit (server.max_websockets); use HTTP or try again later",
                counts.sockets
            ))
        } else if of_key >= limits.max_websockets_per_key {
            Some(format!(
                "this key has {of_key} WebSockets open, its limit (server.max_websockets_per_key); close one or use HTTP"
            ))
        } else if of_tenant >= limits.max_websockets_per_tenant {
            Some(format!(
                "this tenant has {of_tenant} WebSockets open, its limit (server.max_websockets_per_tenant); close one or use HTTP"
            ))
        } else {
            None
        };
        if let Some(message) = refusal {
            return Err(GatewayError::RateLimited {
                message,
                retry_after_secs: RETRY_AFTER_SECS,
            });
        }
        counts.sockets += 1;
        *counts.by_key.entry(key.to_owned()).or_default() += 1;
        *counts.by_tenant.entry(tenant.to_owned()).or_default() += 1;
        Ok(SocketPass {
            caps: Arc::clone(self),
            key: key.to_owned(),
            tenant: tenant.to_owned(),
        })
    }

    /// A place for one more response of `key` (of `tenant`) in flight on their sockets, or
    /// the refusal's message naming the cap reached.
    pub(crate) fn start_response(
        self: &Arc<Self>,
        limits: &ServerLimits,
        key: &str,
        tenant: &str,
    ) -> Result<ResponsePass, String> {
        let mut counts = self.counts();
        let of_key = counts.responses_by_key.get(key).copied().unwrap_or(0);
        let of_tenant = counts.responses_by_tenant.get(tenant).copied().unwrap_or(0);
        if of_key >= limits.max_websocket_responses_per_key {
            return Err(format!(
                "this key has {of_key} responses in flight on its WebSockets, its limit (server.max_websocket_responses_per_key); send this one when one ends"
            ));
        }
        if of_tenant >= limits.max_websocket_responses_per_tenant {
            return Err(format!(
                "this tenant has {of_tenant} responses in flight on its WebSockets, its limit (server.max_websocket_responses_per_tenant); send this one when one ends"
            ));
        }
        *counts.responses_by_key.entry(key.to_owned()).or_default() += 1;
        *counts
            .responses_by_tenant
            .entry(tenant.to_owned())
            .or_default() += 1;
        Ok(ResponsePass {
            caps: Arc::clone(self),
            key: key.to_owned(),
            tenant: tenant.to_owned(),
        })
    }

    /// The counts (a panic while they were held leaves them consistent: every change is one
    /// statement).
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sockets open now.
    #[cfg(test)]
    fn sockets(&self) -> usize {
        self.counts().sockets
    }
}

/// Takes one off `map[name]`, removing the entry at zero.
fn release(map: &mut HashMap<String, usize>, name: &str) {
    if let Some(count) = map.get_mut(name) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            map.remove(name);
        }
    }
}

impl Drop for SocketPass {
    fn drop(&mut self) {
        let mut counts = self.caps.counts();
        counts.sockets = counts.sockets.saturating_sub(1);
        release(&mut counts.by_key, &self.key);
        release(&mut counts.by_tenant, &self.tenant);
    }
}

impl Drop for ResponsePass {
    fn drop(&mut self) {
        let mut counts = self.caps.counts();
        release(&mut counts.responses_by_key, &self.key);
        release(&mut counts.responses_by_tenant, &self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ServerLimits {
        ServerLimits {
            max_websockets: 5,
            max_websockets_per_key: 2,
            max_websockets_per_tenant: 3,
            ..ServerLimits::default()
        }
    }

    #[test]
    fn sockets_are_capped_per_key_per_tenant_and_in_all() {
        let caps = Arc::new(SocketCaps::default());
        let limits = limits();
        let a1 = caps.open(&limits, "a", "t").unwrap();
        let _a2 = caps.open(&limits, "a", "t").unwrap();
        let refused = caps.open(&limits, "a", "t").err().unwrap();
        assert_eq!(refused.code(), "rate_limit_exceeded");
        assert!(
            refused.to_string().contains("max_websockets_per_key"),
            "{refused}"
        );
        let _b1 = caps.open(&limits, "b", "t").unwrap();
        let refused = caps.open(&limits, "b", "t").err().unwrap();
        assert!(
            refused.to_string().contains("max_websockets_per_tenant"),
            "{refused}"
        );
        let _c1 = caps.open(&limits, "c", "u").unwrap();
        let _c2 = caps.open(&limits, "c", "u").unwrap();
        let refused = caps.open(&limits, "d", "v").err().unwrap();
        assert!(
            refused.to_string().contains("(server.max_websockets)"),
            "{refused}"
        );
        drop(a1);
        assert_eq!(caps.sockets(), 4);
        assert!(caps.open(&limits, "a", "t").is_ok());
    }

    #[test]
    fn responses_in_flight_are_capped_per_key_per_tenant_and_given_back() {
        let caps = Arc::new(SocketCaps::default());
        let limits = ServerLimits {
            max_websocket_responses_per_key: 2,
            max_websocket_responses_per_tenant: 3,
            ..ServerLimits::default()
        };
        let first = caps.start_response(&limits, "a", "t").unwrap();
        let _second = caps.start_response(&limits, "a", "t").unwrap();
        let refused = caps.start_response(&limits, "a", "t").err().unwrap();
        assert!(refused.contains("per_key"), "{refused}");
        let _third = caps.start_response(&limits, "b", "t").unwrap();
        let refused = caps.start_response(&limits, "b", "t").err().unwrap();
        assert!(refused.contains("per_tenant"), "{refused}");
        assert!(caps.start_response(&limits, "c", "u").is_ok());
        drop(first);
        assert!(caps.start_response(&limits, "a", "t").is_ok());
        assert!(caps.counts().responses_by_key.len() <= 3);
    }
}
