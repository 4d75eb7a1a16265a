//! The lexer: source text to tokens with spans. Unicode spellings of LANGUAGE.md §1 are mapped to
//! the same tokens as their ASCII forms, so the parser never sees the difference.

use crate::diag::Diagnostic;
use crate::span::Span;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    TyVar(String),
    Int(i64),
    Real(f64),
    // keywords
    Def,
    Let,
    In,
    Fun,
    If,
    Then,
    Else,
    Not,
    True,
    False,
    Pullback,
    Dual,
    Derive,
    // punctuation
    LParen,
    RParen,
    LBracket,
    RBracket,
    /// `bag{`
    BagOpen,
    /// `map{`
    MapOpen,
    RBrace,
    Comma,
    Dot,
    /// `.[`
    DotBracket,
    Arrow,
    /// `λ` only: its binders end with `.`
    Lambda,
    Eq,
    Colon,
    Hash,
    Underscore,
    OrOr,
    AndAnd,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Oplus,
    Ominus,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Caret,
    Eof,
}

impl Tok {
    /// How the token is spelled in messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::TyVar(s) => format!("`'{s}`"),
            Tok::Int(n) => format!("`{n}`"),
            Tok::Real(r) => format!("`{r:?}`"),
            Tok::Eof => "end of file".to_string(),
            t => format!("`{}`", t.spelling()),
        }
    }

    fn spelling(&self) -> &'static str {
        match self {
            Tok::Def => "def",
            Tok::Let => "let",
            Tok::In => "in",
            Tok::Fun => "fun",
            Tok::If => "if",
            Tok::Then => "then",
            Tok::Else => "else",
            Tok::Not => "not",
            Tok::True => "true",
            Tok::False => "false",
            Tok::Pullback => "pullback",
            Tok::Dual => "dual",
            Tok::Derive => "derive",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::BagOpen => "bag{",
            Tok::MapOpen => "map{",
            Tok::RBrace => "}",
            Tok::Comma => ",",
            Tok::Dot => ".",
            Tok::DotBracket => ".[",
            Tok::Arrow => "->",
            Tok::Lambda => "λ",
            Tok::Eq => "=",
            Tok::Colon => ":",
            Tok::Hash => "#",
            Tok::Underscore => "_",
            Tok::OrOr => "||",
            Tok::AndAnd => "&&",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::Oplus => "<+>",
            Tok::Ominus => "<->",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Caret => "^",
            _ => "?",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        "def" => Tok::Def,
        "let" => Tok::Let,
        "in" => Tok::In,
        "fun" => Tok::Fun,
        "if" => Tok::If,
        "then" => Tok::Then,
        "else" => Tok::Else,
        "not" => Tok::Not,
        "true" => Tok::True,
        "false" => Tok::False,
        "pullback" => Tok::Pullback,
        "dual" => Tok::Dual,
        "derive" => Tok::Derive,
        "_" => Tok::Underscore,
        _ => return None,
    })
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '\''
}

/// Splits `src` into tokens, ending with `Tok::Eof`.
pub fn lex(src: &str) -> Result<Vec<Token>, Diagnostic> {
    let mut out: Vec<Token> = Vec::new();
    let bytes = src.as_bytes();
    let mut i = 0usize;
    while i < src.len() {
        let c = src[i..].chars().next().expect("in bounds");
        let start = i;
        // A byte-order mark opening the file (as some editors write) is not part of the program.
        if c.is_whitespace() || (c == '\u{feff}' && i == 0) {
            i += c.len_utf8();
            continue;
        }
        if src[i..].starts_with("--") {
            while i < src.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let after_dot = matches!(out.last(), Some(Token { tok: Tok::Dot, .. }));
        if c.is_ascii_digit() {
            let (tok, end) = lex_number(src, i, after_dot)?;
            i = end;
            out.push(Token { tok, span: Span::new(start, i) });
            continue;
        }
        if is_ident_start(c) {
            let mut j = i;
            while j < src.len() {
                let d = src[j..].chars().next().expect("in bounds");
                if !is_ident_continue(d) {
                    break;
                }
                j += d.len_utf8();
            }
            let word = &src[i..j];
            i = j;
            // `bag{` and `map{` (no space) open literals.
            if (word == "bag" || word == "map") && src[i..].starts_with('{') {
                i += 1;
                let tok = if word == "bag" { Tok::BagOpen } else { Tok::MapOpen };
                out.push(Token { tok, span: Span::new(start, i) });
                continue;
            }
            let tok = keyword(word).unwrap_or_else(|| Tok::Ident(word.to_string()));
            out.push(Token { tok, span: Span::new(start, i) });
            continue;
        }
        if c == '\'' {
            let mut j = i + 1;
            if j < src.len() && is_ident_start(src[j..].chars().next().expect("in bounds")) {
                while j < src.len() {
                    let d = src[j..].chars().next().expect("in bounds");
                    if !is_ident_continue(d) || d == '\'' {
                        break;
                    }
                    j += d.len_utf8();
                }
                out.push(Token { tok: Tok::TyVar(src[i + 1..j].to_string()), span: Span::new(i, j) });
                i = j;
                continue;
            }
            return Err(Diagnostic::error(Span::new(i, i + 1), "expected a type variable name after `'`"));
        }
        // Multi-character ASCII operators, longest first.
        const OPS: &[(&str, Tok)] = &[
            ("<+>", Tok::Oplus),
            ("<->", Tok::Ominus),
            ("->", Tok::Arrow),
            (".[", Tok::DotBracket),
            ("||", Tok::OrOr),
            ("&&", Tok::AndAnd),
            ("==", Tok::EqEq),
            ("!=", Tok::NotEq),
            ("<=", Tok::Le),
            (">=", Tok::Ge),
        ];
        if let Some((s, tok)) = OPS.iter().find(|(s, _)| src[i..].starts_with(s)) {
            i += s.len();
            out.push(Token { tok: tok.clone(), span: Span::new(start, i) });
            continue;
        }
        let tok = match c {
            '(' | '⟨' => Tok::LParen,
            ')' | '⟩' => Tok::RParen,
            '[' => Tok::LBracket,
            ']' => Tok::RBracket,
            '}' => Tok::RBrace,
            ',' => Tok::Comma,
            '.' => Tok::Dot,
            '=' => Tok::Eq,
            ':' => Tok::Colon,
            '#' => Tok::Hash,
            '<' => Tok::Lt,
            '>' => Tok::Gt,
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '*' | '×' => Tok::Star,
            '/' => Tok::Slash,
            '%' => Tok::Percent,
            '^' => Tok::Caret,
            'λ' => Tok::Lambda,
            'Ω' => Tok::Pullback,
            '⊕' => Tok::Oplus,
            '⊖' => Tok::Ominus,
            '→' => Tok::Arrow,
            'Δ' => Tok::Ident("Delta".into()),
            'ℝ' => Tok::Ident("Real".into()),
            'ℤ' => Tok::Ident("Int".into()),
            _ => {
                let what = if c.is_control() || c == '\u{FFFD}' {
                    format!("unexpected character U+{:04X}", c as u32)
                } else {
                    format!("unexpected character `{c}`")
                };
                return Err(Diagnostic::error(Span::new(i, i + c.len_utf8()), what));
            }
        };
        i += c.len_utf8();
        out.push(Token { tok, span: Span::new(start, i) });
    }
    out.push(Token { tok: Tok::Eof, span: Span::new(src.len(), src.len()) });
    Ok(out)
}

/// A numeric literal at `i`. After a `.` only plain digits are read, so `p.1.2` is two projections.
fn lex_number(src: &str, i: usize, after_dot: bool) -> Result<(Tok, usize), Diagnostic> {
    let bytes = src.as_bytes();
    let mut j = i;
    while j < bytes.len() && bytes[j].is_ascii_digit() {
        j += 1;
    }
    let mut is_real = false;
    if !after_dot {
        if j + 1 < bytes.len() && bytes[j] == b'.' && bytes[j + 1].is_ascii_digit() {
            is_real = true;
            j += 1;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
        }
        if j < bytes.len() && (bytes[j] == b'e' || bytes[j] == b'E') {
            let mut k = j + 1;
            if k < bytes.len() && (bytes[k] == b'+' || bytes[k] == b'-') {
                k += 1;
            }
            if k < bytes.len() && bytes[k].is_ascii_digit() {
                while k < bytes.len() && bytes[k].is_ascii_digit() {
                    k += 1;
                }
                is_real = true;
                j = k;
            } else {
                return Err(Diagnostic::error(
                    Span::new(i, k),
                    "malformed real literal: expected digits after the exponent",
                ));
            }
        }
    }
    // An identifier character glued to a number (`12abc`) is a malformed literal.
    if j < bytes.len() && (bytes[j].is_ascii_alphabetic() || bytes[j] == b'_') {
        let mut k = j;
        while k < bytes.len() && (bytes[k].is_ascii_alphanumeric() || bytes[k] == b'_') {
            k += 1;
        }
        return Err(Diagnostic::error(Span::new(i, k), format!("malformed number `{}`", &src[i..k])));
    }
    let text = &src[i..j];
    let span = Span::new(i, j);
    if is_real {
        match text.parse::<f64>() {
            Ok(r) if r.is_finite() => Ok((Tok::Real(r), j)),
            _ => Err(Diagnostic::error(span, format!("real literal `{text}` is out of range"))),
        }
    } else {
        match text.parse::<i64>() {
            Ok(n) => Ok((Tok::Int(n), j)),
            // `-9223372036854775808` is the least Int: right after a `-` the digits of 2^63 lex as
            // i64::MIN, which the parser's negation of a literal (wrapping) keeps as it is.
            Err(_) if i > 0 && bytes[i - 1] == b'-' && text.parse::<u64>() == Ok(1 << 63) => {
                Ok((Tok::Int(i64::MIN), j))
            }
            Err(_) => Err(Diagnostic::error(span, format!("integer literal `{text}` does not fit in 64 bits"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn projections_and_reals() {
        assert_eq!(
            toks("p.1.2 1.5 2e3 x.[i]"),
            vec![
                Tok::Ident("p".into()),
                Tok::Dot,
                Tok::Int(1),
                Tok::Dot,
                Tok::Int(2),
                Tok::Real(1.5),
                Tok::Real(2000.0),
                Tok::Ident("x".into()),
                Tok::DotBracket,
                Tok::Ident("i".into()),
                Tok::RBracket,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_opens_a_file_but_nowhere_else() {
        assert_eq!(toks("\u{feff}def"), vec![Tok::Def, Tok::Eof]);
        let e = lex("def \u{feff}").unwrap_err();
        assert_eq!((e.span.lo, e.span.hi), (4, 7));
    }

    #[test]
    fn literals_open_with_brace() {
        assert_eq!(toks("bag{ map{ map")[..3], [Tok::BagOpen, Tok::MapOpen, Tok::Ident("map".into())]);
    }

    #[test]
    fn unicode_spellings() {
        assert_eq!(
            toks("λx. Ω ⊕ ⊖ → ⟨⟩"),
            vec![
                Tok::Lambda,
                Tok::Ident("x".into()),
                Tok::Dot,
                Tok::Pullback,
                Tok::Oplus,
                Tok::Ominus,
                Tok::Arrow,
                Tok::LParen,
                Tok::RParen,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn bad_literals() {
        assert!(lex("99999999999999999999").is_err());
        assert!(lex("1e").is_err());
        assert!(lex("12ab").is_err());
        assert!(lex("1e400").is_err());
        // 2^63 fits only as the digits of the least Int, right after a `-`.
        assert!(lex("9223372036854775808").is_err());
        assert!(lex("- 9223372036854775808").is_err());
        assert_eq!(toks("-9223372036854775808"), vec![Tok::Minus, Tok::Int(i64::MIN), Tok::Eof]);
    }
}
