//! The typed source's completed contract: a hand-written-schema tool (`define_schema`), the
//! native call on a selection, and the model transport resolving a Chat, an Anthropic and a
//! Gemini call for a stage with the typed errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolbridge_tools::ToolError;
use toolbridge_tools::typed::{
    Dialect, ModelSelection, ModelToolRegistry, ModelToolSource, NameMap, NativeCall,
    SealedToolRegistry, create_model_transport, define_schema,
};

#[derive(Debug, PartialEq)]
enum Action {
    Weather(String),
    Status,
}

#[derive(Deserialize, JsonSchema)]
struct Empty {}

/// `weather` has a hand-written schema and parser; `status` a derived one.
fn registry() -> SealedToolRegistry<Action> {
    let city = define_schema(
        json!({
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1}},
            "required": ["city"],
            "additionalProperties": false
        }),
        |value: &Value| -> Result<String, String> {
            let city = value["city"].as_str().ok_or("`city` must be a string")?;
            if city.chars().any(char::is_numeric) {
                return Err(format!("`{city}` is not a city name"));
            }
            Ok(city.to_owned())
        },
    );
    ModelToolRegistry::new()
        .schema_tool("weather", "Weather for a city.", city, Action::Weather)
        .tool("status", "Reports the status.", |_: Empty| Action::Status)
        .seal()
        .expect("seals")
}

#[test]
fn a_hand_written_schema_tool_is_validated_then_parsed() {
    let tools = registry();
    let weather = tools.get("weather").expect("registered");
    assert_eq!(weather.parameters()["required"], json!(["city"]));
    let ok = tools.resolve(
        &ModelSelection::new("weather", json!({"city": "Lyon"})),
        "s",
    );
    assert_eq!(ok, Ok(Action::Weather("Lyon".into())));
    // The schema runs first, with the failing pointer.
    let err = tools
        .resolve(&ModelSelection::new("weather", json!({"city": 3})), "s")
        .expect_err("schema");
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/city"));
    // Then the tool's own parser.
    let err = tools
        .resolve(
            &ModelSelection::new("weather", json!({"city": "R2D2"})),
            "s",
        )
        .expect_err("parser");
    assert_eq!(
        err,
        ToolError::InvalidArguments {
            path: "/".into(),
            message: "`R2D2` is not a city name".into()
        }
    );
}

#[test]
fn a_hand_written_schema_that_is_not_an_object_schema_is_refused_at_seal() {
    let schema = define_schema(json!({"type": "string"}), |_: &Value| Ok(()));
    let err = ModelToolRegistry::new()
        .schema_tool("bad", "Bad.", schema, |()| ())
        .seal()
        .expect_err("not an object schema");
    assert_eq!(err.code(), "invalid_schema");
}

fn call(id: &str, name: &str, chars: usize) -> Option<NativeCall> {
    Some(NativeCall {
        id: id.into(),
        name: name.into(),
        argument_chars: chars,
    })
}

#[test]
fn the_transport_resolves_a_chat_an_anthropic_and_a_gemini_call_for_a_stage() {
    let stage = registry().select(["weather"]).expect("selects");
    let names = NameMap::from([("get_weather".to_owned(), "weather".to_owned())]);
    let transport = create_model_transport("answer", stage).with_names(names);
    assert_eq!(transport.id(), "answer");

    let chat = json!({"id": "call_1", "type": "function",
                      "function": {"name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"}});
    let (selection, action) = transport.resolve(Dialect::Chat, &chat).expect("chat");
    assert_eq!(action, Action::Weather("Lyon".into()));
    assert_eq!(selection.tool_id, "weather");
    assert_eq!(selection.call, call("call_1", "get_weather", 15));

    let anthropic = json!({"type": "tool_use", "id": "toolu_1", "name": "weather",
                           "input": {"city": "Oslo"}});
    let (selection, action) = transport
        .resolve(Dialect::Anthropic, &anthropic)
        .expect("anthropic");
    assert_eq!(action, Action::Weather("Oslo".into()));
    assert_eq!(selection.call, call("toolu_1", "weather", 15));

    let gemini = json!({"functionCall": {"name": "get_weather", "args": {"city": "Kyiv"}}});
    let (selection, action) = transport.resolve(Dialect::Gemini, &gemini).expect("gemini");
    assert_eq!(action, Action::Weather("Kyiv".into()));
    assert_eq!(selection.call, call("", "get_weather", 15));
    assert_eq!(selection.input, json!({"city": "Kyiv"}));
}

#[test]
fn the_transport_keeps_the_typed_errors() {
    let transport = create_model_transport("answer", registry().select(["weather"]).expect("ok"));
    // Registered, but not in this stage.
    let status = json!({"type": "tool_use", "id": "t", "name": "status", "input": {}});
    let err = transport
        .resolve(Dialect::Anthropic, &status)
        .expect_err("not in stage");
    assert_eq!(
        err,
        ToolError::NotInStage {
            tool: "status".into(),
            stage: "answer".into()
        }
    );
    // Not registered at all: close matches.
    let typo = json!({"functionCall": {"name": "wether", "args": {}}});
    let err = transport
        .resolve(Dialect::Gemini, &typo)
        .expect_err("unknown");
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "wether".into(),
            suggestions: vec!["weather".into()]
        }
    );
    // Chat arguments that are not JSON, and a wrong shape, name the field.
    let broken = json!({"id": "c", "function": {"name": "weather", "arguments": "{city:"}});
    let err = transport
        .resolve(Dialect::Chat, &broken)
        .expect_err("not JSON");
    assert!(
        matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/function/arguments")
    );
    let err = transport
        .resolve(
            Dialect::Anthropic,
            &json!({"name": "weather", "input": [1]}),
        )
        .expect_err("not an object");
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/input"));
    let err = transport
        .selection(Dialect::Chat, &json!({"name": "weather"}))
        .expect_err("no function");
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/function"));
    // An empty Chat argument string reads as `{}` (and then fails the schema, not the parse).
    let empty = json!({"id": "c", "function": {"name": "weather", "arguments": ""}});
    let selection = transport.selection(Dialect::Chat, &empty).expect("parses");
    assert_eq!(selection.input, json!({}));
    assert_eq!(
        transport
            .resolve(Dialect::Chat, &empty)
            .expect_err("schema")
            .code(),
        "invalid_arguments"
    );
}

#[test]
fn a_call_decoded_to_name_and_text_resolves_like_a_chat_call() {
    let names = NameMap::from([("get_weather".to_owned(), "weather".to_owned())]);
    let transport = create_model_transport("loop", registry().select(["weather"]).expect("ok"))
        .with_names(names);
    let (selection, action) = transport
        .resolve_text("call_7", "get_weather", " {\"city\":\"Lyon\"} ")
        .expect("resolves");
    assert_eq!(action, Action::Weather("Lyon".into()));
    assert_eq!(selection.call, call("call_7", "get_weather", 17));
    // Not JSON: the root; schema-invalid: the failing value's pointer.
    let err = transport
        .resolve_text("c", "get_weather", "{city:")
        .expect_err("not JSON");
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/"));
    let err = transport
        .resolve_text("c", "get_weather", "{\"city\": 5}")
        .expect_err("schema");
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/city"));
}

#[test]
fn an_extended_registry_shares_the_sealed_tools_and_checks_the_new_ones() {
    let base = registry();
    let more = base
        .extend(ModelToolRegistry::new().tool("ping", "Pings.", |_: Empty| Action::Status))
        .expect("extends");
    assert_eq!(
        more.ids().collect::<Vec<_>>(),
        ["ping", "status", "weather"]
    );
    assert_eq!(base.ids().count(), 2, "the base is unchanged");
    assert_eq!(
        more.resolve(&ModelSelection::new("ping", json!({})), "s"),
        Ok(Action::Status)
    );
    let err = base
        .extend(ModelToolRegistry::new().tool("status", "Again.", |_: Empty| Action::Status))
        .expect_err("duplicate");
    assert_eq!(err.code(), "duplicate_tool");
}
