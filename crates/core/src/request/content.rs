//! The texts the reduction takes from contents: a tool output as text, a shell run's output, a
//! message's plain text, and a user message's parts.

use serde_json::Value;
use toolbridge_wire::responses::{ContentPart, Diagnostic, MessageContent};

use crate::Error;
use crate::canonical::{OutputPart, ToolOutput, UserPart};
use crate::diagnostics::{CONTENT_PART_DROPPED, ITEM_DROPPED, diag};

/// A tool output as text: a string, or content parts whose text is joined.
pub(super) fn output_text(i: usize, output: &Value) -> Result<String, Error> {
    match output {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => Ok(text_of_output_parts(parts)),
        Value::Null => Ok(String::new()),
        Value::Object(_) => Ok(output.to_string()),
        other => Err(Error::invalid(
            format!("input[{i}].output"),
            format!("must be a string or a list of content parts, got {other}"),
        )),
    }
}

/// A function or custom tool's output: a string, or content parts kept as parts (text, images,
/// files) for the dialect to map. A part of a type with no meaning upstream is left out with a
/// diagnostic.
pub(super) fn tool_output(
    i: usize,
    output: &Value,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<ToolOutput, Error> {
    let Value::Array(parts) = output else {
        return output_text(i, output).map(ToolOutput::Text);
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let param = format!("input[{i}].output[{j}]");
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        let text = |key: &str| part.get(key).and_then(Value::as_str).map(str::to_owned);
        match kind {
            "input_text" | "output_text" | "text" => out.push(OutputPart::Text(
                text("text").unwrap_or_default(),
            )),
            "input_image" => match part.get("image_url") {
                Some(Value::String(url)) => out.push(OutputPart::Image {
                    url: url.clone(),
                    detail: text("detail"),
                }),
                Some(other) if !other.is_null() => {
                    return Err(Error::invalid(
                        format!("{param}.image_url"),
                        "expected a string (a URL or a data URL)",
                    ));
                }
                _ => out.push(OutputPart::File {
                    filename: None,
                    data: None,
                    url: None,
                    file_id: text("file_id"),
                }),
            },
            "input_file" => out.push(OutputPart::File {
                filename: text("filename"),
                data: text("file_data"),
                url: text("file_url"),
                file_id: text("file_id"),
            }),
            "" => return Err(Error::invalid(format!("{param}.type"), "is missing")),
            other => match text("text") {
                Some(t) => out.push(OutputPart::Text(t)),
                None => diagnostics.push(diag(
                    ITEM_DROPPED,
                    Some(&param),
                    format!("tool output part type `{other}` has no representation upstream and was left out"),
                )),
            },
        }
    }
    Ok(ToolOutput::Parts(out))
}

/// `shell_call_output.output`: a list of `{stdout, stderr, outcome}`, rendered as text.
pub(super) fn shell_output_text(output: &Value) -> String {
    let Value::Array(runs) = output else {
        return match output {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    };
    let mut text = String::new();
    for run in runs {
        for stream in ["stdout", "stderr"] {
            if let Some(s) = run
                .get(stream)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                text.push_str(s);
                if !s.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        match run.get("outcome") {
            Some(o) if o.get("type").and_then(Value::as_str) == Some("timeout") => {
                text.push_str("(timed out)\n");
            }
            Some(o) => {
                if let Some(code) = o.get("exit_code") {
                    text.push_str(&format!("(exit code {code})\n"));
                }
            }
            None => {}
        }
    }
    text
}

/// Text of a system, developer or assistant message; such messages carry text only.
pub(super) fn plain_text(i: usize, content: &MessageContent) -> Result<String, Error> {
    match content {
        MessageContent::Text(t) => Ok(t.clone()),
        MessageContent::Parts(parts) => {
            let mut text = String::with_capacity(
                parts
                    .iter()
                    .map(|part| match part {
                        ContentPart::InputText { text, .. }
                        | ContentPart::OutputText { text, .. } => text.len(),
                        ContentPart::Refusal { refusal } => refusal.len(),
                        ContentPart::Other(_) => 0,
                    })
                    .sum(),
            );
            for (j, part) in parts.iter().enumerate() {
                match part {
                    ContentPart::InputText { text: t, .. }
                    | ContentPart::OutputText { text: t, .. } => text.push_str(t),
                    ContentPart::Refusal { refusal } => text.push_str(refusal),
                    ContentPart::Other(map) => {
                        let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
                        return Err(Error::Unsupported {
                            param: format!("input[{i}].content[{j}]"),
                            message: format!(
                                "content type `{kind}` is not supported in this message role"
                            ),
                        });
                    }
                }
            }
            Ok(text)
        }
    }
}

/// Whether a message's content carries the client's explicit cache breakpoint (OpenAI's
/// `prompt_cache_breakpoint` on a text, image or file part).
pub(super) fn marks_cache(content: &MessageContent) -> bool {
    let MessageContent::Parts(parts) = content else {
        return false;
    };
    parts.iter().any(|part| match part {
        ContentPart::InputText {
            prompt_cache_breakpoint,
            ..
        } => prompt_cache_breakpoint.is_some(),
        ContentPart::Other(map) => map.contains_key("prompt_cache_breakpoint"),
        _ => false,
    })
}

pub(super) fn user_parts(
    i: usize,
    content: &MessageContent,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<UserPart>, Error> {
    match content {
        MessageContent::Text(t) => Ok(vec![UserPart::Text(t.clone())]),
        MessageContent::Parts(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                match part {
                    ContentPart::InputText { text, .. } | ContentPart::OutputText { text, .. } => {
                        out.push(UserPart::Text(text.clone()))
                    }
                    ContentPart::Refusal { refusal } => out.push(UserPart::Text(refusal.clone())),
                    ContentPart::Other(map) => out.push(other_user_part(i, j, map, diagnostics)?),
                }
            }
            Ok(out)
        }
    }
}

pub(super) fn other_user_part(
    i: usize,
    j: usize,
    map: &serde_json::Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<UserPart, Error> {
    let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
    // No dialect the gateway translates to takes audio in a user turn: the model reads that
    // there was some, and the session goes on.
    if kind == "input_audio" {
        diagnostics.push(diag(
            CONTENT_PART_DROPPED,
            Some(&format!("input[{i}].content[{j}]")),
            "audio input is not sent to this provider; a placeholder text took its place",
        ));
        return Ok(UserPart::Text(
            "[audio omitted: this model takes no audio]".to_owned(),
        ));
    }
    if kind == "input_image" {
        let detail = map.get("detail").and_then(Value::as_str).map(str::to_owned);
        return match map.get("image_url") {
            Some(Value::String(url)) => Ok(UserPart::Image {
                url: url.clone(),
                detail,
            }),
            // Present but not a URL string: the leaf is at fault, not the part.
            Some(other) if !other.is_null() => Err(Error::InvalidJson {
                param: Some(format!("input[{i}].content[{j}].image_url")),
                message: format!(
                    "invalid request body at `input[{i}].content[{j}].image_url`: expected a string (a URL or a data URL), not {}",
                    match other {
                        Value::Object(_) => "an object",
                        Value::Array(_) => "an array",
                        Value::Bool(_) => "a boolean",
                        _ => "a number",
                    }
                ),
            }),
            _ => Err(Error::Unsupported {
                param: format!("input[{i}].content[{j}]"),
                message: "an input_image needs `image_url`; `file_id` references are not supported"
                    .into(),
            }),
        };
    }
    Err(Error::Unsupported {
        param: format!("input[{i}].content[{j}]"),
        message: format!("content type `{kind}` is not supported by this gateway yet"),
    })
}

/// A tool output given as content parts: its text parts, joined.
pub(super) fn text_of_output_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}
