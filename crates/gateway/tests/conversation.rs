//! Ring 2: conversation state. Stored responses, `previous_response_id` chains, `item_reference`
//! inputs, retrieval, input item pages and deletion, against the default SQLite store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::{chunk, completion, text_stream};

#[tokio::test]
async fn three_turns_chain_through_previous_response_id_streamed_and_not() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream.push(Reply::json(completion("Paris.", "stop")));
    let (status, first) = h
        .post_json(
            &json!({"model": "m", "instructions": "Be brief.", "input": "Capital of France?"}),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["store"], true);

    h.upstream
        .push(Reply::sse(text_stream(&["About 2.1", " million."], "stop")));
    let events = h
        .post_stream(&json!({
            "model": "m", "stream": true, "instructions": "Answer in numbers.",
            "previous_response_id": first["id"], "input": "Its population?",
        }))
        .await;
    let second = events.last().unwrap().data["response"].clone();
    assert_eq!(second["previous_response_id"], first["id"]);

    h.upstream.push(Reply::json(completion("France.", "stop")));
    let (status, third) = h
        .post_json(&json!({"model": "m", "previous_response_id": second["id"], "input": "Which country again?"}))
        .await;
    assert_eq!(status, 200, "{third}");
    // The third upstream call carries the whole conversation, and only this turn's instructions.
    assert_eq!(
        h.upstream.last_body()["messages"],
        json!([
            {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "Paris."},
            {"role": "user", "content": "Its population?"},
            {"role": "assistant", "content": "About 2.1 million."},
            {"role": "user", "content": "Which country again?"},
        ])
    );

    // Retrieval gives back exactly what the client saw.
    let got: Value = h
        .client
        .get(h.url(&format!("/v1/responses/{}", second["id"].as_str().unwrap())))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got, second);
    h.check_response(&got);
}

#[tokio::test]
async fn a_missing_previous_response_is_a_400_with_the_open_responses_code() {
    let h = Harness::with_preset("generic").await;
    let (status, body) = h
        .post_json(&json!({"model": "m", "previous_response_id": "resp_nope", "input": "x"}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "previous_response_not_found");
    assert_eq!(body["error"]["param"], "previous_response_id");
    assert!(h.upstream.requests().is_empty());

    // store: false keeps nothing to chain from or retrieve.
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (_, unstored) = h
        .post_json(&json!({"model": "m", "input": "x", "store": false}))
        .await;
    assert_eq!(unstored["store"], false);
    let (status, body) = h
        .post_json(&json!({"model": "m", "previous_response_id": unstored["id"], "input": "y"}))
        .await;
    assert_eq!(status, 400, "{body}");
    let got = h
        .client
        .get(h.url(&format!(
            "/v1/responses/{}",
            unstored["id"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 404);
    let body: Value = got.json().await.unwrap();
    assert_eq!(body["error"]["code"], "response_not_found");
}

#[tokio::test]
async fn item_references_resolve_from_the_store_and_replay_reasoning() {
    let h = Harness::with_preset("deepseek").await;
    let tools = json!([{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]);
    h.upstream.push(Reply::sse(vec![
        chunk(json!({"role": "assistant", "reasoning_content": "Look it up."}), None),
        chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "stream": true, "tools": tools, "input": "find x"}))
        .await;
    let response = events.last().unwrap().data["response"].clone();
    let reasoning_id = response["output"][0]["id"].clone();
    let call_id = response["output"][1]["id"].clone();

    // The AI SDK's way: earlier output items by reference.
    h.upstream.push(Reply::json(completion("x is 42", "stop")));
    let (status, body) = h
        .post_json(&json!({
            "model": "m", "tools": tools,
            "input": [
                {"role": "user", "content": "find x"},
                {"type": "item_reference", "id": reasoning_id},
                {"type": "item_reference", "id": call_id},
                {"type": "function_call_output", "call_id": "call_1", "output": "42"},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let assistant = h.upstream.last_body()["messages"][1].clone();
    assert_eq!(assistant["reasoning_content"], "Look it up.");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");

    let (status, body) = h
        .post_json(&json!({"model": "m", "input": [{"role": "user", "content": "x"}, {"type": "item_reference", "id": "msg_unknown"}]}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "item_reference_not_found");
    assert_eq!(body["error"]["param"], "input[1]");
}

#[tokio::test]
async fn input_items_page_and_deletion() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (_, response) = h
        .post_json(&json!({"model": "m", "input": [
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
            {"role": "user", "content": "three"},
        ]}))
        .await;
    let id = response["id"].as_str().unwrap().to_owned();
    let page = |query: &str| {
        let url = h.url(&format!("/v1/responses/{id}/input_items{query}"));
        let client = h.client.clone();
        async move {
            client
                .get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let texts = |page: &Value| -> Vec<String> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["content"][0]["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest = page("").await;
    assert_eq!(newest["object"], "list");
    assert_eq!(
        texts(&newest),
        ["three", "two", "one"],
        "newest first by default"
    );
    let first_two = page("?order=asc&limit=2").await;
    assert_eq!(texts(&first_two), ["one", "two"]);
    assert_eq!(first_two["has_more"], true);
    let rest = page(&format!(
        "?order=asc&after={}",
        first_two["last_id"].as_str().unwrap()
    ))
    .await;
    assert_eq!(texts(&rest), ["three"]);
    assert_eq!(rest["has_more"], false);
    let bad = page("?limit=500").await;
    assert_eq!(bad["error"]["param"], "limit");

    let deleted: Value = h
        .client
        .delete(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response.deleted", "deleted": true})
    );
    let again = h
        .client
        .delete(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
}

async fn poll_until(h: &Harness, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        let got: Value = h
            .client
            .get(h.url(&format!("/v1/responses/{id}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if done(&got) {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("response {id} never reached the expected state");
}

#[tokio::test]
async fn a_background_response_runs_detached_and_is_polled_to_completion() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::Delayed {
        pause: std::time::Duration::from_millis(300),
        reply: Box::new(Reply::json(completion("Done in the background.", "stop"))),
    });
    let (status, queued) = h
        .post_json(&json!({"model": "m", "input": "work", "background": true}))
        .await;
    assert_eq!(status, 200, "{queued}");
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["background"], true);
    h.check_response(&queued);
    let id = queued["id"].as_str().unwrap().to_owned();
    let finished = poll_until(&h, &id, |r| r["status"] == "completed").await;
    assert_eq!(
        finished["output"][0]["content"][0]["text"],
        "Done in the background."
    );
    assert_eq!(finished["background"], true);
    h.check_response(&finished);

    // A streamed background request is refused up front; so is a bad one.
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "x", "background": true, "stream": true}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "stream");
    let (status, body) = h
        .post_json(&json!({"model": "m", "background": true, "input": [{"role": "wizard", "content": "x"}]}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "input[0].role");
}

#[tokio::test]
async fn a_cancelled_background_response_stays_cancelled() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::Delayed {
        pause: std::time::Duration::from_millis(800),
        reply: Box::new(Reply::json(completion("too late", "stop"))),
    });
    let (_, queued) = h
        .post_json(&json!({"model": "m", "input": "slow", "background": true}))
        .await;
    let id = queued["id"].as_str().unwrap().to_owned();
    poll_until(&h, &id, |r| r["status"] == "in_progress").await;
    let cancelled: Value = h
        .client
        .post(h.url(&format!("/v1/responses/{id}/cancel")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled["status"], "cancelled");
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let after = poll_until(&h, &id, |_| true).await;
    assert_eq!(
        after["status"], "cancelled",
        "the run's end did not undo the cancel"
    );

    // Only background responses can be cancelled.
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (_, plain) = h.post_json(&json!({"model": "m", "input": "x"})).await;
    let refused = h
        .client
        .post(h.url(&format!(
            "/v1/responses/{}/cancel",
            plain["id"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
}

#[tokio::test]
async fn compaction_condenses_a_conversation_into_a_sealed_item_that_later_expands() {
    let h = Harness::with_preset("deepseek").await;
    let compact = |body: Value| {
        let client = h.client.clone();
        let url = h.url("/v1/responses/compact");
        async move {
            let response = client.post(url).json(&body).send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, body) = compact(json!({"input": "x"})).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "model");

    h.upstream.push(Reply::json(completion(
        "SUMMARY: the user wants a red bike under 300 euros.",
        "stop",
    )));
    let (status, compacted) = compact(json!({
        "model": "m",
        "input": [
            {"role": "user", "content": "I want a bike."},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "What colour?"}]},
            {"role": "user", "content": "Red, under 300 euros."},
        ],
    }))
    .await;
    assert_eq!(status, 200, "{compacted}");
    assert_eq!(compacted["object"], "response.compaction");
    let sent = h.upstream.last_body();
    let last = sent["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .starts_with("Summarize the conversation")
    );
    let output = compacted["output"].as_array().unwrap();
    assert_eq!(
        output.len(),
        3,
        "the two user messages and the compaction item"
    );
    assert_eq!(output[0]["role"], "user");
    // Issue 18: valid items, not echoes of the input (string content, no status).
    for message in &output[..2] {
        assert_eq!(message["status"], "completed", "{message}");
        assert_eq!(message["content"][0]["type"], "input_text", "{message}");
        assert!(
            message["id"].as_str().unwrap().starts_with("msg"),
            "{message}"
        );
    }
    assert_eq!(output[1]["content"][0]["text"], "Red, under 300 euros.");
    if let Some(schema) = &h.schema {
        schema.check_compaction(&compacted).unwrap_or_else(|e| {
            panic!("compaction violates the Open Responses schema:\n{e}\n{compacted:#}")
        });
    }
    let item = output[2].clone();
    assert_eq!(item["type"], "compaction");
    let blob = item["encrypted_content"].as_str().unwrap();
    assert!(blob.starts_with("tbr1.") && !blob.contains("bike"));
    assert!(compacted["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // The next turn sends the compaction item back; the provider sees the summary.
    h.upstream
        .push(Reply::json(completion("Try the Urban 3.", "stop")));
    let (status, _) = h
        .post_json(
            &json!({"model": "m", "input": [item, {"role": "user", "content": "Any suggestion?"}]}),
        )
        .await;
    assert_eq!(status, 200);
    let messages = h.upstream.last_body()["messages"].clone();
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("red bike under 300 euros")
    );
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "Any suggestion?"})
    );

    // A blob that is not ours is left out, and said so.
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (_, body) = h
        .post_json(&json!({"model": "m", "input": [{"type": "compaction", "id": "cmp_x", "encrypted_content": "gAAAA-foreign"}, {"role": "user", "content": "hi"}]}))
        .await;
    assert!(
        body["toolbridge_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "item_dropped")
    );
}

#[tokio::test]
async fn a_response_over_the_store_limit_is_not_kept() {
    let h = Harness::with_toml(|url| {
        format!(
            "store_max_response_bytes = 2000\n[providers.up]\nbase_url = \"{url}\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        )
    })
    .await;
    h.upstream
        .push(Reply::sse(text_stream(&[&"long ".repeat(1000)], "stop")));
    let events = h
        .post_stream(&json!({"model": "m", "input": "write a lot", "stream": true}))
        .await;
    let id = events[0].data["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let got = h
        .client
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        got.status(),
        404,
        "neither the response nor its in_progress record is kept"
    );
}

#[tokio::test]
async fn concurrent_chains_keep_to_their_own_history() {
    let h = Harness::with_preset("generic").await;
    // The upstream answers each turn with the user's own words, so a mixed-up history shows.
    h.upstream
        .set_gate(std::sync::Arc::new(|r: &toolbridge_testkit::Recorded| {
            let messages = r.body["messages"].as_array()?;
            let last = messages.last()?["content"].as_str()?.to_owned();
            Some(Reply::json(completion(&format!("echo {last}"), "stop")))
        }));
    let mut tasks = Vec::new();
    for chain in 0..8 {
        let client = h.client.clone();
        let url = h.url("/v1/responses");
        tasks.push(tokio::spawn(async move {
            let mut previous: Option<String> = None;
            for turn in 0..3 {
                let mut body = json!({"model": "m", "input": format!("c{chain}t{turn}")});
                if let Some(p) = &previous {
                    body["previous_response_id"] = json!(p);
                }
                let response: Value = client
                    .post(&url)
                    .json(&body)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(
                    response["output"][0]["content"][0]["text"],
                    format!("echo c{chain}t{turn}")
                );
                previous = Some(response["id"].as_str().unwrap().to_owned());
            }
            previous.unwrap()
        }));
    }
    let mut last_ids = Vec::new();
    for task in tasks {
        last_ids.push(task.await.unwrap());
    }
    // Each chain's last upstream request held exactly its own five earlier messages.
    for request in h.upstream.requests() {
        let messages = request.body["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_str().unwrap();
        let chain = &last[..2];
        for m in messages {
            let text = m["content"].as_str().unwrap();
            assert!(text.contains(chain), "{chain} saw `{text}`");
        }
    }
    assert_eq!(last_ids.len(), 8);
}

#[tokio::test]
async fn a_conversation_collects_its_turns_and_feeds_them_back() {
    let h = Harness::with_preset("generic").await;
    let client = h.client.clone();
    let created: Value = client
        .post(h.url("/v1/conversations"))
        .json(&json!({"metadata": {"topic": "maps"}, "items": [{"role": "user", "content": "I live in Lyon."}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["object"], "conversation");
    assert_eq!(created["metadata"], json!({"topic": "maps"}));
    let id = created["id"].as_str().unwrap().to_owned();

    h.upstream.push(Reply::json(completion("Noted.", "stop")));
    let (status, first) = h
        .post_json(
            &json!({"model": "m", "conversation": id, "input": "Remember that.", "store": false}),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["conversation"], json!({"id": id}));
    h.upstream.push(Reply::json(completion("Lyon.", "stop")));
    let (_, _) = h
        .post_json(&json!({"model": "m", "conversation": {"id": id}, "input": "Where do I live?"}))
        .await;
    assert_eq!(
        h.upstream.last_body()["messages"],
        json!([
            {"role": "user", "content": "I live in Lyon."},
            {"role": "user", "content": "Remember that."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "Where do I live?"},
        ])
    );

    let items: Value = client
        .get(h.url(&format!("/v1/conversations/{id}/items?order=asc")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let roles: Vec<&str> = items["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "user", "assistant", "user", "assistant"]);

    let added: Value = client
        .post(h.url(&format!("/v1/conversations/{id}/items")))
        .json(&json!({"items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "More."}]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(added["data"].as_array().unwrap().len(), 1);
    assert!(added["data"][0]["id"].is_string());

    let (status, body) = h
        .post_json(&json!({"model": "m", "conversation": id, "previous_response_id": first["id"], "input": "x"}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "conversation");
    let (status, body) = h
        .post_json(&json!({"model": "m", "conversation": "conv_nope", "input": "x"}))
        .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "conversation_not_found");

    let deleted: Value = client
        .delete(h.url(&format!("/v1/conversations/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(deleted["deleted"], true);
    let gone = client
        .get(h.url(&format!("/v1/conversations/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}
