//! Parser for the text format `print` writes. Value and block numbers are kept as written, so
//! `print(parse(text))` reproduces printed text exactly. The parser checks syntax and names only;
//! types, dominance and arities are the verifier's job, so broken IR can be written by hand.

use std::fmt;

use rustc_hash::FxHashMap;

use super::builder::binary_result;
use super::entity::EntityRef;
use super::{
    BinaryOp, Block, BlockCall, BlockData, Cmp, ExtFunc, FuncId, Function, InstData, Module, Op, Signature, TagDecl,
    TagId, TrapCode, Type, UnaryOp, Value, ValueData, ValueDef,
};

/// A syntax error with its 1-based position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses a module from its text format.
pub fn parse(text: &str) -> Result<Module, ParseError> {
    let toks = lex(text)?;
    let slots = MIN_SLOTS.max(SLOTS_PER_BYTE.saturating_mul(text.len()));
    let mut p = Parser { toks, pos: 0, module: Module::new(), funcs: FxHashMap::default(), slots };
    p.declare_functions()?;
    p.module_items()?;
    Ok(p.module)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// `iadd`, `v3`, `b1`, `t0`, `i64`, ...
    Word(String),
    /// A numeric literal as written.
    Num(String),
    /// `@name`
    Func(String),
    /// `$name`
    Ext(String),
    Punct(char),
    Arrow,
    Newline,
    Eof,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: u32,
    col: u32,
}

/// Characters allowed in `@` and `$` names.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '\'' || c == '.'
}

/// Splits the text into tokens; `;` starts a comment to the end of the line.
fn lex(text: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc) = (line, col);
        let start = i;
        let tok = if c == '\n' {
            i += 1;
            Tok::Newline
        } else if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        } else if c == ';' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        } else if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Tok::Word(chars[start..i].iter().collect())
        } else if c.is_ascii_digit() || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            i += 1;
            let hex = chars.get(start..start + 2) == Some(&['0', 'x']);
            while i < chars.len() {
                let d = chars[i];
                let sign_after_exp = !hex && (d == '+' || d == '-') && matches!(chars[i - 1], 'e' | 'E');
                if d.is_ascii_alphanumeric() || d == '.' || d == '_' || sign_after_exp {
                    i += 1;
                } else {
                    break;
                }
            }
            Tok::Num(chars[start..i].iter().collect())
        } else if c == '@' || c == '$' {
            i += 1;
            while i < chars.len() && is_name_char(chars[i]) {
                i += 1;
            }
            let name: String = chars[start + 1..i].iter().collect();
            if name.is_empty() {
                return Err(ParseError { line: tl, col: tc, message: format!("expected a name after `{c}`") });
            }
            if c == '@' {
                Tok::Func(name)
            } else {
                Tok::Ext(name)
            }
        } else if c == '-' && chars.get(i + 1) == Some(&'>') {
            i += 2;
            Tok::Arrow
        } else if "(){}[],:=.+".contains(c) {
            i += 1;
            Tok::Punct(c)
        } else {
            return Err(ParseError { line: tl, col: tc, message: format!("unexpected character `{c}`") });
        };
        if tok == Tok::Newline {
            line += 1;
            col = 1;
        } else {
            col += (i - start) as u32;
        }
        toks.push(Token { tok, line: tl, col: tc });
    }
    toks.push(Token { tok: Tok::Eof, line, col });
    Ok(toks)
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    module: Module,
    funcs: FxHashMap<String, FuncId>,
    /// Value and block slots the module may still make. Numbers need not be dense (holes are
    /// unused slots), so `v4000000000` alone would allocate gigabytes: the slots a text may ask
    /// for are bounded by its length (and a floor that covers any module the compiler prints).
    slots: usize,
}

/// Value and block slots any text may make, at least.
const MIN_SLOTS: usize = 1 << 22;
/// ... and per byte of text.
const SLOTS_PER_BYTE: usize = 64;

/// Per-function state: which numbered values and blocks the text defined.
struct FuncState {
    func: Function,
    value_defined: Vec<bool>,
    block_defined: Vec<bool>,
    /// First use of each value/block, for "used but never defined" errors.
    value_used_at: FxHashMap<Value, (u32, u32)>,
    block_used_at: FxHashMap<Block, (u32, u32)>,
}

type PResult<T> = Result<T, ParseError>;

impl Parser {
    /// The current token.
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    /// Consumes and returns the current token (stays on `Eof`).
    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].tok.clone();
        if t != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    /// An error at the current token.
    fn err<T>(&self, message: impl Into<String>) -> PResult<T> {
        let t = &self.toks[self.pos];
        Err(ParseError { line: t.line, col: t.col, message: message.into() })
    }

    /// A token as an error message names it.
    fn describe(t: &Tok) -> String {
        match t {
            Tok::Word(w) => format!("`{w}`"),
            Tok::Num(n) => format!("`{n}`"),
            Tok::Func(n) => format!("`@{n}`"),
            Tok::Ext(n) => format!("`${n}`"),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Arrow => "`->`".to_string(),
            Tok::Newline => "end of line".to_string(),
            Tok::Eof => "end of input".to_string(),
        }
    }

    /// Consumes punctuation `c` or fails.
    fn expect_punct(&mut self, c: char) -> PResult<()> {
        if *self.peek() == Tok::Punct(c) {
            self.next();
            Ok(())
        } else {
            self.err(format!("expected `{c}`, found {}", Self::describe(self.peek())))
        }
    }

    /// Consumes punctuation `c` if it is next.
    fn eat_punct(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.next();
            true
        } else {
            false
        }
    }

    /// Consumes keyword `w` or fails.
    fn expect_word(&mut self, w: &str) -> PResult<()> {
        if *self.peek() == Tok::Word(w.to_string()) {
            self.next();
            Ok(())
        } else {
            self.err(format!("expected `{w}`, found {}", Self::describe(self.peek())))
        }
    }

    /// Consumes any word.
    fn word(&mut self) -> PResult<String> {
        match self.peek().clone() {
            Tok::Word(w) => {
                self.next();
                Ok(w)
            }
            t => self.err(format!("expected a word, found {}", Self::describe(&t))),
        }
    }

    /// Skips blank lines.
    fn skip_newlines(&mut self) {
        while *self.peek() == Tok::Newline {
            self.next();
        }
    }

    /// Consumes the end of a line (or accepts the end of input).
    fn end_of_line(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Newline => {
                self.next();
                Ok(())
            }
            Tok::Eof => Ok(()),
            t => self.err(format!("expected end of line, found {}", Self::describe(t))),
        }
    }

    /// A type name.
    fn ty(&mut self) -> PResult<Type> {
        let w = self.word()?;
        match Type::from_name(&w) {
            Some(t) => Ok(t),
            None => {
                self.pos -= 1;
                self.err(format!("unknown type `{w}`"))
            }
        }
    }

    /// `(t, ...)`
    fn type_list(&mut self) -> PResult<Vec<Type>> {
        self.expect_punct('(')?;
        let mut ts = Vec::new();
        if self.eat_punct(')') {
            return Ok(ts);
        }
        loop {
            ts.push(self.ty()?);
            if self.eat_punct(')') {
                return Ok(ts);
            }
            self.expect_punct(',')?;
        }
    }

    /// `(params) -> ret` or `(params) -> (rets)`
    fn signature(&mut self) -> PResult<Signature> {
        let params = self.type_list()?;
        if *self.peek() != Tok::Arrow {
            return self.err(format!("expected `->`, found {}", Self::describe(self.peek())));
        }
        self.next();
        let rets = if *self.peek() == Tok::Punct('(') { self.type_list()? } else { vec![self.ty()?] };
        Ok(Signature::new(params, rets))
    }

    /// First pass: every `fn @name(sig)` header, so calls and tags may refer to later functions.
    fn declare_functions(&mut self) -> PResult<()> {
        let mut depth = 0i32;
        let mut at_line_start = true;
        while *self.peek() != Tok::Eof {
            let tok = self.peek().clone();
            if depth == 0 && at_line_start && tok == Tok::Word("fn".to_string()) {
                self.next();
                let name = match self.next() {
                    Tok::Func(n) => n,
                    t => {
                        self.pos -= 1;
                        return self.err(format!("expected a function name, found {}", Self::describe(&t)));
                    }
                };
                let sig = self.signature()?;
                if self.funcs.contains_key(&name) {
                    return self.err(format!("function `@{name}` is defined twice"));
                }
                let id = self.module.funcs.push(Function::empty(&name, sig));
                self.funcs.insert(name, id);
                at_line_start = false;
                continue;
            }
            match tok {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => depth -= 1,
                _ => {}
            }
            at_line_start = tok == Tok::Newline;
            self.next();
        }
        self.pos = 0;
        Ok(())
    }

    /// Second pass: externs, tags and function bodies in order.
    fn module_items(&mut self) -> PResult<()> {
        let mut defined = vec![false; self.module.funcs.len()];
        loop {
            self.skip_newlines();
            match self.peek().clone() {
                Tok::Eof => return Ok(()),
                Tok::Word(w) if w == "extern" => self.extern_decl()?,
                Tok::Word(w) if w == "tag" => self.tag_decl()?,
                Tok::Word(w) if w == "fn" => self.function(&mut defined)?,
                t => return self.err(format!("expected `extern`, `tag` or `fn`, found {}", Self::describe(&t))),
            }
        }
    }

    /// `extern [fallible] $name(params) -> rets`
    fn extern_decl(&mut self) -> PResult<()> {
        self.expect_word("extern")?;
        let fallible = *self.peek() == Tok::Word("fallible".to_string());
        if fallible {
            self.next();
        }
        let name = match self.next() {
            Tok::Ext(n) => n,
            t => {
                self.pos -= 1;
                return self.err(format!("expected a `$name`, found {}", Self::describe(&t)));
            }
        };
        if self.module.extern_by_name(&name).is_some() {
            return self.err(format!("extern `${name}` is declared twice"));
        }
        let sig = self.signature()?;
        self.module.externs.push(ExtFunc { name, sig, fallible });
        self.end_of_line()
    }

    /// `tag tN = @func env(types)`
    fn tag_decl(&mut self) -> PResult<()> {
        self.expect_word("tag")?;
        let w = self.word()?;
        let expected = format!("t{}", self.module.tags.len());
        if w != expected {
            self.pos -= 1;
            return self.err(format!("tags are declared in order: expected `{expected}`, found `{w}`"));
        }
        self.expect_punct('=')?;
        let func = self.func_ref()?;
        self.expect_word("env")?;
        let env = self.type_list()?;
        self.module.tags.push(TagDecl { func, env });
        self.end_of_line()
    }

    /// A `@name` of a declared function.
    fn func_ref(&mut self) -> PResult<FuncId> {
        match self.next() {
            Tok::Func(n) => match self.funcs.get(&n) {
                Some(id) => Ok(*id),
                None => {
                    self.pos -= 1;
                    self.err(format!("no function `@{n}`"))
                }
            },
            t => {
                self.pos -= 1;
                self.err(format!("expected a `@function`, found {}", Self::describe(&t)))
            }
        }
    }

    /// A `tN` of a declared tag.
    fn tag_ref(&mut self) -> PResult<TagId> {
        let w = self.word()?;
        match w.strip_prefix('t').and_then(|n| n.parse::<u32>().ok()) {
            Some(n) if (n as usize) < self.module.tags.len() => Ok(TagId::from_u32(n)),
            _ => {
                self.pos -= 1;
                self.err(format!("no tag `{w}`"))
            }
        }
    }

    /// `fn @name(sig) {` blocks `}`
    fn function(&mut self, defined: &mut [bool]) -> PResult<()> {
        self.expect_word("fn")?;
        // The first pass declared every header at the top level; anything else is misplaced.
        let id = match self.peek() {
            Tok::Func(n) => self.funcs.get(n).copied(),
            _ => None,
        };
        let Some(id) = id.filter(|id| !defined[id.index()]) else {
            return self.err("a function definition must start a line outside any other function");
        };
        defined[id.index()] = true;
        self.next();
        let sig = self.signature()?;
        self.expect_punct('{')?;
        self.end_of_line()?;
        let name = self.module.funcs[id].name.clone();
        let mut st = FuncState {
            func: Function::empty(&name, sig),
            value_defined: Vec::new(),
            block_defined: Vec::new(),
            value_used_at: FxHashMap::default(),
            block_used_at: FxHashMap::default(),
        };
        loop {
            self.skip_newlines();
            if self.eat_punct('}') {
                break;
            }
            self.block(&mut st)?;
        }
        self.end_of_line()?;
        self.check_all_defined(&st)?;
        self.module.funcs[id] = st.func;
        Ok(())
    }

    /// Every value and block the function used is defined (first offender by position).
    fn check_all_defined(&self, st: &FuncState) -> PResult<()> {
        let mut missing: Vec<(u32, u32, String)> = Vec::new();
        for (v, &(line, col)) in &st.value_used_at {
            if !st.value_defined.get(v.index()).copied().unwrap_or(false) {
                missing.push((line, col, format!("value `{v}` is used but never defined")));
            }
        }
        for (b, &(line, col)) in &st.block_used_at {
            if !st.block_defined.get(b.index()).copied().unwrap_or(false) {
                missing.push((line, col, format!("block `{b}` is used but never defined")));
            }
        }
        match missing.into_iter().min() {
            Some((line, col, message)) => Err(ParseError { line, col, message }),
            None => Ok(()),
        }
    }

    /// Parses `vN` (without recording a use).
    fn value_number(&mut self) -> PResult<Value> {
        let w = self.word()?;
        match w.strip_prefix('v').and_then(|n| n.parse::<u32>().ok()) {
            Some(n) => Ok(Value::from_u32(n)),
            None => {
                self.pos -= 1;
                self.err(format!("expected a value `vN`, found `{w}`"))
            }
        }
    }

    /// Is `t` a value name `vN`?
    fn is_value_word(t: &Tok) -> bool {
        let Tok::Word(w) = t else { return false };
        w.strip_prefix('v').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }

    /// Takes `n` slots from the budget, or fails naming the number that asked for them.
    fn take_slots(&mut self, n: usize, what: std::fmt::Arguments) -> PResult<()> {
        if n > self.slots {
            return self.err(format!("{what} is numbered too high for a text of this size"));
        }
        self.slots -= n;
        Ok(())
    }

    /// Makes sure the arena has value `v` (holes are `Unused`).
    fn ensure_value(&mut self, st: &mut FuncState, v: Value) -> PResult<()> {
        let grow = (v.index() + 1).saturating_sub(st.func.values.len());
        self.take_slots(grow, format_args!("value `{v}`"))?;
        while st.func.values.len() <= v.index() {
            st.func.values.push(ValueData { ty: Type::I64, def: ValueDef::Unused });
            st.value_defined.push(false);
        }
        Ok(())
    }

    /// Makes sure the arena has block `b` (holes stay out of the layout).
    fn ensure_block(&mut self, st: &mut FuncState, b: Block) -> PResult<()> {
        let grow = (b.index() + 1).saturating_sub(st.func.blocks.len());
        self.take_slots(grow, format_args!("block `{b}`"))?;
        while st.func.blocks.len() <= b.index() {
            st.func.blocks.push(BlockData::default());
            st.block_defined.push(false);
        }
        Ok(())
    }

    /// A value operand.
    fn use_value(&mut self, st: &mut FuncState) -> PResult<Value> {
        let (line, col) = (self.toks[self.pos].line, self.toks[self.pos].col);
        let v = self.value_number()?;
        self.ensure_value(st, v)?;
        st.value_used_at.entry(v).or_insert((line, col));
        Ok(v)
    }

    /// Defines value `v` with its type and definition.
    fn define_value(&mut self, st: &mut FuncState, v: Value, ty: Type, def: ValueDef) -> PResult<()> {
        self.ensure_value(st, v)?;
        if st.value_defined[v.index()] {
            return self.err(format!("value `{v}` is defined twice"));
        }
        st.value_defined[v.index()] = true;
        st.func.values[v] = ValueData { ty, def };
        Ok(())
    }

    /// Parses `bN`.
    fn block_number(&mut self) -> PResult<Block> {
        let w = self.word()?;
        match w.strip_prefix('b').and_then(|n| n.parse::<u32>().ok()) {
            Some(n) => Ok(Block::from_u32(n)),
            None => {
                self.pos -= 1;
                self.err(format!("expected a block `bN`, found `{w}`"))
            }
        }
    }

    /// `bN:` or `bN(vA: t, ...):` followed by instructions up to the next block or `}`.
    fn block(&mut self, st: &mut FuncState) -> PResult<()> {
        let b = self.block_number()?;
        self.ensure_block(st, b)?;
        if st.block_defined[b.index()] {
            self.pos -= 1;
            return self.err(format!("block `{b}` is defined twice"));
        }
        st.block_defined[b.index()] = true;
        st.func.layout.push(b);
        if self.eat_punct('(') {
            let mut n = 0u32;
            loop {
                let v = self.value_number()?;
                self.expect_punct(':')?;
                let ty = self.ty()?;
                self.define_value(st, v, ty, ValueDef::Param(b, n))?;
                st.func.blocks[b].params.push(v);
                n += 1;
                if self.eat_punct(')') {
                    break;
                }
                self.expect_punct(',')?;
            }
        }
        self.expect_punct(':')?;
        self.end_of_line()?;
        loop {
            self.skip_newlines();
            match self.peek() {
                Tok::Punct('}') | Tok::Eof => return Ok(()),
                Tok::Word(w) if w.starts_with('b') && w[1..].parse::<u32>().is_ok() => return Ok(()),
                _ => self.instruction(st, b)?,
            }
        }
    }

    /// `[results =] op operands` up to the end of the line.
    fn instruction(&mut self, st: &mut FuncState, b: Block) -> PResult<()> {
        let mut results = Vec::new();
        if Self::is_value_word(self.peek()) {
            loop {
                results.push(self.value_number()?);
                if self.eat_punct('=') {
                    break;
                }
                self.expect_punct(',')?;
            }
        }
        let (op, types) = self.operation(st)?;
        if types.len() != results.len() {
            return self.err(format!("this instruction defines {} result(s), not {}", types.len(), results.len()));
        }
        let inst = st.func.insts.push(InstData { op, results: results.clone() });
        for (i, (&v, &ty)) in results.iter().zip(&types).enumerate() {
            self.define_value(st, v, ty, ValueDef::Result(inst, i as u32))?;
        }
        st.func.blocks[b].insts.push(inst);
        self.end_of_line()
    }

    /// `n` comma-separated value operands.
    fn operands(&mut self, st: &mut FuncState, n: usize) -> PResult<Vec<Value>> {
        let mut vs = Vec::new();
        for i in 0..n {
            if i > 0 {
                self.expect_punct(',')?;
            }
            vs.push(self.use_value(st)?);
        }
        Ok(vs)
    }

    /// `(v, ...)`
    fn arg_list(&mut self, st: &mut FuncState) -> PResult<Vec<Value>> {
        self.expect_punct('(')?;
        let mut vs = Vec::new();
        if self.eat_punct(')') {
            return Ok(vs);
        }
        loop {
            vs.push(self.use_value(st)?);
            if self.eat_punct(')') {
                return Ok(vs);
            }
            self.expect_punct(',')?;
        }
    }

    /// `bN` or `bN(args)`
    fn block_call(&mut self, st: &mut FuncState) -> PResult<BlockCall> {
        let (line, col) = (self.toks[self.pos].line, self.toks[self.pos].col);
        let block = self.block_number()?;
        self.ensure_block(st, block)?;
        st.block_used_at.entry(block).or_insert((line, col));
        let args = if *self.peek() == Tok::Punct('(') { self.arg_list(st)? } else { Vec::new() };
        Ok(BlockCall { block, args })
    }

    /// `vN+off` or `vN-off`
    fn address(&mut self, st: &mut FuncState) -> PResult<(Value, i32)> {
        let p = self.use_value(st)?;
        let text = match self.next() {
            Tok::Punct('+') => match self.next() {
                Tok::Num(n) => n,
                t => {
                    self.pos -= 1;
                    return self.err(format!("expected an offset, found {}", Self::describe(&t)));
                }
            },
            Tok::Num(n) if n.starts_with('-') => n,
            t => {
                self.pos -= 1;
                return self.err(format!("expected `+offset` or `-offset`, found {}", Self::describe(&t)));
            }
        };
        match text.parse::<i32>() {
            Ok(off) => Ok((p, off)),
            Err(_) => {
                self.pos -= 1;
                self.err(format!("offset `{text}` is not a 32-bit integer"))
            }
        }
    }

    /// A numeric literal of type `T` (`what` names it in errors).
    fn number<T: std::str::FromStr>(&mut self, what: &str) -> PResult<T> {
        match self.next() {
            Tok::Num(n) => match n.parse::<T>() {
                Ok(x) => Ok(x),
                Err(_) => {
                    self.pos -= 1;
                    self.err(format!("`{n}` is not {what}"))
                }
            },
            t => {
                self.pos -= 1;
                self.err(format!("expected {what}, found {}", Self::describe(&t)))
            }
        }
    }

    /// A float literal, decimal or `0x` bits.
    fn f64_bits(&mut self) -> PResult<u64> {
        match self.next() {
            Tok::Num(n) => {
                if let Some(hex) = n.strip_prefix("0x") {
                    if let Ok(bits) = u64::from_str_radix(hex, 16) {
                        return Ok(bits);
                    }
                } else if let Ok(x) = n.parse::<f64>() {
                    return Ok(x.to_bits());
                }
                self.pos -= 1;
                self.err(format!("`{n}` is not a float"))
            }
            t => {
                self.pos -= 1;
                self.err(format!("expected a float, found {}", Self::describe(&t)))
            }
        }
    }

    /// A comparison condition.
    fn cmp(&mut self) -> PResult<Cmp> {
        let w = self.word()?;
        let c = match w.as_str() {
            "eq" => Cmp::Eq,
            "ne" => Cmp::Ne,
            "lt" => Cmp::Lt,
            "le" => Cmp::Le,
            "gt" => Cmp::Gt,
            "ge" => Cmp::Ge,
            _ => {
                self.pos -= 1;
                return self.err(format!("unknown condition `{w}`"));
            }
        };
        Ok(c)
    }

    /// `.type` after a mnemonic.
    fn type_suffix(&mut self) -> PResult<Type> {
        self.expect_punct('.')?;
        self.ty()
    }

    /// The operation and the types of the results it defines.
    fn operation(&mut self, st: &mut FuncState) -> PResult<(Op, Vec<Type>)> {
        let mnemonic = self.word()?;
        let one = |op: Op, t: Type| Ok((op, vec![t]));
        if let Some(u) = unary_from_name(&mnemonic) {
            let a = self.use_value(st)?;
            let ty = match u {
                UnaryOp::Ineg | UnaryOp::Btoi => Type::I64,
                UnaryOp::Not => Type::Bool,
                _ => Type::F64,
            };
            return one(Op::Unary(u, a), ty);
        }
        if let Some(bop) = binary_from_name(&mnemonic) {
            let vs = self.operands(st, 2)?;
            return one(Op::Binary(bop, vs[0], vs[1]), binary_result(bop));
        }
        match mnemonic.as_str() {
            "iconst" => one(Op::Iconst(self.number::<i64>("a 64-bit integer")?), Type::I64),
            "fconst" => one(Op::Fconst(self.f64_bits()?), Type::F64),
            "bconst" => {
                let w = self.word()?;
                match w.as_str() {
                    "true" => one(Op::Bconst(true), Type::Bool),
                    "false" => one(Op::Bconst(false), Type::Bool),
                    _ => {
                        self.pos -= 1;
                        self.err(format!("expected `true` or `false`, found `{w}`"))
                    }
                }
            }
            "null" => one(Op::Null, Type::Ptr),
            "tag" => one(Op::TagConst(self.tag_ref()?), Type::I64),
            "icmp" | "fcmp" => {
                let c = self.cmp()?;
                let vs = self.operands(st, 2)?;
                let op = if mnemonic == "icmp" { Op::Icmp(c, vs[0], vs[1]) } else { Op::Fcmp(c, vs[0], vs[1]) };
                one(op, Type::Bool)
            }
            "select" => {
                let ty = self.type_suffix()?;
                let vs = self.operands(st, 3)?;
                one(Op::Select(vs[0], vs[1], vs[2]), ty)
            }
            "load" => {
                let ty = self.type_suffix()?;
                let (p, off) = self.address(st)?;
                one(Op::Load(ty, p, off), ty)
            }
            "store" => {
                let v = self.use_value(st)?;
                self.expect_punct(',')?;
                let (p, off) = self.address(st)?;
                Ok((Op::Store(v, p, off), vec![]))
            }
            "alloc" => one(Op::Alloc(self.number::<u32>("a size in bytes")?), Type::Ptr),
            "newarray" => {
                let len = self.use_value(st)?;
                self.expect_punct(',')?;
                one(Op::NewArray(len, self.number::<u32>("a stride in bytes")?), Type::Ptr)
            }
            "arraylen" => one(Op::ArrayLen(self.use_value(st)?), Type::I64),
            "elemaddr" => {
                let vs = self.operands(st, 2)?;
                self.expect_punct(',')?;
                one(Op::ElemAddr(vs[0], vs[1], self.number::<u32>("a stride in bytes")?), Type::Ptr)
            }
            "boundscheck" => {
                let vs = self.operands(st, 3)?;
                Ok((Op::BoundsCheck(vs[0], vs[1], vs[2]), vec![]))
            }
            "call" => match self.peek().clone() {
                Tok::Func(_) => {
                    let f = self.func_ref()?;
                    let args = self.arg_list(st)?;
                    let rets = self.module.funcs[f].sig.rets.clone();
                    Ok((Op::Call(f, args), rets))
                }
                Tok::Ext(name) => {
                    let Some(e) = self.module.extern_by_name(&name) else {
                        return self.err(format!("no extern `${name}` (declare it before use)"));
                    };
                    self.next();
                    let args = self.arg_list(st)?;
                    let rets = self.module.externs[e].sig.rets.clone();
                    Ok((Op::CallExt(e, args), rets))
                }
                t => self.err(format!("expected `@function` or `$extern`, found {}", Self::describe(&t))),
            },
            "jump" => Ok((Op::Jump(self.block_call(st)?), vec![])),
            "brif" => {
                let c = self.use_value(st)?;
                self.expect_punct(',')?;
                let t = self.block_call(st)?;
                self.expect_punct(',')?;
                let e = self.block_call(st)?;
                Ok((Op::Brif(c, t, e), vec![]))
            }
            "switch" => {
                let v = self.use_value(st)?;
                self.expect_punct(',')?;
                self.expect_punct('[')?;
                let mut cases = Vec::new();
                if !self.eat_punct(']') {
                    loop {
                        let t = self.tag_ref()?;
                        self.expect_punct(':')?;
                        cases.push((t, self.block_call(st)?));
                        if self.eat_punct(']') {
                            break;
                        }
                        self.expect_punct(',')?;
                    }
                }
                Ok((Op::Switch(v, cases), vec![]))
            }
            "return" => {
                let mut vs = Vec::new();
                if Self::is_value_word(self.peek()) {
                    vs.push(self.use_value(st)?);
                    while self.eat_punct(',') {
                        vs.push(self.use_value(st)?);
                    }
                }
                Ok((Op::Return(vs), vec![]))
            }
            "trap" => {
                let w = self.word()?;
                let Some(code) = TrapCode::from_name(&w) else {
                    self.pos -= 1;
                    return self.err(format!("unknown trap code `{w}`"));
                };
                let vs = self.arg_list(st)?;
                if vs.len() != 3 {
                    return self.err("a trap takes a site and two payload operands");
                }
                Ok((Op::Trap(code, vs[0], vs[1], vs[2]), vec![]))
            }
            _ => {
                self.pos -= 1;
                self.err(format!("unknown instruction `{mnemonic}`"))
            }
        }
    }
}

/// The one-operand operation called `name`.
fn unary_from_name(name: &str) -> Option<UnaryOp> {
    [UnaryOp::Ineg, UnaryOp::Fneg, UnaryOp::Fabs, UnaryOp::Fsqrt, UnaryOp::Not, UnaryOp::Itof, UnaryOp::Btoi]
        .into_iter()
        .find(|u| super::print::unary_name(*u) == name)
}

/// The two-operand operation called `name`.
fn binary_from_name(name: &str) -> Option<BinaryOp> {
    use BinaryOp::*;
    [Iadd, Isub, Imul, Sdiv, Srem, Fadd, Fsub, Fmul, Fdiv, And, Or, Xor]
        .into_iter()
        .find(|b| super::print::binary_name(*b) == name)
}
