//! Array fusion: an array made by `build`, `map` or `zipWith` and read by exactly one consumer is
//! never materialised — its elements are computed where the consumer reads them.
//!
//! Lowering decides this at each `let a = P` of the A-normal let-series ([`Lowerer::delayable`]):
//! `a` occurs once in the program (binders are unique, [`use_counts`]), and that occurrence is an
//! operand of a *consumer* bound later in the same series — `sum a`, `dot a c`, `fold g z a`,
//! `len a`, `a.[i]`, or `map g a`/`zipWith g a c`, which are producers again. `a` is then bound to
//! a [`Lazy`] producer: its checks (`build`'s count, `zipWith`'s lengths) are made where `P` stood,
//! its elements where the consumer reads them, in index order, inside the consumer's loop.
//!
//! **The same first error.** Only the element functions move, and only where that cannot change
//! which error comes first (the interpreter evaluates `P` completely, then the bindings between,
//! then the consumer). An element function is *fallible* unless [`term_infallible`] proves it can
//! neither fail nor fail to terminate. A fallible producer is delayed only when every binding
//! between it and its consumer is infallible as written, and its consumer reads every element in
//! index order interleaving only infallible work: `sum` always; `fold g`, `map g`, `zipWith g` when
//! `g` is infallible; `len` and indexing (which read no or one element) only infallible producers;
//! `dot`/`zipWith` at most one fallible operand. Their length check, which the interpreter makes
//! after both operands are complete, is made first; when it fails, the fallible operand's elements
//! are computed (and dropped) before the trap, as the interpreter would have. Summation order is
//! unchanged (left to right from zero, the interpreter's `sum` and `dot`); nothing is reassociated.
//! Running out of memory is an error too: an unmade array of a megabyte or more still claims its
//! memory ([`Lowerer::claim`]), so a producer too big for `--max-memory` fails in both engines.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::lin::for_each_child;
use frontend::syntax::{BinOp, ExprKind, PatKind, VarRef, E};
use frontend::types::Type;
use rustc_hash::FxHashMap;

use super::value::flat;
use super::{Clo, LVal, LowerError, Lowerer, Site, VarKey, R};
use crate::ir::{self, BinaryOp, Cmp, TrapCode, Value};
use crate::mono::MonoProgram;

/// How many bindings after a producer its consumer is looked for.
const SCAN_LIMIT: usize = 64;

/// An unmade array at least this big still claims its memory (see [`Lowerer::claim`]).
const CLAIM_BYTES: i64 = 1 << 20;

/// A producer whose elements are computed where its one consumer reads them.
#[derive(Clone, Debug)]
pub(crate) struct Lazy {
    kind: LazyKind,
    /// The length (checked where the producer stood).
    pub(crate) n: Value,
    /// Can computing an element fail (or not terminate)?
    fallible: bool,
}

#[derive(Clone, Debug)]
enum LazyKind {
    /// `build n f`: element `i` is `f i`.
    Build { f: LVal, site: Site },
    /// `map f a`.
    Map { f: LVal, a: Src, site: Site },
    /// `zipWith f a c` (lengths checked).
    ZipWith { f: LVal, a: Src, c: Src, site: Site },
}

/// The array operand of a consumer: an array in memory (with its element type), or a producer.
#[derive(Clone, Debug)]
pub(crate) enum Src {
    Arr(Value, Type),
    Lazy(Rc<Lazy>),
}

impl Src {
    fn fallible(&self) -> bool {
        matches!(self, Src::Lazy(l) if l.fallible)
    }
}

/// How often each local variable occurs in `mono` (binders are unique program-wide).
pub(crate) fn use_counts(mono: &MonoProgram) -> FxHashMap<u32, u32> {
    fn walk(e: &E, out: &mut FxHashMap<u32, u32>) {
        if let ExprKind::Var(_, VarRef::Local(id)) = &e.kind {
            *out.entry(id.0).or_insert(0) += 1;
        }
        for_each_child(e, &mut |c| walk(c, out));
    }
    let mut out = FxHashMap::default();
    for d in &mono.defs {
        walk(&d.body, &mut out);
    }
    out
}

/// Builtins that cannot fail when saturated with values (Int arithmetic wraps).
fn builtin_infallible(b: Builtin) -> bool {
    use Builtin as B;
    matches!(
        b,
        B::Sin
            | B::Cos
            | B::Tan
            | B::Exp
            | B::Log
            | B::Sqrt
            | B::Tanh
            | B::Sigmoid
            | B::Abs
            | B::Neg
            | B::Max
            | B::Min
            | B::ToReal
            | B::Floor
            | B::Round
            | B::Len
            | B::Sum
    )
}

/// Can evaluating `e` neither fail nor fail to terminate? Conservative: indexing, Int division,
/// group operations and applications of anything but an infallible builtin count as fallible.
pub(crate) fn term_infallible(e: &E) -> bool {
    fn go(e: &E, builtins: &mut FxHashMap<u32, Builtin>) -> bool {
        match &e.kind {
            ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Lam(..) => true,
            ExprKind::Let(p, rhs, body) => {
                if let (PatKind::Var(_, id), ExprKind::Var(_, VarRef::Builtin(b))) = (&p.kind, &rhs.kind) {
                    builtins.insert(id.0, *b);
                }
                go(rhs, builtins) && go(body, builtins)
            }
            ExprKind::If(c, a, b) => go(c, builtins) && go(a, builtins) && go(b, builtins),
            ExprKind::Bin(op, a, b) => {
                let fails = match op {
                    BinOp::Div | BinOp::Rem => a.ty == Type::Int,
                    BinOp::Oplus | BinOp::Ominus => true,
                    _ => false,
                };
                !fails && go(a, builtins) && go(b, builtins)
            }
            ExprKind::Neg(a) | ExprKind::Not(a) | ExprKind::Proj(a, _) | ExprKind::Ann(a, _) => go(a, builtins),
            ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.iter().all(|x| go(x, builtins)),
            ExprKind::App(..) => {
                let (head, args) = spine(e);
                let b = match &head.kind {
                    ExprKind::Var(_, VarRef::Builtin(b)) => Some(*b),
                    ExprKind::Var(_, VarRef::Local(id)) => builtins.get(&id.0).copied(),
                    _ => None,
                };
                match b {
                    Some(b) => args.len() == b.arity() && builtin_infallible(b) && args.iter().all(|a| go(a, builtins)),
                    None => false,
                }
            }
            _ => false,
        }
    }
    go(e, &mut FxHashMap::default())
}

/// Can applying the value of the term `t` to `k` arguments (`t` itself evaluated too) neither fail
/// nor fail to terminate? A-normal form binds a curried λ's inner λ: `λa. let g = λb. e in g`.
fn fn_infallible(t: &E, k: usize) -> bool {
    if k == 0 {
        return term_infallible(t);
    }
    match &t.kind {
        ExprKind::Lam(_, body) => fn_infallible(body, k - 1),
        ExprKind::Var(_, VarRef::Builtin(b)) => k < b.arity() || (k == b.arity() && builtin_infallible(*b)),
        ExprKind::Let(p, rhs, body) => match (&p.kind, &body.kind) {
            (PatKind::Var(_, x), ExprKind::Var(_, VarRef::Local(y))) if x == y => fn_infallible(rhs, k),
            _ => term_infallible(rhs) && fn_infallible(body, k),
        },
        _ => false,
    }
}

/// `h a1 … an` as its head and arguments.
fn spine(e: &E) -> (&E, Vec<&E>) {
    let mut args = Vec::new();
    let mut cur = e;
    while let ExprKind::App(f, a) = &cur.kind {
        args.push(a);
        cur = f;
    }
    args.reverse();
    (cur, args)
}

/// Is `e` the local variable `id`?
fn is_var(e: &E, id: u32) -> bool {
    matches!(&e.kind, ExprKind::Var(_, VarRef::Local(x)) if x.0 == id)
}

/// The element type of an array type.
fn elem(t: &Type) -> R<Type> {
    match t {
        Type::Array(a) => Ok((**a).clone()),
        t => Err(LowerError::internal(format!("expected an array type, found {t}"))),
    }
}

impl Lowerer<'_> {
    /// `e` as a saturated application of a builtin (named directly or by a variable bound to it).
    fn builtin_app<'e>(&self, e: &'e E) -> Option<(Builtin, Vec<&'e E>)> {
        if !matches!(e.kind, ExprKind::App(..)) {
            return None;
        }
        let (head, args) = spine(e);
        let b = match &head.kind {
            ExprKind::Var(_, VarRef::Builtin(b)) => *b,
            ExprKind::Var(_, VarRef::Local(id)) => match self.env.get(&VarKey::Local(id.0)) {
                Some(LVal::Fun(Clo::Prim { b, args, .. })) if args.is_empty() => *b,
                _ => return None,
            },
            _ => return None,
        };
        (args.len() == b.arity()).then_some((b, args))
    }

    /// Can applying the closure `f` to `k` arguments neither fail nor fail to terminate?
    fn clo_infallible(&self, f: &LVal, k: usize) -> bool {
        match f {
            LVal::Fun(Clo::Prim { b, args, .. }) => {
                let have = args.len() + k;
                have < b.arity() || (have == b.arity() && builtin_infallible(*b))
            }
            LVal::Fun(Clo::Lam { chain, args, .. }) => {
                let ch = self.chain(*chain);
                let have = args.len() + k;
                have < ch.params.len() || fn_infallible(&ch.body, have - ch.params.len())
            }
            _ => false,
        }
    }

    /// [`Self::clo_infallible`] of the atom `f`: a local in scope, or one bound (to a term) between
    /// a producer and its consumer. (Lowering A-normalises first, and A-normal form binds every
    /// builtin or definition named as an argument to a local, so an argument is never one.)
    fn atom_infallible(&self, f: &E, k: usize, between: &[(u32, &E)]) -> bool {
        match &f.kind {
            ExprKind::Var(_, VarRef::Local(id)) => match self.env.get(&VarKey::Local(id.0)) {
                Some(v) => self.clo_infallible(v, k),
                None => between.iter().find(|(x, _)| *x == id.0).is_some_and(|(_, t)| fn_infallible(t, k)),
            },
            _ => false,
        }
    }

    /// Is the atom `a` a delayed producer whose elements can fail?
    fn atom_fallible_src(&self, a: &E) -> bool {
        matches!(&a.kind, ExprKind::Var(_, VarRef::Local(id)) if self.lazy.get(&id.0).is_some_and(|l| l.fallible))
    }

    /// `let a = rhs in body` (`a` the local `id`): can `a` be left unmade, its elements computed by
    /// its one consumer? (The module comment gives the conditions.)
    pub(crate) fn delayable(&self, id: u32, rhs: &E, body: &E) -> bool {
        if self.uses.get(&id) != Some(&1) {
            return false;
        }
        let Some((b, args)) = self.builtin_app(rhs) else { return false };
        let fallible = match b {
            Builtin::Build => !self.atom_infallible(args[1], 1, &[]),
            Builtin::Map => !self.atom_infallible(args[0], 1, &[]) || self.atom_fallible_src(args[1]),
            Builtin::ZipWith => {
                !self.atom_infallible(args[0], 2, &[])
                    || self.atom_fallible_src(args[1])
                    || self.atom_fallible_src(args[2])
            }
            _ => return false,
        };
        let mut between: Vec<(u32, &E)> = Vec::new();
        let mut cur = body;
        for _ in 0..SCAN_LIMIT {
            let ExprKind::Let(p, rhs2, rest) = &cur.kind else { return false };
            if let Some(accepts) = self.consumes(rhs2, id, fallible, &between) {
                return accepts;
            }
            if fallible && !term_infallible(rhs2) {
                return false;
            }
            if let PatKind::Var(_, x) = &p.kind {
                between.push((x.0, rhs2));
            }
            cur = rest;
        }
        false
    }

    /// If `rhs` reads the local `id` as a consumer's array operand: whether that consumer can
    /// compute the elements of a producer whose elements are `fallible` itself.
    fn consumes(&self, rhs: &E, id: u32, fallible: bool, between: &[(u32, &E)]) -> Option<bool> {
        if let ExprKind::Index(a, _) = &rhs.kind {
            return is_var(a, id).then_some(!fallible);
        }
        let (b, args) = self.builtin_app(rhs)?;
        let pos = args.iter().position(|a| is_var(a, id))?;
        Some(match (b, pos) {
            (Builtin::Sum, 0) => true,
            (Builtin::Len, 0) => !fallible,
            (Builtin::Fold, 2) => !fallible || self.atom_infallible(args[0], 2, between),
            (Builtin::Map, 1) => !fallible || self.atom_infallible(args[0], 1, between),
            (Builtin::Dot, 0 | 1) => !(fallible && self.atom_fallible_src(args[1 - pos])),
            (Builtin::ZipWith, 1 | 2) => {
                let other = self.atom_fallible_src(args[3 - pos]);
                !(fallible && other) && (!(fallible || other) || self.atom_infallible(args[0], 2, between))
            }
            _ => false,
        })
    }

    /// An array operand: a delayed producer (taken: it has one consumer) or an array in memory.
    fn operand(&mut self, a: &E) -> R<Src> {
        if let ExprKind::Var(_, VarRef::Local(id)) = &a.kind {
            if let Some(l) = self.lazy.remove(&id.0) {
                return Ok(Src::Lazy(l));
            }
        }
        let v = self.expr(a)?.word()?;
        Ok(Src::Arr(v, elem(&a.ty)?))
    }

    /// Makes the producer `rhs` (which [`Self::delayable`] accepted) lazy: its atoms are evaluated
    /// and its checks made here; its elements are left to its consumer.
    pub(crate) fn delay(&mut self, rhs: &E) -> R<Lazy> {
        let (b, args) = self.builtin_app(rhs).ok_or_else(|| LowerError::internal("delaying a non-producer"))?;
        let site = Site::Span(rhs.span);
        let lazy = match b {
            Builtin::Build => {
                let n = self.expr(args[0])?.word()?;
                let f = self.expr(args[1])?;
                self.build_checks(n, site);
                let fallible = !self.clo_infallible(&f, 1);
                Lazy { kind: LazyKind::Build { f, site }, n, fallible }
            }
            Builtin::Map => {
                let f = self.expr(args[0])?;
                let a = self.operand(args[1])?;
                let n = self.src_len(&a);
                let fallible = !self.clo_infallible(&f, 1) || a.fallible();
                Lazy { kind: LazyKind::Map { f, a, site }, n, fallible }
            }
            Builtin::ZipWith => {
                let f = self.expr(args[0])?;
                let a = self.operand(args[1])?;
                let c = self.operand(args[2])?;
                let n = self.lengths_agree(TrapCode::ZipWithLengths, &a, &c, site)?;
                let fallible = !self.clo_infallible(&f, 2) || a.fallible() || c.fallible();
                Lazy { kind: LazyKind::ZipWith { f, a, c, site }, n, fallible }
            }
            _ => return Err(LowerError::internal(format!("`{}` is not a producer", b.name()))),
        };
        self.claim(lazy.n, 8 * flat(&elem(&rhs.ty)?).len() as u32);
        Ok(lazy)
    }

    /// Claims the arena memory an unmade array of `n` elements of `stride` bytes would have
    /// taken, when that is at least [`CLAIM_BYTES`]: the interpreter makes every array, so a
    /// producer too big for `--max-memory` (or for memory) is out of memory in both engines. The
    /// claim is an uninitialised `newarray` nothing reads (no write or read pass), freed with
    /// its scope like the array it stands for; smaller arrays claim nothing, so loops of small
    /// fused producers allocate nothing.
    fn claim(&mut self, n: Value, stride: u32) {
        if stride == 0 {
            return;
        }
        let limit = self.b().iconst(CLAIM_BYTES / stride as i64);
        let big = self.b().icmp(Cmp::Ge, n, limit);
        let (yes, _) = self.block(&[]);
        let (join, _) = self.block(&[]);
        self.b().brif(big, ir::BlockCall::new(yes, vec![]), ir::BlockCall::new(join, vec![]));
        self.switch_to(yes);
        self.b().new_array(n, stride);
        self.b().jump(join, vec![]);
        self.switch_to(join);
    }

    /// `rhs` lowered as a consumer of a delayed producer, if it is one.
    pub(crate) fn fused(&mut self, rhs: &E) -> R<Option<LVal>> {
        let is_lazy =
            |l: &Self, a: &E| matches!(&a.kind, ExprKind::Var(_, VarRef::Local(id)) if l.lazy.contains_key(&id.0));
        if let ExprKind::Index(a, i) = &rhs.kind {
            if !is_lazy(self, a) {
                return Ok(None);
            }
            let Src::Lazy(l) = self.operand(a)? else { return Err(LowerError::internal("lost a producer")) };
            let iv = self.expr(i)?.word()?;
            let site = self.site_value(Site::Span(rhs.span));
            self.b().bounds_check(iv, l.n, site);
            return Ok(Some(self.lazy_elem(&l, iv)?));
        }
        let Some((b, args)) = self.builtin_app(rhs) else { return Ok(None) };
        if !args.iter().any(|a| is_lazy(self, a)) {
            return Ok(None);
        }
        let site = Site::Span(rhs.span);
        Ok(Some(match b {
            Builtin::Sum => {
                let a = self.operand(args[0])?;
                self.sum_src(&rhs.ty, &a)?
            }
            Builtin::Len => {
                let a = self.operand(args[0])?;
                LVal::Word(self.src_len(&a))
            }
            Builtin::Dot => {
                let a = self.operand(args[0])?;
                let c = self.operand(args[1])?;
                self.dot_src(&rhs.ty, &a, &c, site)?
            }
            Builtin::Fold => {
                let f = self.expr(args[0])?;
                let z = self.expr(args[1])?;
                let a = self.operand(args[2])?;
                self.fold_src(&rhs.ty, f, z, &a, site)?
            }
            Builtin::Map => {
                let f = self.expr(args[0])?;
                let a = self.operand(args[1])?;
                self.map_src(&rhs.ty, f, &a, site)?
            }
            Builtin::ZipWith => {
                let f = self.expr(args[0])?;
                let a = self.operand(args[1])?;
                let c = self.operand(args[2])?;
                self.zip_src(&rhs.ty, f, &a, &c, site)?
            }
            _ => return Err(LowerError::internal(format!("`{}` does not consume a producer", b.name()))),
        }))
    }

    /// The length of an operand (for an array in memory, read here).
    pub(crate) fn src_len(&mut self, a: &Src) -> Value {
        match a {
            Src::Arr(v, _) => self.b().array_len(*v),
            Src::Lazy(l) => l.n,
        }
    }

    /// Element `i` of an operand (`i` is below its length).
    pub(crate) fn src_elem(&mut self, a: &Src, i: Value) -> R<LVal> {
        match a {
            Src::Arr(v, t) => {
                let p = self.b().elem_addr(*v, i, 8 * flat(t).len() as u32);
                self.load_value(t, p, 0)
            }
            Src::Lazy(l) => self.lazy_elem(l, i),
        }
    }

    /// Computes element `i` of a delayed producer.
    fn lazy_elem(&mut self, l: &Lazy, i: Value) -> R<LVal> {
        match &l.kind {
            LazyKind::Build { f, site } => self.apply(f.clone(), vec![(LVal::Word(i), *site)]),
            LazyKind::Map { f, a, site } => {
                let x = self.src_elem(a, i)?;
                self.apply(f.clone(), vec![(x, *site)])
            }
            LazyKind::ZipWith { f, a, c, site } => {
                let x = self.src_elem(a, i)?;
                let z = self.src_elem(c, i)?;
                self.apply(f.clone(), vec![(x, *site), (z, *site)])
            }
        }
    }

    /// Checks that two operands have the same length (trapping with `code` at `site`) and gives it.
    /// The interpreter checks once both operands are complete: when the check fails, a fallible
    /// delayed operand's elements are computed first, so an error among them comes first.
    pub(crate) fn lengths_agree(&mut self, code: TrapCode, a: &Src, c: &Src, site: Site) -> R<Value> {
        let n = self.src_len(a);
        let m = self.src_len(c);
        let differ = self.b().icmp(Cmp::Ne, n, m);
        let replay: Vec<Rc<Lazy>> = [a, c]
            .into_iter()
            .filter_map(|s| match s {
                Src::Lazy(l) if l.fallible => Some(l.clone()),
                _ => None,
            })
            .collect();
        if replay.is_empty() {
            self.fail_if(differ, code, site, n, m);
            return Ok(n);
        }
        let (fail, _) = self.block(&[]);
        let (ok, _) = self.block(&[]);
        self.b().brif(differ, ir::BlockCall::new(fail, vec![]), ir::BlockCall::new(ok, vec![]));
        self.switch_to(fail);
        for l in replay {
            self.compacting_loop(&Type::Unit, l.n, vec![], &mut |me, i, _| {
                me.lazy_elem(&l, i)?;
                Ok(vec![])
            })?;
        }
        let s = self.site_value(site);
        self.b().trap(code, s, n, m);
        self.switch_to(ok);
        Ok(n)
    }

    /// `sum a`, left to right from zero (the interpreter's order).
    pub(crate) fn sum_src(&mut self, t: &Type, a: &Src) -> R<LVal> {
        let int = *t == Type::Int;
        let n = self.src_len(a);
        let zero = if int { self.b().iconst(0) } else { self.b().fconst(0.0) };
        let op = if int { BinaryOp::Iadd } else { BinaryOp::Fadd };
        let body = &mut |l: &mut Self, i: Value, acc: Vec<Value>| -> R<Vec<Value>> {
            let x = l.src_elem(a, i)?.word()?;
            Ok(vec![l.b().binary(op, acc[0], x)])
        };
        // Computing a delayed element may allocate: its loop frees what each iteration made.
        let out = match a {
            Src::Arr(..) => self.counted_loop(n, vec![zero], body)?,
            Src::Lazy(_) => self.compacting_loop(t, n, vec![zero], body)?,
        };
        Ok(LVal::Word(out[0]))
    }

    /// `dot a c`: lengths must agree; left to right from zero.
    pub(crate) fn dot_src(&mut self, t: &Type, a: &Src, c: &Src, site: Site) -> R<LVal> {
        let int = *t == Type::Int;
        let n = self.lengths_agree(TrapCode::DotLengths, a, c, site)?;
        let zero = if int { self.b().iconst(0) } else { self.b().fconst(0.0) };
        let (mul, add) = if int { (BinaryOp::Imul, BinaryOp::Iadd) } else { (BinaryOp::Fmul, BinaryOp::Fadd) };
        let body = &mut |l: &mut Self, i: Value, acc: Vec<Value>| -> R<Vec<Value>> {
            let x = l.src_elem(a, i)?.word()?;
            let y = l.src_elem(c, i)?.word()?;
            let xy = l.b().binary(mul, x, y);
            Ok(vec![l.b().binary(add, acc[0], xy)])
        };
        let out = match (a, c) {
            (Src::Arr(..), Src::Arr(..)) => self.counted_loop(n, vec![zero], body)?,
            _ => self.compacting_loop(t, n, vec![zero], body)?,
        };
        Ok(LVal::Word(out[0]))
    }

    /// `fold f z a`: `f (… (f z a0) …) a(n-1)`.
    pub(crate) fn fold_src(&mut self, bt: &Type, f: LVal, z: LVal, a: &Src, site: Site) -> R<LVal> {
        let n = self.src_len(a);
        let init = self.materialize(&z)?;
        let out = self.compacting_loop(bt, n, init, &mut |l, i, acc| {
            let acc = Self::from_slice(bt, &acc)?;
            let x = l.src_elem(a, i)?;
            let r = l.apply(f.clone(), vec![(acc, site), (x, site)])?;
            l.materialize(&r)
        })?;
        Self::from_slice(bt, &out)
    }

    /// `map f a`, made.
    pub(crate) fn map_src(&mut self, result: &Type, f: LVal, a: &Src, site: Site) -> R<LVal> {
        let yt = elem(result)?;
        let sy = 8 * flat(&yt).len() as u32;
        let n = self.src_len(a);
        let out = self.b().new_array(n, sy);
        self.element_loop(
            &yt,
            n,
            &mut |l, i| {
                let x = l.src_elem(a, i)?;
                let y = l.apply(f.clone(), vec![(x, site)])?;
                l.materialize(&y)
            },
            &mut |l, i, y| {
                let dst = l.b().elem_addr(out, i, sy);
                l.store_words(&y, dst, 0);
                Ok(())
            },
        )?;
        Ok(LVal::Word(out))
    }

    /// `zipWith f a c`, made: lengths must agree.
    pub(crate) fn zip_src(&mut self, result: &Type, f: LVal, a: &Src, c: &Src, site: Site) -> R<LVal> {
        let yt = elem(result)?;
        let sy = 8 * flat(&yt).len() as u32;
        let n = self.lengths_agree(TrapCode::ZipWithLengths, a, c, site)?;
        let out = self.b().new_array(n, sy);
        self.element_loop(
            &yt,
            n,
            &mut |l, i| {
                let x = l.src_elem(a, i)?;
                let z = l.src_elem(c, i)?;
                let y = l.apply(f.clone(), vec![(x, site), (z, site)])?;
                l.materialize(&y)
            },
            &mut |l, i, y| {
                let dst = l.b().elem_addr(out, i, sy);
                l.store_words(&y, dst, 0);
                Ok(())
            },
        )?;
        Ok(LVal::Word(out))
    }
}
