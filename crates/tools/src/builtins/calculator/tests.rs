//! Calculator tests: a table of expressions with their exact text, the limits, the errors, and a
//! property test that hostile input never panics.

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn text(expr: &str) -> String {
    match Calculator::evaluate(expr) {
        Ok(v) => v["text"].as_str().unwrap().to_owned(),
        Err(e) => panic!("`{expr}` failed: {e}"),
    }
}

fn exact(expr: &str) -> bool {
    Calculator::evaluate(expr).unwrap()["exact"]
        .as_bool()
        .unwrap()
}

fn approx(expr: &str, want: f64) {
    let v = Calculator::evaluate(expr).unwrap();
    let got = v["result"].as_f64().unwrap();
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "`{expr}` = {got}, want {want}"
    );
}

fn code(expr: &str) -> &'static str {
    Calculator::evaluate(expr).unwrap_err().code()
}

#[test]
fn precedence_associativity_and_signs() {
    let table = [
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("10 - 4 - 3", "3"),
        ("100 / 10 / 5", "2"),
        ("2 ^ 3 ^ 2", "512"),
        ("2 ** 10", "1024"),
        ("-2 ^ 2", "-4"),
        ("(-2) ^ 2", "4"),
        ("2 ^ -1", "0.5"),
        ("--3", "3"),
        ("+5", "5"),
        ("-3!", "-6"),
        ("3!^2", "36"),
        ("17 % 5", "2"),
        ("-17 % 5", "-2"),
        ("7.5 % 2", "1.5"),
        ("1 + 2 * 3 - 4 / 2", "5"),
        ("2 × 3 ÷ 4", "1.5"),
        ("1e3 + .5", "1000.5"),
        ("0.1 + 0.2", "0.30000000000000004"),
    ];
    for (expr, want) in table {
        assert_eq!(text(expr), want, "{expr}");
    }
}

#[test]
fn integers_stay_exact_beyond_64_bits() {
    assert_eq!(text("2^100"), "1267650600228229401496703205376");
    assert!(exact("2^100"));
    assert_eq!(text("33!"), "8683317618811886495518194401280000000");
    assert!(exact("33!"));
    assert_eq!(
        text("170141183460469231731687303715884105727 + 1"),
        "1.7014118346046923e38"
    );
    assert!(!exact("170141183460469231731687303715884105727 + 1"));
    assert_eq!(text("9007199254740993 * 3"), "27021597764222979");
    assert_eq!(text("6 / 3"), "2");
    assert!(exact("6 / 3"));
    assert!(!exact("7 / 2"));
    assert_eq!(text("7 / 2"), "3.5");
    // Results within 64 bits are JSON integers; larger exact ones are floats with exact text.
    assert_eq!(
        Calculator::evaluate("2^62").unwrap()["result"],
        json!(4611686018427387904i64)
    );
    assert_eq!(
        Calculator::evaluate("2^64 - 1").unwrap()["result"],
        json!(u64::MAX)
    );
    assert!(Calculator::evaluate("2^100").unwrap()["result"].is_f64());
}

#[test]
fn functions() {
    let table = [
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.4142135623730951"),
        ("abs(-5)", "5"),
        ("abs(-2.5)", "2.5"),
        ("log(1000)", "3"),
        ("log(8, 2)", "3"),
        ("log2(1024)", "10"),
        ("log10(0.01)", "-2"),
        ("round(2.5)", "3"),
        ("round(-2.5)", "-3"),
        ("round(3.14159, 2)", "3.14"),
        ("floor(-1.5)", "-2"),
        ("ceil(1.2)", "2"),
        ("pow(2, 10)", "1024"),
        ("min(3, 1.5, 2)", "1.5"),
        ("max(3, 1, 2)", "3"),
        ("factorial(5)", "120"),
        ("fact(0)", "1"),
        ("5!", "120"),
        ("nCr(5, 2)", "10"),
        ("ncr(52, 5)", "2598960"),
        ("ncr(5, 7)", "0"),
        ("nPr(5, 2)", "20"),
        ("npr(10, 0)", "1"),
        ("gcd(12, 18)", "6"),
        ("gcd(12, 18, 8)", "2"),
        ("gcd(-4, 6)", "2"),
        ("lcm(4, 6)", "12"),
        ("lcm(4, 6, 10)", "60"),
        ("lcm(0, 3)", "0"),
        ("mean(1, 2, 3, 4)", "2.5"),
        ("mean(1, 2, 3)", "2"),
        ("avg(2, 4)", "3"),
        ("median(3, 1, 2)", "2"),
        ("median(4, 1, 3, 2)", "2.5"),
        ("variance(2, 4, 4, 4, 5, 5, 7, 9)", "4"),
        ("stddev(2, 4, 4, 4, 5, 5, 7, 9)", "2"),
        ("variance(1, 2, 3, 4)", "1.25"),
        ("variance(1.5, 2.5)", "0.25"),
        ("exp(0)", "1"),
        ("ln(1)", "0"),
        ("SQRT(9)", "3"),
    ];
    for (expr, want) in table {
        assert_eq!(text(expr), want, "{expr}");
    }
    approx("sin(pi / 2)", 1.0);
    approx("cos(0)", 1.0);
    approx("tan(pi / 4)", 1.0);
    approx("asin(1)", std::f64::consts::FRAC_PI_2);
    approx("acos(1)", 0.0);
    approx("atan(1)", std::f64::consts::FRAC_PI_4);
    approx("ln(e)", 1.0);
    approx("exp(1)", std::f64::consts::E);
    approx("tau / 2", std::f64::consts::PI);
    approx("stddev(1, 2)", 0.5);
    approx("100!", 9.332_621_544_394_415e157);
    assert!(!exact("34!"));
}

#[test]
fn math_failures_are_tool_failures() {
    for expr in [
        "1 / 0",
        "1 / 0.0",
        "5 % 0",
        "0 ^ -1",
        "sqrt(-1)",
        "ln(0)",
        "log(-1)",
        "log(8, 1)",
        "asin(2)",
        "acos(-1.5)",
        "(-1)!",
        "2.5!",
        "10 ^ 400",
        "exp(1000)",
        "gcd(1.5, 3)",
        "ncr(-1, 2)",
    ] {
        assert_eq!(code(expr), "tool_failed", "{expr}");
    }
}

#[test]
fn syntax_errors_point_at_the_expression() {
    for expr in [
        "",
        "   ",
        "1 +",
        "(1 + 2",
        "1 + 2)",
        "2 3",
        "2pi",
        "foo(1)",
        "x + 1",
        "sqrt",
        "sqrt(1, 2)",
        "min()",
        "log(1, 2, 3)",
        "round(1.5, 20)",
        "1 $ 2",
        "1,2",
        "*3",
        "!",
        "sqrt(1,)",
    ] {
        match Calculator::evaluate(expr) {
            Err(ToolError::InvalidArguments { path, .. }) => assert_eq!(path, "/expression"),
            other => panic!("`{expr}`: {other:?}"),
        }
    }
    let err = Calculator::evaluate("1 + (2 * 3").unwrap_err();
    assert!(err.to_string().contains("never closed"), "{err}");
}

#[test]
fn limits() {
    // Length: exactly at the cap is accepted, one over is refused.
    let at_cap = format!("1{}", "+1".repeat((MAX_INPUT_CHARS - 1) / 2));
    assert!(at_cap.chars().count() <= MAX_INPUT_CHARS);
    assert_eq!(text(&at_cap), ((MAX_INPUT_CHARS - 1) / 2 + 1).to_string());
    let too_long = "1".repeat(MAX_INPUT_CHARS + 1);
    assert_eq!(code(&too_long), "limit_exceeded");

    // Nesting: 63 parentheses inside the top level are fine, 64 are not.
    let nested = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
    assert_eq!(text(&nested(MAX_DEPTH - 1)), "1");
    assert_eq!(code(&nested(MAX_DEPTH)), "limit_exceeded");
    assert_eq!(code(&"-".repeat(200)), "limit_exceeded");
    assert_eq!(code(&format!("2{}", "^2".repeat(100))), "limit_exceeded");
    assert_eq!(
        code(&format!("{}1{}", "sqrt(".repeat(70), ")".repeat(70))),
        "limit_exceeded"
    );

    // Factorials: exact to 33, float to 170, refused above.
    assert!(exact(&format!("{MAX_EXACT_FACTORIAL}!")));
    assert!(!exact(&format!("{}!", MAX_EXACT_FACTORIAL + 1)));
    assert!(Calculator::evaluate(&format!("{MAX_FACTORIAL}!")).is_ok());
    assert_eq!(code(&format!("{}!", MAX_FACTORIAL + 1)), "limit_exceeded");
    assert_eq!(code("1000000!"), "limit_exceeded");
    assert_eq!(code("3!!!"), "limit_exceeded");

    // Combinatorics: n is capped; huge exact results fall back to floats or fail as overflow.
    assert_eq!(
        code(&format!("ncr({}, 2)", MAX_COMBINATORICS_N + 1)),
        "limit_exceeded"
    );
    assert!(Calculator::evaluate(&format!("ncr({MAX_COMBINATORICS_N}, 2)")).is_ok());
    assert_eq!(
        code(&format!(
            "npr({MAX_COMBINATORICS_N}, {MAX_COMBINATORICS_N})"
        )),
        "tool_failed"
    );
    approx("ncr(1000, 500) / 1e299", 2.702_882_409_454_365);
}

#[tokio::test]
async fn execute_checks_arguments_and_output_size() {
    let ctx = ToolContext::default();
    let out = Calculator
        .execute(json!({"expression": "2^10 + sqrt(16)"}), &ctx)
        .await
        .unwrap();
    assert_eq!(out["result"], json!(1028));
    assert_eq!(out["exact"], json!(true));
    let out = Calculator
        .execute(json!({"operation": "evaluate", "expression": "1/4"}), &ctx)
        .await
        .unwrap();
    assert_eq!(out["result"], json!(0.25));
    let err = Calculator.execute(json!({}), &ctx).await.unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/expression"));
    let err = Calculator
        .execute(json!({"operation": "solve", "expression": "1"}), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/operation"));
    let tiny = ToolContext::with_timeout(std::time::Duration::from_secs(5), 10);
    let err = Calculator
        .execute(json!({"expression": "1"}), &tiny)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 10 });
}

/// Fragments a model (or an attacker) might string together.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "1",
        "0",
        "2",
        "-",
        "+",
        "*",
        "/",
        "%",
        "^",
        "**",
        "!",
        "(",
        ")",
        ",",
        ".",
        "e",
        "pi",
        "sqrt(",
        "ncr(",
        "factorial(",
        "log(",
        "mean(",
        "gcd(",
        "lcm(",
        "170",
        "171",
        "99999999999999999999999999999999999999999",
        "1e308",
        "1e-308",
        " ",
        "é",
        "9.9.9",
        "min(",
        "variance(",
        "round(",
        "0.5",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn hostile_fragments_never_panic(parts in prop::collection::vec(fragment(), 0..80)) {
        let expr: String = parts.concat();
        match Calculator::evaluate(&expr) {
            Ok(v) => {
                prop_assert!(v["text"].is_string());
                prop_assert!(!v["result"].is_null(), "non-finite result for {expr}");
            }
            Err(e) => prop_assert!(matches!(
                e.code(),
                "invalid_arguments" | "limit_exceeded" | "tool_failed"
            )),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(expr in "\\PC{0,300}") {
        let _ = Calculator::evaluate(&expr);
    }

    #[test]
    fn integer_sums_are_exact(a in any::<i64>(), b in any::<i64>()) {
        let v = Calculator::evaluate(&format!("{a} + ({b})")).unwrap();
        prop_assert_eq!(v["text"].as_str().unwrap(), (i128::from(a) + i128::from(b)).to_string());
    }
}
