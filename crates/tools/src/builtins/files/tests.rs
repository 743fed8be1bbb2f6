//! Unit tests of the sandbox's lexical path checks.

use super::*;

#[test]
fn lexical_checks() {
    assert_eq!(check_path("a/./b/").unwrap(), PathBuf::from("a/b"));
    assert_eq!(check_path(".").unwrap(), PathBuf::from("."));
    assert_eq!(check_path("./").unwrap(), PathBuf::from("."));
    for bad in ["../x", "a/../b", "/etc", "a\\b", "C:x", "a\0b"] {
        assert_eq!(check_path(bad).unwrap_err().code(), "refused", "{bad}");
    }
    assert_eq!(check_path("").unwrap_err().code(), "invalid_arguments");
    let long = "a/".repeat(MAX_PATH_BYTES);
    assert_eq!(check_path(&long).unwrap_err().code(), "limit_exceeded");
    let wide = "a".repeat(MAX_COMPONENT_BYTES + 1);
    assert_eq!(check_path(&wide).unwrap_err().code(), "limit_exceeded");
}
