//! The filter check run before a jq query compiles: parse it, then walk the syntax tree and
//! refuse user `def`s and the banned builtins, with the byte offset of a syntax error. It does
//! not compile or run anything.

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Pattern, Term};
use jaq_core::load::{Lexer, Parser};
use jaq_core::path::Part;

use super::BANNED;
use crate::ToolError;
use crate::builtins::common::invalid;

/// Why a filter is refused before it runs.
pub(super) fn refuse(message: impl Into<String>) -> ToolError {
    invalid("/filter", message)
}

/// The byte offset of `part` inside `code` (both from the same string), for error messages.
fn offset_in(code: &str, part: &str) -> usize {
    (part.as_ptr() as usize)
        .saturating_sub(code.as_ptr() as usize)
        .min(code.len())
}

/// Parses the filter and walks it for refused constructs.
pub(super) fn check(code: &str) -> Result<(), ToolError> {
    let tokens = Lexer::new(code).lex().map_err(|errors| {
        let (expect, rest) = match errors.first() {
            Some((expect, rest)) => (format!("{expect:?}"), *rest),
            None => (String::from("token"), code),
        };
        refuse(format!(
            "jq syntax error at byte {}: expected {}",
            offset_in(code, rest),
            expect.to_lowercase()
        ))
    })?;
    let term = Parser::new(&tokens)
        .parse(|p| p.term())
        .map_err(|errors| match errors.first() {
            Some((expect, found)) => {
                let at = found.map_or(code.len(), |t| offset_in(code, t.0));
                let found = found.map_or("the end", |t| t.0);
                refuse(format!(
                    "jq syntax error at byte {at}: expected {}, found `{}`",
                    expect.as_str(),
                    found.chars().take(20).collect::<String>()
                ))
            }
            None => refuse("jq syntax error"),
        })?;
    walk(&term)
}

fn walk(term: &Term<&str>) -> Result<(), ToolError> {
    match term {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Break(_) => Ok(()),
        Term::Var(name) => banned(name),
        Term::Str(_, parts) => parts.iter().try_for_each(|part| match part {
            StrPart::Term(t) => walk(t),
            _ => Ok(()),
        }),
        Term::Arr(inner) => inner.as_deref().map_or(Ok(()), walk),
        Term::Obj(entries) => entries.iter().try_for_each(|(k, v)| {
            walk(k)?;
            v.as_ref().map_or(Ok(()), walk)
        }),
        Term::Neg(inner) | Term::Label(_, inner) => walk(inner),
        Term::BinOp(lhs, op, rhs) => {
            if let BinaryOp::Pipe(Some(pattern)) = op {
                walk_pattern(pattern)?;
            }
            walk(lhs)?;
            walk(rhs)
        }
        Term::Fold(_, source, pattern, args) => {
            walk(source)?;
            walk_pattern(pattern)?;
            args.iter().try_for_each(walk)
        }
        Term::TryCatch(body, catch) => {
            walk(body)?;
            catch.as_deref().map_or(Ok(()), walk)
        }
        Term::IfThenElse(branches, otherwise) => {
            for (cond, then) in branches {
                walk(cond)?;
                walk(then)?;
            }
            otherwise.as_deref().map_or(Ok(()), walk)
        }
        Term::Def(..) => Err(refuse(
            "function definitions (`def`) are not allowed in queries; use the builtins",
        )),
        Term::Call(name, args) => {
            banned(name)?;
            args.iter().try_for_each(walk)
        }
        Term::Path(base, path) => {
            walk(base)?;
            path.0.iter().try_for_each(|(part, _)| match part {
                Part::Index(i) => walk(i),
                Part::Range(from, upto) => {
                    from.as_ref().map_or(Ok(()), walk)?;
                    upto.as_ref().map_or(Ok(()), walk)
                }
            })
        }
    }
}

fn walk_pattern(pattern: &Pattern<&str>) -> Result<(), ToolError> {
    match pattern {
        Pattern::Var(name) => banned(name),
        Pattern::Arr(items) => items.iter().try_for_each(walk_pattern),
        Pattern::Obj(entries) => entries.iter().try_for_each(|(key, value)| {
            walk(key)?;
            walk_pattern(value)
        }),
    }
}

fn banned(name: &str) -> Result<(), ToolError> {
    if BANNED.contains(&name) {
        Err(refuse(format!("`{name}` is not available in queries")))
    } else {
        Ok(())
    }
}
