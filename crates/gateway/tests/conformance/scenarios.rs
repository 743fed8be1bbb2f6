//! The conformance matrix's scenarios, as data: the request, what the upstream answers (in
//! neutral terms, rendered per dialect by `toolbridge_testkit::dialects`), and what the client
//! must see.

use serde_json::{Value, json};
use toolbridge_testkit::dialects::{End, HttpFailure, Usage};

use super::targets::MAX_RETRIES;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Stream,
    Whole,
}

pub const BOTH: &[Mode] = &[Mode::Stream, Mode::Whole];

/// A call the model makes, by the tool the client declared.
pub struct CallSpec {
    pub namespace: Option<&'static str>,
    pub name: &'static str,
    /// A custom (freeform) tool: its one `input` string is the raw text.
    pub custom: bool,
    pub arguments: fn() -> Value,
}

/// What the upstream answers.
pub enum Upstream {
    Answer {
        reasoning: &'static [&'static str],
        text: &'static [&'static str],
        calls: &'static [CallSpec],
        end: End,
        usage: Usage,
    },
    Http(HttpFailure),
    RateLimitMidStream,
    /// A `200` stream whose first event is an error.
    RateLimitFirst,
    /// This answer, streamed with one more event whose bytes are not valid UTF-8.
    InvalidUtf8Chunk(&'static Upstream),
}

impl Upstream {
    /// The answer without its corruption, and whether it has one.
    pub fn plain(&self) -> (&Upstream, bool) {
        match self {
            Self::InvalidUtf8Chunk(inner) => (inner, true),
            other => (other, false),
        }
    }
}

/// What the client must see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Incomplete,
    /// A cut answer: `incomplete` with `upstream_truncated`, its text kept.
    Truncated,
    /// A response that fails with this code (`response.failed` when streamed).
    Failed(&'static str),
    /// An HTTP error before any answer: status, code, `Retry-After`, upstream attempts.
    Http {
        status: u16,
        code: &'static str,
        retry_after: Option<&'static str>,
        attempts: usize,
    },
}

/// A gateway bug the matrix found and cannot fix here (it lives in `crates/gateway/src`): the
/// pair is still checked against the intended outcome, shows `BUG` while that fails and the
/// observed outcome holds, and fails the test once the intended outcome holds (drop the marker).
pub struct KnownBug {
    pub what: &'static str,
    pub observed: Outcome,
}

pub struct Scenario {
    pub name: &'static str,
    pub modes: &'static [Mode],
    /// Fields added to `{model, input, stream}`.
    pub request: fn() -> Value,
    pub upstream: Upstream,
    pub outcome: Outcome,
    pub known_bug: Option<KnownBug>,
}

pub const USAGE: Usage = Usage {
    input: 20,
    cached: 0,
    output: 8,
    reasoning: 0,
};

pub const PATCH: &str = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";

pub fn weather_args() -> Value {
    json!({"city": "Paris"})
}
pub fn time_args() -> Value {
    json!({"zone": "Asia/Tokyo"})
}
pub fn patch_args() -> Value {
    json!({"input": PATCH})
}
pub fn lookup_args() -> Value {
    json!({"id": "42"})
}

pub const WEATHER: CallSpec = CallSpec {
    namespace: None,
    name: "get_weather",
    custom: false,
    arguments: weather_args,
};
pub const TIME: CallSpec = CallSpec {
    namespace: None,
    name: "get_time",
    custom: false,
    arguments: time_args,
};

pub fn function(name: &str, param: &str) -> Value {
    json!({
        "type": "function",
        "name": name,
        "description": format!("{name} tool"),
        "parameters": {"type": "object", "properties": {param: {"type": "string"}}, "required": [param]},
        "strict": true,
    })
}

pub fn two_tools() -> Value {
    json!([
        function("get_weather", "city"),
        function("get_time", "zone")
    ])
}

pub fn with_tools(choice: Option<Value>) -> Value {
    let mut v = json!({"tools": two_tools()});
    if let Some(c) = choice {
        v["tool_choice"] = c;
    }
    v
}

pub const fn answer(
    text: &'static [&'static str],
    calls: &'static [CallSpec],
    end: End,
) -> Upstream {
    Upstream::Answer {
        reasoning: &[],
        text,
        calls,
        end,
        usage: USAGE,
    }
}

const TEXT: Upstream = answer(&["Hello", " there."], &[], End::Stop);

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "text",
        modes: BOTH,
        request: || json!({"instructions": "Be brief."}),
        upstream: answer(&["Hello", " there."], &[], End::Stop),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "tool_call",
        modes: BOTH,
        request: || json!({"tools": [function("get_weather", "city")]}),
        upstream: answer(&[], &[WEATHER], End::ToolCalls),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "parallel_calls",
        modes: BOTH,
        request: || with_tools(None),
        upstream: answer(&[], &[WEATHER, TIME], End::ToolCalls),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "choice_none",
        modes: BOTH,
        request: || with_tools(Some(json!("none"))),
        upstream: answer(&["No tools needed."], &[], End::Stop),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "choice_auto",
        modes: BOTH,
        request: || with_tools(Some(json!("auto"))),
        upstream: answer(&["Looking."], &[WEATHER], End::ToolCalls),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "choice_required",
        modes: BOTH,
        request: || with_tools(Some(json!("required"))),
        upstream: answer(&[], &[WEATHER], End::ToolCalls),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "choice_named",
        modes: BOTH,
        request: || with_tools(Some(json!({"type": "function", "name": "get_time"}))),
        upstream: answer(&[], &[TIME], End::ToolCalls),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "choice_allowed_tools",
        modes: BOTH,
        request: || {
            with_tools(Some(json!({"type": "allowed_tools", "mode": "auto",
                "tools": [{"type": "function", "name": "get_weather"}]})))
        },
        upstream: answer(&[], &[WEATHER], End::ToolCalls),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "custom_tool",
        modes: BOTH,
        request: || {
            json!({"tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files.",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}}]})
        },
        upstream: answer(
            &[],
            &[CallSpec {
                namespace: None,
                name: "apply_patch",
                custom: true,
                arguments: patch_args,
            }],
            End::ToolCalls,
        ),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "namespaced_tool",
        modes: BOTH,
        request: || {
            json!({"tools": [{"type": "namespace", "name": "crm", "description": "CRM tools",
                "tools": [function("lookup", "id")]}]})
        },
        upstream: answer(
            &[],
            &[CallSpec {
                namespace: Some("crm"),
                name: "lookup",
                custom: false,
                arguments: lookup_args,
            }],
            End::ToolCalls,
        ),
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "reasoning",
        modes: BOTH,
        request: || json!({"reasoning": {"effort": "medium"}}),
        upstream: Upstream::Answer {
            reasoning: &["Paris is", " in France."],
            text: &["France."],
            calls: &[],
            end: End::Stop,
            usage: USAGE,
        },
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "reasoning_then_call",
        modes: BOTH,
        request: || json!({"reasoning": {"effort": "medium"}, "tools": [function("get_weather", "city")]}),
        upstream: Upstream::Answer {
            reasoning: &["I should look it up."],
            text: &[],
            calls: &[WEATHER],
            end: End::ToolCalls,
            usage: USAGE,
        },
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "usage",
        modes: BOTH,
        request: || json!({}),
        upstream: Upstream::Answer {
            reasoning: &[],
            text: &["Counted."],
            calls: &[],
            end: End::Stop,
            usage: Usage {
                input: 100,
                cached: 60,
                output: 40,
                reasoning: 25,
            },
        },
        outcome: Outcome::Completed,
        known_bug: None,
    },
    Scenario {
        name: "error_429",
        modes: BOTH,
        request: || json!({}),
        // Beyond the retry budget: handed back at once, with its delay.
        upstream: Upstream::Http(HttpFailure::RateLimited {
            retry_after_secs: 120,
        }),
        outcome: Outcome::Http {
            status: 429,
            code: "rate_limit_exceeded",
            retry_after: Some("120"),
            attempts: 1,
        },
        known_bug: None,
    },
    Scenario {
        name: "error_429_retried",
        modes: BOTH,
        request: || json!({}),
        // Within the retry budget: retried, then the last answer goes back with its delay.
        upstream: Upstream::Http(HttpFailure::RateLimited {
            retry_after_secs: 0,
        }),
        outcome: Outcome::Http {
            status: 429,
            code: "rate_limit_exceeded",
            retry_after: Some("0"),
            attempts: 1 + MAX_RETRIES,
        },
        known_bug: None,
    },
    Scenario {
        name: "error_500",
        modes: BOTH,
        request: || json!({}),
        upstream: Upstream::Http(HttpFailure::ServerError),
        outcome: Outcome::Http {
            status: 500,
            code: "upstream_server_error",
            retry_after: None,
            attempts: 1 + MAX_RETRIES,
        },
        known_bug: None,
    },
    Scenario {
        name: "error_mid_stream",
        // A whole answer has no middle: its errors are the HTTP ones above.
        modes: &[Mode::Stream],
        request: || json!({}),
        upstream: Upstream::RateLimitMidStream,
        outcome: Outcome::Failed("rate_limit_exceeded"),
        known_bug: None,
    },
    Scenario {
        name: "error_first_event",
        // Nothing reached the client yet, so the error can still be an HTTP error, as the same
        // error inside a whole `200` answer is (MiniMax's `base_resp`: errors_and_routes.rs).
        modes: &[Mode::Stream],
        request: || json!({}),
        upstream: Upstream::RateLimitFirst,
        outcome: Outcome::Http {
            status: 429,
            code: "rate_limit_exceeded",
            retry_after: None,
            attempts: 1,
        },
        known_bug: None,
    },
    Scenario {
        name: "empty",
        modes: BOTH,
        request: || json!({}),
        upstream: answer(&[], &[], End::Stop),
        outcome: Outcome::Failed("empty_upstream_response"),
        known_bug: None,
    },
    Scenario {
        name: "length",
        modes: BOTH,
        request: || json!({"max_output_tokens": 16}),
        upstream: answer(&["This answer is cut"], &[], End::Length),
        outcome: Outcome::Incomplete,
        known_bug: None,
    },
    Scenario {
        // Issue 15: neither a finish reason nor the end marker (whole: no finish reason, or a
        // Responses object still `in_progress`) is a cut answer, never `completed`.
        name: "truncated",
        modes: BOTH,
        request: || json!({}),
        upstream: answer(&["This answer", " is cut"], &[], End::Cut),
        outcome: Outcome::Truncated,
        known_bug: None,
    },
    Scenario {
        // Issue 15: one event that is not valid UTF-8 is skipped with a diagnostic. Only a
        // stream has events: a whole body that is not UTF-8 is not JSON.
        name: "invalid_utf8_chunk",
        modes: &[Mode::Stream],
        request: || json!({}),
        upstream: Upstream::InvalidUtf8Chunk(&TEXT),
        outcome: Outcome::Completed,
        known_bug: None,
    },
];
