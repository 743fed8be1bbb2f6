//! Unit tests of the registry's name rule and output guard.

use super::*;

#[test]
fn names_follow_the_pattern() {
    for ok in ["a", "web_search", "file-read", "X9", &"n".repeat(64)] {
        assert!(validate_name(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "has space",
        "dot.ted",
        "ünïcode",
        "slash/",
        &"n".repeat(65),
    ] {
        assert_eq!(
            validate_name(bad),
            Err(ToolError::InvalidName(bad.to_owned()))
        );
    }
}

#[test]
fn output_size_is_counted_in_serialised_bytes() {
    let value = serde_json::json!("abcd"); // 6 bytes with quotes
    assert!(check_output_size(&value, 6).is_ok());
    assert_eq!(
        check_output_size(&value, 5),
        Err(ToolError::OutputTooLarge { limit: 5 })
    );
}
