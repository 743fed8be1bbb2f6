//! A session's cache affinity: which of a provider's keys (accounts) its requests use.
//!
//! A provider's prompt cache is per account (and, behind pooled relays, per `metadata.user_id`),
//! so a session that moves between keys starts a cold cache. The key is chosen from the
//! session's own key — the client's `prompt_cache_key` (Codex sends its thread id), else its
//! conversation or `previous_response_id` chain (`prepare::chain_root`), else Codex's
//! `session-id` header — by a hash, not by process memory: every
//! gateway process sends a session's requests, and every round of one response, with the same
//! key. A request with no session spreads by its response id instead.

use sha2::{Digest, Sha256};

/// A session's affinity: a stable hash of its key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Affinity(u64);

impl Affinity {
    /// The affinity of the session named `key`.
    pub(crate) fn of(key: &str) -> Self {
        let digest = Sha256::digest(key.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        Self(u64::from_le_bytes(first))
    }

    /// The affinity of a request that names no session: spread over the keys by a counter of
    /// this process (each of its rounds keeps the one chosen).
    pub(crate) fn spread() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self(NEXT.fetch_add(0x9E37_79B9_7F4A_7C15, std::sync::atomic::Ordering::Relaxed))
    }

    /// How much this session prefers the key at `index` (rendezvous hashing: the highest rank
    /// wins, so removing a key moves only the sessions that had it).
    pub(crate) fn rank(self, index: usize) -> u64 {
        // SplitMix64's finaliser over the pair: cheap, and well spread for neighbouring indices.
        let mut z = self.0
            ^ (index as u64)
                .wrapping_add(1)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The session key of a request: its `prompt_cache_key`, else its conversation, else the
/// client's session header; `None` when it names none.
pub(crate) fn session_key<'a>(
    prompt_cache_key: Option<&'a str>,
    conversation: Option<&'a str>,
    session_header: Option<&'a str>,
) -> Option<&'a str> {
    prompt_cache_key
        .or(conversation)
        .or(session_header)
        .filter(|k| !k.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_keeps_its_key_and_sessions_spread_over_the_keys() {
        let pick = |a: Affinity, keys: usize| (0..keys).max_by_key(|i| a.rank(*i)).unwrap();
        let a = Affinity::of("thread-1");
        assert_eq!(a, Affinity::of("thread-1"));
        assert_eq!(pick(a, 3), pick(Affinity::of("thread-1"), 3));
        let mut counts = [0usize; 3];
        for n in 0..300 {
            counts[pick(Affinity::of(&format!("thread-{n}")), 3)] += 1;
        }
        assert!(counts.iter().all(|c| *c > 60), "{counts:?}");
        // Removing the last key moves only the sessions that had it.
        for n in 0..300 {
            let a = Affinity::of(&format!("thread-{n}"));
            let before = pick(a, 3);
            if before < 2 {
                assert_eq!(pick(a, 2), before);
            }
        }
    }

    #[test]
    fn the_session_key_is_the_cache_key_then_the_conversation_then_the_header() {
        assert_eq!(session_key(Some("k"), Some("c"), Some("s")), Some("k"));
        assert_eq!(session_key(None, Some("c"), Some("s")), Some("c"));
        assert_eq!(session_key(None, None, Some("s")), Some("s"));
        assert_eq!(session_key(Some(""), None, None), None);
    }
}
