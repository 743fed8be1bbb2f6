//! The subset of Lark that freeform tool grammars use, compiled for [`super::matcher`].
//!
//! Supported: rules and terminals (`name: …`, `NAME: …`, with `?`/`!` modifiers and `.N`
//! priorities, which are ignored), alternatives on one line or continued on lines starting with
//! `|`, sequences, groups `( … )`, optional `[ … ]`, `?`, `*`, `+`, `-> alias` (ignored), string
//! literals (with `i`), `"a".."z"` ranges, `/regex/flags`, `//` comments, and
//! `%import common.NAME` for the usual terminals. Anything else (`%ignore`, `%declare`,
//! templates, `~` repetition, a Python regex the `regex` crate refuses) is a compile error, and
//! the caller skips the check: a grammar this module misreads must never reject good input.

use std::collections::HashMap;

use regex::Regex;

/// One grammar expression.
#[derive(Debug, Clone)]
pub enum Expr {
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    Opt(Box<Expr>),
    Star(Box<Expr>),
    Plus(Box<Expr>),
    /// A literal; `true` when matched ignoring ASCII case.
    Lit(String, bool),
    /// An index into [`Grammar::regexes`].
    Re(usize),
    /// An index into [`Grammar::rules`].
    Ref(usize),
}

/// A compiled grammar: rules by index, `start` first.
#[derive(Debug)]
pub struct Grammar {
    pub(crate) rules: Vec<Expr>,
    pub(crate) names: Vec<String>,
    pub(crate) regexes: Vec<Regex>,
    pub(crate) start: usize,
}

/// Terminals `%import common.X` may name, as Lark's `common.lark` defines them.
const COMMON: &[(&str, &str)] = &[
    ("LF", r#""\n""#),
    ("CR", r#""\r""#),
    ("NEWLINE", r#"/(\r?\n)+/"#),
    ("WS", r#"/[ \t\f\r\n]+/"#),
    ("WS_INLINE", r#"/[ \t]+/"#),
    ("DIGIT", r#"/[0-9]/"#),
    ("HEXDIGIT", r#"/[a-fA-F0-9]/"#),
    ("INT", r#"/[0-9]+/"#),
    ("SIGNED_INT", r#"/[+-]?[0-9]+/"#),
    ("NUMBER", r#"/[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?/"#),
    (
        "SIGNED_NUMBER",
        r#"/[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?/"#,
    ),
    ("LETTER", r#"/[A-Za-z]/"#),
    ("LCASE_LETTER", r#"/[a-z]/"#),
    ("UCASE_LETTER", r#"/[A-Z]/"#),
    ("WORD", r#"/[A-Za-z]+/"#),
    ("CNAME", r#"/[A-Za-z_][A-Za-z_0-9]*/"#),
    ("ESCAPED_STRING", r#"/"(?:[^"\\]|\\.)*"/"#),
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Colon,
    Pipe,
    LParen,
    RParen,
    LBrack,
    RBrack,
    Question,
    Star,
    Plus,
    Arrow,
    DotDot,
    Str(String, bool),
    Re(String, String),
    Newline,
    Directive(String),
    Priority,
}

impl Grammar {
    /// Compiles a Lark grammar; `Err` says what is outside the supported subset.
    pub fn compile(source: &str) -> Result<Self, String> {
        let tokens = tokenize(source)?;
        let statements = statements(&tokens);
        let mut defs: Vec<(String, &[Tok])> = Vec::new();
        let mut imports: Vec<(String, String)> = Vec::new();
        for st in &statements {
            match st.as_slice() {
                [Tok::Directive(d)] => imports.push(import(d)?),
                [Tok::Name(name), Tok::Colon, body @ ..]
                | [Tok::Name(name), Tok::Priority, Tok::Colon, body @ ..] => {
                    defs.push((name.trim_start_matches(['?', '!']).to_owned(), body));
                }
                other => return Err(format!("unsupported statement near {:?}", other.first())),
            }
        }
        let mut names: Vec<String> = defs.iter().map(|(n, _)| n.clone()).collect();
        let mut import_sources = Vec::new();
        for (name, src) in &imports {
            if !names.contains(name) {
                names.push(name.clone());
                import_sources.push(tokenize(src)?);
            }
        }
        let index: HashMap<String, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let mut builder = Builder {
            index: &index,
            regexes: Vec::new(),
            nesting: 0,
        };
        let mut rules = Vec::with_capacity(names.len());
        for (_, body) in &defs {
            rules.push(builder.parse_body(body)?);
        }
        for src in &import_sources {
            let body: Vec<Tok> = src
                .iter()
                .filter(|t| **t != Tok::Newline)
                .cloned()
                .collect();
            rules.push(builder.parse_body(&body)?);
        }
        let start = *index
            .get("start")
            .ok_or("the grammar has no `start` rule")?;
        Ok(Self {
            rules,
            names,
            regexes: builder.regexes,
            start,
        })
    }
}

/// `%import common.NAME` or `%import common.NAME -> ALIAS` → (name, definition).
fn import(directive: &str) -> Result<(String, String), String> {
    let rest = directive
        .strip_prefix("%import")
        .ok_or_else(|| format!("unsupported directive `{directive}`"))?
        .trim();
    let (path, alias) = match rest.split_once("->") {
        Some((p, a)) => (p.trim(), Some(a.trim())),
        None => (rest, None),
    };
    let name = path
        .strip_prefix("common.")
        .ok_or_else(|| format!("unsupported import `{path}`"))?;
    let def = COMMON
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
        .ok_or_else(|| format!("unsupported import `common.{name}`"))?;
    Ok((alias.unwrap_or(name).to_owned(), def.to_owned()))
}

/// Statements: a definition runs over the lines after it that start with `|`.
fn statements(tokens: &[Tok]) -> Vec<Vec<Tok>> {
    let mut out: Vec<Vec<Tok>> = Vec::new();
    for line in tokens.split(|t| *t == Tok::Newline) {
        match line.first() {
            None => {}
            Some(Tok::Pipe) => match out.last_mut() {
                Some(prev) => prev.extend(line.iter().cloned()),
                None => out.push(line.to_vec()),
            },
            Some(_) => out.push(line.to_vec()),
        }
    }
    out
}

fn tokenize(src: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = src.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\n' => out.push(Tok::Newline),
            c if c.is_whitespace() => {}
            '/' if src[i..].starts_with("//") => {
                while chars.peek().is_some_and(|(_, c)| *c != '\n') {
                    chars.next();
                }
            }
            '%' => {
                let end = src[i..].find('\n').map_or(src.len(), |n| i + n);
                out.push(Tok::Directive(src[i..end].trim().to_owned()));
                while chars.peek().is_some_and(|(j, _)| *j < end) {
                    chars.next();
                }
            }
            ':' => out.push(Tok::Colon),
            '|' => out.push(Tok::Pipe),
            '(' => out.push(Tok::LParen),
            ')' => out.push(Tok::RParen),
            '[' => out.push(Tok::LBrack),
            ']' => out.push(Tok::RBrack),
            '?' if !next_is_name(&mut chars) => out.push(Tok::Question),
            '*' => out.push(Tok::Star),
            '+' => out.push(Tok::Plus),
            '-' if chars.peek().is_some_and(|(_, c)| *c == '>') => {
                chars.next();
                out.push(Tok::Arrow);
            }
            '.' if chars.peek().is_some_and(|(_, c)| *c == '.') => {
                chars.next();
                out.push(Tok::DotDot);
            }
            '.' if chars.peek().is_some_and(|(_, c)| c.is_ascii_digit()) => {
                while chars.peek().is_some_and(|(_, c)| c.is_ascii_digit()) {
                    chars.next();
                }
                out.push(Tok::Priority);
            }
            '"' => {
                let text = string_literal(&mut chars)?;
                let ci = chars.peek().is_some_and(|(_, c)| *c == 'i');
                if ci {
                    chars.next();
                }
                out.push(Tok::Str(text, ci));
            }
            '/' => {
                let (pattern, flags) = regex_literal(&mut chars)?;
                out.push(Tok::Re(pattern, flags));
            }
            c if c == '_' || c == '?' || c == '!' || c.is_ascii_alphabetic() => {
                let mut name = String::from(c);
                while let Some((_, n)) = chars
                    .peek()
                    .filter(|(_, n)| n.is_ascii_alphanumeric() || *n == '_')
                {
                    name.push(*n);
                    chars.next();
                }
                out.push(Tok::Name(name));
            }
            other => return Err(format!("unsupported character `{other}` in the grammar")),
        }
    }
    Ok(out)
}

/// Whether a `?` starts a rule name (`?expr: …`) rather than being the optional operator.
fn next_is_name(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> bool {
    chars
        .peek()
        .is_some_and(|(_, c)| c.is_ascii_lowercase() || *c == '_')
}

fn string_literal(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<String, String> {
    let mut text = String::new();
    while let Some((_, c)) = chars.next() {
        match c {
            '"' => return Ok(text),
            '\\' => {
                let (_, e) = chars.next().ok_or("unterminated string in the grammar")?;
                text.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' | '"' => e,
                    other => return Err(format!("unsupported escape `\\{other}` in a string")),
                });
            }
            c => text.push(c),
        }
    }
    Err("unterminated string in the grammar".to_owned())
}

fn regex_literal(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<(String, String), String> {
    let mut pattern = String::new();
    loop {
        let (_, c) = chars.next().ok_or("unterminated regex in the grammar")?;
        match c {
            '/' => break,
            '\\' => {
                let (_, e) = chars.next().ok_or("unterminated regex in the grammar")?;
                if e != '/' {
                    pattern.push('\\');
                }
                pattern.push(e);
            }
            '\n' => return Err("unterminated regex in the grammar".to_owned()),
            c => pattern.push(c),
        }
    }
    let mut flags = String::new();
    while let Some((_, f)) = chars
        .peek()
        .filter(|(_, f)| matches!(f, 'i' | 'm' | 's' | 'x' | 'u' | 'l'))
    {
        flags.push(*f);
        chars.next();
    }
    Ok((pattern, flags))
}

/// Brackets a grammar may nest: the client writes the grammar, so its depth is bounded before
/// it can exhaust the stack.
const MAX_NESTING: usize = 64;

struct Builder<'a> {
    index: &'a HashMap<String, usize>,
    regexes: Vec<Regex>,
    nesting: usize,
}

impl Builder<'_> {
    fn parse_body(&mut self, body: &[Tok]) -> Result<Expr, String> {
        let mut pos = 0;
        let expr = self.alternatives(body, &mut pos)?;
        match body.get(pos) {
            None => Ok(expr),
            Some(t) => Err(format!("unsupported grammar syntax at {t:?}")),
        }
    }

    fn alternatives(&mut self, toks: &[Tok], pos: &mut usize) -> Result<Expr, String> {
        let mut alts = vec![self.sequence(toks, pos)?];
        while toks.get(*pos) == Some(&Tok::Pipe) {
            *pos += 1;
            alts.push(self.sequence(toks, pos)?);
        }
        Ok(if alts.len() == 1 {
            alts.remove(0)
        } else {
            Expr::Alt(alts)
        })
    }

    fn sequence(&mut self, toks: &[Tok], pos: &mut usize) -> Result<Expr, String> {
        let mut items = Vec::new();
        loop {
            match toks.get(*pos) {
                None | Some(Tok::Pipe | Tok::RParen | Tok::RBrack) => break,
                Some(Tok::Arrow) => {
                    // `-> alias` renames the tree node; matching does not care.
                    *pos += 2;
                    break;
                }
                Some(_) => {
                    let atom = self.atom(toks, pos)?;
                    items.push(self.postfix(atom, toks, pos));
                }
            }
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Seq(items)
        })
    }

    fn postfix(&mut self, atom: Expr, toks: &[Tok], pos: &mut usize) -> Expr {
        let wrapped = match toks.get(*pos) {
            Some(Tok::Question) => Expr::Opt(Box::new(atom)),
            Some(Tok::Star) => Expr::Star(Box::new(atom)),
            Some(Tok::Plus) => Expr::Plus(Box::new(atom)),
            _ => return atom,
        };
        *pos += 1;
        wrapped
    }

    fn atom(&mut self, toks: &[Tok], pos: &mut usize) -> Result<Expr, String> {
        let tok = toks.get(*pos).cloned().ok_or("unexpected end of a rule")?;
        *pos += 1;
        match tok {
            Tok::LParen | Tok::LBrack => {
                let close = if tok == Tok::LParen {
                    Tok::RParen
                } else {
                    Tok::RBrack
                };
                if self.nesting >= MAX_NESTING {
                    return Err(format!(
                        "the grammar nests brackets deeper than {MAX_NESTING}"
                    ));
                }
                self.nesting += 1;
                let inner = self.alternatives(toks, pos);
                self.nesting -= 1;
                let inner = inner?;
                if toks.get(*pos) != Some(&close) {
                    return Err("unbalanced brackets in the grammar".to_owned());
                }
                *pos += 1;
                Ok(if close == Tok::RBrack {
                    Expr::Opt(Box::new(inner))
                } else {
                    inner
                })
            }
            Tok::Str(from, ci) if toks.get(*pos) == Some(&Tok::DotDot) => {
                let Some(Tok::Str(to, _)) = toks.get(*pos + 1) else {
                    return Err("a `..` range needs two strings".to_owned());
                };
                *pos += 2;
                let class = format!("[{}-{}]", regex::escape(&from), regex::escape(to));
                self.regex(&class, if ci { "i" } else { "" })
            }
            Tok::Str(text, ci) => Ok(Expr::Lit(text, ci)),
            Tok::Re(pattern, flags) => self.regex(&pattern, &flags),
            Tok::Name(name) => self
                .index
                .get(name.as_str())
                .map(|i| Expr::Ref(*i))
                .ok_or_else(|| format!("the grammar names `{name}`, which it does not define")),
            other => Err(format!("unsupported grammar syntax at {other:?}")),
        }
    }

    fn regex(&mut self, pattern: &str, flags: &str) -> Result<Expr, String> {
        let flags: String = flags
            .chars()
            .filter(|f| matches!(f, 'i' | 'm' | 's' | 'x'))
            .collect();
        let prefix = if flags.is_empty() {
            String::new()
        } else {
            format!("(?{flags})")
        };
        let re = Regex::new(&format!("^(?:{prefix}{pattern})"))
            .map_err(|e| format!("unsupported regex /{pattern}/: {e}"))?;
        self.regexes.push(re);
        Ok(Expr::Re(self.regexes.len() - 1))
    }
}
