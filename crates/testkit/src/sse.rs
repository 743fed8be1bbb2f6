//! Reading an SSE body in tests.

use serde_json::Value;

/// One event: its `event:` name (if any) and its `data:` JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: Option<String>,
    pub data: Value,
}

/// Parses a whole SSE body. Panics on a `data:` line that is not JSON: our gateway never sends one.
pub fn parse(body: &str) -> Vec<Event> {
    assert!(!body.contains('\r'), "SSE must use LF line endings");
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .filter(|block| !block.starts_with(':'))
        .map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            let data = serde_json::from_str(&data)
                .unwrap_or_else(|e| panic!("data is not JSON ({e}): {data}"));
            Event { name, data }
        })
        .collect()
}

/// The `type` of each event.
pub fn types(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.data["type"].as_str().unwrap_or("").to_owned())
        .collect()
}
