//! A WebSocket connection's own state for `store: false` chains: each response created on the
//! connection and not stored is kept (its whole history — input and output items — and the
//! tools and instructions it ran with), so a later `response.create` that names it in
//! `previous_response_id` and sends only its new items is expanded to the full history for the
//! provider.
//!
//! *Architecture invariant:* bounded per connection, in responses ([`MAX_RESPONSES`]) and in
//! bytes (the gateway's body limit times [`BYTES_PER_BODY_LIMIT`]); the oldest response goes
//! first, and everything goes with the connection. Nothing here is shared between connections
//! or tenants: a connection belongs to the one key that opened it.
//!
//! A frame continuing a kept response gets its history prepended here ([`continue_chain`]).
//!
//! Not here: `store: true` chains, which go through the store as on HTTP (`history`).

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;
use toolbridge_wire::responses::{CreateResponse, Input, InputItem, Tool};

use crate::http::responses::stored::history::{take_items, user_message};

/// The most responses a connection keeps.
pub(super) const MAX_RESPONSES: usize = 16;

/// A connection keeps at most this many body limits' worth of history: a chain that would need
/// more could not have been sent over HTTP either.
pub(super) const BYTES_PER_BODY_LIMIT: usize = 2;

/// One kept response: what a continuation of it starts from.
#[derive(Clone)]
pub(super) struct Kept {
    /// The chain's items up to and including this response's output, in order.
    pub(super) history: Arc<Vec<InputItem>>,
    pub(super) tools: Option<Vec<Tool>>,
    pub(super) instructions: Option<String>,
    /// The wire bytes this entry stands for (the frames that built its history).
    pub(super) bytes: usize,
}

/// The responses kept on one connection, oldest first.
pub(super) struct Chains {
    kept: VecDeque<(String, Kept)>,
    bytes: usize,
    max_bytes: usize,
}

impl Chains {
    /// An empty state holding at most `max_bytes` of history.
    pub(super) fn new(max_bytes: usize) -> Self {
        Self {
            kept: VecDeque::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// The kept response `id`.
    pub(super) fn get(&self, id: &str) -> Option<&Kept> {
        self.kept.iter().find(|(k, _)| k == id).map(|(_, v)| v)
    }

    /// Keeps `id`, evicting the oldest responses past the bounds. A response too large to keep
    /// at all is not kept (a continuation of it answers `previous_response_not_found`, and the
    /// client resends the whole history).
    pub(super) fn keep(&mut self, id: String, kept: Kept) {
        self.evict(&id);
        if kept.bytes > self.max_bytes {
            return;
        }
        self.bytes += kept.bytes;
        self.kept.push_back((id, kept));
        while self.kept.len() > MAX_RESPONSES || self.bytes > self.max_bytes {
            match self.kept.pop_front() {
                Some((_, old)) => self.bytes -= old.bytes,
                None => break,
            }
        }
    }

    /// Forgets `id` (a continuation of it failed or was cancelled).
    pub(super) fn evict(&mut self, id: &str) {
        if let Some(at) = self.kept.iter().position(|(k, _)| k == id)
            && let Some((_, old)) = self.kept.remove(at)
        {
            self.bytes -= old.bytes;
        }
    }
}

/// Prepends the kept history to the frame's new items, unless a compaction item starts a new
/// chain; tools and instructions the frame leaves out are the chain's.
pub(super) fn continue_chain(req: &mut CreateResponse, kept: &Kept) {
    req.previous_response_id = None;
    let new = take_items(req);
    let compacted = new.iter().any(
        |item| matches!(item, InputItem::Other(map) if map.get("type").and_then(Value::as_str) == Some("compaction")),
    );
    let mut items = if compacted {
        Vec::with_capacity(new.len())
    } else {
        let mut items = Vec::with_capacity(kept.history.len() + new.len());
        items.extend(kept.history.iter().cloned());
        items
    };
    items.extend(new);
    req.input = Some(Input::Items(items));
    if req.tools.is_none() {
        req.tools.clone_from(&kept.tools);
    }
    if req.instructions.is_none() {
        req.instructions.clone_from(&kept.instructions);
    }
}

/// A copy of the request's input as items.
pub(super) fn input_items(req: &CreateResponse) -> Vec<InputItem> {
    match &req.input {
        None => Vec::new(),
        Some(Input::Items(items)) => items.clone(),
        Some(Input::Text(text)) => vec![user_message(text.clone())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(bytes: usize) -> Kept {
        Kept {
            history: Arc::new(Vec::new()),
            tools: None,
            instructions: None,
            bytes,
        }
    }

    #[test]
    fn the_oldest_responses_go_first_past_the_count_and_byte_bounds() {
        let mut chains = Chains::new(100);
        for n in 0..MAX_RESPONSES + 2 {
            chains.keep(format!("resp_{n}"), kept(1));
        }
        assert_eq!(chains.kept.len(), MAX_RESPONSES);
        assert!(chains.get("resp_0").is_none() && chains.get("resp_1").is_none());
        assert!(chains.get("resp_2").is_some());
        chains.keep("big".to_owned(), kept(95));
        assert!(chains.get("big").is_some());
        assert!(chains.bytes <= 100, "{}", chains.bytes);
        chains.keep("huge".to_owned(), kept(101));
        assert!(chains.get("huge").is_none());
        chains.evict("big");
        assert!(chains.get("big").is_none());
        assert_eq!(
            chains.bytes,
            chains.kept.iter().map(|(_, k)| k.bytes).sum::<usize>()
        );
    }
}
