//! The reduction strategy of Mak & Ong Sec. 3.4 over closed terms: call-by-value contexts and
//! redexes, reductions 1–6, and (in `rules.rs`) the pullback reductions 7–20.
//!
//! `eval` reduces a term to a value — a normal form — by exactly the steps of the small-step
//! strategy, in the same order: the evaluation contexts
//!
//! ```text
//! C ::= [] | C + P | V + C | C P | V C | πi(C) | ⟨C, S⟩ | ⟨V, C⟩ | f(C) | J f · C
//!     | (λx. S)*·C | (λx. C)*·V | (Ω λy. C_A)·S | (Ω λy. E)·C | (Ω λy. ⟨y, E⟩)·C
//! ```
//!
//! are the order in which `eval` visits sub-terms (left to right, dual maps' arguments before
//! their bodies, a pullback's function before its 1-form), and each contraction is reported as a
//! step with its rule number. Free variables are values, so terms with free variables (the premises
//! of the proof-tree rules reduce under a binder, with a fresh 1-form `ω′`) reduce to normal forms
//! that may be stuck applications.
//!
//! Extensions, each reported under its own label: `δ` unfolds a definition; `η` makes a function
//! value a λ where a rule needs one; `A` A-normalises; `if`, `map`, `zipWith`, `build`, `fold`,
//! `iterate`, `while` unfold control and array primitives at known sizes; `grad`, `vjp`, `jacobian` unfold
//! into the pullbacks they abbreviate; `D` applies a dual map to a tangent and `r*` a dual vector;
//! `+` adds literal vectors; `0` the laws of the symbolic zero; `≡` the paper's identities
//! `(S + S′) P ≡ S P + S′ P` and linearity of dual maps in their argument.

use frontend::builtins::Builtin;
use frontend::span::Span;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::Diagnostic;
use rustc_hash::FxHashMap;
use std::rc::Weak;

use super::print;
use super::term::*;
use super::vector;
use crate::interp::Interp;

pub type R<T> = Result<T, Diagnostic>;

/// Limits and options of one reduction.
#[derive(Clone, Debug)]
pub struct Config {
    /// The most steps (counting those of premises and nested pullbacks) before giving up.
    pub budget: u64,
    /// Record the steps (`nabla trace`).
    pub trace: bool,
    /// Terms printed wider than this are abbreviated in the trace.
    pub width: usize,
    /// The most steps the trace records; the reduction stops at the next one (`nabla trace
    /// --max-steps`). `None`: no bound.
    pub max_steps: Option<usize>,
}

impl Default for Config {
    fn default() -> Config {
        Config { budget: DEFAULT_BUDGET, trace: false, width: 1000, max_steps: None }
    }
}

/// Steps one reduction may take. The calculus is strongly normalising, so only a very large
/// computation reaches this.
pub const DEFAULT_BUDGET: u64 = 20_000_000;

/// How deep premises and nested pullbacks may nest.
const MAX_NESTING: u32 = 10_000;

pub struct Reducer<'a, 'p> {
    pub it: &'a mut Interp<'p>,
    steps: u64,
    budget: u64,
    span: Span,
    trace: Option<Trace>,
    quiet: u32,
    nesting: u32,
    unfolded: FxHashMap<DefId, E>,
    /// Binders A-normalisation made so far: new ones continue the numbering.
    names: u32,
    /// Terms already reduced to values (by identity): values are normal forms, so reducing one
    /// again, as each step's context is revisited, is skipped. The `Weak` keeps the node's address
    /// from being reused without keeping its children alive (holding every intermediate term made
    /// the reducer's memory quadratic in the length of a let-series); dead entries are swept.
    values: FxHashMap<*const Expr, Weak<Expr>>,
    /// Normal forms of terms reduced before, while both are alive.
    results: FxHashMap<*const Expr, (Weak<Expr>, Weak<Expr>)>,
    /// Sweep dead entries of `values` and `results` when they reach this size.
    sweep_at: usize,
    /// `NABLA_DEBUG` is set: every step, hidden ones included, goes to stderr.
    debug: bool,
}

struct Trace {
    lines: Vec<String>,
    steps: usize,
    /// The context of the sub-term being reduced: each parent with the index of the hole.
    frames: Vec<(E, usize)>,
    depth: usize,
    width: usize,
    max_steps: Option<usize>,
    /// The trace reached `max_steps` and the reduction was stopped.
    cut: bool,
}

impl<'a, 'p> Reducer<'a, 'p> {
    /// A reducer whose errors point at `span` when the failing term has no source location.
    pub fn new(it: &'a mut Interp<'p>, span: Span, config: &Config) -> Reducer<'a, 'p> {
        let trace = config.trace.then(|| Trace {
            lines: Vec::new(),
            steps: 0,
            frames: Vec::new(),
            depth: 0,
            width: config.width,
            max_steps: config.max_steps,
            cut: false,
        });
        Reducer {
            it,
            steps: 0,
            budget: config.budget,
            span,
            trace,
            quiet: 0,
            nesting: 0,
            unfolded: FxHashMap::default(),
            names: 0,
            values: FxHashMap::default(),
            results: FxHashMap::default(),
            sweep_at: 1 << 16,
            debug: std::env::var_os("NABLA_DEBUG").is_some(),
        }
    }

    pub fn span(&self) -> Span {
        self.span
    }

    /// Steps recorded in the trace.
    pub fn traced_steps(&self) -> usize {
        self.trace.as_ref().map_or(0, |t| t.steps)
    }

    pub fn error(&self, msg: &str) -> Diagnostic {
        Diagnostic::error(self.span, msg.to_string())
    }

    pub(super) fn error_at(&self, e: &E, msg: String) -> Diagnostic {
        let span = if e.span == Span::SYNTHETIC || e.span == CHAIN { self.span } else { e.span };
        Diagnostic::error(span, msg)
    }

    /// Whether the trace reached its bound and the reduction was stopped there.
    pub fn trace_cut(&self) -> bool {
        self.trace.as_ref().is_some_and(|t| t.cut)
    }

    /// The recorded trace lines.
    pub fn take_trace(&mut self) -> Vec<String> {
        self.trace.as_mut().map(|t| std::mem::take(&mut t.lines)).unwrap_or_default()
    }

    fn tracing(&self) -> bool {
        self.trace.is_some() && self.quiet == 0
    }

    /// Records the first line of a trace: the term itself.
    pub fn trace_start(&mut self, t: &E) {
        if self.tracing() {
            let tr = self.trace.as_mut().expect("tracing");
            let line = format!("{}{:<12}{}", "  ".repeat(tr.depth), "", print::abbreviated(t, tr.width));
            tr.lines.push(line);
        }
    }

    /// One step of the strategy: `new` replaced the redex in the current context.
    pub(super) fn step(&mut self, label: &str, new: &E) -> R<()> {
        self.steps += 1;
        if self.debug {
            let mut seen = rustc_hash::FxHashSet::default();
            fn count(e: &E, seen: &mut rustc_hash::FxHashSet<*const Expr>) {
                if seen.insert(std::rc::Rc::as_ptr(e)) {
                    frontend::lin::for_each_child(e, &mut |c| count(c, seen));
                }
            }
            count(new, &mut seen);
            eprintln!("[{}:{}:{}] ({label}) {}", self.steps, self.nesting, seen.len(), print::abbreviated(new, 300));
        }
        crate::interp::check_interrupt(self.span)?;
        if self.steps > self.budget {
            return Err(self.error(&format!(
                "the reduction exceeded its budget of {} steps (the term is too large for the reference reducer)",
                self.budget
            )));
        }
        if self.tracing() {
            let tr = self.trace.as_mut().expect("tracing");
            if tr.max_steps.is_some_and(|m| tr.steps >= m) {
                tr.cut = true;
                return Err(self.error("the trace reached its bound (--max-steps)"));
            }
            let mut whole = new.clone();
            for (parent, i) in tr.frames.iter().rev() {
                whole = with_child(parent, *i, &whole);
            }
            let line = format!(
                "{}{:<12}{}",
                "  ".repeat(tr.depth),
                format!("({label})"),
                print::abbreviated(&whole, tr.width)
            );
            let tr = self.trace.as_mut().expect("tracing");
            tr.lines.push(line);
            tr.steps += 1;
        }
        Ok(())
    }

    /// A note in the trace (no step).
    pub(super) fn note(&mut self, text: &str) {
        if self.tracing() {
            let tr = self.trace.as_mut().expect("tracing");
            let line = format!("{}{}", "  ".repeat(tr.depth), text);
            tr.lines.push(line);
        }
    }

    /// Reduces `start`, the premise of proof-tree rule `rule`, as a derivation of its own.
    pub(super) fn premise(&mut self, rule: &str, start: &E) -> R<E> {
        self.enter()?;
        let saved = self.trace.as_mut().map(|t| {
            t.depth += 1;
            std::mem::take(&mut t.frames)
        });
        if self.tracing() {
            let tr = self.trace.as_ref().expect("tracing");
            let text = format!("premise of ({rule}): {}", print::abbreviated(start, tr.width));
            self.note(&text);
        }
        let r = self.eval(start);
        if let (Some(t), Some(frames)) = (self.trace.as_mut(), saved) {
            t.depth -= 1;
            t.frames = frames;
        }
        self.nesting -= 1;
        r
    }

    /// Runs `f` without tracing (the Jacobians of function symbols, computed by nested pullbacks).
    pub(super) fn quietly<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.enter()?;
        self.quiet += 1;
        let saved = self.trace.as_mut().map(|t| std::mem::take(&mut t.frames));
        let r = f(self);
        if let (Some(t), Some(frames)) = (self.trace.as_mut(), saved) {
            t.frames = frames;
        }
        self.quiet -= 1;
        self.nesting -= 1;
        r
    }

    fn enter(&mut self) -> R<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            self.nesting -= 1;
            return Err(self.error("pullbacks nested too deeply"));
        }
        Ok(())
    }

    /// Reduces the `i`-th sub-term of `t` (the hole of the context) to a value and puts it back.
    fn child(&mut self, t: &mut E, i: usize) -> R<E> {
        let c = child_at(t, i);
        let traced = self.tracing();
        if traced {
            self.trace.as_mut().expect("tracing").frames.push((t.clone(), i));
        }
        let r = self.eval(&c);
        if traced {
            self.trace.as_mut().expect("tracing").frames.pop();
        }
        let v = r?;
        if !std::rc::Rc::ptr_eq(&v, &c) {
            *t = with_child(t, i, &v);
        }
        Ok(v)
    }

    /// Drops the memo entries of terms that are gone, once the tables have doubled.
    fn sweep(&mut self) {
        if self.values.len() + self.results.len() < self.sweep_at {
            return;
        }
        self.values.retain(|_, w| w.strong_count() > 0);
        self.results.retain(|_, (k, v)| k.strong_count() > 0 && v.strong_count() > 0);
        self.sweep_at = (2 * (self.values.len() + self.results.len())).max(1 << 16);
    }

    /// Reduces a closed term (or one whose free variables are values) to a value.
    pub fn eval(&mut self, t0: &E) -> R<E> {
        let key = std::rc::Rc::as_ptr(t0);
        // `t0` is alive at `key`, so an entry there (whose `Weak` holds the address) is about `t0`.
        if self.values.contains_key(&key) {
            return Ok(t0.clone());
        }
        if let Some(v) = self.results.get(&key).and_then(|(_, v)| v.upgrade()) {
            return Ok(v);
        }
        let mut t = t0.clone();
        loop {
            match self.contract(&mut t)? {
                None => {
                    self.sweep();
                    self.values.insert(std::rc::Rc::as_ptr(&t), std::rc::Rc::downgrade(&t));
                    // A shared sub-term reduces once: its normal form is reused wherever it occurs
                    // (not in a trace, which shows every step).
                    if !self.tracing() && !std::rc::Rc::ptr_eq(&t, t0) {
                        self.results.insert(key, (std::rc::Rc::downgrade(t0), std::rc::Rc::downgrade(&t)));
                    }
                    return Ok(t);
                }
                Some((label, next)) => {
                    self.step(&label, &next)?;
                    t = next;
                }
            }
        }
    }

    /// Reduces the sub-terms of `t` in context order; then, if `t` is a redex, returns its rule and
    /// contractum.
    fn contract(&mut self, t: &mut E) -> R<Option<(String, E)>> {
        let e = t.clone();
        let lab = |s: &str| s.to_string();
        Ok(match &e.kind {
            ExprKind::Var(_, VarRef::Local(_)) | ExprKind::Lit(_) | ExprKind::Lam(..) | ExprKind::Zero => None,
            ExprKind::Var(_, VarRef::Builtin(_)) => None,
            ExprKind::Var(_, VarRef::Global(d)) => {
                if self.is_symbol(*d) {
                    None
                } else {
                    Some((lab("δ"), self.unfold(*d)?))
                }
            }
            ExprKind::Ann(x, _) => Some((lab("≡"), x.clone())),
            // ILC's Derive is the interpreter's business: a closed term's derivative, read back.
            ExprKind::Derive(a) => {
                if !is_closed(a) {
                    return Err(self.error_at(&e, "`derive` of a term with free variables".into()));
                }
                let span = if e.span == Span::SYNTHETIC || e.span == CHAIN { self.span } else { e.span };
                let v = crate::interp::incremental::eval_derive(self.it, a, span)?;
                Some((lab("Derive"), super::readback::readback(&v, &e.ty)))
            }
            ExprKind::Tuple(xs) | ExprKind::Array(xs) if !self.tracing() => {
                // Left to right, as `child` would, but the tuple or array is rebuilt once, not once
                // per element that reduces (a trace shows each element's context instead).
                let mut ys: Option<Vec<E>> = None;
                for (i, x) in xs.iter().enumerate() {
                    let v = self.eval(x)?;
                    if !std::rc::Rc::ptr_eq(&v, x) {
                        ys.get_or_insert_with(|| xs.clone())[i] = v;
                    }
                }
                if let Some(ys) = ys {
                    let kind = match &e.kind {
                        ExprKind::Tuple(_) => ExprKind::Tuple(ys),
                        _ => ExprKind::Array(ys),
                    };
                    *t = Expr::new(kind, e.span, e.ty.clone());
                }
                None
            }
            ExprKind::Tuple(xs) | ExprKind::Array(xs) => {
                for i in 0..xs.len() {
                    self.child(t, i)?;
                }
                None
            }
            ExprKind::Bag(xs) => {
                for i in 0..xs.len() {
                    self.child(t, i)?;
                }
                None
            }
            ExprKind::Map(xs) => {
                for i in 0..2 * xs.len() {
                    self.child(t, i)?;
                }
                None
            }
            ExprKind::Proj(_, i) => {
                let a = self.child(t, 0)?;
                match &a.kind {
                    // Reduction 2: πi⟨V1, V2⟩ → Vi.
                    ExprKind::Tuple(xs) => match xs.get(*i) {
                        Some(x) => Some((lab("2"), x.clone())),
                        None => return Err(self.error_at(&e, "internal: projection out of range".into())),
                    },
                    ExprKind::Zero => Some((lab("0"), zero(&e.ty))),
                    _ => None,
                }
            }
            ExprKind::Index(..) => {
                let a = self.child(t, 0)?;
                let i = self.child(t, 1)?;
                if is_zero(&a) {
                    Some((lab("0"), zero(&e.ty)))
                } else if let (ExprKind::Array(xs), ExprKind::Lit(Lit::Int(k))) = (&a.kind, &i.kind) {
                    // Reduction 2 for arrays: [V₀, …, Vₙ₋₁].[k] → Vₖ.
                    match usize::try_from(*k).ok().and_then(|k| xs.get(k)) {
                        Some(x) => Some((lab("2"), x.clone())),
                        None => {
                            return Err(self.error_at(&e, format!("index {k} out of bounds for length {}", xs.len())))
                        }
                    }
                } else if vector::is_vector(&a) && matches!(i.kind, ExprKind::Lit(_)) {
                    let sym = super::prim::Sym::Index(a.ty.clone());
                    Some((lab("3"), sym.apply(self, &[a, i]).map_err(|d| self.relocate(d, &e))?))
                } else {
                    None
                }
            }
            ExprKind::Neg(_) => {
                let a = self.child(t, 0)?;
                match &a.kind {
                    ExprKind::Zero => Some((lab("0"), zero(&e.ty))),
                    ExprKind::Lit(Lit::Real(r)) => Some((lab("3"), real(-r))),
                    ExprKind::Lit(Lit::Int(n)) => Some((lab("3"), int(n.wrapping_neg()))),
                    _ => None,
                }
            }
            ExprKind::Not(_) => {
                let a = self.child(t, 0)?;
                match &a.kind {
                    ExprKind::Lit(Lit::Bool(b)) => Some((lab("3"), boolean(!b))),
                    _ => None,
                }
            }
            ExprKind::Bin(op @ (BinOp::And | BinOp::Or), _, b) => {
                let a = self.child(t, 0)?;
                match (&a.kind, op) {
                    (ExprKind::Lit(Lit::Bool(true)), BinOp::And) | (ExprKind::Lit(Lit::Bool(false)), BinOp::Or) => {
                        Some((lab("if"), b.clone()))
                    }
                    (ExprKind::Lit(Lit::Bool(v)), _) => Some((lab("if"), boolean(*v))),
                    _ => None,
                }
            }
            ExprKind::Bin(op, ..) => {
                let a = self.child(t, 0)?;
                let b = self.child(t, 1)?;
                self.binary(&e, *op, &a, &b)?
            }
            ExprKind::Sum(..) => {
                let a = self.child(t, 0)?;
                let b = self.child(t, 1)?;
                if is_zero(&a) {
                    Some((lab("0"), b))
                } else if is_zero(&b) {
                    Some((lab("0"), a))
                } else if vector::is_vector(&a) && vector::is_vector(&b) {
                    Some((lab("+"), vector::add(&a, &b).map_err(|m| self.error_at(&e, m))?))
                } else if let (Some(r), Some(s)) = (star_vector(&a), star_vector(&b)) {
                    Some((lab("+"), star(vector::add(&r, &s).map_err(|m| self.error_at(&e, m))?)))
                } else {
                    None
                }
            }
            ExprKind::If(_, a, b) => {
                let c = self.child(t, 0)?;
                match &c.kind {
                    ExprKind::Lit(Lit::Bool(true)) => Some((lab("if"), a.clone())),
                    ExprKind::Lit(Lit::Bool(false)) => Some((lab("if"), b.clone())),
                    _ => None,
                }
            }
            // let x = t in s ≡ (λx. s) t: reduction 1 once t is a value.
            ExprKind::Let(p, _, body) => {
                let v = self.child(t, 0)?;
                Some((lab("1"), instantiate(p, body, &v)))
            }
            ExprKind::App(..) => {
                self.child(t, 0)?;
                self.child(t, 1)?;
                let t2 = t.clone();
                self.application(&t2)?
            }
            ExprKind::Pullback(..) => self.pullback_term(t)?,
            ExprKind::Dual(..) => {
                // (λx. S)*·C, then (λx. C)*·V.
                self.child(t, 1)?;
                self.child(t, 0)?;
                let t2 = t.clone();
                self.dual_map(&t2)?
            }
        })
    }

    fn relocate(&self, mut d: Diagnostic, e: &E) -> Diagnostic {
        if d.span == self.span && e.span != Span::SYNTHETIC && e.span != CHAIN {
            d.span = e.span;
        }
        d
    }

    fn binary(&mut self, e: &E, op: BinOp, a: &E, b: &E) -> R<Option<(String, E)>> {
        let lab = |s: &str| s.to_string();
        // The symbolic zero (the tangents of inactive paths): linear positions only.
        match op {
            BinOp::Add if is_zero(a) => return Ok(Some((lab("0"), b.clone()))),
            BinOp::Add | BinOp::Sub if is_zero(b) => return Ok(Some((lab("0"), a.clone()))),
            BinOp::Sub if is_zero(a) => return Ok(Some((lab("0"), mk(ExprKind::Neg(b.clone()), e.ty.clone())))),
            BinOp::Mul if is_zero(a) || is_zero(b) => return Ok(Some((lab("0"), zero(&e.ty)))),
            BinOp::Div if is_zero(a) => return Ok(Some((lab("0"), zero(&e.ty)))),
            _ => {}
        }
        let literal = |x: &E| vector::is_vector(x) && !is_zero(x);
        // Changes (ILC's ⊕, ⊖) and equality work on any closed values.
        let closed_values = matches!(op, BinOp::Oplus | BinOp::Ominus | BinOp::Eq | BinOp::Ne)
            && is_closed(a)
            && is_closed(b)
            && !is_zero(a)
            && !is_zero(b);
        if !(literal(a) && literal(b) || closed_values) {
            return Ok(None);
        }
        // Reduction 3: an operator is a function symbol applied to literals.
        let sym = super::prim::Sym::Op(op, a.ty.clone());
        let v = sym.apply(self, &[a.clone(), b.clone()]).map_err(|d| self.relocate(d, e))?;
        Ok(Some((lab("3"), v)))
    }

    /// The redexes `V V′`.
    fn application(&mut self, t: &E) -> R<Option<(String, E)>> {
        let ExprKind::App(f, a) = &t.kind else { return Ok(None) };
        let lab = |s: &str| s.to_string();
        let (head, args) = spine(t);
        if let Some(b) = builtin_head(&head) {
            if args.len() == b.arity() {
                return self.builtin(t, b, &head, &args);
            }
            // J is linear in the function and in the tangent: J 0 · s = J f · 0 = 0.
            if b == Builtin::Jac && args.len() == 2 && (is_zero(&args[0]) || is_zero_vector(&args[1])) {
                return Ok(Some((lab("0"), zero(&t.ty))));
            }
            // `r* V`: a dual vector applied to a tangent is the pairing ⟨r, V⟩.
            if b == Builtin::Star && args.len() == 2 {
                let (r, v) = (&args[0], &args[1]);
                if is_zero(v) || vector::is_vector(r) && vector::inner(r, r) == Ok(0.0) && !vector::is_vector(v) {
                    return Ok(Some((lab("0"), zero(&Type::Real))));
                }
                if vector::is_vector(r) && vector::is_vector(v) {
                    let x = vector::inner(r, v).map_err(|m| self.error_at(t, m))?;
                    return Ok(Some((lab("r*"), real(x))));
                }
            }
            return Ok(None);
        }
        Ok(match &f.kind {
            // Reduction 1: (λx. S) V → S[V/x].
            ExprKind::Lam(p, body) => Some((lab("1"), instantiate(p, body, a))),
            // Reduction 3: f(r) → f(r) for a definition in F.
            ExprKind::Var(_, VarRef::Global(d)) => {
                if vector::is_vector(a) {
                    let sym = super::prim::Sym::Global(f.clone());
                    let v = sym.apply(self, &[a.clone()]).map_err(|d| self.relocate(d, t))?;
                    Some((lab("3"), v))
                } else {
                    let _ = d;
                    None
                }
            }
            ExprKind::Pullback(g, w) => match &g.kind {
                ExprKind::Lam(p, body) => self.pullback_at(p, body, w, a)?,
                _ => None,
            },
            // A dual map applied to a tangent: [[(λx. S)*·S′]] = λv. [[S′]]([[S]] v).
            ExprKind::Dual(p, s, w) => Some((lab("D"), app(w, instantiate(p, s, a)))),
            // (S + S′) P ≡ S P + S′ P.
            ExprKind::Sum(g, h) => {
                let ty = t.ty.clone();
                Some((lab("≡"), mk(ExprKind::Sum(app(g, a.clone()), app(h, a.clone())), ty)))
            }
            ExprKind::Zero => Some((lab("0"), zero(&t.ty))),
            _ => None,
        })
    }

    /// `J(.[]) · ⟨ts, _⟩` at `⟨xs, i⟩` with `ts` an array literal and `i` an Int literal: `ts.[i]`
    /// (an out-of-range index is left to the primal, which reports it).
    fn index_jvp(&self, f: &E, t: &E, p: &E) -> Option<E> {
        if !matches!(self.symbol_of(f), super::prim::Sym::Index(_)) {
            return None;
        }
        let (ExprKind::Tuple(ts), ExprKind::Tuple(ps)) = (&t.kind, &p.kind) else { return None };
        match (&ts.first()?.kind, &ps.get(1)?.kind) {
            (ExprKind::Array(xs), ExprKind::Lit(Lit::Int(i))) => {
                usize::try_from(*i).ok().and_then(|i| xs.get(i)).cloned()
            }
            _ => None,
        }
    }

    /// A saturated builtin applied to values.
    fn builtin(&mut self, t: &E, b: Builtin, head: &E, args: &[E]) -> R<Option<(String, E)>> {
        use Builtin as B;
        let lab = |s: &str| s.to_string();
        let literal = |x: &E| vector::is_vector(x);
        Ok(match b {
            // (3) len depends only on the shape: len [V₀, …, Vₙ₋₁] → n, its elements symbolic or not.
            B::Len if matches!(args[0].kind, ExprKind::Array(_)) && !literal(&args[0]) => {
                let ExprKind::Array(xs) = &args[0].kind else { return Ok(None) };
                Some((lab("3"), int(xs.len() as i64)))
            }
            _ if super::prim::is_prim(b) => {
                // Linear primitives keep the symbolic zero.
                if matches!(b, B::Neg | B::Sum) && is_zero(&args[0])
                    || b == B::Dot && (is_zero(&args[0]) || is_zero(&args[1]))
                {
                    return Ok(Some((lab("0"), zero(&t.ty))));
                }
                if !args.iter().all(literal) {
                    return Ok(None);
                }
                let sym = super::prim::Sym::Prim(b, head.ty.clone());
                let joined = if args.len() == 1 { args[0].clone() } else { tuple(args.to_vec()) };
                let parts = if args.len() == 1 { vec![joined] } else { args.to_vec() };
                Some((lab("3"), sym.apply(self, &parts).map_err(|d| self.relocate(d, t))?))
            }
            // `build n f`, `map f xs`, … unfold into the applications they perform.
            // (build) build n f → [f 0, …, f (n-1)].
            B::Build => match &args[0].kind {
                ExprKind::Lit(Lit::Int(n)) => {
                    let n = self.size(*n, "build", t)?;
                    let xs = (0..n).map(|i| app(&args[1], int(i as i64))).collect();
                    Some((lab("build"), mk(ExprKind::Array(xs), t.ty.clone())))
                }
                _ => None,
            },
            // (map) map f [V₀, …] → [f V₀, …].
            B::Map => match &args[1].kind {
                ExprKind::Array(xs) => {
                    let ys = xs.iter().map(|x| app(&args[0], x.clone())).collect();
                    Some((lab("map"), mk(ExprKind::Array(ys), t.ty.clone())))
                }
                _ => None,
            },
            // (zipWith) zipWith f [V₀, …] [W₀, …] → [f V₀ W₀, …].
            B::ZipWith => match (&args[1].kind, &args[2].kind) {
                (ExprKind::Array(xs), ExprKind::Array(ys)) => {
                    if xs.len() != ys.len() {
                        return Err(self.error_at(
                            t,
                            format!("zipWith: arrays have different lengths {} and {}", xs.len(), ys.len()),
                        ));
                    }
                    let zs = xs.iter().zip(ys).map(|(x, y)| app_n(&args[0], vec![x.clone(), y.clone()])).collect();
                    Some((lab("zipWith"), mk(ExprKind::Array(zs), t.ty.clone())))
                }
                _ => None,
            },
            // (fold) fold f b [V₀, …, Vₙ₋₁] → f (… (f b V₀) …) Vₙ₋₁.
            B::Fold => match &args[2].kind {
                ExprKind::Array(xs) => {
                    let r = xs.iter().fold(args[1].clone(), |acc, x| app_n(&args[0], vec![acc, x.clone()]));
                    Some((lab("fold"), r))
                }
                _ => None,
            },
            // (iterate) iterate n f x → f (… (f x)).
            B::Iterate => match &args[0].kind {
                ExprKind::Lit(Lit::Int(n)) => {
                    if *n < 0 {
                        return Err(self.error_at(t, format!("iterate: negative count {n}")));
                    }
                    let n = self.size(*n, "iterate", t)?;
                    let r = (0..n).fold(args[2].clone(), |x, _| app(&args[1], x));
                    Some((lab("iterate"), r))
                }
                _ => None,
            },
            // (while) while p f x → if p x then while p f (f x) else x: one iteration at a time, each
            // a step of the reduction loop (no recursion, so no depth grows with the iterations).
            B::While => {
                let again = app_n(head, vec![args[0].clone(), args[1].clone(), app(&args[1], args[2].clone())]);
                let c = app(&args[0], args[2].clone());
                Some((lab("while"), mk(ExprKind::If(c, again, args[2].clone()), t.ty.clone())))
            }
            // r* is a value; 0* is the zero dual.
            B::Star => is_zero(&args[0]).then(|| (lab("0"), zero(&t.ty))),
            B::Unstar => match &args[0].kind {
                ExprKind::Zero => Some((lab("0"), zero(&t.ty))),
                // unstar is linear: unstar (d₁ + d₂) ≡ unstar d₁ + unstar d₂.
                ExprKind::Sum(a, b) => {
                    let u = |d: &E| app(head, d.clone());
                    Some((lab("≡"), mk(ExprKind::Sum(u(a), u(b)), t.ty.clone())))
                }
                _ => star_of(&args[0]).map(|r| (lab("unstar"), r)),
            },
            // (Ω r) x → r*: Ω r ≡ λx. r*, so this is reduction 1.
            B::Omega => Some((lab("1"), star(args[0].clone()))),
            // Reduction 4: (J f · r) r′ → J(f)(r′)(r).
            B::Jac => {
                if is_zero_vector(&args[1]) || is_zero(&args[0]) {
                    Some((lab("0"), zero(&t.ty)))
                } else if literal(&args[1]) && literal(&args[2]) && is_closed(&args[0]) {
                    let sym = self.symbol_of(&args[0]);
                    Some((lab("4"), sym.jvp(self, &args[2], &args[1])?))
                } else if let Some(e) = self.index_jvp(&args[0], &args[1], &args[2]) {
                    // Reduction 4 for `.[]`, which is linear in its array: J(.[])(xs, i)(ts, _) =
                    // ts.[i] for tangents of any type (arrays of closures included).
                    Some((lab("4"), e))
                } else if matches!(args[0].kind, ExprKind::Lam(..)) && !is_closed(&args[0]) {
                    // J of a function with free variables: its derivative as a term.
                    self.jvp_term(&args[0], &args[2], &args[1])?.map(|d| (lab("J"), d))
                } else {
                    None
                }
            }
            // grad f x = unstar (((Ω f)·(Ω 1.0)) x).
            B::Grad => {
                let one = real(1.0);
                Some((lab("grad"), self.unstarred_pullback(&args[0], one, &args[1])))
            }
            // vjp f x c = unstar (((Ω f)·(Ω c)) x).
            B::Vjp => Some((lab("vjp"), self.unstarred_pullback(&args[0], args[2].clone(), &args[1]))),
            // jacobian f x: row p is unstar (((Ω f)·(Ω e_p)) x).
            B::Jacobian => {
                let y = self.quietly(|r| r.eval(&app(&args[0], args[1].clone())))?;
                let ExprKind::Array(ys) = &y.kind else { return Ok(None) };
                let rows = (0..ys.len())
                    .map(|p| {
                        let e = vector::one_hot(ys.len(), p, &real(1.0), &y.ty);
                        self.unstarred_pullback(&args[0], vector::materialise(&e, &y), &args[1])
                    })
                    .collect();
                Some((lab("jacobian"), mk(ExprKind::Array(rows), t.ty.clone())))
            }
            // Constructors: their applications are values.
            B::MapGroup | B::PairGroup | B::MkGroup | B::Replace | B::GChange => None,
            // Everything else (bags, maps, groups, changes) is discrete: computed by the
            // interpreter as a function symbol applied to values.
            _ => {
                if !args.iter().all(is_closed) {
                    return Ok(None);
                }
                let vals = args.iter().map(|a| super::readback::to_value(self, a)).collect::<R<Vec<_>>>()?;
                let span = if t.span == Span::SYNTHETIC || t.span == CHAIN { self.span } else { t.span };
                let v = crate::interp::builtins::call(self.it, b, &head.ty, vals, span)?;
                Some((lab("3"), super::readback::readback(&v, &t.ty)))
            }
        })
    }

    fn size(&self, n: i64, what: &str, t: &E) -> R<usize> {
        if n < 0 {
            return Err(self.error_at(t, format!("{what}: negative array size {n}")));
        }
        if n > crate::interp::MAX_ARRAY_LEN {
            return Err(
                self.error_at(t, format!("{what}: size {n} exceeds the limit of {}", crate::interp::MAX_ARRAY_LEN))
            );
        }
        Ok(n as usize)
    }

    /// `unstar (((Ω f)·(Ω c)) x)`.
    pub(super) fn unstarred_pullback(&self, f: &E, c: E, x: &E) -> E {
        let d = app(&pullback(f.clone(), omega(c)), x.clone());
        let ty = argument_of(&f.ty);
        let u = app(&builtin(Builtin::Unstar, Type::fun(Type::dual(ty.clone()), ty.clone())), d);
        // The gradient is a value the program may go on to use as data (`map h (grad g v)`): a
        // symbolic zero in it takes the shape of the point, as when a result is read
        // (`0 + 0⃗ ≡ 0⃗`; an array's length is not in its type).
        if !holds_array(&ty) {
            return u;
        }
        let z = if vector::is_vector(x) { vector::zeros_like(x) } else { zeros_term(x) };
        mk(ExprKind::Sum(u, z), ty)
    }

    /// `(λx. S)*·V` once `V` and `S` are values: reductions 5 and 6.
    fn dual_map(&mut self, t: &E) -> R<Option<(String, E)>> {
        let ExprKind::Dual(p, s, w) = &t.kind else { return Ok(None) };
        let lab = |s: &str| s.to_string();
        if is_zero(s) || is_zero(w) {
            return Ok(Some((lab("0"), zero(&t.ty))));
        }
        // A dual map is linear in its argument: (λx. S)*·(S1 + S2) ≡ (λx. S)*·S1 + (λx. S)*·S2.
        if let ExprKind::Sum(a, b) = &w.kind {
            let ty = t.ty.clone();
            return Ok(Some((
                lab("≡"),
                mk(ExprKind::Sum(dual(p.clone(), s.clone(), a.clone()), dual(p.clone(), s.clone(), b.clone())), ty),
            )));
        }
        // Reduction 5: (λv. (J f · v) r)*·r′* → ((J(f)(r))ᵀ r′)*, for every linear body.
        if let Some(r) = star_of(w) {
            if let Some(res) = super::transpose::transpose(self, p, s, &r)? {
                return Ok(Some((lab("5"), res)));
            }
            return Ok(None);
        }
        // Reduction 6: (λv. V)*·((λv′. V′)*·V″) → (λv. V′[V/v′])*·V″.
        if let ExprKind::Dual(q, s2, w2) = &w.kind {
            return Ok(Some((lab("6"), dual(p.clone(), instantiate(q, s2, s), w2.clone()))));
        }
        Ok(None)
    }

    /// `(Ω f)·w`: the function becomes a λ, its body a let-series, which splits (7, 8); then the
    /// 1-form of the innermost pullback is reduced.
    fn pullback_term(&mut self, t: &mut E) -> R<Option<(String, E)>> {
        let lab = |s: &str| s.to_string();
        let ExprKind::Pullback(f, w) = &t.kind.clone() else { return Ok(None) };
        let ExprKind::Lam(p0, body) = &f.kind else {
            let fv = self.child(t, 0)?;
            return Ok(match &fv.kind {
                // The pullback along the zero function is the zero 1-form.
                ExprKind::Zero => Some((lab("0"), zero(&t.ty))),
                ExprKind::Lam(..) => self.pullback_term(t)?,
                ExprKind::Var(_, VarRef::Global(d)) => Some((lab("δ"), pullback(self.unfold(*d)?, w.clone()))),
                _ => Some((lab("η"), pullback(eta(&fv), w.clone()))),
            });
        };
        let p = tame(p0);
        if !std::rc::Rc::ptr_eq(&p, p0) {
            *t = pullback(lam(p.clone(), body.clone()), w.clone());
        }
        if normalised_body(&p, body) {
            self.child(t, 1)?;
            return Ok(None);
        }
        if let ExprKind::Let(x, e1, rest) = &body.kind {
            if anf::anormal::is_series(body) {
                if matches!(&rest.kind, ExprKind::Var(_, VarRef::Local(id)) if binds(x).contains(id)) {
                    // Reduction 7: (Ω λy. let x = E in x)·ω → (Ω λy. E)·ω.
                    return Ok(Some((lab("7"), pullback(lam(p.clone(), e1.clone()), w.clone()))));
                }
                // Reduction 8: (Ω λy. let x = E in L)·ω → (Ω λy. ⟨y, E⟩)·((Ω λ⟨y, x⟩. L)·ω).
                let link = lam(p.clone(), chain_pair(pattern_term(&p), e1.clone()));
                let rest_pb = pullback(lam(chain_pattern(&p, x), rest.clone()), w.clone());
                return Ok(Some((lab("8"), pullback(link, rest_pb))));
            }
        }
        // The context (Ω λy. C_A)·S: A-reduce the body into a let-series.
        let series = self.anormalise(body);
        Ok(Some((lab("A"), pullback(lam(p, series), w.clone()))))
    }

    /// The A-normal form of `e` (reduction context `(Ω λy. C_A)·S`), numbering binders after those
    /// made before in this derivation.
    pub(super) fn anormalise(&mut self, e: &E) -> E {
        anf::anormal::anormalise_numbered(e, &mut fresh_id, &mut self.names)
    }

    /// A fresh binder name in the same numbering.
    pub(super) fn fresh_name(&mut self) -> String {
        self.names += 1;
        format!("z{}", self.names)
    }

    /// The symbol `f` of a `J f`.
    pub(super) fn symbol_of(&self, f: &E) -> super::prim::Sym {
        super::prim::Sym::from_term(f, &|d| self.is_symbol(d))
    }

    /// Is definition `d` a function symbol (first-order type `s -> t`)?
    pub(super) fn is_symbol(&self, d: DefId) -> bool {
        let Some(def) = self.it.program.defs.get(d.0 as usize) else { return false };
        match &def.ty {
            Type::Fun(a, b) => a.is_first_order() && b.is_first_order() && def.ty.is_ground(),
            _ => false,
        }
    }

    /// The value of definition `d` as a closed term (δ).
    pub(super) fn unfold(&mut self, d: DefId) -> R<E> {
        if let Some(e) = self.unfolded.get(&d) {
            return Ok(e.clone());
        }
        let Some(v) = self.it.globals.get(d.0 as usize).cloned() else {
            return Err(self.error("internal: a definition used before it is evaluated"));
        };
        let ty = self.it.program.defs[d.0 as usize].ty.clone();
        let e = super::readback::readback(&v, &ty);
        self.unfolded.insert(d, e.clone());
        Ok(e)
    }

    /// `((Ω f)·(Ω c)) x` reduced quietly to its cotangent vector (the transposed Jacobian of a
    /// function symbol, reduction 5's `(J(f)(x))ᵀ c`).
    pub(super) fn vjp_of(&mut self, f: &E, x: &E, c: &E) -> R<E> {
        let term = app(&pullback(f.clone(), omega(vector::materialise(c, &vector::zeros_like(c)))), x.clone());
        let r = self.quietly(|r| r.eval(&term))?;
        match &r.kind {
            ExprKind::Zero => Ok(zero(&x.ty)),
            _ => match star_vector(&r) {
                Some(g) => Ok(g),
                None => Err(self.error(&super::stuck_message(&r))),
            },
        }
    }
}

/// The i-th child of `e` in `map_children` order.
pub fn child_at(e: &E, i: usize) -> E {
    // Collections directly (the walk below is linear in their size).
    let c = match &e.kind {
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.get(i),
        ExprKind::Bag(xs) => xs.get(i).map(|(x, _)| x),
        ExprKind::Map(xs) => xs.get(i / 2).map(|(k, v)| if i % 2 == 0 { k } else { v }),
        _ => None,
    };
    if let Some(c) = c {
        return c.clone();
    }
    let mut k = 0;
    let mut found = None;
    map_children(e, &mut |c| {
        if k == i {
            found = Some(c.clone());
        }
        k += 1;
        c.clone()
    });
    found.unwrap_or_else(|| e.clone())
}

/// `r` when `e` is `r*` (for any first-order `r`, literal or not).
pub fn star_of(e: &E) -> Option<E> {
    let (head, args) = spine(e);
    (builtin_head(&head) == Some(Builtin::Star) && args.len() == 1).then(|| args[0].clone())
}

/// Is `e` a zero vector: `0`, or a tuple or array of zero vectors?
pub fn is_zero_vector(e: &E) -> bool {
    match &e.kind {
        ExprKind::Zero => true,
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.iter().all(is_zero_vector),
        _ => e.ty.is_discrete(),
    }
}

/// `r` when `e` is `r*` for a literal vector `r`.
pub fn star_vector(e: &E) -> Option<E> {
    let (head, args) = spine(e);
    (builtin_head(&head) == Some(Builtin::Star) && args.len() == 1 && vector::is_vector(&args[0]))
        .then(|| args[0].clone())
}

/// Is `e` a function value whose applications reduce (so η-expanding it makes progress)? A free
/// variable or a stuck projection is not.
pub fn is_function_value(e: &E) -> bool {
    match &e.kind {
        ExprKind::Lam(..) | ExprKind::Pullback(..) | ExprKind::Dual(..) => true,
        ExprKind::Var(_, VarRef::Builtin(_) | VarRef::Global(_)) => true,
        ExprKind::Sum(a, b) => is_function_value(a) && is_function_value(b),
        ExprKind::App(..) => {
            let (h, args) = spine(e);
            match builtin_head(&h) {
                Some(b) => args.len() < b.arity() || b == Builtin::Star && args.len() == 1,
                None => false,
            }
        }
        _ => false,
    }
}

/// `λa. f a`.
pub fn eta(f: &E) -> E {
    let (p, a) = fresh_var("a", &argument_of(&f.ty));
    lam(p, app(f, a))
}

/// Is the body of `(Ω λy. body)` already split: an elementary term, a link `⟨y, E⟩`, or a tuple
/// of variables?
pub fn normalised_body(p: &Pat, body: &E) -> bool {
    is_link(p, body) || anf::anormal::is_elementary(body) || is_atom_tree(body)
}

/// `⟨y, E⟩` made by reduction 8.
pub fn is_link(p: &Pat, body: &E) -> bool {
    fn matches(p: &Pat, e: &E) -> bool {
        match (&p.kind, &e.kind) {
            (PatKind::Var(_, i), ExprKind::Var(_, VarRef::Local(j))) => i == j,
            (PatKind::Unit, ExprKind::Lit(Lit::Unit)) => true,
            (PatKind::Tuple(ps), ExprKind::Tuple(xs)) => {
                ps.len() == xs.len() && ps.iter().zip(xs).all(|(q, x)| matches(q, x))
            }
            _ => false,
        }
    }
    match &body.kind {
        // Rule 8 writes `y` as its remembered pattern term, so the walk is rarely needed.
        ExprKind::Tuple(xs) if body.span == CHAIN && xs.len() == 2 => {
            std::rc::Rc::ptr_eq(&xs[0], &pattern_term(p)) || matches(p, &xs[0])
        }
        _ => false,
    }
}

/// A tuple whose leaves are variables (nested tuples allowed).
pub fn is_atom_tree(e: &E) -> bool {
    match &e.kind {
        ExprKind::Var(_, VarRef::Local(_)) => true,
        ExprKind::Tuple(xs) => !xs.is_empty() && xs.iter().all(is_atom_tree),
        _ => false,
    }
}

/// Does a value of type `t` hold an array (whose length its type does not give)?
fn holds_array(t: &Type) -> bool {
    match t {
        Type::Array(_) => true,
        Type::Tuple(ts) => ts.iter().any(holds_array),
        _ => false,
    }
}

/// A term computing the zero of `x`'s shape: `map (λy. 0) x` for an array, componentwise for a
/// tuple (the zero of a discrete or other type is its symbolic zero).
fn zeros_term(x: &E) -> E {
    match &x.ty {
        Type::Real => real(0.0),
        Type::Array(t) => {
            let (py, y) = fresh_var("y", t);
            let f = lam(py, zeros_term(&y));
            let map_ty = Type::fun(f.ty.clone(), Type::fun(x.ty.clone(), x.ty.clone()));
            app_n(&builtin(Builtin::Map, map_ty), vec![f, x.clone()])
        }
        Type::Tuple(ts) => mk(ExprKind::Tuple((0..ts.len()).map(|i| zeros_term(&proj(x, i))).collect()), x.ty.clone()),
        t => zero(t),
    }
}
