//! Ring 2: one conformance matrix for every provider. The same scenario list runs, streamed and
//! whole, against every preset of every dialect through a fake upstream speaking that dialect's
//! real wire format (`toolbridge_testkit::dialects`). Nothing is skipped: where a profile cannot
//! do something (a `tool_choice` it cannot say, a tool type it takes only degraded), the expected
//! outcome is derived from the profile's data by the real planner, and asserted.
//!
//! One gateway per target; every (scenario × mode) pair of a target runs concurrently, each
//! request tagged by its model name (`conf-<scenario>-<mode>`), which every dialect carries
//! upstream (the body's `model`, or Gemini's URL), so one gate answers all of them.
//! `cargo test -p toolbridge-gateway --test conformance -- --nocapture` prints the pass matrix.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;
#[path = "conformance/scenarios.rs"]
mod scenarios;
#[path = "conformance/targets.rs"]
mod targets;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::Harness;
use scenarios::{CallSpec, Mode, Outcome, SCENARIOS, Scenario, Upstream};
use serde_json::{Value, json};
use targets::{Dialect, MAX_RETRIES, Target, targets};
use toolbridge_core::plan::{Decision, Identity, NativeTool, ToolPlan, UpstreamTool, plan};
use toolbridge_providers::profile::Profile;
use toolbridge_testkit::dialects::{Answer, Call, responses_output};
use toolbridge_testkit::{Recorded, Reply};
// ---- Running ----

/// The replies of one target's upstream, by request tag.
type Replies = Arc<Mutex<HashMap<String, Reply>>>;

/// The tag of a request: its model, in the body or (Gemini) in the URL.
fn tag_of(r: &Recorded) -> Option<String> {
    if let Some(m) = r.body["model"].as_str() {
        return Some(m.to_owned());
    }
    let rest = r.path.split("/models/").nth(1)?;
    Some(rest.split(':').next()?.to_owned())
}

async fn gateway(target: &Target) -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.up]
dialect = "{dialect}"
preset = "{preset}"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = {MAX_RETRIES}

[[routes]]
model = "*"
provider = "up"
"#,
            dialect = target.dialect.config_name(),
            preset = target.preset,
        )
    })
    .await
}

/// The plan the gateway will make for this request: the oracle of every tool assertion.
fn plan_for(profile: &Profile, request: &Value) -> ToolPlan {
    let tools: Vec<toolbridge_wire::responses::Tool> = request
        .get("tools")
        .map(|t| serde_json::from_value(t.clone()).expect("scenario tools parse"))
        .unwrap_or_default();
    plan(&tools, request.get("tool_choice"), &profile.tools).expect("scenario plans")
}

fn identity(c: &CallSpec) -> Identity {
    let namespace = c.namespace.map(str::to_owned);
    let name = c.name.to_owned();
    if c.custom {
        Identity::Custom { namespace, name }
    } else {
        Identity::Function { namespace, name }
    }
}

fn provider_name(plan: &ToolPlan, c: &CallSpec) -> String {
    plan.names
        .provider_name(&identity(c))
        .unwrap_or_else(|| panic!("{} has no provider name", c.name))
        .to_owned()
}

fn upstream_function_names(plan: &ToolPlan) -> Vec<String> {
    if !plan.send_tools {
        return Vec::new();
    }
    plan.upstream
        .iter()
        .filter_map(|t| match t {
            UpstreamTool::Function { name, .. } => Some(name.clone()),
            UpstreamTool::Native(_) => None,
        })
        .collect()
}

/// The top-level names of a planned Responses request's tools, in order.
fn planned_names(plan: &ToolPlan) -> Vec<String> {
    if !plan.send_tools {
        return Vec::new();
    }
    plan.upstream
        .iter()
        .map(|t| match t {
            UpstreamTool::Function { name, .. } => name.clone(),
            UpstreamTool::Native(NativeTool::AsDeclared(v)) => {
                v["name"].as_str().unwrap_or("").to_owned()
            }
            UpstreamTool::Native(_) => String::new(),
        })
        .collect()
}

/// Runs one (scenario × mode) pair against one target's gateway.
async fn run_pair(
    h: Arc<Harness>,
    replies: Replies,
    target: &'static Target,
    scenario: &'static Scenario,
    mode: Mode,
    outcome: Outcome,
    variant: &'static str,
) {
    let profile = Profile::preset(target.preset).expect("known preset");
    let dialect = target.dialect;
    let wire = dialect.wire(&profile);
    let streamed = mode == Mode::Stream;
    let model = format!(
        "conf-{}-{}{}",
        scenario.name,
        if streamed { "stream" } else { "whole" },
        variant
    );
    let mut request = (scenario.request)();
    request["model"] = json!(model);
    request["input"] = json!("What is the weather in Paris?");
    request["stream"] = json!(streamed);
    let plan = plan_for(&profile, &request);
    // A native Responses upstream whose profile takes every tool as declared gets the request
    // as it came; one that does not gets the plan's tools, and its calls are restored.
    let passthrough = dialect.passthrough() && plan.passes_tools_as_declared();
    let functions = upstream_function_names(&plan);

    let mut sent_answer = None;
    let (upstream, corrupted) = scenario.upstream.plain();
    let reply = match upstream {
        Upstream::Answer {
            reasoning,
            text,
            calls,
            end,
            usage,
        } => {
            let answer = Answer {
                reasoning: reasoning.iter().map(|s| (*s).to_owned()).collect(),
                text: text.iter().map(|s| (*s).to_owned()).collect(),
                calls: calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        // A passthrough upstream knows the tools as declared; a planned one
                        // calls a degraded tool as the function it was sent as.
                        let name = if passthrough {
                            c.name.to_owned()
                        } else {
                            provider_name(&plan, c)
                        };
                        let degraded = !passthrough && functions.contains(&name);
                        Call {
                            id: format!("call_{i}"),
                            name,
                            namespace: c.namespace.filter(|_| !degraded).map(str::to_owned),
                            custom: c.custom && !degraded,
                            arguments: (c.arguments)(),
                        }
                    })
                    .collect(),
                end: *end,
                usage: *usage,
            };
            let reply = if streamed {
                wire.stream(&answer)
            } else {
                wire.whole(&answer)
            };
            sent_answer = Some(answer);
            reply
        }
        Upstream::Http(failure) => wire.http_error(*failure),
        Upstream::RateLimitMidStream => wire.stream_then_rate_limit("Partial"),
        Upstream::RateLimitFirst => wire.stream_starting_with_rate_limit(),
        Upstream::InvalidUtf8Chunk(_) => unreachable!("plain() unwraps it"),
    };
    let reply = if corrupted {
        reply.with_invalid_utf8_event(1)
    } else {
        reply
    };
    replies.lock().unwrap().insert(model.clone(), reply);

    // The client's side.
    let response = h.post(&request).await;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = if let Outcome::Http {
        status: want,
        code,
        retry_after: want_retry,
        ..
    } = outcome
    {
        let text = response.text().await.expect("error body");
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status {status}, error body is not JSON ({e}): {text}"));
        assert_eq!(status, want, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].is_string(), "{body}");
        assert!(body["error"]["type"].is_string(), "{body}");
        assert!(body["error"].get("param").is_some(), "{body}");
        assert_eq!(retry_after.as_deref(), want_retry, "Retry-After");
        None
    } else if streamed {
        assert_eq!(status, 200, "stream status");
        let text = response.text().await.expect("stream body");
        let events = toolbridge_testkit::sse::parse(&text);
        common::check_stream(&events, h.schema.as_ref());
        let last = events.last().unwrap();
        let terminal = match outcome {
            Outcome::Completed => "response.completed",
            Outcome::Incomplete | Outcome::Truncated => "response.incomplete",
            Outcome::Failed(_) => "response.failed",
            Outcome::Http { .. } => unreachable!(),
        };
        assert_eq!(last.data["type"], terminal, "terminal event");
        Some(last.data["response"].clone())
    } else {
        let body: Value = response.json().await.expect("JSON body");
        assert_eq!(status, 200, "{body}");
        h.check_response(&body);
        Some(body)
    };
    if let Some(body) = &body {
        check_response(body, scenario, outcome, dialect, &plan);
        if corrupted {
            let skipped = body["toolbridge_diagnostics"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["code"] == "upstream_chunk_skipped"));
            assert!(skipped, "the bad chunk is reported: {body:#}");
        }
        // A cut stream relayed has no item the upstream completed.
        let cut_relay = streamed && outcome == Outcome::Truncated;
        if passthrough
            && !cut_relay
            && let Some(answer) = &sent_answer
        {
            // Items come back exactly as the upstream sent them, types and ids included.
            assert_eq!(
                body["output"],
                json!(responses_output(answer)),
                "output passed through"
            );
        }
    }

    // The upstream's side.
    let sent: Vec<Recorded> = h
        .upstream
        .requests()
        .into_iter()
        .filter(|r| tag_of(r).as_deref() == Some(&model))
        .collect();
    let attempts = match outcome {
        Outcome::Http { attempts, .. } => attempts,
        _ => 1,
    };
    assert_eq!(sent.len(), attempts, "upstream attempts");
    let req = &sent[0];
    let url = format!(
        "{}{}",
        req.path,
        req.query
            .as_ref()
            .map(|q| format!("?{q}"))
            .unwrap_or_default()
    );
    assert_eq!(url, dialect.target_url(&model, streamed), "upstream URL");
    dialect.check_common(&profile, &req.body, streamed);
    if passthrough {
        check_passthrough(&request, &req.body, &plan);
    }
    // A passthrough sends every tool under its declared name; a planned Responses upstream, the
    // plan's tools (as declared or as functions); the others, the functions the plan made.
    let expected_names = if passthrough {
        plan.entries.iter().filter_map(|e| e.name.clone()).collect()
    } else if dialect.relays() {
        planned_names(&plan)
    } else {
        functions.clone()
    };
    assert_eq!(
        dialect.tool_names(&req.body),
        expected_names,
        "tools declared upstream"
    );
    assert_eq!(
        dialect.sent_choice(&req.body),
        dialect.expected_choice(&plan),
        "tool_choice upstream"
    );
    if let Upstream::Answer { calls, .. } = &scenario.upstream
        && !passthrough
    {
        for c in calls
            .iter()
            .filter(|c| c.custom && functions.contains(&provider_name(&plan, c)))
        {
            // A degraded custom tool is a function with one string parameter `input`.
            let params = dialect.tool_parameters(&req.body, &provider_name(&plan, c));
            assert_eq!(params["properties"]["input"]["type"], "string", "{params}");
        }
    }
    if request.get("reasoning").is_some() {
        dialect.check_effort(&profile, &req.body);
    }
}

/// A passthrough request is the client's own: every tool native and sent byte for byte as
/// declared, `tool_choice` as it came, every other field as sent but the gateway's own (`model`,
/// `store`, `include` for stored reasoning).
fn check_passthrough(request: &Value, body: &Value, plan: &ToolPlan) {
    assert!(
        plan.entries.iter().all(|e| e.decision == Decision::Native),
        "every tool native: {:?}",
        plan.entries
    );
    let planned: Vec<Value> = plan
        .upstream
        .iter()
        .filter_map(|t| match t {
            UpstreamTool::Native(NativeTool::AsDeclared(v)) => Some(v.clone()),
            UpstreamTool::Native(_) => None,
            UpstreamTool::Function { .. } => None,
        })
        .collect();
    let declared = request.get("tools").cloned();
    assert_eq!(
        body.get("tools"),
        declared.as_ref(),
        "tools upstream as declared"
    );
    if let Some(declared) = &declared {
        assert_eq!(&json!(planned), declared, "the plan keeps every tool");
    }
    assert_eq!(
        body.get("tool_choice"),
        request.get("tool_choice"),
        "tool_choice as is"
    );
    for (k, v) in request.as_object().unwrap() {
        if !["model", "store", "include"].contains(&k.as_str()) {
            assert_eq!(&body[k], v, "{k} passed through");
        }
    }
}

/// Checks the client-visible response object of an answered scenario.
fn check_response(
    body: &Value,
    scenario: &Scenario,
    outcome: Outcome,
    dialect: Dialect,
    plan: &ToolPlan,
) {
    match outcome {
        Outcome::Failed(code) => {
            assert_eq!(body["status"], "failed", "{body:#}");
            // The documented code, and the gateway's own beside it when it differs.
            let documented = toolbridge_core::assemble::codes::public_code(code);
            assert_eq!(body["error"]["code"], documented, "{body:#}");
            let fine = body["error"]["toolbridge_code"]
                .as_str()
                .unwrap_or(documented);
            assert_eq!(fine, code, "{body:#}");
            return;
        }
        Outcome::Incomplete => {
            assert_eq!(body["status"], "incomplete", "{body:#}");
            assert_eq!(
                body["incomplete_details"]["reason"], "max_output_tokens",
                "{body:#}"
            );
        }
        Outcome::Truncated => {
            assert_eq!(body["status"], "incomplete", "{body:#}");
            assert_eq!(
                body["incomplete_details"]["reason"], "upstream_truncated",
                "{body:#}"
            );
            let diagnosed = body["toolbridge_diagnostics"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["code"] == "upstream_unterminated"));
            assert!(diagnosed, "{body:#}");
            if !dialect.relays() {
                // The text so far is kept, its message marked incomplete.
                let Upstream::Answer { text, .. } = &scenario.upstream else {
                    unreachable!()
                };
                assert_eq!(body["output"][0]["status"], "incomplete", "{body:#}");
                assert_eq!(body["output"][0]["content"][0]["text"], text.concat());
            }
            return;
        }
        Outcome::Completed => assert_eq!(body["status"], "completed", "{body:#}"),
        Outcome::Http { .. } => unreachable!(),
    }
    let Upstream::Answer {
        reasoning,
        text,
        calls,
        usage,
        ..
    } = scenario.upstream.plain().0
    else {
        unreachable!("answered scenarios have an answer")
    };
    let output = body["output"].as_array().expect("output");
    let mut expected_types = Vec::new();
    if !reasoning.is_empty() {
        expected_types.push("reasoning");
    }
    if !text.is_empty() {
        expected_types.push("message");
    }
    for c in calls.iter() {
        expected_types.push(if c.custom {
            "custom_tool_call"
        } else {
            "function_call"
        });
    }
    let types: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(types, expected_types, "output items: {body:#}");

    let mut items = output.iter();
    if !reasoning.is_empty() {
        let item = items.next().unwrap();
        // A passthrough shows the reasoning as the upstream did (OpenAI: a summary).
        let (field, part) = if dialect.relays() {
            ("summary", "summary_text")
        } else {
            ("content", "reasoning_text")
        };
        let shown: String = item[field]
            .as_array()
            .unwrap_or_else(|| panic!("reasoning {field}: {item}"))
            .iter()
            .filter(|p| p["type"] == part)
            .map(|p| p["text"].as_str().unwrap())
            .collect();
        assert_eq!(shown, reasoning.concat(), "reasoning text");
    }
    if !text.is_empty() {
        let item = items.next().unwrap();
        assert_eq!(item["content"][0]["text"], text.concat(), "message text");
    }
    let mut call_ids = Vec::new();
    for (i, (item, c)) in items.zip(calls.iter()).enumerate() {
        assert_eq!(item["name"], c.name, "restored name");
        assert_eq!(
            item.get("namespace").and_then(Value::as_str),
            c.namespace,
            "restored namespace: {item}"
        );
        let call_id = item["call_id"].as_str().unwrap().to_owned();
        if dialect.call_ids() {
            assert_eq!(call_id, format!("call_{i}"), "call_id");
        } else {
            assert!(!call_id.is_empty(), "call_id");
        }
        call_ids.push(call_id);
        if c.custom {
            assert_eq!(item["input"], (c.arguments)()["input"], "custom input");
        } else {
            let arguments: Value =
                serde_json::from_str(item["arguments"].as_str().unwrap()).expect("JSON arguments");
            assert_eq!(arguments, (c.arguments)(), "arguments");
        }
    }
    call_ids.sort();
    call_ids.dedup();
    assert_eq!(call_ids.len(), calls.len(), "call ids are distinct");

    let reasoning_tokens = if dialect.reports_reasoning_tokens() {
        usage.reasoning
    } else {
        0
    };
    let u = &body["usage"];
    assert_eq!(u["input_tokens"], usage.input, "input_tokens");
    assert_eq!(u["input_tokens_details"]["cached_tokens"], usage.cached);
    assert_eq!(u["output_tokens"], usage.output, "output_tokens");
    assert_eq!(
        u["output_tokens_details"]["reasoning_tokens"],
        reasoning_tokens
    );
    assert_eq!(u["total_tokens"], usage.input + usage.output);

    // Every decision the planner reported reaches the client, with its param; a downgrade is
    // reported exactly when the profile forces one.
    let got: Vec<(String, Option<String>)> = body["toolbridge_diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_owned(),
                d["param"].as_str().map(str::to_owned),
            )
        })
        .collect();
    for d in &plan.diagnostics {
        assert!(
            got.contains(&(d.code.clone(), d.param.clone())),
            "diagnostic {}:{:?} missing from {got:?}",
            d.code,
            d.param
        );
    }
    for code in ["tool_choice_downgraded", "allowed_tools_filtered"] {
        assert_eq!(
            got.iter().any(|(c, _)| c == code),
            plan.diagnostics.iter().any(|d| d.code == code),
            "{code} reported iff planned: {got:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_against_every_preset_and_dialect() {
    let mut tasks = Vec::new();
    let mut gateways = Vec::new();
    for target in targets() {
        let h = Arc::new(gateway(target).await);
        let replies: Replies = Arc::default();
        let table = replies.clone();
        let preset = target.preset;
        h.upstream.set_gate(Arc::new(move |r: &Recorded| {
            // The endpoint's documented refusals come first, as the real one would answer.
            targets::refusal(preset, &r.body)
                .or_else(|| tag_of(r).and_then(|t| table.lock().unwrap().get(&t).cloned()))
        }));
        for scenario in SCENARIOS {
            for &mode in scenario.modes {
                let spawn = |outcome, variant| {
                    tokio::spawn(run_pair(
                        h.clone(),
                        replies.clone(),
                        target,
                        scenario,
                        mode,
                        outcome,
                        variant,
                    ))
                };
                let intended = spawn(scenario.outcome, "");
                let observed = scenario
                    .known_bug
                    .as_ref()
                    .map(|b| spawn(b.observed, "-observed"));
                tasks.push((target.preset, scenario, mode, intended, observed));
            }
        }
        gateways.push(h);
    }

    async fn outcome(handle: tokio::task::JoinHandle<()>) -> Result<(), String> {
        handle.await.map_err(|e| {
            let panic = e.into_panic();
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()
        })
    }
    let mut results: HashMap<(&str, &str, Mode), Result<&str, String>> = HashMap::new();
    for (preset, scenario, mode, intended, observed) in tasks {
        let intended = outcome(intended).await;
        let cell = match (intended, observed, &scenario.known_bug) {
            (Ok(()), None, _) => Ok("ok"),
            (Err(e), None, _) => Err(e),
            (Ok(()), Some(observed), _) => {
                let _ = outcome(observed).await;
                Err("intended outcome holds: drop the KnownBug marker".to_owned())
            }
            (Err(intended), Some(observed), bug) => match outcome(observed).await {
                Ok(()) => Ok("BUG"),
                Err(e) => Err(format!(
                    "known bug {:?} changed: intended: {intended}; observed: {e}",
                    bug.as_ref().map(|b| b.what)
                )),
            },
        };
        results.insert((preset, scenario.name, mode), cell);
    }

    // The matrix: one row per scenario and mode, one column per target.
    let mut table = format!("{:<30}", "scenario / target");
    for t in targets() {
        table.push_str(&format!(" {:>9}", t.preset));
    }
    table.push('\n');
    let mut failures = Vec::new();
    let mut bugs = Vec::new();
    for s in SCENARIOS {
        for &mode in s.modes {
            let label = format!(
                "{} ({})",
                s.name,
                if mode == Mode::Stream {
                    "stream"
                } else {
                    "whole"
                }
            );
            table.push_str(&format!("{label:<30}"));
            for t in targets() {
                let cell = match &results[&(t.preset, s.name, mode)] {
                    Ok(cell) => *cell,
                    Err(e) => {
                        failures.push(format!("{label} × {}: {e}", t.preset));
                        "FAIL"
                    }
                };
                table.push_str(&format!(" {cell:>9}"));
            }
            table.push('\n');
            if let Some(bug) = &s.known_bug {
                bugs.push(format!("BUG {label}: {}", bug.what));
            }
        }
    }
    let pairs = results.len();
    println!(
        "{table}{pairs} pairs, {} failed, {} known bugs\n{}",
        failures.len(),
        bugs.len(),
        bugs.join("\n")
    );
    if gateways.first().and_then(|h| h.schema.as_ref()).is_none() {
        println!("(Open Responses schema absent: events and responses were not validated)");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
