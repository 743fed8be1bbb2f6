//! jq queries with jaq, hardened for model-written filters.
//!
//! jaq has no step or memory limit of its own and its values are `Rc`-based (not `Send`), so a
//! query runs start to finish on a dedicated thread (`common::run_on_thread`) and is bounded here:
//!
//! - the filter is at most [`MAX_FILTER_BYTES`] and is parsed and checked before compiling:
//!   user `def`s are refused (non-tail recursion such as `def f: 1 + f; f` overflows the stack and
//!   aborts the process, which no `catch_unwind` can stop), and so are builtins that read the
//!   environment or end the process (`env`, `$ENV`, `input`, `halt`, `debug`, …);
//! - every generator step (`range`, `repeat`, `recurse`/`..`, `while`, `until`) spends from a
//!   budget of [`MAX_STEPS`] and polls the deadline and the caller's stop flag, because the
//!   std library's versions of those are replaced by counting ones;
//! - `fromjson` is replaced by serde_json's parser (128 levels deep at most) because jaq's
//!   recurses without a limit;
//! - results are converted as they come, capped at [`MAX_RESULTS`] values, [`MAX_RESULT_DEPTH`]
//!   levels and the caller's output limit;
//! - at most [`MAX_CONCURRENT`] queries run at once, and a query that overruns its deadline keeps
//!   its slot until its thread really ends, so runaway queries cannot pile up;
//! - the thread has a large reserved stack ([`STACK_BYTES`]) so deep values built within the step
//!   budget are dropped and compared without overflowing it;
//! - `halt` never reaches `std::process::exit` (jaq's `unwrap_valr` would call it), and panics are
//!   caught.
//!
//! What is *not* bounded in process: work that needs no generator step, such as nested iteration
//! over a large input (`[.[] as $a | .[] as $b | 1]`) or repeated doubling (`. + . | . + .`), can
//! use CPU and memory until it ends — or until the process runs out of memory and dies; the caller
//! gets `Timeout` at the deadline, but the thread runs on (holding its slot). The isolated mode
//! ([`super::isolated`]) closes that gap: the same `run_query` runs in a short-lived child
//! process ([`super::jq_worker_main`]) under an address-space limit, killed at the deadline.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::OnceLock;
use std::time::Instant;

use jaq_core::load::parse::Def;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::native::{Fun, bome, run, v};
use jaq_core::{Compiler, Ctx, Cv, Error, Exn, RunPtr, ValX, ValXs, Vars, data};
use jaq_json::Val;
use serde_json::{Map, Number, Value};
use tokio::sync::Semaphore;

use crate::builtins::common::{StopFlag, run_on_thread};
use crate::{ToolContext, ToolError};

mod check;

use check::{check, refuse};

/// The most bytes of a filter.
pub const MAX_FILTER_BYTES: usize = 2048;
/// The most generator steps one query may take.
pub const MAX_STEPS: u64 = 100_000;
/// The most values one query may produce.
pub const MAX_RESULTS: usize = 1_000;
/// How deeply a result may nest.
pub const MAX_RESULT_DEPTH: usize = 128;
/// How many queries may run at once in this process.
pub const MAX_CONCURRENT: usize = 4;
/// The reserved stack of a query thread.
pub const STACK_BYTES: usize = 256 * 1024 * 1024;

/// Builtins a model-written filter may not call.
const BANNED: &[&str] = &[
    "env",
    "halt",
    "halt_error",
    "input",
    "inputs",
    "debug",
    "stderr",
    "input_filename",
    "input_line_number",
    "get_search_list",
    "get_prog_origin",
    "get_jq_origin",
    "debug_empty",
    "stderr_empty",
    "$ENV",
    "$__prog_args",
    TICK,
];

/// Natives removed outright (the rest of [`BANNED`] is kept because std definitions refer to it,
/// and is unreachable because the filter check refuses the names).
const REMOVED: &[&str] = &["env", "range", "fromjson"];

/// The internal native every counted generator step calls.
const TICK: &str = "_toolbridge_step";

/// Counting replacements for the std library's recursive generators (same semantics, one step
/// per iteration).
const COUNTED_DEFS: &str = "
def repeat(f): def rec: _toolbridge_step | (f, rec); rec;
def recurse(f): def rec: _toolbridge_step | (., (f | rec)); rec;
def while(cond; update): def rec: _toolbridge_step | if cond then ., (update | rec) else empty end; rec;
def until(cond; update): def rec: _toolbridge_step | if cond then . else update | rec end; rec;
";

static SLOTS: Semaphore = Semaphore::const_new(MAX_CONCURRENT);

type Data = data::JustLut<Val>;

/// The budget of the query running on this thread.
struct Budget {
    steps_left: u64,
    deadline: Instant,
    stop: StopFlag,
}

thread_local! {
    static BUDGET: RefCell<Option<Budget>> = const { RefCell::new(None) };
}

/// Spends one step; fails when the budget is spent, the deadline passed or the caller stopped.
fn step() -> Result<(), Error<Val>> {
    BUDGET.with_borrow_mut(|budget| {
        let Some(budget) = budget else {
            return Err(Error::str("no step budget on this thread"));
        };
        if budget.steps_left == 0 {
            return Err(Error::str(format!(
                "the filter took more than {MAX_STEPS} generator steps"
            )));
        }
        budget.steps_left -= 1;
        // Checking the clock every 256 steps keeps the check cheap.
        if budget.steps_left % 256 == 0
            && (budget.stop.is_raised() || Instant::now() >= budget.deadline)
        {
            budget.steps_left = 0;
            return Err(Error::str("the filter ran out of time"));
        }
        Ok(())
    })
}

fn step_native<'a>(cv: Cv<'a, Data>) -> ValXs<'a, Val> {
    bome(step().map(|()| cv.1))
}

/// `range($from; $to; $by)` with one step per value.
fn range_native<'a>(mut cv: Cv<'a, Data>) -> ValXs<'a, Val> {
    let by = cv.0.pop_var();
    let to = cv.0.pop_var();
    let from = cv.0.pop_var();
    Box::new(CountedRange {
        next: Some(from),
        to,
        by,
        lifetime: PhantomData,
    })
}

struct CountedRange<'a> {
    next: Option<Val>,
    to: Val,
    by: Val,
    lifetime: PhantomData<&'a ()>,
}

impl<'a> Iterator for CountedRange<'a> {
    type Item = ValX<'a, Val>;

    fn next(&mut self) -> Option<Self::Item> {
        let current = self.next.take()?;
        let zero = Val::from(0usize);
        let go_on = if self.by > zero {
            current < self.to
        } else if self.by < zero {
            current > self.to
        } else {
            current != self.to
        };
        if !go_on {
            return None;
        }
        if let Err(e) = step() {
            return Some(Err(Exn::from(e)));
        }
        match current.clone() + self.by.clone() {
            Ok(next) => self.next = Some(next),
            Err(e) => return Some(Err(Exn::from(e))),
        }
        Some(Ok(current))
    }
}

/// `fromjson` through serde_json, whose parser stops at 128 levels.
fn fromjson_native<'a>(cv: Cv<'a, Data>) -> ValXs<'a, Val> {
    let result = match &cv.1 {
        Val::TStr(bytes) | Val::BStr(bytes) => serde_json::from_slice::<Val>(bytes)
            .map_err(|e| Error::str(format!("cannot parse the string as JSON: {e}"))),
        other => Err(Error::str(format!(
            "cannot parse {other} as JSON: not a string"
        ))),
    };
    bome(result)
}

/// The natives: jaq's own minus the banned and replaced ones, plus the counting replacements.
fn natives() -> Vec<Fun<Data>> {
    let keep = |f: &Fun<Data>| !REMOVED.contains(&f.0);
    let ours: [Fun<Data>; 3] = [
        run::<Data>((TICK, v(0), step_native as RunPtr<Data>)),
        run::<Data>(("range", v(3), range_native as RunPtr<Data>)),
        run::<Data>(("fromjson", v(0), fromjson_native as RunPtr<Data>)),
    ];
    jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(keep)
        .chain(ours)
        .collect()
}

/// Converts a jaq value to JSON, refusing values nested deeper than [`MAX_RESULT_DEPTH`]. Numbers
/// that JSON cannot hold (NaN, infinities) become null, as in jq.
fn to_json(value: &Val, depth: usize) -> Result<Value, ToolError> {
    if depth > MAX_RESULT_DEPTH {
        return Err(ToolError::LimitExceeded(format!(
            "a result nests deeper than {MAX_RESULT_DEPTH} levels"
        )));
    }
    Ok(match value {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => match n {
            jaq_json::Num::Int(i) => {
                i64::try_from(*i).map_or(Value::Null, |i| Value::Number(i.into()))
            }
            jaq_json::Num::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            // Big integers and decimals keep their text; serde_json reads it as the nearest number.
            other => serde_json::from_str::<Number>(&other.to_string())
                .map_or(Value::Null, Value::Number),
        },
        Val::TStr(bytes) | Val::BStr(bytes) => {
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        }
        Val::Arr(items) => Value::Array(
            items
                .iter()
                .map(|item| to_json(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Val::Obj(entries) => {
            let mut map = Map::with_capacity(entries.len());
            for (key, item) in entries.iter() {
                let key = match key {
                    Val::TStr(bytes) | Val::BStr(bytes) => {
                        String::from_utf8_lossy(bytes).into_owned()
                    }
                    other => other.to_string(),
                };
                map.insert(key, to_json(item, depth + 1)?);
            }
            Value::Object(map)
        }
    })
}

/// The std library with the counting generators in place of jaq's, parsed once per process.
fn prelude() -> Result<&'static [Def<&'static str>], ToolError> {
    static PRELUDE: OnceLock<Result<Vec<Def<&'static str>>, String>> = OnceLock::new();
    PRELUDE
        .get_or_init(build_prelude)
        .as_deref()
        .map_err(|e| ToolError::Failed(format!("internal error: {e}")))
}

fn build_prelude() -> Result<Vec<Def<&'static str>>, String> {
    let counted = jaq_core::load::parse(COUNTED_DEFS, |p| p.defs())
        .ok_or("the counted prelude does not parse")?;
    let mut counted: Vec<_> = counted.into_iter().map(Some).collect();
    let mut replaced = 0;
    // Replace the std generators in place, so later std definitions (`paths`, `..`) use ours.
    let core_defs: Vec<_> = jaq_core::defs()
        .map(|def| {
            let ours = counted.iter_mut().find(|slot| {
                slot.as_ref()
                    .is_some_and(|d| d.name == def.name && d.args.len() == def.args.len())
            });
            match ours.and_then(Option::take) {
                Some(ours) => {
                    replaced += 1;
                    ours
                }
                None => def,
            }
        })
        .collect();
    if counted.iter().any(Option::is_some) || replaced == 0 {
        return Err("jaq's generators changed; the step budget cannot be installed".to_owned());
    }
    Ok(core_defs
        .into_iter()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .collect())
}

/// Fails with `LimitExceeded` when the filter is longer than [`MAX_FILTER_BYTES`].
pub(crate) fn check_filter_len(filter: &str) -> Result<(), ToolError> {
    if filter.len() > MAX_FILTER_BYTES {
        return Err(ToolError::LimitExceeded(format!(
            "the filter is {} bytes; the limit is {MAX_FILTER_BYTES}",
            filter.len()
        )));
    }
    Ok(())
}

/// Runs one query start to finish on the calling thread: the pre-checks (length, refused
/// constructs), compilation, the step budget and the result caps. The thread must have a stack of
/// [`STACK_BYTES`]. The in-process path calls this on its dedicated thread and the isolated
/// worker (`worker`) in its child process, so both answer the same.
pub(crate) fn run_query(
    filter: &str,
    input: Value,
    max_output: usize,
    deadline: Instant,
    stop: &StopFlag,
) -> Result<Vec<Value>, ToolError> {
    check_filter_len(filter)?;
    check(filter)?;
    let defs = prelude()?.iter().cloned();
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(
            &arena,
            File {
                code: filter,
                path: (),
            },
        )
        .map_err(|_| refuse("the filter does not parse as a jq module"))?;
    let compiled = Compiler::default()
        .with_funs(natives())
        .compile(modules)
        .map_err(|errors| {
            let names: Vec<String> = errors
                .iter()
                .flat_map(|(_, undefined)| undefined.iter())
                .map(|(name, kind)| format!("{} `{name}`", kind.as_str()))
                .collect();
            refuse(format!("unknown {} in the filter", names.join(", ")))
        })?;
    let input: Val = serde_json::from_value(input)
        .map_err(|e| ToolError::Failed(format!("the document cannot be given to jq: {e}")))?;

    BUDGET.with_borrow_mut(|budget| {
        *budget = Some(Budget {
            steps_left: MAX_STEPS,
            deadline,
            stop: stop.clone(),
        });
    });
    let ctx = Ctx::<Data>::new(&compiled.lut, Vars::new([]));
    let mut results = Vec::new();
    let mut size = 0usize;
    for item in compiled.id.run((ctx, input)) {
        if stop.is_raised() {
            return Err(ToolError::Timeout);
        }
        match item {
            Ok(value) => {
                if results.len() == MAX_RESULTS {
                    return Err(ToolError::LimitExceeded(format!(
                        "the filter produced more than {MAX_RESULTS} results; narrow it (e.g. `first(f)`, `limit(n; f)`)"
                    )));
                }
                let value = to_json(&value, 0)?;
                size =
                    size.saturating_add(serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len()));
                if size > max_output {
                    return Err(ToolError::OutputTooLarge { limit: max_output });
                }
                results.push(value);
            }
            Err(exn) => {
                // Never `unwrap_valr`: it calls `std::process::exit` on `halt`.
                return Err(match exn.get_err() {
                    Ok(error) => ToolError::Failed(format!("jq error: {error}")),
                    Err(_) => ToolError::Failed("the filter stopped abnormally".to_owned()),
                });
            }
        }
    }
    Ok(results)
}

/// Runs a jq filter on a document under the context's deadline, cancellation and output limit.
pub(crate) async fn query(
    filter: &str,
    input: Value,
    ctx: &ToolContext,
) -> Result<Vec<Value>, ToolError> {
    check_filter_len(filter)?;
    let permit = tokio::time::timeout_at(ctx.deadline, SLOTS.acquire())
        .await
        .map_err(|_| ToolError::Timeout)?
        .map_err(|_| ToolError::Failed("the jq evaluator is shut down".to_owned()))?;
    let filter = filter.to_owned();
    let max_output = ctx.max_output_bytes;
    let deadline = ctx.deadline.into_std();
    run_on_thread(ctx, "toolbridge-jq", STACK_BYTES, move |stop| {
        // The slot is held until this thread is done, even when the caller stopped waiting.
        let _permit = permit;
        run_query(&filter, input, max_output, deadline, stop)
    })
    .await
}
