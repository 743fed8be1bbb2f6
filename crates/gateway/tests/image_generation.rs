//! Ring 2: `image_generation` run by the gateway for a model without it (issue 22), against a
//! GLM-like Chat upstream and the testkit's fake Images API, both on 127.0.0.1:0: the
//! function the model is offered and the system note naming it, the `image_generation_call`
//! item with its events (partial images streamed while the image is made), the short text the
//! model reads, the side channel (`tool.started`, `tool.progress` with the partials,
//! `tool.completed` with the media reference), the stored image read back, an echoed call
//! replayed as a description, an edit of an earlier image, a large image stored once and read
//! back whole, and a backend failure and a moderation refusal each ending in a clear item and
//! a text answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use std::sync::Arc;

use toolbridge_testkit::chat::{
    chunk, completion, text_stream, tool_calls_completion, usage_chunk,
};
use toolbridge_testkit::images::{
    Behaviour, FakeImages, large_png_b64, partial_b64, png_b64, revised,
};
use toolbridge_testkit::{Recorded, Reply};

const PROMPT: &str = "a kitten asleep in a teacup";
const ANSWER: &str = "Here is your kitten.";

/// A gateway serving `image_generation` with `images` for a GLM-preset provider.
async fn harness(images: &FakeImages, extra: &str) -> Harness {
    let images_url = images.base_url();
    let extra = extra.to_owned();
    Harness::with_toml(move |url| {
        format!(
            r#"
[providers.glm]
preset = "glm"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = 0

[[routes]]
model = "*"
provider = "glm"
upstream_model = "glm-4.6"

[gateway_tools]
jq_isolation = false
{extra}

[gateway_tools.images]
url = "{images_url}"
api_key_env = "FAKE_UPSTREAM_KEY"
model = "gpt-image-1"
max_retries = 2
"#
        )
    })
    .await
}

/// The model calls the image tool, then answers once the result is in (streamed when the
/// request is).
fn script(h: &Harness, arguments: Value) {
    let call = tool_calls_completion(&[("call_img", "image_generation", arguments.clone())]);
    h.upstream.set_gate(Arc::new(move |r: &Recorded| {
        let answered = r.body.to_string().contains("\"role\":\"tool\"");
        let streamed = r.body["stream"] == true;
        Some(match (answered, streamed) {
            (false, false) => Reply::json(call.clone()),
            (true, false) => Reply::json(completion(ANSWER, "stop")),
            (false, true) => Reply::sse(vec![
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_img", "type": "function", "function": {"name": "image_generation", "arguments": arguments.to_string()}}]}),
                    None,
                ),
                chunk(json!({}), Some("tool_calls")),
                usage_chunk(10, 5),
            ]),
            (true, true) => Reply::sse(text_stream(&[ANSWER], "stop")),
        })
    }));
}

fn request(stream: bool, partials: u32) -> Value {
    json!({
        "model": "glm",
        "input": "Draw a kitten with GPT-Image",
        "tools": [{"type": "image_generation", "partial_images": partials, "quality": "low"}],
        "stream": stream,
    })
}

fn image_item(response: &Value) -> Value {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "image_generation_call")
        .cloned()
        .unwrap_or_else(|| panic!("no image_generation_call: {response:#}"))
}

fn final_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

/// What the model read back for its call, in the second upstream request.
fn tool_result(h: &Harness) -> String {
    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 2, "one call round, one answer round");
    requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned()
}

/// A backend asked for partial images that answers with plain JSON (it does not stream) still
/// gives the image: the final one, with no partials (the item used to fail).
#[tokio::test]
async fn a_backend_that_answers_json_to_a_stream_request_still_gives_the_image() {
    let images = FakeImages::start().await;
    images.set(Behaviour::DrawWhole);
    let h = harness(&images, "").await;
    script(&h, json!({"prompt": PROMPT}));
    let events = h.post_stream(&request(true, 2)).await;
    let types = toolbridge_testkit::sse::types(&events);
    assert!(
        !types
            .iter()
            .any(|t| t == "response.image_generation_call.partial_image"),
        "{types:?}"
    );
    let response = &events.last().unwrap().data["response"];
    assert_eq!(response["status"], "completed", "{response:#}");
    let item = image_item(response);
    assert_eq!(item["status"], "completed", "{item:#}");
    assert_eq!(item["result"], png_b64());
    assert_eq!(images.requests()[0].2["stream"], true);
}

#[tokio::test]
async fn a_glm_model_draws_through_the_gateway_with_partial_images_streamed_live() {
    let images = FakeImages::start().await;
    let h = harness(&images, "").await;
    script(&h, json!({"prompt": PROMPT}));
    let events = h.post_stream(&request(true, 2)).await;
    let types = toolbridge_testkit::sse::types(&events);
    let position = |t: &str| {
        types
            .iter()
            .position(|x| x == t)
            .unwrap_or_else(|| panic!("{t}: {types:?}"))
    };
    // The item's own events in OpenAI's order, the partials between `generating` and the end.
    let order = [
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.partial_image",
        "response.image_generation_call.completed",
        "response.output_text.delta",
        "response.completed",
    ];
    for pair in order.windows(2) {
        assert!(
            position(pair[0]) < position(pair[1]),
            "{pair:?} in {types:?}"
        );
    }
    let partials: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["type"] == "response.image_generation_call.partial_image")
        .map(|e| &e.data)
        .collect();
    assert_eq!(partials.len(), 2, "{types:?}");
    for (i, p) in partials.iter().enumerate() {
        assert_eq!(p["partial_image_index"], i);
        assert_eq!(p["partial_image_b64"], partial_b64(i as u64));
    }
    let done = events.last().unwrap();
    let response = &done.data["response"];
    let item = image_item(response);
    assert_eq!(item["status"], "completed");
    assert_eq!(item["result"], png_b64());
    assert_eq!(item["revised_prompt"], revised(PROMPT));
    assert_eq!(item["quality"], "low", "the declared option is the item's");
    assert_eq!(partials[0]["item_id"], item["id"]);
    assert_eq!(final_text(response), ANSWER);

    // The model was offered a function and told the gateway runs it.
    let first = &h.upstream.requests()[0].body;
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(tools, ["image_generation"], "{first}");
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        first["messages"][0]["role"] == "system" && system.contains("image_generation"),
        "{first}"
    );
    // It read the image's id and the prompt, never the image.
    let result = tool_result(&h);
    assert!(result.contains(item["id"].as_str().unwrap()), "{result}");
    assert!(result.contains(&revised(PROMPT)), "{result}");
    assert!(!result.contains(&png_b64()), "{result}");

    // The backend got the declared options, streamed, with the operator's key.
    let sent = images.requests();
    assert_eq!(sent.len(), 1);
    let (path, headers, body) = &sent[0];
    assert_eq!(path, "/v1/images/generations");
    assert_eq!(headers["authorization"], "Bearer sk-upstream-secret");
    assert_eq!(body["model"], "gpt-image-1");
    assert_eq!(body["prompt"], PROMPT);
    assert_eq!(body["quality"], "low");
    assert_eq!(body["stream"], true);
    assert_eq!(body["partial_images"], 2);

    // The stored response returns the image.
    let id = response["id"].as_str().unwrap();
    let stored: Value = h
        .client
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(image_item(&stored)["result"], png_b64(), "{stored:#}");
}

#[tokio::test]
async fn a_whole_answer_carries_the_image_and_the_side_channel_shows_its_progress() {
    let images = FakeImages::start().await;
    let h = harness(&images, "").await;
    let subscription = h
        .client
        .get(h.url("/v1/sessions/draw-1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(subscription.status().as_u16(), 200);
    script(&h, json!({"prompt": PROMPT, "size": "1024x1536"}));
    let response: Value = h
        .client
        .post(h.url("/v1/responses"))
        .header("session-id", "draw-1")
        .json(&request(false, 1))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(response["status"], "completed", "{response:#}");
    h.check_response(&response);
    let item = image_item(&response);
    assert_eq!(item["result"], png_b64());
    assert_eq!(
        item["size"], "1024x1536",
        "the model's choice where the client left it"
    );
    assert_eq!(final_text(&response), ANSWER);

    let events = read_side_channel(subscription).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.started",
            "tool.started",
            "tool.progress",
            "tool.completed",
            "response.completed"
        ]
    );
    let progress = &events[2];
    assert_eq!(progress["tool"], "image_generation");
    assert_eq!(progress["media"]["partial_image_index"], 0);
    assert_eq!(progress["media"]["b64"], partial_b64(0));
    let completed = &events[3];
    assert_eq!(completed["media"]["item_id"], item["id"]);
    assert_eq!(completed["media"]["kind"], "image");
    let url = completed["media"]["url"].as_str().unwrap();
    assert_eq!(
        url,
        format!("/v1/responses/{}", response["id"].as_str().unwrap())
    );
    let stored: Value = h
        .client
        .get(h.url(url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(image_item(&stored)["result"], png_b64());
}

/// The side channel's events up to the response's end.
async fn read_side_channel(subscription: reqwest::Response) -> Vec<Value> {
    use futures::StreamExt;
    let mut stream = subscription.bytes_stream();
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if text.contains("event: response.completed") {
                break;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("the side channel shows the response's end");
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn a_backend_failure_is_a_failed_item_the_model_answers_after_not_a_500() {
    let images = FakeImages::start().await;
    images.set(Behaviour::Fail);
    let h = harness(&images, "").await;
    for stream in [false, true] {
        script(&h, json!({"prompt": PROMPT}));
        let response = respond(&h, stream).await;
        let item = image_item(&response);
        assert_eq!(item["status"], "failed", "{item}");
        assert_eq!(item["error"]["code"], "tool_unavailable", "{item}");
        assert!(item["result"].is_null());
        assert_eq!(response["status"], "completed");
        assert_eq!(final_text(&response), ANSWER);
        let result = last_tool_result(&h);
        assert!(
            result.contains("tool_unavailable") && result.contains("Do not look for API keys"),
            "{result}"
        );
    }
    // Retried before anything was shown: three tries per call.
    assert_eq!(images.requests().len(), 6);
}

#[tokio::test]
async fn a_moderation_refusal_is_told_to_the_client_and_the_model_once() {
    let images = FakeImages::start().await;
    images.set(Behaviour::Refuse);
    let h = harness(&images, "").await;
    for stream in [false, true] {
        script(&h, json!({"prompt": PROMPT}));
        let response = respond(&h, stream).await;
        let item = image_item(&response);
        assert_eq!(item["status"], "failed");
        assert_eq!(item["error"]["code"], "moderation_blocked", "{item}");
        assert_eq!(item["error"]["type"], "image_generation_user_error");
        assert_eq!(final_text(&response), ANSWER);
        let result = last_tool_result(&h);
        assert!(
            result.contains("moderation_blocked") && result.contains("different prompt"),
            "{result}"
        );
    }
    assert_eq!(images.requests().len(), 2, "a refusal is not retried");
}

/// A response, whole or streamed (its terminal event's response).
async fn respond(h: &Harness, stream: bool) -> Value {
    if stream {
        let events = h.post_stream(&request(true, 0)).await;
        let last = events.last().unwrap();
        assert_eq!(last.data["type"], "response.completed");
        last.data["response"].clone()
    } else {
        let (status, body) = h.post_json(&request(false, 0)).await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

fn last_tool_result(h: &Harness) -> String {
    let last = h.upstream.requests().last().unwrap().body.clone();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_echoed_image_is_described_to_the_model_and_can_be_edited() {
    let images = FakeImages::start().await;
    let h = harness(&images, "").await;
    let earlier = json!({
        "type": "image_generation_call", "id": "ig_earlier", "status": "completed",
        "result": png_b64(), "revised_prompt": revised(PROMPT),
    });
    script(
        &h,
        json!({"prompt": "the same kitten, awake", "input_image_id": "ig_earlier"}),
    );
    let (status, response) = h
        .post_json(&json!({
            "model": "glm",
            "store": false,
            "tools": [{"type": "image_generation"}],
            "input": [
                {"role": "user", "content": "Draw a kitten"},
                earlier,
                {"role": "user", "content": "Now wake it up"},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{response}");
    // The model saw a short note in its own turn, never the bytes.
    let first = h.upstream.requests()[0].body.to_string();
    assert!(
        first.contains("ig_earlier") && first.contains(&revised(PROMPT)),
        "{first}"
    );
    assert!(!first.contains(&png_b64()), "{first}");
    let codes: Vec<&str> = response["toolbridge_diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect();
    assert!(codes.contains(&"image_call_described"), "{codes:?}");
    // The edit went to the edits endpoint with the earlier image.
    let sent = images.requests();
    assert_eq!(sent[0].0, "/v1/images/edits");
    assert_eq!(
        sent[0].2["images"][0]["image_url"],
        format!("data:image/png;base64,{}", png_b64())
    );
    let item = image_item(&response);
    assert_eq!(item["action"], "edit");
    assert_eq!(item["result"], png_b64());
}

#[tokio::test]
async fn without_a_backend_the_declared_tool_is_ignored_with_its_diagnostic() {
    let h = Harness::with_toml(|url| {
        format!(
            "[providers.glm]\npreset = \"glm\"\nbase_url = \"{url}\"\nmax_retries = 0\n\n[[routes]]\nmodel = \"*\"\nprovider = \"glm\"\n\n[gateway_tools]\njq_isolation = false\n"
        )
    })
    .await;
    h.upstream
        .push(Reply::json(completion("I cannot draw.", "stop")));
    let (status, body) = h.post_json(&request(false, 0)).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        h.upstream.last_body().get("tools").is_none(),
        "{}",
        h.upstream.last_body()
    );
    let ignored = body["toolbridge_diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["code"] == "tool_ignored" && d["param"] == "tools[0]");
    assert!(ignored, "{body:#}");
}

#[tokio::test]
async fn a_key_without_the_image_generation_rule_is_refused_the_tool() {
    let narrow = "tb-0000000000000000000000000000000000000000000000000000000000000003";
    let keys = format!(
        "[[keys]]\nid = \"narrow\"\nname = \"narrow\"\nhash = \"{}\"\ntools = [\"function\"]\n",
        toolbridge_gateway::hash_secret(narrow)
    );
    let images = FakeImages::start().await;
    let images_url = images.base_url();
    let h = Harness::with_toml(move |url| {
        format!(
            "{keys}\n[providers.glm]\npreset = \"glm\"\nbase_url = \"{url}\"\nmax_retries = 0\n\n[[routes]]\nmodel = \"*\"\nprovider = \"glm\"\n\n[gateway_tools]\njq_isolation = false\n\n[gateway_tools.images]\nurl = \"{images_url}\"\nmodel = \"gpt-image-1\"\n"
        )
    })
    .await;
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .bearer_auth(narrow)
        .json(&request(false, 0))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    assert!(
        h.upstream.requests().is_empty(),
        "refused before anything went upstream"
    );
    assert!(images.requests().is_empty());
}

/// How many rows of `sql` (one text column; `$1` the response id) hold `needle`.
async fn rows_holding(store_url: &str, sql: &'static str, id: &str, needle: &str) -> usize {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(store_url).await.unwrap();
    sqlx::query(sql)
        .bind(id)
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .iter()
        .filter(|row| sqlx::Row::get::<String, _>(*row, 0).contains(needle))
        .count()
}

/// Issue 22: a stored image is kept once — in its item's row, not in the response body as
/// well — and `GET /v1/responses/{id}` and `input_items` give it back whole.
#[tokio::test]
async fn a_stored_image_is_kept_once_and_read_back_whole() {
    let images = FakeImages::start().await;
    images.set(Behaviour::DrawLarge);
    let h = harness(&images, "").await;
    script(&h, json!({"prompt": PROMPT}));
    let (status, response) = h.post_json(&request(false, 0)).await;
    assert_eq!(status, 200, "{response}");
    let item = image_item(&response);
    assert_eq!(item["result"], large_png_b64());
    let id = response["id"].as_str().unwrap();

    let stored: Value = h
        .client
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(image_item(&stored), item, "GET gives the item whole");
    let image = large_png_b64();
    let body_sql = "SELECT body FROM toolbridge_responses WHERE id = $1";
    let items_sql = "SELECT body FROM toolbridge_items WHERE response_id = $1";
    assert_eq!(rows_holding(&h.store_url, body_sql, id, &image).await, 0);
    assert_eq!(rows_holding(&h.store_url, items_sql, id, &image).await, 1);

    // Sent back as input of the next turn, it is stored once there too, and listed whole.
    h.upstream.set_gate(Arc::new(|_: &Recorded| {
        Some(Reply::json(completion("A fine kitten.", "stop")))
    }));
    let (status, next) = h
        .post_json(&json!({
            "model": "glm",
            "tools": [{"type": "image_generation"}],
            "input": [{"role": "user", "content": "Draw a kitten"}, item, {"role": "user", "content": "Nice?"}],
        }))
        .await;
    assert_eq!(status, 200, "{next}");
    let next_id = next["id"].as_str().unwrap();
    let listed: Value = h
        .client
        .get(h.url(&format!("/v1/responses/{next_id}/input_items?order=asc")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let echoed = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "image_generation_call")
        .unwrap_or_else(|| panic!("{listed:#}"));
    assert_eq!(echoed["result"], image);
    assert_eq!(
        rows_holding(&h.store_url, body_sql, next_id, &image).await,
        0
    );
    assert_eq!(
        rows_holding(&h.store_url, items_sql, next_id, &image).await,
        1
    );
}
