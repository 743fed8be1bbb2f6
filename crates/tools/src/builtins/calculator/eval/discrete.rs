//! The calculator's discrete and statistical functions: factorial, combinatorics, gcd and lcm,
//! and the population statistics. Each is bounded (caps from the parent module) and exact on
//! integers where it can be; parsing and the operators stay in the parent.

use super::{
    EvalError, MAX_COMBINATORICS_N, MAX_EXACT_FACTORIAL, MAX_FACTORIAL, Num, finite, math, sqrt,
};

/// A non-negative integer argument, or a usage error naming the function.
fn natural(x: Num, what: &str) -> Result<i128, EvalError> {
    match x.as_int() {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(math(format!(
            "{what} is defined for non-negative integers only"
        ))),
    }
}

pub(super) fn factorial(x: Num) -> Result<Num, EvalError> {
    let n = natural(x, "the factorial")?;
    if n > MAX_FACTORIAL {
        return Err(EvalError::Limit(format!(
            "the factorial is capped at {MAX_FACTORIAL}! (the largest that fits a 64-bit float); got {n}!"
        )));
    }
    if n <= MAX_EXACT_FACTORIAL {
        return Ok(Num::Int((2..=n).product()));
    }
    let value = (2..=n).fold(1.0_f64, |acc, k| acc * k as f64);
    Ok(Num::Float(value))
}

fn combinatorics_args(n: Num, r: Num, what: &str) -> Result<(i128, i128), EvalError> {
    let n = natural(n, what)?;
    let r = natural(r, what)?;
    if n > MAX_COMBINATORICS_N {
        return Err(EvalError::Limit(format!(
            "{what} is capped at n = {MAX_COMBINATORICS_N}; got n = {n}"
        )));
    }
    Ok((n, r))
}

pub(super) fn ncr(n: Num, r: Num) -> Result<Num, EvalError> {
    let (n, r) = combinatorics_args(n, r, "ncr")?;
    if r > n {
        return Ok(Num::Int(0));
    }
    let r = r.min(n - r);
    // C(n, i + 1) = C(n, i) * (n - i) / (i + 1) divides exactly at every step.
    let mut exact: Option<i128> = Some(1);
    let mut approx = 1.0_f64;
    for i in 0..r {
        exact = exact
            .and_then(|c| c.checked_mul(n - i))
            .map(|c| c / (i + 1));
        approx = approx * (n - i) as f64 / (i + 1) as f64;
        if exact.is_none() && !approx.is_finite() {
            break;
        }
    }
    finite(exact.map_or(Num::Float(approx), Num::Int))
}

pub(super) fn npr(n: Num, r: Num) -> Result<Num, EvalError> {
    let (n, r) = combinatorics_args(n, r, "npr")?;
    if r > n {
        return Ok(Num::Int(0));
    }
    let mut exact: Option<i128> = Some(1);
    let mut approx = 1.0_f64;
    for i in 0..r {
        exact = exact.and_then(|p| p.checked_mul(n - i));
        approx *= (n - i) as f64;
        if exact.is_none() && !approx.is_finite() {
            break;
        }
    }
    finite(exact.map_or(Num::Float(approx), Num::Int))
}

fn integers(args: &[Num], what: &str) -> Result<Vec<i128>, EvalError> {
    args.iter()
        .map(|a| {
            a.as_int()
                .ok_or_else(|| math(format!("{what} is defined for integers only")))
        })
        .collect()
}

fn gcd2(a: u128, b: u128) -> u128 {
    let (mut a, mut b) = (a, b);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

pub(super) fn gcd_all(args: &[Num]) -> Result<Num, EvalError> {
    let ints = integers(args, "gcd")?;
    let g = ints.iter().fold(0u128, |g, &x| gcd2(g, x.unsigned_abs()));
    // Only gcd(i128::MIN, 0) does not fit back into an i128.
    Ok(i128::try_from(g).map_or(Num::Float(g as f64), Num::Int))
}

pub(super) fn lcm_all(args: &[Num]) -> Result<Num, EvalError> {
    let ints = integers(args, "lcm")?;
    let mut l: u128 = 1;
    for x in ints {
        let x = x.unsigned_abs();
        if x == 0 {
            return Ok(Num::Int(0));
        }
        let step = (l / gcd2(l, x)).checked_mul(x);
        match step {
            Some(v) => l = v,
            None => return Err(math("the least common multiple overflows 128 bits")),
        }
    }
    Ok(i128::try_from(l).map_or(Num::Float(l as f64), Num::Int))
}

/// `num / den` exactly when it divides, else as a float.
fn ratio(num: i128, den: i128) -> Num {
    match (num.checked_rem(den), num.checked_div(den)) {
        (Some(0), Some(q)) => Num::Int(q),
        _ => Num::Float(num as f64 / den as f64),
    }
}

fn all_ints(args: &[Num]) -> Option<Vec<i128>> {
    args.iter()
        .map(|a| match a {
            Num::Int(i) => Some(*i),
            Num::Float(_) => None,
        })
        .collect()
}

fn len_i128(args: &[Num]) -> i128 {
    i128::try_from(args.len()).unwrap_or(i128::MAX)
}

pub(super) fn mean(args: &[Num]) -> Result<Num, EvalError> {
    if let Some(ints) = all_ints(args)
        && let Some(sum) = ints.iter().try_fold(0i128, |s, &x| s.checked_add(x))
    {
        return Ok(ratio(sum, len_i128(args)));
    }
    let n = args.len() as f64;
    finite(Num::Float(args.iter().map(|a| a.as_f64()).sum::<f64>() / n))
}

pub(super) fn median(args: &[Num]) -> Result<Num, EvalError> {
    let mut sorted = args.to_vec();
    sorted.sort_by(|a, b| a.as_f64().total_cmp(&b.as_f64()));
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        return Ok(sorted[mid]);
    }
    mean(&sorted[mid - 1..=mid])
}

pub(super) fn variance(args: &[Num]) -> Result<Num, EvalError> {
    let n = len_i128(args);
    if let Some(ints) = all_ints(args) {
        // Population variance = (n·Σx² − (Σx)²) / n², exact when every step fits.
        let exact = (|| {
            let sum = ints.iter().try_fold(0i128, |s, &x| s.checked_add(x))?;
            let squares = ints
                .iter()
                .try_fold(0i128, |s, &x| s.checked_add(x.checked_mul(x)?))?;
            let num = n.checked_mul(squares)?.checked_sub(sum.checked_mul(sum)?)?;
            Some(ratio(num, n.checked_mul(n)?))
        })();
        if let Some(v) = exact {
            return Ok(v);
        }
    }
    let count = args.len() as f64;
    let mean = args.iter().map(|a| a.as_f64()).sum::<f64>() / count;
    let var = args
        .iter()
        .map(|a| (a.as_f64() - mean).powi(2))
        .sum::<f64>()
        / count;
    finite(Num::Float(var))
}

pub(super) fn stddev(args: &[Num]) -> Result<Num, EvalError> {
    sqrt(variance(args)?)
}
