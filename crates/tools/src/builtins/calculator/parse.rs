//! The calculator's lexer and Pratt parser: text in, a small expression tree out.
//!
//! Parsing is bounded by the input length ([`MAX_INPUT_CHARS`]) and by the recursion depth
//! ([`MAX_DEPTH`], counting parentheses, function calls, unary signs and right-associative power
//! chains), so hostile input cannot exhaust the stack. Names are checked here (unknown functions
//! and constants are syntax errors); arity and numeric domains are checked by the evaluator.

use super::eval::{FUNCTIONS, Num};

/// The most characters an expression may have.
pub const MAX_INPUT_CHARS: usize = 1_000;
/// The deepest the parser may recurse.
pub const MAX_DEPTH: usize = 64;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Lit(Num),
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Factorial(Box<Expr>),
    /// A function call; the name is lower-cased and known to be in [`FUNCTIONS`].
    Call(&'static str, Vec<Expr>),
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
}

/// Why an expression could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ParseError {
    /// Malformed input; `at` is a 1-based character position.
    Syntax { at: usize, message: String },
    /// The input is longer than [`MAX_INPUT_CHARS`].
    TooLong(usize),
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Num),
    Ident(String),
    Op(BinOp),
    Minus,
    Plus,
    LParen,
    RParen,
    Comma,
    Bang,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// 1-based character position.
    at: usize,
}

fn syntax(at: usize, message: impl Into<String>) -> ParseError {
    ParseError::Syntax {
        at,
        message: message.into(),
    }
}

fn lex(input: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let at = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let (num, next) = lex_number(&chars, i)?;
            tokens.push(Token {
                tok: Tok::Num(num),
                at,
            });
            i = next;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect::<String>().to_lowercase();
            tokens.push(Token {
                tok: Tok::Ident(name),
                at,
            });
            continue;
        }
        let tok = match c {
            '+' => Tok::Plus,
            '-' | '\u{2212}' => Tok::Minus,
            '*' if chars.get(i + 1) == Some(&'*') => {
                i += 1;
                Tok::Op(BinOp::Pow)
            }
            '*' | '\u{d7}' => Tok::Op(BinOp::Mul),
            '/' | '\u{f7}' => Tok::Op(BinOp::Div),
            '%' => Tok::Op(BinOp::Rem),
            '^' => Tok::Op(BinOp::Pow),
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            '!' => Tok::Bang,
            other => return Err(syntax(at, format!("unexpected character `{other}`"))),
        };
        tokens.push(Token { tok, at });
        i += 1;
    }
    Ok(tokens)
}

/// Lexes a number starting at `start`: digits, an optional fraction, an optional exponent.
/// Integer literals stay exact when they fit in an `i128`.
fn lex_number(chars: &[char], start: usize) -> Result<(Num, usize), ParseError> {
    let digits = |mut i: usize| {
        while chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let mut integral = true;
    if chars.get(i) == Some(&'.') {
        integral = false;
        i = digits(i + 1);
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let mut j = i + 1;
        if matches!(chars.get(j), Some('+' | '-')) {
            j += 1;
        }
        if chars.get(j).is_some_and(char::is_ascii_digit) {
            integral = false;
            i = digits(j);
        }
    }
    let text: String = chars[start..i].iter().collect();
    if integral && let Ok(n) = text.parse::<i128>() {
        return Ok((Num::Int(n), i));
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok((Num::Float(f), i)),
        _ => Err(syntax(
            start + 1,
            format!("`{text}` is not a usable number"),
        )),
    }
}

const PREFIX_BP: u8 = 30;
const POSTFIX_BP: u8 = 50;

/// Left and right binding powers; power is right-associative and binds tighter than a sign.
fn binding_power(op: BinOp) -> (u8, u8) {
    match op {
        BinOp::Add | BinOp::Sub => (10, 11),
        BinOp::Mul | BinOp::Div | BinOp::Rem => (20, 21),
        BinOp::Pow => (40, 39),
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    fn expr(&mut self, min_bp: u8) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        let mut lhs = self.prefix()?;
        while let Some(token) = self.peek() {
            let at = token.at;
            match token.tok.clone() {
                Tok::Bang => {
                    if POSTFIX_BP < min_bp {
                        break;
                    }
                    self.pos += 1;
                    lhs = Expr::Factorial(Box::new(lhs));
                }
                Tok::Op(op) => {
                    let (left, right) = binding_power(op);
                    if left < min_bp {
                        break;
                    }
                    self.pos += 1;
                    let rhs = self.expr(right)?;
                    lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
                }
                Tok::Plus | Tok::Minus => {
                    let op = if token.tok == Tok::Plus {
                        BinOp::Add
                    } else {
                        BinOp::Sub
                    };
                    let (left, right) = binding_power(op);
                    if left < min_bp {
                        break;
                    }
                    self.pos += 1;
                    let rhs = self.expr(right)?;
                    lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
                }
                Tok::RParen | Tok::Comma => break,
                Tok::Num(_) | Tok::Ident(_) | Tok::LParen => {
                    return Err(syntax(
                        at,
                        "expected an operator (write multiplication with `*`)",
                    ));
                }
            }
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn prefix(&mut self) -> Result<Expr, ParseError> {
        let Some(token) = self.next() else {
            return Err(syntax(self.end, "the expression ends too early"));
        };
        match token.tok {
            Tok::Num(n) => Ok(Expr::Lit(n)),
            Tok::Minus => Ok(Expr::Neg(Box::new(self.expr(PREFIX_BP)?))),
            Tok::Plus => self.expr(PREFIX_BP),
            Tok::LParen => {
                let inner = self.expr(0)?;
                self.expect_close(token.at)?;
                Ok(inner)
            }
            Tok::Ident(name) => self.name(name, token.at),
            Tok::RParen => Err(syntax(token.at, "unexpected `)`")),
            Tok::Comma => Err(syntax(token.at, "unexpected `,`")),
            Tok::Bang => Err(syntax(token.at, "unexpected `!`")),
            Tok::Op(_) => Err(syntax(token.at, "an operator needs a left operand")),
        }
    }

    fn expect_close(&mut self, open_at: usize) -> Result<(), ParseError> {
        match self.next() {
            Some(Token {
                tok: Tok::RParen, ..
            }) => Ok(()),
            Some(token) => Err(syntax(token.at, "expected `)`")),
            None => Err(syntax(
                self.end,
                format!("the `(` at character {open_at} is never closed"),
            )),
        }
    }

    fn name(&mut self, name: String, at: usize) -> Result<Expr, ParseError> {
        let is_call = matches!(
            self.peek(),
            Some(Token {
                tok: Tok::LParen,
                ..
            })
        );
        if !is_call {
            return match name.as_str() {
                "pi" | "\u{3c0}" => Ok(Expr::Lit(Num::Float(std::f64::consts::PI))),
                "e" => Ok(Expr::Lit(Num::Float(std::f64::consts::E))),
                "tau" => Ok(Expr::Lit(Num::Float(std::f64::consts::TAU))),
                _ if FUNCTIONS.iter().any(|f| f.name == name) => Err(syntax(
                    at,
                    format!("`{name}` is a function: call it as `{name}(…)`"),
                )),
                _ => Err(syntax(
                    at,
                    format!("unknown name `{name}` (constants: pi, e, tau)"),
                )),
            };
        }
        let Some(function) = FUNCTIONS.iter().find(|f| f.name == name) else {
            return Err(syntax(at, format!("unknown function `{name}`")));
        };
        let open_at = self.next().map_or(at, |t| t.at);
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        let mut args = Vec::new();
        if matches!(
            self.peek(),
            Some(Token {
                tok: Tok::RParen,
                ..
            })
        ) {
            self.pos += 1;
        } else {
            loop {
                args.push(self.expr(0)?);
                match self.next() {
                    Some(Token {
                        tok: Tok::Comma, ..
                    }) => {}
                    Some(Token {
                        tok: Tok::RParen, ..
                    }) => break,
                    Some(token) => return Err(syntax(token.at, "expected `,` or `)`")),
                    None => {
                        return Err(syntax(
                            self.end,
                            format!("the `(` at character {open_at} is never closed"),
                        ));
                    }
                }
            }
        }
        self.depth -= 1;
        Ok(Expr::Call(function.name, args))
    }
}

/// Parses an expression, enforcing the length and depth caps.
pub(crate) fn parse(input: &str) -> Result<Expr, ParseError> {
    let len = input.chars().count();
    if len > MAX_INPUT_CHARS {
        return Err(ParseError::TooLong(len));
    }
    let tokens = lex(input)?;
    if tokens.is_empty() {
        return Err(syntax(1, "the expression is empty"));
    }
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
        end: len + 1,
    };
    let expr = parser.expr(0)?;
    match parser.next() {
        None => Ok(expr),
        Some(token) => Err(syntax(
            token.at,
            match token.tok {
                Tok::RParen => "unmatched `)`",
                Tok::Comma => "a `,` only separates function arguments",
                _ => "unexpected input",
            },
        )),
    }
}
