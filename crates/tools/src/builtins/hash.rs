//! The `hash` tool: digests (MD5, SHA-1, SHA-256, SHA-512, BLAKE3), HMAC-SHA256, and base64 and
//! hex encoding and decoding.
//!
//! Input is text interpreted as UTF-8, hex or base64 (`input_encoding`), so binary data can be
//! hashed too. Work is linear in the input, which is capped at [`MAX_INPUT_BYTES`], so it runs
//! inline. This is not a password-hashing or key-management tool: MD5 and SHA-1 are offered for
//! checksums and interoperability only, and the HMAC key is taken as given.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Digest as _;

use super::common::{Args, bounded, cap_len, check_live, invalid, operation_schema};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// The most bytes of `input` (as given, before decoding).
pub const MAX_INPUT_BYTES: usize = 1024 * 1024;
/// The most bytes of an HMAC `key` (as given, before decoding).
pub const MAX_KEY_BYTES: usize = 4096;

const OPERATIONS: &[&str] = &[
    "md5",
    "sha1",
    "sha256",
    "sha512",
    "blake3",
    "hmac_sha256",
    "base64_encode",
    "base64_decode",
    "hex_encode",
    "hex_decode",
];

/// Hashes and encodes data.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hash;

/// Decoding accepts padded and unpadded input; encoding pads unless asked not to.
const fn engine(url_safe: bool, pad: bool) -> GeneralPurpose {
    let config = GeneralPurposeConfig::new()
        .with_encode_padding(pad)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent);
    if url_safe {
        GeneralPurpose::new(&alphabet::URL_SAFE, config)
    } else {
        GeneralPurpose::new(&alphabet::STANDARD, config)
    }
}

/// Decodes text in `encoding` into bytes; `field` names the argument in errors.
fn decode(text: &str, encoding: &str, url_safe: bool, field: &str) -> Result<Vec<u8>, ToolError> {
    match encoding {
        "utf8" => Ok(text.as_bytes().to_vec()),
        "hex" => {
            let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            hex::decode(compact)
                .map_err(|e| invalid(format!("/{field}"), format!("is not valid hex: {e}")))
        }
        "base64" => {
            let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            engine(url_safe, true)
                .decode(compact)
                .map_err(|e| invalid(format!("/{field}"), format!("is not valid base64: {e}")))
        }
        other => Err(invalid(
            format!("/{field}_encoding"),
            format!("unknown encoding `{other}` (utf8, hex or base64)"),
        )),
    }
}

/// Encodes bytes for output.
fn encode(bytes: &[u8], encoding: &str, url_safe: bool, pad: bool) -> Result<String, ToolError> {
    match encoding {
        "hex" => Ok(hex::encode(bytes)),
        "base64" => Ok(engine(url_safe, pad).encode(bytes)),
        "utf8" => String::from_utf8(bytes.to_vec()).map_err(|_| {
            ToolError::Failed(
                "the decoded bytes are not valid UTF-8; ask for output_encoding `hex` or `base64`"
                    .to_owned(),
            )
        }),
        other => Err(invalid(
            "/output_encoding",
            format!("unknown encoding `{other}` (utf8, hex or base64)"),
        )),
    }
}

impl Hash {
    /// Runs one operation on validated-shape arguments.
    pub fn run(args: &Value) -> Result<Value, ToolError> {
        let args = Args::new(args)?;
        let op = args.operation()?;
        let input = args.str("input")?;
        cap_len("input", input.len(), MAX_INPUT_BYTES)?;
        let url_safe = args.opt_str("alphabet")? == Some("url_safe");
        let pad = args.opt_bool("padding")?.unwrap_or(true);
        let input_encoding = args.opt_str("input_encoding")?;
        let output_encoding = args.opt_str("output_encoding")?;
        if op != "hmac_sha256" && args.get("key").is_some() {
            return Err(invalid("/key", "is only used by `hmac_sha256`"));
        }

        let (result, default_out) = match op {
            "md5" | "sha1" | "sha256" | "sha512" | "blake3" | "hmac_sha256" => {
                let data = decode(input, input_encoding.unwrap_or("utf8"), url_safe, "input")?;
                let digest = match op {
                    "md5" => md5::Md5::digest(&data).to_vec(),
                    "sha1" => sha1::Sha1::digest(&data).to_vec(),
                    "sha256" => sha2::Sha256::digest(&data).to_vec(),
                    "sha512" => sha2::Sha512::digest(&data).to_vec(),
                    "blake3" => blake3::hash(&data).as_bytes().to_vec(),
                    _ => {
                        let key_text = args.str("key")?;
                        cap_len("key", key_text.len(), MAX_KEY_BYTES)?;
                        let key_encoding = args.opt_str("key_encoding")?.unwrap_or("utf8");
                        let key = decode(key_text, key_encoding, url_safe, "key")?;
                        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key)
                            .map_err(|e| invalid("/key", format!("unusable HMAC key: {e}")))?;
                        mac.update(&data);
                        mac.finalize().into_bytes().to_vec()
                    }
                };
                (digest, "hex")
            }
            "hex_encode" | "base64_encode" => {
                if output_encoding.is_some() {
                    return Err(invalid(
                        "/output_encoding",
                        "an encode operation's output is its own encoding",
                    ));
                }
                let data = decode(input, input_encoding.unwrap_or("utf8"), url_safe, "input")?;
                (data, if op == "hex_encode" { "hex" } else { "base64" })
            }
            "hex_decode" | "base64_decode" => {
                if input_encoding.is_some() {
                    return Err(invalid(
                        "/input_encoding",
                        "a decode operation's input is in the encoding it decodes",
                    ));
                }
                let from = if op == "hex_decode" { "hex" } else { "base64" };
                (decode(input, from, url_safe, "input")?, "utf8")
            }
            other => {
                return Err(invalid(
                    "/operation",
                    format!("unknown operation `{other}`"),
                ));
            }
        };
        let out_encoding = output_encoding.unwrap_or(default_out);
        let text = encode(&result, out_encoding, url_safe, pad)?;
        Ok(json!({
            "operation": op,
            "result": text,
            "encoding": out_encoding,
            "bytes": result.len(),
        }))
    }
}

impl Tool for Hash {
    fn name(&self) -> &str {
        "hash"
    }

    fn description(&self) -> &str {
        "Computes digests (md5, sha1, sha256, sha512, blake3) and HMAC-SHA256, and encodes or decodes base64 and hex. Digests are returned in lowercase hex unless output_encoding says base64. Input is UTF-8 text unless input_encoding says hex or base64."
    }

    fn parameters(&self) -> Value {
        let encodings = ["utf8", "hex", "base64"];
        json!({
            "type": "object",
            "properties": {
                "operation": operation_schema(OPERATIONS, "What to compute: a digest (md5, sha1, sha256, sha512, blake3), hmac_sha256 (needs `key`), or an encoding conversion."),
                "input": {
                    "type": "string",
                    "maxLength": MAX_INPUT_BYTES,
                    "description": "The data. For *_decode operations, the encoded text; otherwise interpreted per `input_encoding`. At most 1 MiB.",
                },
                "input_encoding": {
                    "type": "string",
                    "enum": encodings,
                    "description": "How to read `input` for digests and encode operations: utf8 (default), hex or base64. Not used by decode operations.",
                },
                "output_encoding": {
                    "type": "string",
                    "enum": encodings,
                    "description": "How to write the result: hex (default for digests), base64, or utf8 (default for decode operations). Not used by encode operations.",
                },
                "key": {
                    "type": "string",
                    "maxLength": MAX_KEY_BYTES,
                    "description": "The HMAC key, for hmac_sha256 only; read per `key_encoding`.",
                },
                "key_encoding": {
                    "type": "string",
                    "enum": encodings,
                    "description": "How to read `key`: utf8 (default), hex or base64.",
                },
                "alphabet": {
                    "type": "string",
                    "enum": ["standard", "url_safe"],
                    "description": "The base64 alphabet: standard (+/, default) or url_safe (-_).",
                },
                "padding": {
                    "type": "boolean",
                    "description": "Whether base64 output is padded with `=` (default true). Decoding accepts either.",
                },
            },
            "required": ["operation", "input"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &[
            "hash", "digest", "checksum", "hmac", "encode", "decode", "base64", "hex",
        ]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            // Linear in an input capped at 1 MiB (a few milliseconds), so it runs inline.
            bounded(Self::run(&args)?, ctx)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: Value) -> Result<Value, ToolError> {
        Hash::run(&args)
    }

    fn result(args: Value) -> String {
        run(args).unwrap()["result"].as_str().unwrap().to_owned()
    }

    #[test]
    fn digests_match_known_vectors() {
        let table = [
            ("md5", "900150983cd24fb0d6963f7d28e17f72"),
            ("sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                "sha256",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                "sha512",
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            ),
            (
                "blake3",
                "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85",
            ),
        ];
        for (op, want) in table {
            assert_eq!(
                result(json!({"operation": op, "input": "abc"})),
                want,
                "{op}"
            );
        }
        // The same bytes given as hex or base64 hash the same.
        let want = table[2].1;
        assert_eq!(
            result(json!({"operation": "sha256", "input": "616263", "input_encoding": "hex"})),
            want
        );
        assert_eq!(
            result(json!({"operation": "sha256", "input": "YWJj", "input_encoding": "base64"})),
            want
        );
        let b64 =
            result(json!({"operation": "sha256", "input": "abc", "output_encoding": "base64"}));
        assert_eq!(b64, "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
        let out = run(json!({"operation": "md5", "input": ""})).unwrap();
        assert_eq!(out["result"], "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(out["bytes"], 16);
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // RFC 4231 test case 2.
        let out = result(json!({
            "operation": "hmac_sha256",
            "key": "Jefe",
            "input": "what do ya want for nothing?",
        }));
        assert_eq!(
            out,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 1: a binary key given in hex.
        let out = result(json!({
            "operation": "hmac_sha256",
            "key": "0b".repeat(20),
            "key_encoding": "hex",
            "input": "Hi There",
        }));
        assert_eq!(
            out,
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        let err = run(json!({"operation": "hmac_sha256", "input": "x"})).unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/key"));
        let err = run(json!({"operation": "sha256", "input": "x", "key": "k"})).unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/key"));
    }

    #[test]
    fn base64_and_hex_round_trip() {
        assert_eq!(
            result(json!({"operation": "base64_encode", "input": "hello?>"})),
            "aGVsbG8/Pg=="
        );
        assert_eq!(
            result(
                json!({"operation": "base64_encode", "input": "hello?>", "alphabet": "url_safe", "padding": false})
            ),
            "aGVsbG8_Pg"
        );
        assert_eq!(
            result(json!({"operation": "base64_decode", "input": "aGVsbG8/Pg=="})),
            "hello?>"
        );
        // Unpadded and line-wrapped input decodes too.
        assert_eq!(
            result(
                json!({"operation": "base64_decode", "input": "aGVs\nbG8_Pg", "alphabet": "url_safe"})
            ),
            "hello?>"
        );
        assert_eq!(
            result(json!({"operation": "hex_encode", "input": "hi"})),
            "6869"
        );
        assert_eq!(
            result(json!({"operation": "hex_decode", "input": "68 69"})),
            "hi"
        );
        // Conversions between encodings.
        assert_eq!(
            result(json!({"operation": "base64_encode", "input": "ff00", "input_encoding": "hex"})),
            "/wA="
        );
        assert_eq!(
            result(
                json!({"operation": "base64_decode", "input": "/wA=", "output_encoding": "hex"})
            ),
            "ff00"
        );
    }

    #[test]
    fn bad_input_is_reported_precisely() {
        let err = run(json!({"operation": "hex_decode", "input": "xyz"})).unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/input"));
        let err = run(json!({"operation": "base64_decode", "input": "!!!"})).unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/input"));
        // Bytes that are not UTF-8 need a binary output encoding.
        let err = run(json!({"operation": "base64_decode", "input": "/wA="})).unwrap_err();
        assert_eq!(err.code(), "tool_failed");
        let err =
            run(json!({"operation": "hex_encode", "input": "a", "output_encoding": "base64"}))
                .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/output_encoding")
        );
        let err = run(json!({"operation": "hex_decode", "input": "61", "input_encoding": "hex"}))
            .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/input_encoding")
        );
        let err = run(json!({"operation": "crc32", "input": "a"})).unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/operation")
        );
        let err = run(json!({"operation": "md5"})).unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/input"));
    }

    #[test]
    fn input_and_key_are_capped() {
        let at_cap = "a".repeat(MAX_INPUT_BYTES);
        assert!(run(json!({"operation": "blake3", "input": at_cap})).is_ok());
        let over = "a".repeat(MAX_INPUT_BYTES + 1);
        let err = run(json!({"operation": "blake3", "input": over})).unwrap_err();
        assert_eq!(err.code(), "limit_exceeded");
        let key = "k".repeat(MAX_KEY_BYTES + 1);
        let err = run(json!({"operation": "hmac_sha256", "input": "x", "key": key})).unwrap_err();
        assert_eq!(err.code(), "limit_exceeded");
        let key = "k".repeat(MAX_KEY_BYTES);
        assert!(run(json!({"operation": "hmac_sha256", "input": "x", "key": key})).is_ok());
    }

    #[tokio::test]
    async fn execute_applies_the_output_limit() {
        let ctx = ToolContext::with_timeout(std::time::Duration::from_secs(5), 64);
        let err = Hash
            .execute(
                json!({"operation": "hex_encode", "input": "a".repeat(100)}),
                &ctx,
            )
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::OutputTooLarge { limit: 64 });
        let out = Hash
            .execute(
                json!({"operation": "md5", "input": "abc"}),
                &ToolContext::default(),
            )
            .await
            .unwrap();
        assert_eq!(out["result"], "900150983cd24fb0d6963f7d28e17f72");
    }
}
