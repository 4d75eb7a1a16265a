//! The compiled engine: a monomorphised program is lowered (`anf::lower`), compiled once by the
//! JIT, run, and its result marshalled back into a [`Value`] so printing is shared with the
//! interpreter. Errors come back as the interpreter's diagnostics: each trap carries a site that
//! lowering maps to the span the interpreter would report.
//!
//! ILC constructs that are not ordinary terms (`derive`, `nil` of functions, `<+>`/`<->` on
//! functions) are rewritten first by [`adjoint::incremental::expand`]; derivative primitives and
//! changes are compiled like everything else. Reverse mode is rewritten first by
//! [`adjoint::reverse::transform`]: each differentiation site becomes ordinary terms, or, where the
//! transform does not compile it yet, an `interp'` site the reference interpreter evaluates (per-site
//! fallback). A program the transform cannot split that way, or one lowering refuses as not compiled
//! yet, is evaluated by the interpreter whole. [`Run::note`] says which site and why.

use std::rc::Rc;

use anf::ir::{self, TrapCode};
use anf::lower::{self, LowerOptions, Lowered};
use anf::mono::MonoProgram;
use anf::opt::{optimize, OptOptions};
use frontend::syntax::{Expr, ExprKind, Lit};
use frontend::types::Type;
use frontend::{Diagnostic, Span};
use jit::{CallError, CompiledModule, Jit, JitConfig, Word};

use crate::native::{self, CallCtx, NativeError, DEFAULT_ARENA_LIMIT};
use crate::value::{Bag, Change, Group, MapV, Value};

/// The value of a program's root and how it was computed.
pub struct Run {
    pub value: Value,
    /// Set when the program was evaluated by the interpreter because the compiler does not handle
    /// one of its constructs: `… is not compiled yet; evaluated by the reference interpreter`.
    pub note: Option<String>,
}

/// Evaluates the root of `mono` with the compiled engine (or, for programs it does not compile
/// yet, with the reference interpreter).
pub fn run(mono: &MonoProgram) -> Result<Run, Diagnostic> {
    run_in(mono, &mut CallCtx::new(DEFAULT_ARENA_LIMIT))
}

/// [`run`] in a given call context (tests use one that compacts loops eagerly).
pub fn run_in(mono: &MonoProgram, ctx: &mut CallCtx) -> Result<Run, Diagnostic> {
    let fallback = |what: &str| -> Result<Run, Diagnostic> {
        let value = crate::interp::run(mono)?;
        Ok(Run { value, note: Some(format!("{what} is not compiled yet; evaluated by the reference interpreter")) })
    };
    let original = mono;
    // A root holding first-order dual vectors computes their vectors; the `*` is put back below.
    let unstarred;
    let (mono, duals) = match adjoint::reverse::unstar_root(mono) {
        Some((m, shape)) => {
            unstarred = m;
            (&unstarred, Some(shape))
        }
        None => (mono, None),
    };
    let transformed;
    let mono = match adjoint::reverse::transform(mono) {
        Ok(Some(t)) => {
            transformed = t;
            &transformed
        }
        Ok(None) => mono,
        Err(nc) => {
            let value = crate::interp::run(original)?;
            return Ok(Run { value, note: Some(reverse_note(&nc)) });
        }
    };
    // ILC's `derive`, function changes and `nil` of functions become ordinary terms.
    let expanded = adjoint::incremental::expand(mono)?;
    let mono = &expanded;
    let span = root_span(mono);
    let lowered = match lower::lower(mono, &LowerOptions::default()) {
        Ok(l) => l,
        Err(e) if e.unsupported => return fallback(e.message.trim_end_matches(" is not compiled yet")),
        Err(e) => return Err(Diagnostic::error(span, format!("internal compiler error: {e}"))),
    };
    let machine = Machine::new(&lowered, span, BIG_STACK_BUDGET).map_err(|e| Diagnostic::error(span, e))?;
    let value = machine.run_main(ctx)?;
    let value = match &duals {
        Some(shape) => restar(value, shape),
        None => value,
    };
    Ok(Run { value, note: machine.interpreted_note() })
}

/// What keeps `mono` from running wholly as native code: the first differentiation site the
/// reverse-mode transform does not compile (the whole program's, or one left to the interpreter
/// per site), as "… is not compiled yet"; `None` when every site compiles.
pub fn uncompiled_site(mono: &MonoProgram) -> Option<String> {
    let what = match adjoint::reverse::transform(mono) {
        Err(nc) => nc.what,
        Ok(t) => t?.interpreted.as_ref()?.sites.first()?.what.clone(),
    };
    Some(format!("{what} is not compiled yet"))
}

/// `v` with the dual vectors `shape` marks made duals again (`r` ↦ `r*`).
fn restar(v: Value, shape: &adjoint::reverse::DualShape) -> Value {
    use adjoint::reverse::DualShape as S;
    match (shape, &v) {
        (S::Star, _) => Value::Star(Rc::new(v)),
        (S::Tuple(cs), Value::Tuple(vs)) => {
            Value::tuple(vs.iter().zip(cs).map(|(v, c)| restar(v.clone(), c)).collect())
        }
        _ => v,
    }
}

/// The note for a program whose differentiation site the reverse-mode transform does not compile.
/// The site's span is in the note as `@lo..hi` byte offsets; the CLI turns it into a line and
/// column ([`note_with_lines`]).
pub fn reverse_note(nc: &adjoint::reverse::NotCompiled) -> String {
    format!(
        "{} (at @{}..{}) is not compiled yet; evaluated by the reference interpreter",
        nc.what, nc.span.lo, nc.span.hi
    )
}

/// A note with `@lo..hi` byte offsets rewritten as `line:column` of `src`.
pub fn note_with_lines(note: &str, src: &str) -> String {
    let mut out = String::new();
    let mut rest = note;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let digits = tail.find(|c: char| !c.is_ascii_digit()).unwrap_or(tail.len());
        let after = &tail[digits..];
        let hi_len = after.strip_prefix("..").map(|h| 2 + h.find(|c: char| !c.is_ascii_digit()).unwrap_or(h.len()));
        match (tail[..digits].parse::<usize>(), hi_len) {
            (Ok(lo), Some(n)) if lo <= src.len() => {
                let (l, c) = frontend::span::line_col(src, lo);
                out.push_str(&format!("{l}:{c}"));
                rest = &after[n..];
            }
            _ => {
                out.push('@');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Stack compiled code may use under [`run`], which must run on a thread with a big stack
/// (`frontend::with_big_stack`, as the CLI does): nesting deeper is an error, never an overflow.
pub const BIG_STACK_BUDGET: usize = 64 << 20;

/// The IR of `mono` as text (`nabla ir`): as the JIT compiles it after `anf::opt` when
/// `optimized`, else as lowering made it.
pub fn ir_text(mono: &MonoProgram, optimized: bool) -> Result<String, Diagnostic> {
    let transformed;
    let mut header = String::new();
    let mono = match adjoint::reverse::transform_listing(mono) {
        Ok((Some(t), listings)) => {
            transformed = t;
            // Each gradient's two phases, as the terms the transform emitted (then lowered below).
            for l in &listings {
                header.push_str(&format!("; gradient at @{}..{}: forward phase\n", l.span.lo, l.span.hi));
                for b in &l.forward {
                    header.push_str(&format!(";   {b}\n"));
                }
                header.push_str(&format!("; gradient at @{}..{}: reverse phase\n", l.span.lo, l.span.hi));
                for b in &l.reverse {
                    header.push_str(&format!(";   {b}\n"));
                }
            }
            // Sites left to the interpreter: `interp' k` calls `$nabla_interp` with k.
            for (k, s) in transformed.interpreted.iter().flat_map(|i| i.sites.iter()).enumerate() {
                header.push_str(&format!(
                    "; interpreted site {k} at @{}..{}: {} is not compiled yet\n",
                    s.span.lo, s.span.hi, s.what
                ));
            }
            &transformed
        }
        Ok((None, _)) => mono,
        Err(nc) => return Err(Diagnostic::error(nc.span, format!("{} is not compiled yet", nc.what))),
    };
    let expanded = adjoint::incremental::expand(mono)?;
    let mono = &expanded;
    let mut lowered = lower::lower(mono, &LowerOptions::default())
        .map_err(|e| Diagnostic::error(if e.unsupported { e.span } else { root_span(mono) }, e.message))?;
    if optimized {
        optimize(&mut lowered.module, &[lowered.main], &OptOptions::default());
    }
    Ok(format!("{header}{}", ir::print(&lowered.module)))
}

/// The span of the root definition's body: where errors without a site are reported.
pub fn root_span(mono: &MonoProgram) -> Span {
    mono.defs.last().map(|d| d.body.span).unwrap_or(Span::SYNTHETIC)
}

/// A language type as the marshalling code needs it (`Send`, unlike `Type`).
#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    Int,
    Real,
    Bool,
    Unit,
    Tuple(Vec<Layout>),
    Array(Box<Layout>),
    Bag(Box<Layout>),
    Map(Box<Layout>, Box<Layout>),
    Group(Box<Layout>),
    /// Functions and duals: opaque closures.
    Fun,
    Delta(Box<Layout>),
}

impl Layout {
    /// The layout of a ground type.
    pub fn of(t: &Type) -> Layout {
        match t {
            Type::Int => Layout::Int,
            Type::Real => Layout::Real,
            Type::Bool => Layout::Bool,
            Type::Unit | Type::Var(_) => Layout::Unit,
            Type::Tuple(ts) => Layout::Tuple(ts.iter().map(Layout::of).collect()),
            Type::Array(a) => Layout::Array(Box::new(Layout::of(a))),
            Type::Bag(a) => Layout::Bag(Box::new(Layout::of(a))),
            Type::Map(k, v) => Layout::Map(Box::new(Layout::of(k)), Box::new(Layout::of(v))),
            Type::Group(a) => Layout::Group(Box::new(Layout::of(a))),
            Type::Fun(..) | Type::Dual(_) => Layout::Fun,
            Type::Delta(a) => Layout::Delta(Box::new(Layout::of(a))),
        }
    }

    /// How many words a value of this layout takes (`ir::layout::flatten`).
    #[inline]
    pub fn words(&self) -> usize {
        match self {
            Layout::Int | Layout::Real | Layout::Bool => 1,
            Layout::Unit => 0,
            // (Out of line: the common cases above inline to a few instructions.)
            Layout::Tuple(ts) => tuple_words(ts),
            Layout::Array(_) | Layout::Bag(_) | Layout::Map(..) | Layout::Group(_) => 1,
            Layout::Fun | Layout::Delta(_) => 2,
        }
    }
}

#[inline(never)]
fn tuple_words(ts: &[Layout]) -> usize {
    ts.iter().map(Layout::words).sum()
}

/// A compiled program: its machine code, entry points and what is needed to report its errors.
pub struct Machine {
    /// Owns the code (entries keep it alive).
    _jit: Jit,
    compiled: CompiledModule,
    main: ir::FuncId,
    apply: Option<ir::FuncId>,
    sites: Vec<(Span, Option<Layout>)>,
    root: Layout,
    /// The sites the interpreter evaluates for this code (per-site fallback).
    interpreted: Option<Rc<crate::sites::Sites>>,
    /// Where errors without a site are reported.
    span: Span,
    /// Stack compiled code may use below the caller.
    stack_budget: usize,
}

impl Machine {
    /// JIT-compiles a lowered program.
    pub fn new(lowered: &Lowered, span: Span, stack_budget: usize) -> Result<Machine, String> {
        Machine::new_with(lowered, span, stack_budget, &OptOptions::default())
    }

    /// [`Machine::new`] with explicit optimisation options (`OptOptions::none()` compiles the IR
    /// exactly as lowering made it).
    pub fn new_with(lowered: &Lowered, span: Span, stack_budget: usize, opts: &OptOptions) -> Result<Machine, String> {
        let mut m = Machine::from_parts_with(
            &lowered.module,
            lowered.main,
            lowered.apply,
            lowered.sites.iter().map(|s| (s.span, s.key.as_ref().map(Layout::of))).collect(),
            Layout::of(&lowered.root_ty),
            span,
            stack_budget,
            opts,
        )?;
        m.interpreted = lowered.interpreted.clone().map(|i| Rc::new(crate::sites::Sites::new(i)));
        Ok(m)
    }

    /// Sets the sites the interpreter evaluates for this code (those of the program it was
    /// lowered from, when it was made from parts).
    pub fn set_interpreted(&mut self, interpreted: Rc<anf::mono::Interpreted>) {
        self.interpreted = Some(Rc::new(crate::sites::Sites::new(interpreted)));
    }

    /// The note for the sites this code leaves to the interpreter (`None`: it leaves none).
    pub fn interpreted_note(&self) -> Option<String> {
        self.interpreted.as_ref().map(|s| s.note())
    }

    /// Makes `ctx` ready to run this code: its stack budget and interpreted sites.
    pub fn prepare(&self, ctx: &mut CallCtx) {
        ctx.limit_stack(self.stack_budget);
        ctx.set_sites(self.interpreted.clone());
    }

    /// JIT-compiles an IR module whose entry points are `main` and `apply`, optimised first
    /// (`anf::opt` with its default options).
    pub fn from_parts(
        module: &ir::Module,
        main: ir::FuncId,
        apply: Option<ir::FuncId>,
        sites: Vec<(Span, Option<Layout>)>,
        root: Layout,
        span: Span,
        stack_budget: usize,
    ) -> Result<Machine, String> {
        Machine::from_parts_with(module, main, apply, sites, root, span, stack_budget, &OptOptions::default())
    }

    /// [`Machine::from_parts`] with explicit optimisation options (`OptOptions::none()` compiles
    /// the IR exactly as lowering made it).
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts_with(
        module: &ir::Module,
        main: ir::FuncId,
        apply: Option<ir::FuncId>,
        sites: Vec<(Span, Option<Layout>)>,
        root: Layout,
        span: Span,
        stack_budget: usize,
        opt: &OptOptions,
    ) -> Result<Machine, String> {
        let mut module = module.clone();
        let entries: Vec<ir::FuncId> = std::iter::once(main).chain(apply).collect();
        let moved = optimize(&mut module, &entries, opt);
        let lost = || "internal compiler error: an entry point was optimised away".to_string();
        let main = moved.get(main).ok_or_else(lost)?;
        let apply = match apply {
            Some(a) => Some(moved.get(a).ok_or_else(lost)?),
            None => None,
        };
        let entries: Vec<ir::FuncId> = std::iter::once(main).chain(apply).collect();
        let mut jit = Jit::new(JitConfig::default(), native::support_table()).map_err(|e| e.to_string())?;
        let compiled = jit.compile(&module, &entries).map_err(|e| format!("internal compiler error: {e}"))?;
        Ok(Machine { _jit: jit, compiled, main, apply, sites, root, interpreted: None, span, stack_budget })
    }

    /// Runs `@main` in `ctx` and marshals the root's value (the context is reset first).
    pub fn run_main(&self, ctx: &mut CallCtx) -> Result<Value, Diagnostic> {
        let words = self.main_words(ctx)?;
        // SAFETY: the words were just returned by compiled code whose memory `ctx` still holds.
        Ok(unsafe { to_value(&self.root, &mut words.into_iter()) })
    }

    /// Runs `@main` in `ctx` and gives the root's words (valid until `ctx` is reset).
    pub fn main_words(&self, ctx: &mut CallCtx) -> Result<Vec<Word>, Diagnostic> {
        ctx.reset();
        self.prepare(ctx);
        let entry = self.compiled.entry(self.main).ok_or_else(|| self.internal("no entry for @main"))?;
        // SAFETY: `ctx` is a live runtime context and `@main` takes no arguments.
        match unsafe { entry.call(ctx.header(), &[]) } {
            Ok(words) => Ok(words),
            Err(e) => Err(self.call_error(ctx, e)),
        }
    }

    /// Stack compiled code may use below the caller.
    pub fn stack_budget(&self) -> usize {
        self.stack_budget
    }

    /// The `@apply` entry.
    pub fn apply_entry(&self) -> Option<&jit::Entry> {
        self.apply.and_then(|f| self.compiled.entry(f))
    }

    /// The diagnostic for a failed call.
    pub fn call_error(&self, ctx: &CallCtx, e: CallError) -> Diagnostic {
        match (e, ctx.failure()) {
            (CallError::Trapped(_), Some(err)) if err.status == crate::native::STATUS_INTERPRETED => {
                ctx.interpreted_error().cloned().unwrap_or_else(|| self.diagnostic(&err))
            }
            (CallError::Trapped(_), Some(err)) => self.diagnostic(&err),
            (e, _) => self.internal(&e.to_string()),
        }
    }

    /// The interpreter's diagnostic for an error raised by compiled code.
    pub fn diagnostic(&self, err: &NativeError) -> Diagnostic {
        let site = usize::try_from(err.site).ok().and_then(|i| self.sites.get(i));
        let span = site.map_or(self.span, |(s, _)| *s);
        let message = match (TrapCode::from_code(err.status), site) {
            (Some(TrapCode::DuplicateKey), Some((_, Some(key)))) => {
                let mut words = err.payload.iter().map(|w| Word::from_i64(*w));
                // SAFETY: keys are words only (Int, Bool, Unit and tuples of them).
                let k = unsafe { to_value(key, &mut words) };
                format!("duplicate key {k} in map literal")
            }
            _ => err.message.clone(),
        };
        Diagnostic::error(span, message)
    }

    fn internal(&self, m: &str) -> Diagnostic {
        Diagnostic::error(self.span, format!("internal compiler error: {m}"))
    }
}

/// A function value as the printer sees it (`<fun>`): compiled closures are opaque.
fn opaque_function() -> Value {
    Value::Term(Expr::new(ExprKind::Lit(Lit::Unit), Span::SYNTHETIC, Type::Unit))
}

/// The value of layout `l` whose words come next from `words`.
///
/// # Safety
/// The words must be a value of that layout made by compiled code, whose memory (arena records,
/// bags and maps of its context) is still alive.
pub unsafe fn to_value(l: &Layout, words: &mut dyn Iterator<Item = Word>) -> Value {
    let mut next = || words.next().unwrap_or_default();
    match l {
        Layout::Int => Value::Int(next().as_i64()),
        Layout::Real => Value::Real(next().as_f64()),
        Layout::Bool => Value::Bool(next().as_bool()),
        Layout::Unit => Value::Unit,
        Layout::Tuple(ts) => Value::tuple(ts.iter().map(|t| to_value(t, words)).collect()),
        Layout::Array(e) => {
            let p = next().as_ptr::<u64>();
            let len = (*p as i64).max(0) as usize;
            let n = e.words();
            let mut out = Vec::with_capacity(len);
            for i in 0..len {
                let elem = p.add(1 + i * n);
                let mut it = (0..n).map(|j| Word(*elem.add(j)));
                out.push(to_value(e, &mut it));
            }
            Value::Array(Rc::new(out))
        }
        Layout::Bag(e) => {
            let bag = native::bag_ref(next());
            let mut out = Bag::default();
            for (k, m) in bag.sorted_entries() {
                if let Some(key) = to_value(e, &mut k.iter().map(|w| Word(*w))).to_key() {
                    // Distinct keys with nonzero multiplicities: nothing to add up.
                    out.entries.insert(key, m);
                }
            }
            Value::Bag(Rc::new(out))
        }
        Layout::Map(kl, vl) => {
            let map = native::map_ref(next());
            let mut out = MapV::default();
            for (k, v) in map.sorted_entries() {
                if let Some(key) = to_value(kl, &mut k.iter().map(|w| Word(*w))).to_key() {
                    out.entries.insert(key, to_value(vl, &mut v.iter().map(|w| Word(*w))));
                }
            }
            Value::Map(Rc::new(out))
        }
        Layout::Group(t) => Value::Group(Rc::new(group(t, next()))),
        Layout::Fun => {
            next();
            next();
            opaque_function()
        }
        Layout::Delta(t) => {
            let kind = next().as_i64();
            let p = next().as_ptr::<u64>();
            let change = if kind == 0 {
                Change::Replace(to_value(t, &mut (0..t.words()).map(|j| Word(*p.add(j)))))
            } else {
                let g = group(t, Word(*p));
                Change::GChange(Rc::new(g), to_value(t, &mut (0..t.words()).map(|j| Word(*p.add(1 + j)))))
            };
            Value::Change(Rc::new(change))
        }
    }
}

/// A group record (`anf::lower` groups) of carrier layout `t`.
unsafe fn group(t: &Layout, w: Word) -> Group {
    let p = w.as_ptr::<u64>();
    match *p {
        0 => Group::Int,
        1 => Group::Real,
        2 => Group::Bag,
        3 => match t {
            Layout::Map(_, v) => Group::Map(Rc::new(group(v, Word(*p.add(1))))),
            _ => Group::Bag,
        },
        4 => match t {
            Layout::Tuple(ts) if ts.len() == 2 => {
                Group::Pair(Rc::new(group(&ts[0], Word(*p.add(1)))), Rc::new(group(&ts[1], Word(*p.add(2)))))
            }
            _ => Group::Bag,
        },
        _ => Group::User {
            op: opaque_function(),
            inverse: opaque_function(),
            zero: to_value(t, &mut (0..t.words()).map(|j| Word(*p.add(5 + j)))),
        },
    }
}
