//! Matching text against a compiled [`Grammar`]: a memoising backtracking matcher that computes,
//! for each rule at each position, every position where the rule can end.
//!
//! Terminals are matched the way Lark's lexer reads them: a literal exactly, a regex by its
//! longest match at the position. Repetitions are expanded breadth-first over positions, so a
//! long patch costs time in proportion to its length, not its ambiguity. Work is bounded by a
//! step budget and a depth bound; spending either (or re-entering a rule at the same position,
//! left recursion) ends the match with [`Verdict::Undecided`], never a rejection.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use super::lark::{Expr, Grammar};

/// Steps one match may take: terminal attempts, rule entries (memoised or not) and end
/// positions produced, so that the bound follows the work done. A well-formed patch takes a
/// few steps per byte; the budget grows with the input so long patches pass, and an ambiguous
/// grammar on adversarial input stops after a number of steps linear in its length.
pub fn step_budget(text_len: usize) -> usize {
    100_000 + 8 * text_len
}
/// Nested expressions (rule entries included) one match may follow: the grammar is the
/// client's, and each level is a few stack frames, so this bounds the stack whatever the
/// grammar and the input.
const MAX_DEPTH: usize = 512;

/// What matching found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Matches,
    /// The text does not match; the message names the line, column and what was expected there.
    Fails(String),
    /// The matcher gave up; the reason says why.
    Undecided(String),
}

/// Checks the whole of `text` against `grammar`'s `start` rule.
pub fn check(grammar: &Grammar, text: &str) -> Verdict {
    let mut m = Matcher {
        g: grammar,
        text,
        memo: HashMap::new(),
        active: BTreeSet::new(),
        steps: 0,
        budget: step_budget(text.len()),
        depth: 0,
        farthest: 0,
        expected: BTreeSet::new(),
    };
    match m.rule(grammar.start, 0) {
        Err(reason) => Verdict::Undecided(reason),
        Ok(ends) if ends.contains(&text.len()) => Verdict::Matches,
        Ok(ends) => Verdict::Fails(m.failure(ends.last().copied())),
    }
}

type Ends = Rc<Vec<usize>>;

struct Matcher<'g, 't> {
    g: &'g Grammar,
    text: &'t str,
    memo: HashMap<(usize, usize), Ends>,
    active: BTreeSet<(usize, usize)>,
    steps: usize,
    budget: usize,
    depth: usize,
    farthest: usize,
    expected: BTreeSet<Expected<'g>>,
}

/// A terminal that failed, kept by reference and spelled out only if the match fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Expected<'g> {
    Lit(&'g str),
    Re(usize),
}

impl<'g> Matcher<'g, '_> {
    fn rule(&mut self, rule: usize, pos: usize) -> Result<Ends, String> {
        self.step()?;
        if let Some(ends) = self.memo.get(&(rule, pos)) {
            return Ok(ends.clone());
        }
        if !self.active.insert((rule, pos)) {
            return Err(format!(
                "rule `{}` is left-recursive, which this matcher does not follow",
                self.g.names.get(rule).map_or("?", String::as_str)
            ));
        }
        let g = self.g;
        let expr = g.rules.get(rule).ok_or("a rule index is out of range")?;
        let result = self.expr(expr, pos);
        self.active.remove(&(rule, pos));
        let ends = Rc::new(result?);
        self.memo.insert((rule, pos), ends.clone());
        Ok(ends)
    }

    fn step(&mut self) -> Result<(), String> {
        self.steps += 1;
        if self.steps > self.budget {
            return Err(format!("the match took more than {} steps", self.budget));
        }
        Ok(())
    }

    /// Every position where `expr`, starting at `pos`, can end; sorted, without repeats.
    fn expr(&mut self, expr: &'g Expr, pos: usize) -> Result<Vec<usize>, String> {
        if self.depth >= MAX_DEPTH {
            return Err("the grammar nests deeper than the matcher follows".to_owned());
        }
        self.depth += 1;
        let ends = self.expr_inner(expr, pos);
        self.depth -= 1;
        ends
    }

    fn expr_inner(&mut self, expr: &'g Expr, pos: usize) -> Result<Vec<usize>, String> {
        match expr {
            Expr::Lit(text, ci) => self.literal(text, *ci, pos),
            Expr::Re(i) => self.regex(*i, pos),
            Expr::Ref(rule) => Ok(self.rule(*rule, pos)?.to_vec()),
            Expr::Seq(items) => {
                let mut frontier = vec![pos];
                for item in items {
                    frontier = self.ends_from_each(item, &frontier)?;
                    if frontier.is_empty() {
                        break;
                    }
                }
                Ok(frontier)
            }
            Expr::Alt(alts) => {
                let mut ends = BTreeSet::new();
                for alt in alts {
                    ends.extend(self.expr(alt, pos)?);
                }
                Ok(ends.into_iter().collect())
            }
            Expr::Opt(inner) => {
                let mut ends: BTreeSet<usize> = self.expr(inner, pos)?.into_iter().collect();
                ends.insert(pos);
                Ok(ends.into_iter().collect())
            }
            Expr::Star(inner) => {
                let mut ends = self.repeat(inner, pos)?;
                ends.insert(pos);
                Ok(ends.into_iter().collect())
            }
            Expr::Plus(inner) => Ok(self.repeat(inner, pos)?.into_iter().collect()),
        }
    }

    /// The ends of `expr` from every position of `starts`.
    fn ends_from_each(&mut self, expr: &'g Expr, starts: &[usize]) -> Result<Vec<usize>, String> {
        let mut ends = BTreeSet::new();
        for &start in starts {
            let found = self.expr(expr, start)?;
            self.steps += found.len();
            self.step()?;
            ends.extend(found);
        }
        Ok(ends.into_iter().collect())
    }

    /// Every end of one or more `inner`s from `pos`, each position expanded once.
    fn repeat(&mut self, inner: &'g Expr, pos: usize) -> Result<BTreeSet<usize>, String> {
        let mut ends = BTreeSet::new();
        let mut queue = vec![pos];
        let mut seen = BTreeSet::from([pos]);
        while let Some(at) = queue.pop() {
            for end in self.expr(inner, at)? {
                self.step()?;
                ends.insert(end);
                if seen.insert(end) {
                    queue.push(end);
                }
            }
        }
        Ok(ends)
    }

    fn literal(&mut self, text: &'g str, ci: bool, pos: usize) -> Result<Vec<usize>, String> {
        self.step()?;
        let rest = self.text.get(pos..).unwrap_or("");
        let hit = match rest.get(..text.len()) {
            Some(head) if ci => head.eq_ignore_ascii_case(text),
            Some(head) => head == text,
            None => false,
        };
        if hit {
            return Ok(vec![pos + text.len()]);
        }
        self.miss(pos, Expected::Lit(text));
        Ok(Vec::new())
    }

    fn regex(&mut self, i: usize, pos: usize) -> Result<Vec<usize>, String> {
        self.step()?;
        let re = self
            .g
            .regexes
            .get(i)
            .ok_or("a regex index is out of range")?;
        let rest = self.text.get(pos..).unwrap_or("");
        if let Some(m) = re.find(rest) {
            return Ok(vec![pos + m.end()]);
        }
        self.miss(pos, Expected::Re(i));
        Ok(Vec::new())
    }

    /// Records what was expected at the farthest position a terminal failed at.
    fn miss(&mut self, pos: usize, expected: Expected<'g>) {
        if pos > self.farthest {
            self.farthest = pos;
            self.expected.clear();
        }
        if pos == self.farthest && self.expected.len() < 8 {
            self.expected.insert(expected);
        }
    }

    fn failure(&self, longest: Option<usize>) -> String {
        let at = match longest {
            Some(end) if end >= self.farthest => end,
            _ => self.farthest,
        };
        let (line, column) = line_column(self.text, at);
        if at == self.farthest && !self.expected.is_empty() {
            let expected: Vec<String> = self.expected.iter().map(|e| self.spell(*e)).collect();
            format!(
                "the input does not match the grammar at line {line}, column {column}: expected {}",
                expected.join(" or ")
            )
        } else {
            format!(
                "the input does not match the grammar at line {line}, column {column}: unexpected text"
            )
        }
    }
}

impl Matcher<'_, '_> {
    fn spell(&self, expected: Expected<'_>) -> String {
        match expected {
            Expected::Lit(text) => format!("{text:?}"),
            Expected::Re(i) => {
                let source = self.g.regexes.get(i).map_or("", |r| r.as_str());
                let inner = source
                    .strip_prefix("^(?:")
                    .and_then(|s| s.strip_suffix(')'));
                format!("/{}/", inner.unwrap_or(source))
            }
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
