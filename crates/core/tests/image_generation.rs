//! The pure half of issue 22: a declared `image_generation` the gateway serves is planned as a
//! `gateway` decision (and ignored without the offer); the assembler shows an
//! `image_generation_call` with OpenAI's events, partial images between `generating` and
//! `completed`, and a failure without `completed`; an echoed call becomes a short note upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use toolbridge_core::assemble::{AssembleOptions, Assembler, Hosted, ResponseMeta, skeleton};
use toolbridge_core::canonical::Turn;
use toolbridge_core::plan::{
    Decision, GatewayOffer, GatewayTool, ToolCapabilities, plan_with, reasons,
};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_wire::responses::{CreateResponse, ImageGenerationCallItem, Tool};

fn image_tool() -> Vec<Tool> {
    serde_json::from_value(json!([{"type": "image_generation", "partial_images": 1}])).unwrap()
}

#[test]
fn a_served_image_generation_is_a_gateway_decision_and_otherwise_ignored() {
    let offer = GatewayOffer {
        tools: vec![GatewayTool {
            server: "toolbridge".to_owned(),
            name: "image_generation".to_owned(),
            description: None,
            parameters: json!({"type": "object", "properties": {"prompt": {"type": "string"}}}),
        }],
        image_generation: true,
        ..GatewayOffer::default()
    };
    let caps = ToolCapabilities::default();
    let plan = plan_with(&image_tool(), None, &caps, &offer).unwrap();
    assert_eq!(plan.entries[0].decision, Decision::Gateway);
    assert_eq!(plan.entries[0].reason, reasons::GATEWAY_IMAGE_GENERATION);
    assert_eq!(
        plan.upstream.len(),
        1,
        "only the gateway's function goes upstream"
    );
    let plain = plan_with(&image_tool(), None, &caps, &GatewayOffer::default()).unwrap();
    assert_eq!(plain.entries[0].decision, Decision::Ignored);
    assert!(plain.upstream.is_empty());
}

fn assembler() -> Assembler {
    let req: CreateResponse = serde_json::from_value(json!({"model": "m", "input": "x"})).unwrap();
    let meta = ResponseMeta {
        id: "resp_1".to_owned(),
        created_at: 1,
        stored: false,
    };
    Assembler::new(skeleton(&req, &meta), AssembleOptions::default())
}

#[test]
fn an_image_call_shows_its_events_in_openai_order_with_its_partials() {
    let mut a = assembler();
    let mut out = Vec::new();
    a.start(&mut out);
    let declared = ImageGenerationCallItem {
        quality: Some("low".to_owned()),
        ..ImageGenerationCallItem::default()
    };
    let slot = a.hosted_start(Hosted::Image(Box::new(declared)), &mut out);
    assert!(slot.id().starts_with("ig_"), "{}", slot.id());
    a.hosted_partial_image(&slot, 0, "cGFydA==".to_owned(), &mut out);
    let made = ImageGenerationCallItem {
        status: "completed".to_owned(),
        result: Some("aW1hZ2U=".to_owned()),
        revised_prompt: Some("a cat".to_owned()),
        ..ImageGenerationCallItem::default()
    };
    a.hosted_finish_image(slot, made, &mut out);
    let response = a.finish(2, &mut out);
    let names: Vec<&str> = out.iter().map(|e| e.name()).collect();
    assert_eq!(
        &names[2..8],
        [
            "response.output_item.added",
            "response.image_generation_call.in_progress",
            "response.image_generation_call.generating",
            "response.image_generation_call.partial_image",
            "response.image_generation_call.completed",
            "response.output_item.done",
        ]
    );
    let item = serde_json::to_value(&response.output[0]).unwrap();
    assert_eq!(item["type"], "image_generation_call");
    assert_eq!(item["status"], "completed");
    assert_eq!(item["result"], "aW1hZ2U=");
    assert_eq!(
        item["quality"], "low",
        "the declared options stay on the item"
    );
}

#[test]
fn a_failed_image_call_has_no_completed_event_and_keeps_its_error() {
    let mut a = assembler();
    let mut out = Vec::new();
    a.start(&mut out);
    let slot = a.hosted_start(Hosted::Image(Box::default()), &mut out);
    let failed = ImageGenerationCallItem {
        status: "failed".to_owned(),
        error: Some(
            json!({"type": "image_generation_user_error", "code": "moderation_blocked", "message": "refused"}),
        ),
        ..ImageGenerationCallItem::default()
    };
    a.hosted_finish_image(slot, failed, &mut out);
    let response = a.finish(2, &mut out);
    assert!(
        !out.iter()
            .any(|e| e.name() == "response.image_generation_call.completed")
    );
    let item = serde_json::to_value(&response.output[0]).unwrap();
    assert_eq!(item["status"], "failed");
    assert!(item["result"].is_null());
    assert_eq!(item["error"]["code"], "moderation_blocked");
}

#[test]
fn an_echoed_image_call_is_a_short_note_in_the_assistant_turn() {
    let req: CreateResponse = serde_json::from_value(json!({
        "model": "m",
        "input": [
            {"role": "user", "content": "draw a cat"},
            {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "aW1hZ2U=", "revised_prompt": "a cat"},
            {"role": "user", "content": "thanks"},
        ],
    }))
    .unwrap();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    let text = canonical
        .turns
        .iter()
        .find_map(|t| match t {
            Turn::Assistant(a) => a.text.clone(),
            _ => None,
        })
        .unwrap();
    assert!(text.contains("ig_1") && text.contains("a cat"), "{text}");
    assert!(!text.contains("aW1hZ2U="), "{text}");
    assert!(
        canonical
            .diagnostics
            .iter()
            .any(|d| d.code == "image_call_described")
    );
}
