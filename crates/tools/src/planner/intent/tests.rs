//! Unit tests of the rule-based intent analyser: word boundaries, Chinese segmentation and
//! the default rules.

use super::*;

fn capabilities(text: &str) -> Vec<String> {
    RuleBasedAnalyzer::with_default_rules()
        .matches(text)
        .into_iter()
        .map(|m| m.capability)
        .collect()
}

#[test]
fn default_rules_are_valid() {
    assert!(RuleBasedAnalyzer::new(default_rules(), DEFAULT_NEUTRAL_TERMS).is_ok());
}

#[test]
fn words_split_at_non_alphanumerics_and_lowercase() {
    let got: Vec<String> = words("Re-Read the_file, NOW!")
        .into_iter()
        .map(|w| w.text)
        .collect();
    assert_eq!(got, ["re", "read", "the", "file", "now"]);
}

#[test]
fn a_term_inside_a_longer_word_does_not_match() {
    assert!(capabilities("update my address").is_empty());
    assert!(capabilities("spawn a thread").is_empty());
    assert!(capabilities("the research paper").is_empty());
    assert!(capabilities("profile the summary").is_empty());
}

#[test]
fn whole_words_match_in_any_case_and_next_to_punctuation() {
    assert_eq!(capabilities("ADD these: 2, 3"), ["math"]);
    assert_eq!(capabilities("(read)"), ["file"]);
}

#[test]
fn phrases_match_consecutive_words_only() {
    assert_eq!(capabilities("take the square root of 9"), ["math"]);
    // "square" and "root" apart are not the phrase.
    assert!(capabilities("a square garden and a root").is_empty());
}

#[test]
fn every_rule_is_evaluated_and_the_strongest_wins() {
    // Not first-match: "read" (file) appears first, but hashing is asked twice.
    let got = capabilities("read this and give the sha256 digest");
    assert_eq!(got, ["hash", "file"]);
}

#[test]
fn chinese_terms_match_whole_and_neutral_words_shadow_them() {
    assert_eq!(capabilities("请计算 1+1"), ["math"]);
    assert_eq!(capabilities("计算一下这个"), ["math"]);
    assert!(capabilities("我的计算机坏了").is_empty());
    assert!(capabilities("给数据加密").is_empty());
    assert_eq!(capabilities("读取文件"), ["file"]);
    assert!(capabilities("线程安全").is_empty());
}

#[test]
fn mixed_scripts_are_segmented_separately() {
    assert_eq!(capabilities("sha256哈希"), ["hash"]);
}

#[test]
fn remainder_drops_the_matched_terms() {
    let analyzer = RuleBasedAnalyzer::with_default_rules();
    let text = "compute 1+1";
    let top = &analyzer.matches(text)[0];
    assert_eq!(top.remainder(text), "1+1");
    let text = "计算 2*3";
    let top = &analyzer.matches(text)[0];
    assert_eq!(top.remainder(text), "2*3");
}

#[test]
fn bad_rules_are_configuration_errors() {
    let err = RuleBasedAnalyzer::new([IntentRule::new("", ["x"])], [] as [&str; 0]);
    assert_eq!(err.map(|_| ()).unwrap_err().code(), "invalid_configuration");
    let err = RuleBasedAnalyzer::new([IntentRule::new("m", ["  "])], [] as [&str; 0]);
    assert_eq!(err.map(|_| ()).unwrap_err().code(), "invalid_configuration");
    let err = RuleBasedAnalyzer::new([IntentRule::new("m", ["计算x"])], [] as [&str; 0]);
    assert_eq!(err.map(|_| ()).unwrap_err().code(), "invalid_configuration");
}
