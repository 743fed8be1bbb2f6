//! [`RouteSignals`]: what a client says of a request beyond its body, that a route may match
//! on: Codex's `x-codex-turn-metadata` (its `request_kind` and `agent_name`, read field by
//! field from the JSON text), the tier of `x-codex-routing-hint` and `x-codex-turn-state`.
//!
//! Not here: the routes that match on them (the parent).

/// The Codex request kinds a route may match.
pub(super) const REQUEST_KINDS: &[&str] = &["turn", "compaction", "prewarm"];

/// What a client says of a request beyond its body, that a route may match on: Codex's
/// `x-codex-turn-metadata` (the header, or the same JSON text in the body's `client_metadata`,
/// as Codex sends it over WebSocket).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteSignals {
    pub request_kind: Option<String>,
    pub agent_name: Option<String>,
    /// The tier of `x-codex-routing-hint: model=…;tier=…`.
    pub tier: Option<String>,
    /// `x-codex-turn-state`: the gateway's token naming the target that answered the turn so
    /// far (Codex replays it on every request of a turn).
    pub turn_state: Option<String>,
}

/// The longest `x-codex-turn-metadata` read, in bytes: it is a small JSON object.
const MAX_TURN_METADATA: usize = 16 * 1024;

impl RouteSignals {
    /// The signals in a `x-codex-turn-metadata` JSON text; none when it is not a JSON object.
    /// Read field by field, borrowing: only two of its twenty-odd fields matter, and it comes
    /// with every Codex turn. As with a JSON object read whole, the last of a repeated field
    /// counts, and a field that is not a string is not a signal.
    pub fn from_turn_metadata(text: &str) -> Self {
        if text.len() > MAX_TURN_METADATA {
            return Self::default();
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let Ok(read) = serde::Deserializer::deserialize_any(&mut de, MetadataVisitor) else {
            return Self::default();
        };
        if de.end().is_err() {
            return Self::default();
        }
        let field = |v: Option<std::borrow::Cow<'_, str>>| {
            v.filter(|v| !v.is_empty() && v.len() <= 256)
                .map(std::borrow::Cow::into_owned)
        };
        Self {
            request_kind: field(read.request_kind),
            agent_name: field(read.agent_name),
            tier: None,
            turn_state: None,
        }
    }

    /// The tier named by an `x-codex-routing-hint` value (`model=…;tier=…`, pairs in any
    /// order); `None` when it names none. A bounded word: longer values are not a tier.
    pub fn tier_of_hint(hint: &str) -> Option<String> {
        hint.split(';')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| k.trim() == "tier")
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty() && v.len() <= 64)
            .map(str::to_owned)
    }

    /// The signals of a request body's `client_metadata["x-codex-turn-metadata"]`, else `header`.
    pub fn of_request(
        extra: &serde_json::Map<String, serde_json::Value>,
        header: &RouteSignals,
    ) -> Self {
        let from_body = extra
            .get("client_metadata")
            .and_then(|m| m.get("x-codex-turn-metadata"))
            .and_then(serde_json::Value::as_str)
            .map(Self::from_turn_metadata)
            .unwrap_or_default();
        if from_body == Self::default() {
            header.clone()
        } else {
            // The hint and the turn state come only as headers.
            Self {
                tier: header.tier.clone(),
                turn_state: header.turn_state.clone(),
                ..from_body
            }
        }
    }
}

/// The two signals of a turn metadata object, borrowed from its text where unescaped.
#[derive(Default)]
struct Metadata<'a> {
    request_kind: Option<std::borrow::Cow<'a, str>>,
    agent_name: Option<std::borrow::Cow<'a, str>>,
}

/// Reads a JSON object into [`Metadata`]; anything but an object is an error.
struct MetadataVisitor;

impl<'de> serde::de::Visitor<'de> for MetadataVisitor {
    type Value = Metadata<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut read = Metadata::default();
        while let Some(TextOf(key)) = map.next_key::<TextOf<'de>>()? {
            match key.as_deref() {
                Some("request_kind") => read.request_kind = map.next_value::<TextOf<'de>>()?.0,
                Some("agent_name") => read.agent_name = map.next_value::<TextOf<'de>>()?.0,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(read)
    }
}

/// A JSON value read for its text: a string's, nothing for any other value.
struct TextOf<'a>(Option<std::borrow::Cow<'a, str>>);

impl<'de> serde::Deserialize<'de> for TextOf<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> serde::de::Visitor<'de> for Text {
            type Value = TextOf<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(TextOf(Some(std::borrow::Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TextOf(Some(std::borrow::Cow::Owned(v.to_owned()))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(TextOf(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(TextOf(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(TextOf(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(TextOf(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(TextOf(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(TextOf(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(TextOf(None))
            }
        }
        d.deserialize_any(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::RouteSignals;

    fn signals(kind: Option<&str>, agent: Option<&str>) -> RouteSignals {
        RouteSignals {
            request_kind: kind.map(str::to_owned),
            agent_name: agent.map(str::to_owned),
            tier: None,
            turn_state: None,
        }
    }

    #[test]
    fn a_routing_hint_names_its_tier() {
        assert_eq!(
            RouteSignals::tier_of_hint("model=gpt-5.5; tier=fast").as_deref(),
            Some("fast")
        );
        assert_eq!(
            RouteSignals::tier_of_hint("tier=priority").as_deref(),
            Some("priority")
        );
        assert_eq!(RouteSignals::tier_of_hint("model=gpt-5.5"), None);
        assert_eq!(RouteSignals::tier_of_hint("tier="), None);
        assert_eq!(
            RouteSignals::tier_of_hint(&format!("tier={}", "x".repeat(65))),
            None
        );
    }

    #[test]
    fn turn_metadata_signals_are_read_from_its_object() {
        let read = RouteSignals::from_turn_metadata(
            r#"{"session_id":"s","window_number":0,"nested":{"request_kind":"x"},"list":[1,{"a":2}],
                "request_kind":"compaction","agent_name":"/root/re\"viewer","sandbox":null}"#,
        );
        assert_eq!(read, signals(Some("compaction"), Some("/root/re\"viewer")));
    }

    #[test]
    fn turn_metadata_keeps_the_last_of_a_repeated_field_and_skips_non_strings() {
        let read = RouteSignals::from_turn_metadata(
            r#"{"request_kind":"turn","request_kind":"prewarm","agent_name":7}"#,
        );
        assert_eq!(read, signals(Some("prewarm"), None));
        let empty = RouteSignals::from_turn_metadata(r#"{"request_kind":"","agent_name":true}"#);
        assert_eq!(empty, RouteSignals::default());
    }

    #[test]
    fn turn_metadata_that_is_not_one_json_object_has_no_signals() {
        for text in [
            r#"["request_kind","turn"]"#,
            r#""turn""#,
            r#"{"request_kind":"turn""#,
            r#"{"request_kind":"turn"} {"#,
            "",
        ] {
            assert_eq!(
                RouteSignals::from_turn_metadata(text),
                RouteSignals::default(),
                "{text}"
            );
        }
        let long = format!(
            r#"{{"request_kind":"turn","pad":"{}"}}"#,
            "x".repeat(17 * 1024)
        );
        assert_eq!(
            RouteSignals::from_turn_metadata(&long),
            RouteSignals::default()
        );
    }
}
