//! The `calculator` tool: arithmetic expressions with exact integers where possible.
//!
//! A hand-written Pratt parser (`parse`) builds a small tree that `eval` computes in `i128`
//! while values stay integral and no step overflows, falling back to `f64` otherwise. It is not a
//! computer-algebra system: there are no variables, no symbolic results and no arbitrary
//! precision. Work is bounded by the input length (1,000 characters), the nesting depth (64) and
//! the caps on factorials and combinatorics, so it runs inline on the caller's task.

mod eval;
mod parse;
#[cfg(test)]
mod tests;

use serde_json::{Number, Value, json};

use super::common::{Args, bounded, check_live, invalid};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

pub use eval::{MAX_COMBINATORICS_N, MAX_EXACT_FACTORIAL, MAX_FACTORIAL};
pub use parse::{MAX_DEPTH, MAX_INPUT_CHARS};

use eval::{EvalError, Num};
use parse::ParseError;

/// Evaluates arithmetic expressions: `+ - * / % ^` (also `**`), unary signs, parentheses,
/// postfix `!`, constants `pi`, `e`, `tau`, and the functions listed in its description.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

const DESCRIPTION: &str = "Evaluates an arithmetic expression exactly where possible. Operators: + - * / % (remainder, sign of the dividend) ^ or ** (power, right-associative, binds tighter than a leading minus: -2^2 = -4), postfix ! (factorial), parentheses. Constants: pi, e, tau. Functions (radians for trigonometry): sqrt, abs, sin, cos, tan, asin, acos, atan, log(x) (base 10), log(x, base), log2, ln, exp, round(x) or round(x, digits), floor, ceil, pow(a, b), min(...), max(...), factorial(n), ncr(n, r), npr(n, r), gcd(...), lcm(...), mean(...), median(...), variance(...) and stddev(...) (population). Integer arithmetic is exact up to 128 bits; otherwise results are 64-bit floats.";

impl Calculator {
    /// Evaluates one expression into the tool's output object.
    pub fn evaluate(expression: &str) -> Result<Value, ToolError> {
        let tree = parse::parse(expression).map_err(|e| match e {
            ParseError::TooLong(len) => ToolError::LimitExceeded(format!(
                "the expression has {len} characters; the limit is {MAX_INPUT_CHARS}"
            )),
            ParseError::TooDeep => ToolError::LimitExceeded(format!(
                "the expression nests deeper than {MAX_DEPTH} levels"
            )),
            ParseError::Syntax { at, message } => {
                invalid("/expression", format!("{message} (at character {at})"))
            }
        })?;
        let value = eval::eval(&tree).map_err(|e| match e {
            EvalError::Math(m) => ToolError::Failed(m),
            EvalError::Limit(m) => ToolError::LimitExceeded(m),
            EvalError::Usage(m) => invalid("/expression", m),
        })?;
        Ok(json!({
            "expression": expression,
            "result": to_json(value),
            "text": to_text(value),
            "exact": matches!(value, Num::Int(_)),
        }))
    }
}

/// The JSON number closest to the value: exact for integers within 64 bits.
fn to_json(n: Num) -> Value {
    match n {
        Num::Int(i) => {
            if let Ok(v) = i64::try_from(i) {
                Value::Number(v.into())
            } else if let Ok(v) = u64::try_from(i) {
                Value::Number(v.into())
            } else {
                Number::from_f64(n.as_f64()).map_or(Value::Null, Value::Number)
            }
        }
        Num::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
    }
}

/// The value as text: every digit of an integer; the shortest round-trip form of a float, with an
/// exponent when it is very large or very small.
fn to_text(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => {
            let magnitude = f.abs();
            if magnitude != 0.0 && !(1e-6..1e16).contains(&magnitude) {
                format!("{f:e}")
            } else {
                format!("{f}")
            }
        }
    }
}

impl Tool for Calculator {
    fn name(&self) -> &str {
        "calculator"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "operation": {
                    "type": "string",
                    "enum": ["evaluate"],
                    "description": "The only operation, `evaluate`; may be omitted.",
                },
                "expression": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_INPUT_CHARS,
                    "description": "The expression, e.g. `2^10 + sqrt(16)`, `10!`, `ncr(52, 5)`, `mean(1, 2, 3, 4)`.",
                },
            },
            "required": ["expression"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["math", "calculate", "arithmetic", "statistics"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            let args = Args::new(&args)?;
            if let Some(op) = args.opt_str("operation")?
                && op != "evaluate"
            {
                return Err(invalid("/operation", "the only operation is `evaluate`"));
            }
            // Bounded by the length and depth caps, so it runs inline.
            let output = Self::evaluate(args.str("expression")?)?;
            bounded(output, ctx)
        })
    }
}
