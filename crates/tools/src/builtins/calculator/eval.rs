//! The calculator's evaluator: exact `i128` arithmetic while every value is an integer and no
//! operation overflows, `f64` otherwise, and the function library.
//!
//! Every operation is bounded: factorials are capped ([`MAX_FACTORIAL`]), combinatorics loop at
//! most `min(r, n - r)` times with `n` capped ([`MAX_COMBINATORICS_N`]), integer powers use
//! `checked_pow`, and a non-finite result is an error rather than `inf` or `NaN`.

use super::parse::{BinOp, Expr};

mod discrete;

use discrete::{factorial, gcd_all, lcm_all, mean, median, ncr, npr, stddev, variance};

/// The largest `n` whose factorial is computed (`171!` overflows an `f64`).
pub const MAX_FACTORIAL: i128 = 170;
/// The largest `n` whose factorial is exact (`34!` overflows an `i128`).
pub const MAX_EXACT_FACTORIAL: i128 = 33;
/// The largest `n` accepted by `ncr` and `npr`.
pub const MAX_COMBINATORICS_N: i128 = 1_000_000;

/// A number: exact while it can be, floating point otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

/// Floats beyond this magnitude are not treated as integers (not every integer is representable).
const MAX_SAFE_FLOAT_INT: f64 = 9_007_199_254_740_992.0;

impl Num {
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            // Precision loss above 2^53 is the documented fallback.
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// The value as an integer, when it is one (floats only up to 2^53).
    fn as_int(self) -> Option<i128> {
        match self {
            Num::Int(i) => Some(i),
            Num::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE_FLOAT_INT => {
                // Exact: the value is integral and within the safe range.
                Some(f as i128)
            }
            Num::Float(_) => None,
        }
    }

    /// Integral floats within the safe range become exact integers (used by rounding).
    fn integral(f: f64) -> Num {
        match Num::Float(f).as_int() {
            Some(i) => Num::Int(i),
            None => Num::Float(f),
        }
    }
}

/// Why evaluation failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EvalError {
    /// A mathematical failure: division by zero, a domain error, an overflow to infinity.
    Math(String),
    /// A value beyond one of the calculator's caps.
    Limit(String),
    /// A function called with the wrong number or kind of arguments.
    Usage(String),
}

fn math(message: impl Into<String>) -> EvalError {
    EvalError::Math(message.into())
}

/// How many arguments a function takes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arity {
    Exactly(usize),
    Between(usize, usize),
    AtLeast(usize),
}

/// A library function.
#[derive(Debug)]
pub(crate) struct Function {
    pub(crate) name: &'static str,
    pub(crate) arity: Arity,
    pub(crate) call: fn(&[Num]) -> Result<Num, EvalError>,
}

const fn f(
    name: &'static str,
    arity: Arity,
    call: fn(&[Num]) -> Result<Num, EvalError>,
) -> Function {
    Function { name, arity, call }
}

/// The function library; names are matched lower-cased.
pub(crate) const FUNCTIONS: &[Function] = &[
    f("sqrt", Arity::Exactly(1), |a| sqrt(a[0])),
    f("abs", Arity::Exactly(1), |a| abs(a[0])),
    f("sin", Arity::Exactly(1), |a| {
        Ok(Num::Float(a[0].as_f64().sin()))
    }),
    f("cos", Arity::Exactly(1), |a| {
        Ok(Num::Float(a[0].as_f64().cos()))
    }),
    f("tan", Arity::Exactly(1), |a| {
        Ok(Num::Float(a[0].as_f64().tan()))
    }),
    f("asin", Arity::Exactly(1), |a| {
        inverse_trig(a[0], f64::asin, "asin")
    }),
    f("acos", Arity::Exactly(1), |a| {
        inverse_trig(a[0], f64::acos, "acos")
    }),
    f("atan", Arity::Exactly(1), |a| {
        Ok(Num::Float(a[0].as_f64().atan()))
    }),
    f("log", Arity::Between(1, 2), log),
    f("log10", Arity::Exactly(1), |a| log(&[a[0], Num::Int(10)])),
    f("log2", Arity::Exactly(1), |a| log(&[a[0], Num::Int(2)])),
    f("ln", Arity::Exactly(1), |a| ln(a[0])),
    f("exp", Arity::Exactly(1), |a| {
        Ok(Num::Float(a[0].as_f64().exp()))
    }),
    f("round", Arity::Between(1, 2), round),
    f("floor", Arity::Exactly(1), |a| rounding(a[0], f64::floor)),
    f("ceil", Arity::Exactly(1), |a| rounding(a[0], f64::ceil)),
    f("pow", Arity::Exactly(2), |a| pow(a[0], a[1])),
    f("min", Arity::AtLeast(1), |a| extreme(a, |x, y| x < y)),
    f("max", Arity::AtLeast(1), |a| extreme(a, |x, y| x > y)),
    f("factorial", Arity::Exactly(1), |a| factorial(a[0])),
    f("fact", Arity::Exactly(1), |a| factorial(a[0])),
    f("ncr", Arity::Exactly(2), |a| ncr(a[0], a[1])),
    f("comb", Arity::Exactly(2), |a| ncr(a[0], a[1])),
    f("npr", Arity::Exactly(2), |a| npr(a[0], a[1])),
    f("perm", Arity::Exactly(2), |a| npr(a[0], a[1])),
    f("gcd", Arity::AtLeast(1), gcd_all),
    f("lcm", Arity::AtLeast(1), lcm_all),
    f("mean", Arity::AtLeast(1), mean),
    f("avg", Arity::AtLeast(1), mean),
    f("median", Arity::AtLeast(1), median),
    f("variance", Arity::AtLeast(1), variance),
    f("stddev", Arity::AtLeast(1), stddev),
];

/// Evaluates an expression tree.
pub(crate) fn eval(expr: &Expr) -> Result<Num, EvalError> {
    let value = match expr {
        Expr::Lit(n) => *n,
        Expr::Neg(inner) => neg(eval(inner)?),
        Expr::Factorial(inner) => factorial(eval(inner)?)?,
        Expr::Binary(op, lhs, rhs) => binary(*op, eval(lhs)?, eval(rhs)?)?,
        Expr::Call(name, args) => call(name, args)?,
    };
    finite(value)
}

fn finite(n: Num) -> Result<Num, EvalError> {
    match n {
        Num::Float(f) if f.is_nan() => Err(math("the result is undefined (not a number)")),
        Num::Float(f) if f.is_infinite() => Err(math(
            "the result overflows a 64-bit float (it is too large to represent)",
        )),
        n => Ok(n),
    }
}

fn call(name: &str, args: &[Expr]) -> Result<Num, EvalError> {
    let Some(function) = FUNCTIONS.iter().find(|f| f.name == name) else {
        return Err(EvalError::Usage(format!("unknown function `{name}`")));
    };
    let n = args.len();
    let ok = match function.arity {
        Arity::Exactly(k) => n == k,
        Arity::Between(lo, hi) => (lo..=hi).contains(&n),
        Arity::AtLeast(k) => n >= k,
    };
    if !ok {
        let wanted = match function.arity {
            Arity::Exactly(k) => format!("{k}"),
            Arity::Between(lo, hi) => format!("{lo} or {hi}"),
            Arity::AtLeast(k) => format!("at least {k}"),
        };
        return Err(EvalError::Usage(format!(
            "`{name}` takes {wanted} argument(s), got {n}"
        )));
    }
    let values = args.iter().map(eval).collect::<Result<Vec<_>, _>>()?;
    (function.call)(&values)
}

fn neg(n: Num) -> Num {
    match n {
        Num::Int(i) => i.checked_neg().map_or(Num::Float(-n.as_f64()), Num::Int),
        Num::Float(f) => Num::Float(-f),
    }
}

fn binary(op: BinOp, a: Num, b: Num) -> Result<Num, EvalError> {
    let exact = |r: Option<i128>, fallback: fn(f64, f64) -> f64| {
        r.map_or_else(|| Num::Float(fallback(a.as_f64(), b.as_f64())), Num::Int)
    };
    match (op, a, b) {
        (BinOp::Add, Num::Int(x), Num::Int(y)) => Ok(exact(x.checked_add(y), |x, y| x + y)),
        (BinOp::Sub, Num::Int(x), Num::Int(y)) => Ok(exact(x.checked_sub(y), |x, y| x - y)),
        (BinOp::Mul, Num::Int(x), Num::Int(y)) => Ok(exact(x.checked_mul(y), |x, y| x * y)),
        (BinOp::Add, ..) => Ok(Num::Float(a.as_f64() + b.as_f64())),
        (BinOp::Sub, ..) => Ok(Num::Float(a.as_f64() - b.as_f64())),
        (BinOp::Mul, ..) => Ok(Num::Float(a.as_f64() * b.as_f64())),
        (BinOp::Div, _, b) if b.as_f64() == 0.0 => Err(math("division by zero")),
        (BinOp::Div, Num::Int(x), Num::Int(y)) => Ok(match x.checked_rem(y) {
            Some(0) => exact(x.checked_div(y), |x, y| x / y),
            _ => Num::Float(a.as_f64() / b.as_f64()),
        }),
        (BinOp::Div, ..) => Ok(Num::Float(a.as_f64() / b.as_f64())),
        (BinOp::Rem, _, b) if b.as_f64() == 0.0 => Err(math("modulo by zero")),
        // `i128::MIN % -1` overflows in Rust but is 0 mathematically.
        (BinOp::Rem, Num::Int(x), Num::Int(y)) => Ok(Num::Int(x.checked_rem(y).unwrap_or(0))),
        (BinOp::Rem, ..) => Ok(Num::Float(a.as_f64() % b.as_f64())),
        (BinOp::Pow, ..) => pow(a, b),
    }
}

fn pow(a: Num, b: Num) -> Result<Num, EvalError> {
    if let (Num::Int(x), Num::Int(y)) = (a, b) {
        if y >= 0 {
            if let Ok(e) = u32::try_from(y)
                && let Some(r) = x.checked_pow(e)
            {
                return Ok(Num::Int(r));
            }
        } else if x == 0 {
            return Err(math("division by zero (zero to a negative power)"));
        }
    }
    if a.as_f64() == 0.0 && b.as_f64() < 0.0 {
        return Err(math("division by zero (zero to a negative power)"));
    }
    finite(Num::Float(a.as_f64().powf(b.as_f64())))
}

fn sqrt(x: Num) -> Result<Num, EvalError> {
    if x.as_f64() < 0.0 {
        return Err(math("square root of a negative number"));
    }
    if let Num::Int(i) = x {
        let r = i.isqrt();
        if r * r == i {
            return Ok(Num::Int(r));
        }
    }
    Ok(Num::Float(x.as_f64().sqrt()))
}

fn abs(x: Num) -> Result<Num, EvalError> {
    Ok(match x {
        Num::Int(i) => i
            .checked_abs()
            .map_or(Num::Float(x.as_f64().abs()), Num::Int),
        Num::Float(f) => Num::Float(f.abs()),
    })
}

fn inverse_trig(x: Num, f: fn(f64) -> f64, name: &str) -> Result<Num, EvalError> {
    let v = x.as_f64();
    if !(-1.0..=1.0).contains(&v) {
        return Err(math(format!("{name} is defined on [-1, 1] only")));
    }
    Ok(Num::Float(f(v)))
}

fn ln(x: Num) -> Result<Num, EvalError> {
    if x.as_f64() <= 0.0 {
        return Err(math("the logarithm is defined for positive numbers only"));
    }
    Ok(Num::Float(x.as_f64().ln()))
}

fn log(args: &[Num]) -> Result<Num, EvalError> {
    let x = args[0].as_f64();
    if x <= 0.0 {
        return Err(math("the logarithm is defined for positive numbers only"));
    }
    let base = args.get(1).map_or(10.0, |b| b.as_f64());
    if base <= 0.0 || base == 1.0 {
        return Err(math("a logarithm's base must be positive and not 1"));
    }
    let value = if base == 10.0 {
        x.log10()
    } else if base == 2.0 {
        x.log2()
    } else {
        x.ln() / base.ln()
    };
    Ok(Num::Float(value))
}

fn rounding(x: Num, f: fn(f64) -> f64) -> Result<Num, EvalError> {
    Ok(match x {
        Num::Int(_) => x,
        Num::Float(v) => Num::integral(f(v)),
    })
}

fn round(args: &[Num]) -> Result<Num, EvalError> {
    let Some(digits) = args.get(1) else {
        return rounding(args[0], f64::round);
    };
    let digits = match digits.as_int() {
        Some(d) if (0..=15).contains(&d) => d,
        _ => {
            return Err(EvalError::Usage(
                "round(x, digits) takes 0 to 15 digits".to_owned(),
            ));
        }
    };
    if let Num::Int(_) = args[0] {
        return Ok(args[0]);
    }
    // `digits` is at most 15, so the cast is exact.
    let scale = 10f64.powi(digits as i32);
    let v = args[0].as_f64();
    let scaled = v * scale;
    if !scaled.is_finite() {
        return Ok(args[0]);
    }
    Ok(Num::Float(scaled.round() / scale))
}

fn extreme(args: &[Num], better: fn(f64, f64) -> bool) -> Result<Num, EvalError> {
    let mut best = args[0];
    for &candidate in &args[1..] {
        if better(candidate.as_f64(), best.as_f64()) {
            best = candidate;
        }
    }
    Ok(best)
}
