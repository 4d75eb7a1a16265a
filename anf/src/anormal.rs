//! A-normalisation: the administrative reduction of Mak & Ong (Sec. 3.2, App. B; Sabry and
//! Felleisen) of a core term into a let-series of elementary terms,
//!
//! ```text
//! L ::= let z = E in L | let z = E in z
//! E ::= 0 | z + z | z | λx. L | z z | πi z | ⟨z, …, z⟩ | r | f(z, …, z) | J f · z
//!     | (λx. L)*·z | (Ω λx. L)·z | r*                                  (the paper's, Fig. App. B)
//!     | z op z | -z | not z | z.[z] | [z, …] | bag{z # n, …} | map{z -> z, …}
//!     | if z then L else L | (Ω f)·z | derive e                          (this language's)
//! ```
//!
//! where `z` ranges over local variables (the atoms), `r` over closed literal data (numbers and
//! tuples, arrays, bags and maps of them), and `f` over primitives and definitions (a `Builtin` or
//! `Global` name at the head of an application spine: `max(a, b)`, `g(z)`). Decisions:
//!
//! - Variables are already atomic: `⟨x, y⟩` is elementary as it stands, so the paper's Example 3.3
//!   comes out exactly as printed there (`let z1 = ⟨x, y⟩; z2 = g(z1); …`). App. B would also bind
//!   every variable occurrence (`let z1 = x; z2 = y; z3 = ⟨z1, z2⟩`), which its own examples do not.
//! - Closed literal data is one elementary term `r` (the paper's r ∈ ℝⁿ), however large.
//! - A `let` keeps the user's binder: `let t = x * x in …` binds `t = x * x`, not `z1 = x * x; t = z1`.
//!   A tuple pattern becomes projections (`λ⟨x, y⟩. S ≡ λz. S[π1 z/x][π2 z/y]`). Binders of `λ`,
//!   `dual` and `pullback` keep their patterns.
//! - `a && b` and `a || b` only evaluate `b` when needed, so they become `if`.
//! - A builtin takes its arguments in one elementary term up to its arity (`max(a, b)`, `map(f, xs)`);
//!   further arguments, and arguments of local functions, are applied one at a time (`z z`).
//!
//! Fresh binders are named `z1`, `z2`, … in the order they are made (an `if` is numbered after its
//! branches), with fresh `LocalId`s from the caller.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::span::Span;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::FxHashMap;

/// The A-normal form of `e`: a let-series of elementary terms.
pub fn anormalise(e: &E, fresh: &mut dyn FnMut() -> LocalId) -> E {
    Anf { fresh, names: 0, last_fresh: None, shared: Vec::new() }.series(e)
}

/// `anormalise`, numbering the fresh binders after `*counter` (and advancing it), so several
/// A-normalisations in one derivation never reuse a name.
pub fn anormalise_numbered(e: &E, fresh: &mut dyn FnMut() -> LocalId, counter: &mut u32) -> E {
    let mut a = Anf { fresh, names: *counter, last_fresh: None, shared: Vec::new() };
    let r = a.series(e);
    *counter = a.names;
    r
}

/// The A-normal form of a definition's body: its leading `λ`s are kept and what they return is
/// A-normalised (a definition of function type is a value, `f = λx. L`).
pub fn anormalise_def(body: &E, fresh: &mut dyn FnMut() -> LocalId) -> E {
    let mut a = Anf { fresh, names: 0, last_fresh: None, shared: Vec::new() };
    fn go(a: &mut Anf, e: &E) -> E {
        match &e.kind {
            ExprKind::Lam(p, b) => Expr::new(ExprKind::Lam(p.clone(), go(a, b)), e.span, e.ty.clone()),
            ExprKind::Ann(x, _) => go(a, x),
            _ => a.series(e),
        }
    }
    go(&mut a, body)
}

/// Why a term is not in A-normal form: rendered (with the offending sub-term pretty-printed) only
/// when displayed, so the boolean checks the reducer makes at every step print nothing.
#[derive(Clone, Debug)]
pub struct NotAnf {
    what: String,
    term: E,
}

impl NotAnf {
    fn new(what: impl Into<String>, term: &E) -> NotAnf {
        NotAnf { what: what.into(), term: term.clone() }
    }
}

impl std::fmt::Display for NotAnf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.what, show(&self.term))
    }
}

/// Checks that `e` is a let-series of elementary terms (recursively: bodies of `λ`, `if`, dual maps
/// and pullbacks inside it are let-series too). The error names the first offending sub-term.
pub fn check_series(e: &E) -> Result<(), NotAnf> {
    match &e.kind {
        ExprKind::Let(p, rhs, rest) => {
            let PatKind::Var(_, id) = &p.kind else {
                return Err(NotAnf::new("a let-series binds one variable, found the pattern", e));
            };
            check_elementary(rhs)?;
            match &rest.kind {
                ExprKind::Var(_, VarRef::Local(j)) if j == id => Ok(()),
                ExprKind::Let(..) => check_series(rest),
                _ => Err(NotAnf::new("a let-series ends `let z = E in z`, found", rest)),
            }
        }
        _ => Err(NotAnf::new("expected a let-series, found", e)),
    }
}

/// Is `e` a let-series of elementary terms?
pub fn is_series(e: &E) -> bool {
    check_series(e).is_ok()
}

/// Is `e` an elementary term (with let-series where the grammar has `L`)?
pub fn is_elementary(e: &E) -> bool {
    check_elementary(e).is_ok()
}

/// Closed literal data: the paper's `r` (numbers, and tuples, arrays, bags and maps of literals).
pub fn is_literal(e: &E) -> bool {
    match &e.kind {
        ExprKind::Lit(_) => true,
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => xs.iter().all(is_literal),
        ExprKind::Bag(xs) => xs.iter().all(|(x, _)| is_literal(x)),
        ExprKind::Map(xs) => xs.iter().all(|(k, v)| is_literal(k) && is_literal(v)),
        _ => false,
    }
}

/// Is `e` an atom (a local variable)?
pub fn is_atom(e: &E) -> bool {
    matches!(e.kind, ExprKind::Var(_, VarRef::Local(_)))
}

/// The head and arguments of an application spine `h a1 … an` (n ≥ 0).
pub fn spine(e: &E) -> (&E, Vec<&E>) {
    let mut args = Vec::new();
    let mut cur = e;
    while let ExprKind::App(f, a) = &cur.kind {
        args.push(a);
        cur = f;
    }
    args.reverse();
    (cur, args)
}

fn check_elementary(e: &E) -> Result<(), NotAnf> {
    let atom = |x: &E| if is_atom(x) { Ok(()) } else { Err(NotAnf::new("expected a variable, found", x)) };
    let atoms = |xs: &[E]| xs.iter().try_for_each(atom);
    match &e.kind {
        ExprKind::Zero | ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Derive(_) => Ok(()),
        _ if is_literal(e) => Ok(()),
        ExprKind::Sum(a, b) | ExprKind::Bin(_, a, b) | ExprKind::Index(a, b) => atom(a).and(atom(b)),
        ExprKind::Neg(a) | ExprKind::Not(a) | ExprKind::Proj(a, _) => atom(a),
        ExprKind::Tuple(xs) | ExprKind::Array(xs) => atoms(xs),
        ExprKind::Bag(xs) => xs.iter().try_for_each(|(x, _)| atom(x)),
        ExprKind::Map(xs) => xs.iter().try_for_each(|(k, v)| atom(k).and(atom(v))),
        ExprKind::Lam(_, b) => check_series(b),
        ExprKind::If(c, a, b) => atom(c).and(check_series(a)).and(check_series(b)),
        ExprKind::Dual(_, s, w) => check_series(s).and(atom(w)),
        ExprKind::Pullback(f, w) => {
            match &f.kind {
                ExprKind::Lam(_, b) => check_series(b)?,
                ExprKind::Var(..) => {}
                _ => return Err(NotAnf::new("a pullback's function is a λ or a name, found", f)),
            }
            atom(w)
        }
        ExprKind::App(..) => {
            let (head, args) = spine(e);
            match &head.kind {
                ExprKind::Var(_, VarRef::Builtin(b)) => {
                    if args.len() > b.arity() {
                        return Err(NotAnf::new(format!("`{}` applied to more than its arity in", b.name()), e));
                    }
                    for (i, a) in args.iter().enumerate() {
                        // `J f · z`: the function symbol stays as written (a name, or a λ for an operator).
                        let symbol =
                            i == 0 && *b == Builtin::Jac && matches!(a.kind, ExprKind::Var(..) | ExprKind::Lam(..));
                        if !symbol {
                            atom(a)?;
                        }
                    }
                    Ok(())
                }
                ExprKind::Var(_, VarRef::Global(_)) if args.len() == 1 => atom(args[0]),
                _ if args.len() == 1 => atom(head).and(atom(args[0])),
                _ => Err(NotAnf::new("an application of a local function takes one argument:", e)),
            }
        }
        ExprKind::Let(..) | ExprKind::Ann(..) => Err(NotAnf::new("not an elementary term:", e)),
    }
}

fn show(e: &E) -> String {
    let s = frontend::pretty::expr(e, frontend::pretty::Mode::Paper);
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

struct Anf<'f> {
    fresh: &'f mut dyn FnMut() -> LocalId,
    names: u32,
    /// The binder `bind` made last (so renaming it to a user's name can give its number back).
    last_fresh: Option<LocalId>,
    /// Atoms already holding the value of a sub-term in the series being built: a term that
    /// shares a sub-term (as the terms passes build often do) computes it once.
    shared: Vec<FxHashMap<*const Expr, (E, E)>>,
}

type Bindings = Vec<(Rc<Pat>, E)>;

impl Anf<'_> {
    fn new_var(&mut self, ty: &Type, span: Span) -> (Rc<Pat>, E) {
        self.names += 1;
        let name: Name = format!("z{}", self.names).into();
        let id = (self.fresh)();
        self.last_fresh = Some(id);
        let pat = Rc::new(Pat::var(name.clone(), id, ty.clone()));
        let var = Expr::new(ExprKind::Var(name, VarRef::Local(id)), span, ty.clone());
        (pat, var)
    }

    /// Binds the elementary term `e` to a fresh variable and returns that variable, which carries
    /// `e`'s span (an error about the value, such as a duplicate map key, points at its source).
    fn bind(&mut self, e: E, out: &mut Bindings) -> E {
        let (p, v) = self.new_var(&e.ty, e.span);
        out.push((p, e));
        v
    }

    /// `e` as a let-series.
    fn series(&mut self, e: &E) -> E {
        let mut out = Vec::new();
        let before = out.len();
        self.shared.push(FxHashMap::default());
        let atom = self.norm(e, &mut out);
        self.shared.pop();
        // The series must end `let z = E in z`: bind the result unless the last binding made it.
        let ends_with_it = out.len() > before
            && matches!(
                (&out[out.len() - 1].0.kind, &atom.kind),
                (PatKind::Var(_, i), ExprKind::Var(_, VarRef::Local(j))) if i == j
            );
        let atom = if ends_with_it { atom } else { self.bind(atom, &mut out) };
        let mut result = atom;
        for (p, rhs) in out.into_iter().rev() {
            let ty = result.ty.clone();
            result = Expr::new(ExprKind::Let(p, rhs.clone(), result), rhs.span, ty);
        }
        result
    }

    /// Appends the bindings that compute `e` and returns the atom holding its value.
    fn norm(&mut self, e: &E, out: &mut Bindings) -> E {
        let key = Rc::as_ptr(e);
        if let Some((_, atom)) = self.shared.last().and_then(|m| m.get(&key)) {
            return atom.clone();
        }
        let atom = self.norm_fresh(e, out);
        if let Some(m) = self.shared.last_mut() {
            // The node is kept alive with its atom, so its address cannot be reused meanwhile.
            m.insert(key, (e.clone(), atom.clone()));
        }
        atom
    }

    fn norm_fresh(&mut self, e: &E, out: &mut Bindings) -> E {
        let mk = |kind: ExprKind| Expr::new(kind, e.span, e.ty.clone());
        if is_literal(e) {
            return self.bind(e.clone(), out);
        }
        match &e.kind {
            ExprKind::Var(_, VarRef::Local(_)) => e.clone(),
            ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero | ExprKind::Derive(_) => self.bind(e.clone(), out),
            ExprKind::Ann(x, _) => self.norm(x, out),
            ExprKind::Lam(p, b) => {
                let body = self.series(b);
                self.bind(mk(ExprKind::Lam(p.clone(), body)), out)
            }
            ExprKind::Let(p, rhs, body) => {
                self.let_pattern(p, rhs, out);
                self.norm(body, out)
            }
            ExprKind::App(..) => self.app(e, out),
            ExprKind::If(c, a, b) => {
                let c = self.norm(c, out);
                let (a, b) = (self.series(a), self.series(b));
                self.bind(mk(ExprKind::If(c, a, b)), out)
            }
            // `a && b` ≡ if a then b else false; `a || b` ≡ if a then true else b.
            ExprKind::Bin(op @ (BinOp::And | BinOp::Or), a, b) => {
                let c = self.norm(a, out);
                let lit = |v: bool| Expr::new(ExprKind::Lit(Lit::Bool(v)), e.span, Type::Bool);
                let rest = self.series(b);
                let (t, f) =
                    if *op == BinOp::And { (rest, self.series(&lit(false))) } else { (self.series(&lit(true)), rest) };
                self.bind(mk(ExprKind::If(c, t, f)), out)
            }
            ExprKind::Bin(op, a, b) => {
                let (a, b) = (self.norm(a, out), self.norm(b, out));
                self.bind(mk(ExprKind::Bin(*op, a, b)), out)
            }
            ExprKind::Sum(a, b) => {
                let (a, b) = (self.norm(a, out), self.norm(b, out));
                self.bind(mk(ExprKind::Sum(a, b)), out)
            }
            ExprKind::Index(a, b) => {
                let (a, b) = (self.norm(a, out), self.norm(b, out));
                self.bind(mk(ExprKind::Index(a, b)), out)
            }
            ExprKind::Neg(a) => {
                let a = self.norm(a, out);
                self.bind(mk(ExprKind::Neg(a)), out)
            }
            ExprKind::Not(a) => {
                let a = self.norm(a, out);
                self.bind(mk(ExprKind::Not(a)), out)
            }
            ExprKind::Proj(a, i) => {
                let a = self.norm(a, out);
                self.bind(mk(ExprKind::Proj(a, *i)), out)
            }
            ExprKind::Tuple(xs) => {
                let xs = xs.iter().map(|x| self.norm(x, out)).collect();
                self.bind(mk(ExprKind::Tuple(xs)), out)
            }
            ExprKind::Array(xs) => {
                let xs = xs.iter().map(|x| self.norm(x, out)).collect();
                self.bind(mk(ExprKind::Array(xs)), out)
            }
            ExprKind::Bag(xs) => {
                let xs = xs.iter().map(|(x, n)| (self.norm(x, out), *n)).collect();
                self.bind(mk(ExprKind::Bag(xs)), out)
            }
            ExprKind::Map(xs) => {
                let xs = xs.iter().map(|(k, v)| (self.norm(k, out), self.norm(v, out))).collect();
                self.bind(mk(ExprKind::Map(xs)), out)
            }
            ExprKind::Pullback(f, w) => {
                let f = match &f.kind {
                    ExprKind::Lam(p, b) => Expr::new(ExprKind::Lam(p.clone(), self.series(b)), f.span, f.ty.clone()),
                    ExprKind::Var(..) => f.clone(),
                    _ => self.norm(f, out),
                };
                let w = self.norm(w, out);
                self.bind(mk(ExprKind::Pullback(f, w)), out)
            }
            ExprKind::Dual(p, s, w) => {
                let w = self.norm(w, out);
                let s = self.series(s);
                self.bind(mk(ExprKind::Dual(p.clone(), s, w)), out)
            }
        }
    }

    /// `let p = rhs in …`: binds the user's variable(s) to the value of `rhs`.
    fn let_pattern(&mut self, p: &Rc<Pat>, rhs: &E, out: &mut Bindings) {
        let before = out.len();
        let atom = self.norm(rhs, out);
        match &p.kind {
            PatKind::Var(..) => {
                // Rename the binding that made the value, when there is one.
                let made_here = out.len() > before
                    && matches!(
                        (&out[out.len() - 1].0.kind, &atom.kind),
                        (PatKind::Var(_, i), ExprKind::Var(_, VarRef::Local(j))) if i == j
                    );
                if made_here {
                    let last = out.len() - 1;
                    if let (PatKind::Var(_, id), Some(f)) = (&out[last].0.kind, self.last_fresh) {
                        if *id == f {
                            self.names -= 1;
                            self.last_fresh = None;
                        }
                    }
                    // Sub-terms already computed into the renamed binder now live in the user's.
                    if let (PatKind::Var(_, old), PatKind::Var(name, new)) = (&out[last].0.kind, &p.kind) {
                        let user = Expr::new(ExprKind::Var(name.clone(), VarRef::Local(*new)), p.span, p.ty.clone());
                        for entry in self.shared.iter_mut().flat_map(|m| m.values_mut()) {
                            if matches!(&entry.1.kind, ExprKind::Var(_, VarRef::Local(j)) if j == old) {
                                entry.1 = user.clone();
                            }
                        }
                    }
                    out[last].0 = p.clone();
                } else {
                    out.push((p.clone(), atom));
                }
            }
            PatKind::Wild | PatKind::Unit => {}
            PatKind::Tuple(_) => self.destructure(p, atom, out),
        }
    }

    /// Binds the variables of a tuple pattern to projections of `atom`.
    fn destructure(&mut self, p: &Pat, atom: E, out: &mut Bindings) {
        let PatKind::Tuple(ps) = &p.kind else { return };
        for (i, q) in ps.iter().enumerate() {
            let proj = Expr::new(ExprKind::Proj(atom.clone(), i), q.span, q.ty.clone());
            match &q.kind {
                PatKind::Var(..) => out.push((Rc::new(q.clone()), proj)),
                PatKind::Wild | PatKind::Unit => {}
                PatKind::Tuple(_) => {
                    let inner = self.bind(proj, out);
                    self.destructure(q, inner, out);
                }
            }
        }
    }

    fn app(&mut self, e: &E, out: &mut Bindings) -> E {
        let (head, args) = spine(e);
        // The span and type of the application node holding the first `k + 1` arguments (the
        // span is where the interpreter reports an error in that application).
        let nodes = spine_nodes(e);
        let at = |k: usize| &nodes[k];
        match &head.kind {
            ExprKind::Var(_, VarRef::Builtin(b)) if b.arity() > 0 => {
                let n = args.len().min(b.arity());
                let mut cur = head.clone();
                for (i, a) in args[..n].iter().enumerate() {
                    let symbol =
                        i == 0 && *b == Builtin::Jac && matches!(a.kind, ExprKind::Var(..) | ExprKind::Lam(..));
                    let a = if symbol { (*a).clone() } else { self.norm(a, out) };
                    cur = app_node(&cur, a, at(i));
                }
                let mut v = self.bind(cur, out);
                for (i, a) in args.iter().enumerate().skip(n) {
                    let a = self.norm(a, out);
                    v = self.bind(app_node(&v, a, at(i)), out);
                }
                v
            }
            ExprKind::Var(_, VarRef::Global(_)) => {
                let a = self.norm(args[0], out);
                let mut v = self.bind(app_node(head, a, at(0)), out);
                for (i, a) in args.iter().enumerate().skip(1) {
                    let a = self.norm(a, out);
                    v = self.bind(app_node(&v, a, at(i)), out);
                }
                v
            }
            _ => {
                let mut v = self.norm(head, out);
                for (i, a) in args.iter().enumerate() {
                    let a = self.norm(a, out);
                    v = self.bind(app_node(&v, a, at(i)), out);
                }
                v
            }
        }
    }
}

/// The application nodes of a spine `h a1 … an`, innermost (`h a1`) first.
fn spine_nodes(e: &E) -> Vec<&E> {
    let mut nodes = Vec::new();
    let mut cur = e;
    while let ExprKind::App(f, _) = &cur.kind {
        nodes.push(cur);
        cur = f;
    }
    nodes.reverse();
    nodes
}

/// `f a`, with the span and type of the source application node `like` (a dual applied to a
/// tangent is a Real, though `f` has no function type).
fn app_node(f: &E, a: E, like: &E) -> E {
    Expr::new(ExprKind::App(f.clone(), a), like.span, like.ty.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal_forms(src: &str) -> Vec<(String, E)> {
        let program = frontend::check_source(src).expect("type-checks");
        let mut next = program.next_local;
        let mut fresh = || fresh_local(&mut next);
        program.defs.iter().map(|d| (d.name.to_string(), anormalise_def(&d.body, &mut fresh))).collect()
    }

    fn paper(e: &E) -> String {
        frontend::pretty::expr(e, frontend::pretty::Mode::Paper)
    }

    #[test]
    fn example_3_3() {
        let defs = normal_forms(
            "def g (x, y) = (x + 1.0, 2.0 * x + y * y)\n\
             def mult (a, b) = a * b\n\
             def pow2 z = z * z\n\
             def f (x, y) = pow2 (mult (g (x, y)))",
        );
        let (_, f) = &defs[3];
        assert_eq!(paper(f), "λ⟨x, y⟩. let z1 = ⟨x, y⟩; z2 = g z1; z3 = mult z2; z4 = pow2 z3 in z4");
        for (name, d) in &defs {
            let ExprKind::Lam(_, body) = &d.kind else { panic!("{name} is a λ") };
            check_series(body).unwrap_or_else(|m| panic!("{name}: {m}"));
        }
    }

    #[test]
    fn user_lets_keep_their_names_and_tuples_become_projections() {
        let defs = normal_forms("def h x = let (a, (b, _)) = (x, (x * 2.0, 1.0)) in let t = a * b in t + 1.0");
        let s = paper(&defs[0].1);
        assert_eq!(
            s,
            "λx. let z1 = 2.0; z2 = x * z1; z3 = 1.0; z4 = ⟨z2, z3⟩; z5 = ⟨x, z4⟩; a = π1 z5; z6 = π2 z5; \
             b = π1 z6; t = a * b; z7 = 1.0; z8 = t + z7 in z8"
        );
    }

    #[test]
    fn short_circuit_and_literals() {
        let defs = normal_forms("def h (xs : Array Real) = len xs > 0 && xs.[0] > 1.0\ndef k = [1.0, 2.0]");
        assert_eq!(
            paper(&defs[0].1),
            "λxs. let z1 = len xs; z2 = 0; z3 = z1 > z2; \
             z9 = (if z3 then let z4 = 0; z5 = xs.[z4]; z6 = 1.0; z7 = z5 > z6 in z7 else let z8 = false in z8) in z9"
        );
        assert_eq!(paper(&defs[1].1), "let z1 = [1.0, 2.0] in z1");
    }

    #[test]
    fn every_form_normalises_to_a_checked_series() {
        let defs = normal_forms(
            "def sq x = x * x\n\
             def k (xs : Array Real) (w : Real) =\n\
               let f = fun a -> a * w in\n\
               let ys = map f xs in\n\
               let s = fold (fun acc y -> acc + y) 0.0 ys in\n\
               let p = (pullback (fun v -> sq v) (omega 1.0)) s in\n\
               let d = dual (fun v -> v * 2.0) p in\n\
               (if s > 0.0 then unstar d else -s, sq s, max s w, bag{1 # 2}, map{1 -> s})",
        );
        for (name, d) in &defs {
            let mut body = d;
            while let ExprKind::Lam(_, b) = &body.kind {
                body = b;
            }
            check_series(body).unwrap_or_else(|m| panic!("{name}: {m}\n{}", paper(d)));
        }
    }

    #[test]
    fn a_shared_sub_term_is_computed_once_and_renamed_binders_stay_bound() {
        // `let t = c in c * q` where both `c` are one node: the second use must name `t`.
        let program = frontend::check_source("def h (q : Real) = let t = 2.0 in t * q").unwrap();
        let ExprKind::Lam(p, body) = &program.defs[0].body.kind else { panic!() };
        let ExprKind::Let(tp, c, rest) = &body.kind else { panic!() };
        let ExprKind::Bin(op, _, q) = &rest.kind else { panic!() };
        let shared = Expr::new(ExprKind::Bin(*op, c.clone(), q.clone()), rest.span, rest.ty.clone());
        let term = Expr::new(ExprKind::Let(tp.clone(), c.clone(), shared.clone()), body.span, body.ty.clone());
        let term = Expr::new(ExprKind::Tuple(vec![term, shared]), body.span, body.ty.clone());
        let _ = p;
        let mut next = program.next_local;
        let mut fresh = || fresh_local(&mut next);
        let series = anormalise(&term, &mut fresh);
        check_series(&series).unwrap();
        assert_eq!(paper(&series), "let t = 2.0; z1 = t * q; z2 = ⟨z1, z1⟩ in z2");
    }

    #[test]
    fn the_checker_rejects_non_series() {
        let defs = normal_forms("def h x = sin (x * x)");
        let ExprKind::Lam(_, body) = &defs[0].1.kind else { panic!() };
        assert!(check_series(body).is_ok());
        let program = frontend::check_source("def h x = sin (x * x)").unwrap();
        let ExprKind::Lam(_, raw) = &program.defs[0].body.kind else { panic!() };
        assert!(check_series(raw).is_err());
    }
}
