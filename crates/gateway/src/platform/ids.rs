//! Identifiers for responses and requests: a prefix and a UUIDv7 (time-ordered, so stored
//! responses sort by creation).

/// `prefix_` followed by 32 hex digits.
pub(crate) fn new(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}
