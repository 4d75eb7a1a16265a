//! The incremental driver (docs/incremental-semantics.md, ILC Sec. 4): holds the input and output of a definition
//! `f : A -> B` and keeps the output current under a stream of input changes, using f's derivative.
//!
//! An update computes the output change with the self-maintainable fast derivative (base
//! computations eliminated); if a change falls outside its fast path it runs the total derivative
//! instead. Then it applies both changes with `⊕`. It is all or nothing: a change that fails leaves
//! input and output as they were. Changes in built-in groups are applied in place, so an update
//! costs time proportional to the change, not to the input or output.

use std::rc::Rc;

use adjoint::incremental::{derive_definition, Derivative};
use anf::mono::MonoProgram;
use frontend::syntax::DefId;
use frontend::types::{Type, TypePrinter};
use frontend::{Diagnostic, Span};

use crate::interp::incremental::{needs_base, reserve_locals};
use crate::interp::{group_op_into, Interp};
use crate::value::{Change, Group, Value};

/// Which derivative computed an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The derivative after dead-code elimination: it never read a base input.
    Fast,
    /// The total derivative (the change needed base values the fast one does not keep).
    Total,
}

pub struct Incr<'p> {
    interp: Interp<'p>,
    f: Value,
    fast: Value,
    total: Value,
    input_ty: Type,
    output_ty: Type,
    input: Value,
    output: Value,
    derivative: Derivative,
    last_change: Option<Value>,
}

impl<'p> Incr<'p> {
    /// Starts from `input`: computes the root definition's output on it.
    pub fn new(program: &'p MonoProgram, input: Value) -> Result<Incr<'p>, Diagnostic> {
        let root = program.root();
        let def = program.def(root);
        let Type::Fun(a, b) = &def.ty else {
            return Err(Diagnostic::error(
                def.body.span,
                format!("`incr` needs a function `{} : A -> B`, but it has type {}", def.name, def.ty),
            ));
        };
        let (input_ty, output_ty) = ((**a).clone(), (**b).clone());
        let derivative = derive_definition(program, root)?;
        let mut interp = Interp::new(program);
        // Binders made while deriving at run time must not clash with the derivative's.
        reserve_locals(&mut interp, derivative.next_local);
        interp.eval_globals()?;
        let f = interp.globals[root.0 as usize].clone();
        // Curried: fed the first input and its change, they leave a change of `B`.
        let fast = interp.eval(&derivative.fast, &Default::default())?;
        let total = interp.eval(&derivative.total, &Default::default())?;
        let output = interp.apply(&f, input.clone(), def.body.span)?;
        Ok(Incr { interp, f, fast, total, input_ty, output_ty, input, output, derivative, last_change: None })
    }

    pub fn input(&self) -> &Value {
        &self.input
    }
    pub fn output(&self) -> &Value {
        &self.output
    }
    pub fn input_type(&self) -> &Type {
        &self.input_ty
    }
    pub fn output_type(&self) -> &Type {
        &self.output_ty
    }
    pub fn derivative(&self) -> &Derivative {
        &self.derivative
    }
    /// The output change of the last successful update.
    pub fn last_change(&self) -> Option<&Value> {
        self.last_change.as_ref()
    }

    /// Applies the input change `da : Delta A`: all or nothing.
    pub fn update(&mut self, da: Value) -> Result<Path, Diagnostic> {
        let span = Span::SYNTHETIC;
        // A change that replaces the whole input: recomputation gives exactly f's value there
        // (the derivative's `a + (b - a)` would lose it to cancellation on Reals).
        if all_replace(&da) {
            let input = self.interp.oplus(&self.input, &da, &self.input_ty, span)?;
            let output = self.interp.apply(&self.f, input.clone(), span)?;
            self.last_change = Some(replace_all(&output, &self.output_ty));
            self.input = input;
            self.output = output;
            return Ok(Path::Total);
        }
        let fast = self.interp.apply_n(&self.fast, vec![self.input.clone(), da.clone()], span);
        let (dout, path) = match fast {
            Ok(d) => (d, Path::Fast),
            Err(e) if needs_base(&e) => {
                (self.interp.apply_n(&self.total, vec![self.input.clone(), da.clone()], span)?, Path::Total)
            }
            Err(e) => return Err(e),
        };
        // From here on the driver holds the only references to input and output (unless the
        // program shares parts of them), so built-in group changes update them in place.
        if in_place_safe(&da, &self.input_ty) && in_place_safe(&dout, &self.output_ty) {
            // Cannot fail: built-in group operations on values of the right types.
            apply_in_place(&mut self.interp, &mut self.input, &da, &self.input_ty)?;
            apply_in_place(&mut self.interp, &mut self.output, &dout, &self.output_ty)?;
        } else {
            let input = self.interp.oplus(&self.input, &da, &self.input_ty, span)?;
            let output = self.interp.oplus(&self.output, &dout, &self.output_ty, span)?;
            self.input = input;
            self.output = output;
        }
        self.last_change = Some(dout);
        // A Real output that stopped being finite is recomputed, not updated.
        if !finite_reals(&self.output) {
            self.output = self.recompute()?;
            self.last_change = Some(replace_all(&self.output, &self.output_ty));
        }
        Ok(path)
    }

    /// `f input`, computed from scratch (for checking the incremental result).
    pub fn recompute(&mut self) -> Result<Value, Diagnostic> {
        self.interp.apply(&self.f, self.input.clone(), Span::SYNTHETIC)
    }

    /// Values made by another program (a change literal) may hold closures whose binders go up
    /// to `next_local`; run-time derivation must not reuse those.
    pub fn reserve_locals(&mut self, next_local: u32) {
        reserve_locals(&mut self.interp, next_local);
    }
}

/// Parses and checks one expression of type `ty` and evaluates it (the `--input` file and each line
/// of the `--changes` file). Only built-in names are in scope. Spans in errors are offsets into
/// `text` plus `offset`. Returns the value and the literal program's `next_local`.
pub fn literal(text: &str, ty: &Type, offset: usize) -> Result<(Value, u32), Diagnostic> {
    if let Some(v) = data_literal(text, ty) {
        return Ok((v, 0));
    }
    evaluate_literal(text, ty, offset)
}

/// [`literal`] without the fast path for data: checked and evaluated by the front end and the
/// reference interpreter.
pub fn evaluate_literal(text: &str, ty: &Type, offset: usize) -> Result<(Value, u32), Diagnostic> {
    let prefix = format!("def literal : {} =\n", TypePrinter::new().ty(ty));
    let src = format!("{prefix}{text}");
    let shift = |d: Diagnostic| shift_diag(d, prefix.len(), offset, text.len());
    let program = frontend::check_source(&src).map_err(shift)?;
    if program.defs.len() != 1 {
        let at = program.defs.get(1).map(|d| d.span).unwrap_or(Span::new(0, 0));
        return Err(shift(Diagnostic::error(at, "expected one expression, found another definition")));
    }
    let mono = anf::mono::monomorphise(&program, DefId(0)).map_err(shift)?;
    let v = crate::interp::run(&mono).map_err(shift)?;
    Ok((v, mono.next_local))
}

fn shift_diag(d: Diagnostic, prefix: usize, offset: usize, len: usize) -> Diagnostic {
    let f = |s: Span| {
        let lo = (s.lo as usize).saturating_sub(prefix).min(len) + offset;
        let hi = (s.hi as usize).saturating_sub(prefix).min(len) + offset;
        Span::new(lo, hi.max(lo))
    };
    Diagnostic { span: f(d.span), labels: d.labels.into_iter().map(|(s, t)| (f(s), t)).collect(), ..d }
}

/// Does the change replace every part of the value?
fn all_replace(dv: &Value) -> bool {
    match dv {
        Value::Tuple(ds) => ds.iter().all(all_replace),
        Value::Change(c) => matches!(&**c, Change::Replace(_)),
        _ => false,
    }
}

/// `replace v`, componentwise on tuples.
fn replace_all(v: &Value, ty: &Type) -> Value {
    match (ty, v) {
        (Type::Tuple(ts), Value::Tuple(vs)) => {
            Value::tuple(ts.iter().zip(vs.iter()).map(|(t, x)| replace_all(x, t)).collect())
        }
        _ => Value::Change(Rc::new(Change::Replace(v.clone()))),
    }
}

/// Are the Reals in the value's tuple structure finite?
fn finite_reals(v: &Value) -> bool {
    match v {
        Value::Real(x) => x.is_finite(),
        Value::Tuple(vs) => vs.iter().all(finite_reals),
        _ => true,
    }
}

/// A change that `apply_in_place` applies without any user code, so it cannot fail.
fn in_place_safe(dv: &Value, ty: &Type) -> bool {
    match (ty, dv) {
        (Type::Tuple(ts), Value::Tuple(ds)) => ts.iter().zip(ds.iter()).all(|(t, d)| in_place_safe(d, t)),
        (Type::Fun(..), _) => false,
        (_, Value::Change(c)) => match &**c {
            Change::Replace(_) => true,
            Change::GChange(g, _) => builtin_group(g),
        },
        _ => false,
    }
}

fn builtin_group(g: &Group) -> bool {
    match g {
        Group::Int | Group::Real | Group::Bag => true,
        Group::Map(g) => builtin_group(g),
        Group::Pair(a, b) => builtin_group(a) && builtin_group(b),
        Group::User { .. } => false,
    }
}

/// `slot ⊕ dv`, updating a bag or map held only here in place (cost: the size of the change).
fn apply_in_place(it: &mut Interp, slot: &mut Value, dv: &Value, ty: &Type) -> Result<(), Diagnostic> {
    match (ty, dv) {
        (Type::Tuple(ts), Value::Tuple(ds)) => {
            let old = std::mem::replace(slot, Value::Unit);
            let Value::Tuple(ref parts) = old else {
                return Err(Diagnostic::error(Span::SYNTHETIC, "internal: a tuple change for a non-tuple"));
            };
            let mut vs: Vec<Value> = parts.iter().cloned().collect();
            // Release the old tuple so each component is held once and updates in place.
            drop(old);
            for ((t, d), v) in ts.iter().zip(ds.iter()).zip(vs.iter_mut()) {
                apply_in_place(it, v, d, t)?;
            }
            *slot = Value::Tuple(Rc::from(vs));
            Ok(())
        }
        (_, Value::Change(c)) => {
            match &**c {
                Change::Replace(v) => *slot = v.clone(),
                Change::GChange(g, d) => {
                    let v = std::mem::replace(slot, Value::Unit);
                    *slot = group_op_into(it, g, v, d, Span::SYNTHETIC)?;
                }
            }
            Ok(())
        }
        _ => Err(Diagnostic::error(Span::SYNTHETIC, "internal: a change of the wrong shape")),
    }
}

/// A data literal of type `ty` read directly (numbers, booleans, `()`, tuples, arrays, bags, maps
/// and `replace`/`gchange` changes of builtin groups), without the front end and the interpreter:
/// input files of a million entries load in about a second. `None` for anything else (an
/// expression, a user's group, a malformed or ill-typed literal), which `literal` then checks
/// and evaluates in full, with its errors; where both accept a text they give the same value.
pub fn data_literal(text: &str, ty: &Type) -> Option<Value> {
    let mut p = DataParser { s: text.as_bytes(), i: 0 };
    let v = p.value(ty)?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct DataParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl DataParser<'_> {
    fn ws(&mut self) {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            if self.s[self.i..].starts_with(b"--") {
                while self.i < self.s.len() && self.s[self.i] != b'\n' {
                    self.i += 1;
                }
            } else {
                return;
            }
        }
    }

    fn eat(&mut self, tok: &[u8]) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(tok) {
            let next = self.s.get(self.i + tok.len()).copied();
            let word = tok.last().is_some_and(|c| c.is_ascii_alphanumeric());
            if word && next.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'\'') {
                return false;
            }
            self.i += tok.len();
            true
        } else {
            false
        }
    }

    /// A number token: `-`? digits (`.` digits)? (`e` sign? digits)?; whether it is real.
    fn number(&mut self) -> Option<(&str, bool)> {
        self.ws();
        let start = self.i;
        let s = self.s;
        let mut j = self.i;
        if j < s.len() && s[j] == b'-' {
            j += 1;
        }
        let digits = j;
        while j < s.len() && s[j].is_ascii_digit() {
            j += 1;
        }
        if j == digits {
            return None;
        }
        let mut real = false;
        if j + 1 < s.len() && s[j] == b'.' && s[j + 1].is_ascii_digit() {
            real = true;
            j += 1;
            while j < s.len() && s[j].is_ascii_digit() {
                j += 1;
            }
        }
        if j < s.len() && (s[j] == b'e' || s[j] == b'E') {
            let mut k = j + 1;
            if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
                k += 1;
            }
            if !(k < s.len() && s[k].is_ascii_digit()) {
                return None;
            }
            while k < s.len() && s[k].is_ascii_digit() {
                k += 1;
            }
            real = true;
            j = k;
        }
        if j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_' || s[j] == b'.') {
            return None;
        }
        self.i = j;
        Some((std::str::from_utf8(&s[start..j]).ok()?, real))
    }

    fn int(&mut self) -> Option<i64> {
        match self.number()? {
            (t, false) => t.parse().ok(),
            _ => None,
        }
    }

    fn value(&mut self, ty: &Type) -> Option<Value> {
        Some(match ty {
            Type::Int => Value::Int(self.int()?),
            Type::Real => {
                let (t, real) = self.number()?;
                let x = if real { t.parse::<f64>().ok()? } else { t.parse::<i64>().ok()? as f64 };
                // Negative literals negate the positive one (`-0.0` included), as the parser does.
                if !x.is_finite() {
                    return None;
                }
                Value::Real(x)
            }
            Type::Bool if self.eat(b"true") => Value::Bool(true),
            Type::Bool if self.eat(b"false") => Value::Bool(false),
            Type::Unit if self.eat(b"(") && self.eat(b")") => Value::Unit,
            Type::Tuple(ts) => {
                if !self.eat(b"(") {
                    return None;
                }
                let mut vs = Vec::with_capacity(ts.len());
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 && !self.eat(b",") {
                        return None;
                    }
                    vs.push(self.value(t)?);
                }
                if !self.eat(b")") {
                    return None;
                }
                Value::tuple(vs)
            }
            Type::Array(e) => {
                if !self.eat(b"[") {
                    return None;
                }
                let mut vs = Vec::new();
                if !self.eat(b"]") {
                    loop {
                        vs.push(self.value(e)?);
                        if self.eat(b"]") {
                            break;
                        }
                        if !self.eat(b",") {
                            return None;
                        }
                    }
                }
                Value::Array(Rc::new(vs))
            }
            Type::Bag(e) => {
                if !(self.eat(b"bag") && self.eat(b"{")) {
                    return None;
                }
                let mut b = crate::value::Bag::default();
                if !self.eat(b"}") {
                    loop {
                        let k = self.value(e)?.to_key()?;
                        let n = if self.eat(b"#") { self.int()? } else { 1 };
                        // An overflow: the front end's reader reports it, located.
                        b.insert(k, n).ok()?;
                        if self.eat(b"}") {
                            break;
                        }
                        if !self.eat(b",") {
                            return None;
                        }
                    }
                }
                Value::Bag(Rc::new(b))
            }
            Type::Map(k, v) => {
                if !(self.eat(b"map") && self.eat(b"{")) {
                    return None;
                }
                let mut m = crate::value::MapV::default();
                if !self.eat(b"}") {
                    loop {
                        let key = self.value(k)?.to_key()?;
                        if !self.eat(b"->") {
                            return None;
                        }
                        let val = self.value(v)?;
                        // A repeated key is an error `literal` reports.
                        if m.entries.insert(key, val).is_some() {
                            return None;
                        }
                        if self.eat(b"}") {
                            break;
                        }
                        if !self.eat(b",") {
                            return None;
                        }
                    }
                }
                Value::Map(Rc::new(m))
            }
            Type::Delta(t) => {
                // An argument starting with `-` is a subtraction (`replace -3` is `replace - 3`).
                if self.eat(b"replace") {
                    self.no_minus()?;
                    Value::Change(Rc::new(Change::Replace(self.value(t)?)))
                } else if self.eat(b"gchange") {
                    self.no_minus()?;
                    let g = self.group(t)?;
                    self.no_minus()?;
                    Value::Change(Rc::new(Change::GChange(Rc::new(g), self.value(t)?)))
                } else {
                    return None;
                }
            }
            _ => return None,
        })
    }

    /// `None` when a `-` comes next.
    fn no_minus(&mut self) -> Option<()> {
        self.ws();
        (self.s.get(self.i) != Some(&b'-')).then_some(())
    }

    /// A builtin group of carrier `t`.
    fn group(&mut self, t: &Type) -> Option<Group> {
        if self.eat(b"(") {
            let g = self.group(t)?;
            return self.eat(b")").then_some(g);
        }
        Some(match t {
            Type::Int if self.eat(b"intGroup") => Group::Int,
            Type::Real if self.eat(b"realGroup") => Group::Real,
            Type::Bag(_) if self.eat(b"bagGroup") => Group::Bag,
            Type::Map(_, v) if self.eat(b"mapGroup") => Group::Map(Rc::new(self.group_arg(v)?)),
            Type::Tuple(ts) if ts.len() == 2 && self.eat(b"pairGroup") => {
                Group::Pair(Rc::new(self.group_arg(&ts[0])?), Rc::new(self.group_arg(&ts[1])?))
            }
            _ => return None,
        })
    }

    /// A group as an argument: a name or a parenthesised group.
    fn group_arg(&mut self, t: &Type) -> Option<Group> {
        self.ws();
        if self.s[self.i..].starts_with(b"(") {
            return self.group(t);
        }
        match t {
            Type::Int if self.eat(b"intGroup") => Some(Group::Int),
            Type::Real if self.eat(b"realGroup") => Some(Group::Real),
            Type::Bag(_) if self.eat(b"bagGroup") => Some(Group::Bag),
            _ => None,
        }
    }
}
