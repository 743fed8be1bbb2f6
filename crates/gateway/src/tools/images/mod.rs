//! The images backend: a declared `image_generation` tool the provider lacks, run by the
//! gateway against an OpenAI Images API compatible server (`[gateway_tools.images]`: GPT-Image,
//! or a provider's own images API where it speaks that shape).
//!
//! The model is offered one function (`image_generation`: a prompt, and the options the client
//! left to it); a call becomes `POST {url}/images/generations` (or `/images/edits` for an image
//! made earlier in the conversation), streamed with `partial_images` when the client asked for
//! partial images, so each partial reaches the client while the image is still being made. The
//! client sees an `image_generation_call` item with the image as base64; the model reads a short
//! text (the image's id and the prompt used, never the image), or a structured error
//! (`moderation_blocked`, `tool_unavailable`) that tells it not to look for other ways.
//!
//! The URL is the operator's (trusted: not checked against the SSRF policy); the exchange is
//! bounded: a connect and an idle timeout, a deadline per image, the size of an answer, and
//! retries (connect errors, 429, 5xx) only before anything of the image was shown.
//!
//! Not here: the HTTP exchange itself (`backend`), the section as written (`file`), showing
//! the item (the assembler) or the loop that runs the call (`http/responses/rounds/tool_loop`).

mod backend;
mod file;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolbridge_core::plan::GatewayTool;
use toolbridge_tools::ToolError;
use toolbridge_wire::responses::{ImageGenerationCallItem, Tool};

pub(crate) use backend::ImagesBackend;
pub(crate) use file::ImagesFile;

/// The name of the function the model calls (under the built-ins' server label).
pub(crate) const IMAGE_TOOL: &str = "image_generation";

/// The options a client declared on its `image_generation` tool; a value other than `auto`
/// is fixed (the model's choice is not asked for), `auto` or absent leaves it to the model and
/// then to the backend.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ImageOptions {
    pub size: Option<String>,
    pub quality: Option<String>,
    pub output_format: Option<String>,
    pub output_compression: Option<u64>,
    pub background: Option<String>,
    pub moderation: Option<String>,
    /// How many partial images to stream (0–3); 0: none.
    pub partial_images: u32,
    /// The input fidelity of an edit (`high`, `low`).
    pub input_fidelity: Option<String>,
}

impl ImageOptions {
    /// The options of the first `image_generation` tool in `tools`, if one is declared.
    pub(crate) fn declared(tools: &[Tool]) -> Option<Self> {
        tools.iter().find_map(|t| match t {
            Tool::Other(map) if is_image_tool(map) => Some(Self::from_map(map)),
            _ => None,
        })
    }

    fn from_map(map: &Map<String, Value>) -> Self {
        let text = |key: &str| {
            map.get(key)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Self {
            size: text("size"),
            quality: text("quality"),
            output_format: text("output_format"),
            output_compression: map.get("output_compression").and_then(Value::as_u64),
            background: text("background"),
            moderation: text("moderation"),
            partial_images: map
                .get("partial_images")
                .and_then(Value::as_u64)
                .map_or(0, |n| n.min(3) as u32),
            input_fidelity: text("input_fidelity"),
        }
    }

    /// The item shown while the image is made: the options known before the call.
    pub(crate) fn item(&self, args: &ImageArgs) -> ImageGenerationCallItem {
        ImageGenerationCallItem {
            status: "in_progress".to_owned(),
            action: Some(
                if args.input_image_id.is_some() {
                    "edit"
                } else {
                    "generate"
                }
                .to_owned(),
            ),
            background: fixed(&self.background).or_else(|| args.background.clone()),
            output_format: self.output_format.clone(),
            quality: fixed(&self.quality).or_else(|| args.quality.clone()),
            size: fixed(&self.size).or_else(|| args.size.clone()),
            ..ImageGenerationCallItem::default()
        }
    }
}

/// A declared value that is not `auto`.
fn fixed(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| v != "auto")
}

/// True for a declared `image_generation` tool.
pub(crate) fn is_image_tool(map: &Map<String, Value>) -> bool {
    map.get("type").and_then(Value::as_str) == Some("image_generation")
}

/// The arguments of one call, as the function's schema allows them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImageArgs {
    pub prompt: String,
    #[serde(default)]
    pub size: Option<String>,
    #[serde(default)]
    pub quality: Option<String>,
    #[serde(default)]
    pub background: Option<String>,
    /// The id (`ig_…`) of an image made earlier in this conversation, to edit it.
    #[serde(default)]
    pub input_image_id: Option<String>,
}

impl ImageArgs {
    /// Parses a call's arguments as text (for showing the call before it runs).
    pub(crate) fn parse(arguments: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(arguments.trim())
            .map_err(|e| format!("the arguments are not JSON: {e}"))?;
        Self::from_value(&value)
    }

    /// Parses a call's arguments (the typed source's parse function: the schema has checked
    /// them); `Err` is the message the model reads.
    pub(crate) fn from_value(arguments: &Value) -> Result<Self, String> {
        let args = Self::deserialize(arguments)
            .map_err(|e| format!("the arguments do not fit the tool's schema: {e}"))?;
        if args.prompt.trim().is_empty() {
            return Err("`prompt` must describe the image".to_owned());
        }
        let check = |name: &str, value: &Option<String>, allowed: &[&str]| match value {
            Some(v) if !allowed.contains(&v.as_str()) => Err(format!(
                "`{name}` must be one of {}, not `{v}`",
                allowed.join(", ")
            )),
            _ => Ok(()),
        };
        check("size", &args.size, SIZES)?;
        check("quality", &args.quality, QUALITIES)?;
        check("background", &args.background, BACKGROUNDS)?;
        Ok(args)
    }
}

const SIZES: &[&str] = &["auto", "1024x1024", "1536x1024", "1024x1536"];
const QUALITIES: &[&str] = &["auto", "low", "medium", "high"];
const BACKGROUNDS: &[&str] = &["auto", "transparent", "opaque"];

/// The function the model is offered for a declared `image_generation` tool.
pub(crate) fn offered(model: &str) -> GatewayTool {
    GatewayTool {
        server: crate::tools::BUILTIN_SERVER.to_owned(),
        name: IMAGE_TOOL.to_owned(),
        description: Some(format!(
            "Generate an image with {model} and show it to the user. Use it whenever the user asks \
             for a picture, drawing, illustration, photo or other image; do not write code or run \
             commands to make images. Describe the whole image in `prompt`. To change an image made \
             earlier in this conversation, give its id as `input_image_id`. You get back the \
             image's id and the prompt used; the user already sees the image."
        )),
        parameters: json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "A full description of the image to make."},
                "size": {"type": "string", "enum": SIZES},
                "quality": {"type": "string", "enum": QUALITIES},
                "background": {"type": "string", "enum": BACKGROUNDS},
                "input_image_id": {
                    "type": "string",
                    "description": "The id (ig_…) of an image made earlier in this conversation, to edit it."
                }
            },
            "required": ["prompt"],
            "additionalProperties": false
        }),
    }
}

/// An image made (or not) by one call: the item's outcome and what the model reads.
#[derive(Debug, Clone)]
pub(crate) struct ImageRun {
    /// Status, result (base64) or error, revised prompt, the options used.
    pub item: ImageGenerationCallItem,
    /// The model's text: `Ok` a short summary, `Err` a structured error.
    pub text: Result<String, String>,
}

impl ImageRun {
    /// A call that made its image `id`.
    pub(crate) fn made(id: &str, mut item: ImageGenerationCallItem) -> Self {
        item.status = "completed".to_owned();
        let text = json!({
            "image_id": id,
            "status": "completed",
            "revised_prompt": item.revised_prompt,
            "note": "The image was generated and is shown to the user; do not repeat it or describe how to make it."
        })
        .to_string();
        Self {
            item,
            text: Ok(text),
        }
    }

    /// A call that failed: `code` and `message` on the item (OpenAI's error shape, `kind` its
    /// type) and, for the model, what to do instead.
    pub(crate) fn failed(
        mut item: ImageGenerationCallItem,
        kind: &str,
        code: &str,
        message: &str,
    ) -> Self {
        item.status = "failed".to_owned();
        item.result = None;
        item.error = Some(json!({"type": kind, "code": code, "message": message}));
        let advice = match code {
            "moderation_blocked" => {
                "; tell the user it was refused and offer a different prompt. Do not try other ways to make the image"
            }
            "invalid_arguments" => "",
            _ => {
                "; the image could not be made now: tell the user. Do not look for API keys, install packages or run commands to make images"
            }
        };
        Self {
            item,
            text: Err(crate::tools::error_result(
                code,
                &format!("{message}{advice}"),
            )),
        }
    }
}

/// One partial image of a call in progress: its index (from 0) and base64.
#[derive(Debug, Clone)]
pub(crate) struct Partial {
    pub index: u32,
    pub b64: String,
}

/// Images made earlier in the conversation (echoed `image_generation_call` items, and those
/// made earlier in this response), by id, for edits: bounded by count and bytes, the oldest
/// forgotten first.
#[derive(Debug, Default, Clone)]
pub(crate) struct EarlierImages {
    images: std::collections::VecDeque<(String, std::sync::Arc<str>)>,
    bytes: usize,
}

/// At most this many earlier images are kept for edits, and this many bytes of them.
const EARLIER_MAX: usize = 8;
const EARLIER_MAX_BYTES: usize = 64 * 1024 * 1024;

impl EarlierImages {
    /// The images of a request's input items (`image_generation_call` with a `result`).
    pub(crate) fn from_input(input: Option<&toolbridge_wire::responses::Input>) -> Self {
        let mut earlier = Self::default();
        if let Some(toolbridge_wire::responses::Input::Items(items)) = input {
            for item in items {
                if let toolbridge_wire::responses::InputItem::Other(map) = item
                    && map.get("type").and_then(Value::as_str) == Some("image_generation_call")
                    && let (Some(id), Some(result)) = (
                        map.get("id").and_then(Value::as_str),
                        map.get("result").and_then(Value::as_str),
                    )
                {
                    earlier.add(id, result);
                }
            }
        }
        earlier
    }

    pub(crate) fn add(&mut self, id: &str, b64: &str) {
        self.bytes += b64.len();
        self.images.push_back((id.to_owned(), b64.into()));
        while self.images.len() > EARLIER_MAX || self.bytes > EARLIER_MAX_BYTES {
            match self.images.pop_front() {
                Some((_, old)) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    fn get(&self, id: &str) -> Option<std::sync::Arc<str>> {
        self.images
            .iter()
            .rev()
            .find(|(i, _)| i == id)
            .map(|(_, b64)| b64.clone())
    }
}

/// Runs one `image_generation` call (`id`: its item's id) with `backend`, the declared
/// `options` and the model's arguments, resolved by the typed source (`Err`: why they do not
/// resolve, told to the model); an image to edit is looked up in `earlier`.
pub(crate) async fn run(
    backend: Option<&ImagesBackend>,
    id: &str,
    args: Result<&ImageArgs, &ToolError>,
    options: &ImageOptions,
    earlier: &EarlierImages,
    timeout: std::time::Duration,
    progress: &(dyn Fn(Partial) + Send + Sync),
) -> ImageRun {
    let Some(backend) = backend else {
        return ImageRun::failed(
            options.item(&ImageArgs::default()),
            "server_error",
            "tool_unavailable",
            "the gateway has no images backend configured",
        );
    };
    let args = match args {
        Ok(args) => args,
        Err(e) => {
            return ImageRun::failed(
                options.item(&ImageArgs::default()),
                "invalid_request_error",
                e.code(),
                &format!("{e}; call the tool again with a JSON object with `prompt`"),
            );
        }
    };
    let input = match &args.input_image_id {
        Some(image) => match earlier.get(image) {
            Some(b64) => Some(b64),
            None => {
                return ImageRun::failed(
                    options.item(args),
                    "invalid_request_error",
                    "invalid_arguments",
                    &format!(
                        "no image `{image}` was made in this conversation; leave out `input_image_id` to make a new one"
                    ),
                );
            }
        },
        None => None,
    };
    backend
        .run(id, options, args, input.as_deref(), timeout, progress)
        .await
}
