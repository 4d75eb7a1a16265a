//! The pullback reductions of Fig. 3: `((Ω λy. E)·ω) V → (λv. S)*·(ω (E[V/y]))`, where `λv. S` is
//! the Jacobian of `λy. E` at `V` (rules 9–19), and the pair rules 20a/20b for the links
//! `(Ω λy. ⟨y, E⟩)` that reduction 8 makes.
//!
//! Written `y` for the pullback's pattern, `yᵢ` for one of its variables, `v` for the tangent
//! pattern of the same shape (`vᵢ` the tangent of `yᵢ`), and `z` for a variable not in `y`. Rules
//! marked *ext* are this language's; each is the paper's treatment of a construct it has no
//! syntax for, or an unfolding that is valid in a neighbourhood of `V` because it only depends on
//! discrete data (array lengths, iteration counts, the branch a Bool selects):
//!
//! ```text
//! (9)     ((Ω λy. E)·ω) V → 0          if y ∉ FV(E), or E has a discrete type (Int, Bool, …)
//! (10)    y₁ + y₂, y₁ - y₂, -y₁, y₁ + z        ↦ v₁ + v₂, v₁ - v₂, -v₁, v₁        (10a/10b; ext: -, neg)
//! (11)    y ↦ v        (12)  yᵢ ↦ vᵢ,  πi yⱼ ↦ πi vⱼ
//! (13)    ⟨a₁, …, aₙ⟩, [a₁, …, aₙ] ↦ the same with tangents, 0 for a z         (13a–c; ext: n-ary, arrays)
//! (14)    J f · yᵢ ↦ J f · vᵢ;  ext: (J f · t) p ↦ (J f · t′) P for f = (.[]), sum (p only through len)
//! (15)    f(a₁, …, aₙ) ↦ (J f · ⟨t₁, …, tₙ⟩) ⟨A₁, …, Aₙ⟩   f ∈ F: primitives, operators, .[i],
//!         definitions of first-order type; ext: any function not depending on y, `z yᵢ`
//! (lin)   star yᵢ, unstar yᵢ, (Ω yᵢ) x ↦ star vᵢ, unstar vᵢ, star vᵢ                        (ext)
//!         a dual applied to a tangent, yᵢ yⱼ ↦ vᵢ Vⱼ + Vᵢ vⱼ (the pairing is bilinear)     (ext)
//! (16a–c) (λx. L)*·z, as the paper
//! (17)    (Ω λx. L)·z ↦ λa. (λv. S)*·(z P)   if ((Ω λx. L)·z) a →* (λv. S)*·(z P), a fresh
//!         if that premise stops: (Ω λx. L)·z ↦ let g = λx. L in (Ω g)·z first              (A)
//! (18)    λx. L ↦ λx. S                       if ((Ω λy. L)·ω′) V →* (λv. S)*·(ω′ P)
//! (19a–c) yᵢ z, yᵢ yⱼ, as the paper (a function value that is not a λ is η-expanded first)
//! (if)    if yᵢ then L₁ else L₂ ↦ the branch Vᵢ selects                                   (ext)
//! (if′)   if z then L₁ else L₂ ↦ if z then S₁ else S₂, from both branches' premises       (ext)
//! (map)   map f xs ↦ [f xs.[0], …, f xs.[n-1]]        n = len Vₓₛ                         (ext)
//! (zipWith) zipWith f xs ys ↦ [f xs.[0] ys.[0], …]                                       (ext)
//! (build) build n f ↦ [f 0, …, f (n-1)]                n = V_n                           (ext)
//! (fold)  fold f b xs ↦ f (… (f b xs.[0]) …) xs.[n-1]                                    (ext)
//! (iterate) iterate n f x ↦ f (… (f x))                 n applications                   (ext)
//! (while) while p f x ↦ f (… (f x))                     n = the iterations taken at V    (ext)
//! (⊕)     a ⊕ da ↦ the update D = V_da selects: v (replace v), a + d (gchange realGroup d),
//!         op a d (a user group's op), componentwise on tuples of changes                 (ext)
//! (grad)  grad f x ↦ unstar (((Ω f)·(Ω 1.0)) x); likewise vjp, jacobian                  (ext)
//! (J)     (J f · t) p ↦ the derivative of f as a term, to differentiate it again, its premise
//!         at p's shape [p.[0], …, p.[n-1]], n = len Vₚ                                   (ext)
//! (20a)   ((Ω λy. ⟨y, E⟩)·ω) V → (λv. ⟨v, S⟩)*·(ω ⟨V, E[V/y]⟩)   if E's rule gives S
//! (20b)   ((Ω λy. ⟨y, E⟩)·ω) V → (λv. ⟨v, 0⟩)*·(ω ⟨V, E⟩)          if y ∉ FV(E)
//! ```
//!
//! The unfolding rules rewrite `E` to a let-series equivalent near `V`, and the pullback continues
//! along it (reductions 7 and 8 split it). When a premise does not reduce to `(λv. S)*·(ω′ P)`
//! (an array's length is unknown at a symbolic point), rules 16, 18 and 19b keep the Jacobian as
//! `J h · v` of the function `h` concerned, which reductions 4 and 5 evaluate at concrete points.

use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use rustc_hash::{FxHashMap, FxHashSet};

use super::prim::{is_prim, Sym};
use super::print;
use super::reduce::{eta, is_function_value, Reducer, R};
use super::term::*;

/// What an elementary term's rule gives at the point.
enum Elem {
    /// `(λv. S)*·(ω P)` by rule `label`.
    Jac { label: String, s: E, primal: E },
    /// The Jacobian is 0 (rule 9), the value `P`.
    Zero { primal: E },
    /// `E` is equivalent, near the point, to this let-series.
    Rewrite { label: String, series: E },
    /// No rule applies: the redex is a normal form (Remark 3.6).
    Stuck,
}

/// The point a pullback is applied at, seen from its elementary term.
struct At {
    /// The variables of `y` free in the elementary term.
    ids: FxHashSet<LocalId>,
    /// Each of them to its component of `V`.
    prim: FxHashMap<LocalId, E>,
    /// Each of them to its tangent variable.
    tan: FxHashMap<LocalId, E>,
    /// `y` is one variable (rule 11 rather than 12).
    whole: bool,
    y: Rc<Pat>,
    v: E,
    tterm: E,
}

impl At {
    fn var_id(z: &E) -> Option<LocalId> {
        match &z.kind {
            ExprKind::Var(_, VarRef::Local(id)) => Some(*id),
            _ => None,
        }
    }
    /// Is `z` a variable of `y` with a non-trivial tangent?
    fn dep(&self, z: &E) -> bool {
        Self::var_id(z).is_some_and(|id| self.ids.contains(&id)) && !z.ty.is_discrete()
    }
    /// The tangent of an atom: `vᵢ` for `yᵢ`, 0 for anything else.
    fn tan(&self, z: &E) -> E {
        match Self::var_id(z) {
            Some(id) if !z.ty.is_discrete() => self.tan.get(&id).cloned().unwrap_or_else(|| zero(&z.ty)),
            _ => zero(&z.ty),
        }
    }
    /// The value of an atom at the point (a variable not in `y` stands for itself).
    fn prim(&self, z: &E) -> E {
        match Self::var_id(z) {
            Some(id) => self.prim.get(&id).cloned().unwrap_or_else(|| z.clone()),
            None => z.clone(),
        }
    }
    /// `E[V/y]`.
    fn primal(&self, e: &E) -> E {
        subst(e, &self.prim)
    }
    /// `e` with each variable of `y` whose value holds arrays written at that value's shape,
    /// `yᵢ ≡ [yᵢ.[0], …, yᵢ.[n-1]]` with `n = len Vᵢ` (and tuples componentwise). The lengths are
    /// discrete, hence constant near `V`: a term in `y` made at this point is valid near `V`, and
    /// a premise reduced at it can unfold `map`, `fold`, … (the symbolic point's shape is known).
    fn shaped(&self, e: &E) -> E {
        let s: FxHashMap<LocalId, E> = free_vars(e)
            .into_iter()
            .filter_map(|(id, n, ty)| {
                let v = self.prim.get(&id)?;
                let x = var(n, id, &ty);
                let ex = expand_shape(&x, v);
                (!Rc::ptr_eq(&ex, &x)).then_some((id, ex))
            })
            .collect();
        subst(e, &s)
    }
}

/// `x` written at the shape of its value `v`: `[x.[0], …]` for an array literal, `⟨π1 x, …⟩` for a
/// tuple holding arrays, recursively; `x` itself otherwise.
pub(super) fn expand_shape(x: &E, v: &E) -> E {
    match (&v.kind, &x.ty) {
        (ExprKind::Array(vs), Type::Array(t)) => {
            let xs = vs
                .iter()
                .enumerate()
                .map(|(i, vi)| expand_shape(&mk(ExprKind::Index(x.clone(), int(i as i64)), (**t).clone()), vi))
                .collect();
            mk(ExprKind::Array(xs), x.ty.clone())
        }
        (ExprKind::Tuple(vs), Type::Tuple(_)) => {
            let xs: Vec<E> = vs.iter().enumerate().map(|(i, vi)| expand_shape(&proj(x, i), vi)).collect();
            if xs.iter().enumerate().all(|(i, c)| matches!(&c.kind, ExprKind::Proj(_, j) if *j == i)) {
                return x.clone();
            }
            tuple(xs)
        }
        _ => x.clone(),
    }
}

enum Premise {
    /// `(λq. S)*·(ω′ P)`.
    Dual(Rc<Pat>, E),
    Zero,
    Stuck(E),
}

impl<'a, 'p> Reducer<'a, 'p> {
    /// The redex `((Ω λy. body)·ω) V`, `body` an elementary term or a link `⟨y, E⟩`.
    ///
    /// The rules only ask about the variables of `y` that the elementary term mentions, so `At`
    /// holds just those (a link's `y` is rule 8's chain, as long as the let-series so far).
    pub(super) fn pullback_at(&mut self, p: &Rc<Pat>, body: &E, w: &E, v: &E) -> R<Option<(String, E)>> {
        let link = super::reduce::is_link(p, body);
        let elementary = match &body.kind {
            ExprKind::Tuple(xs) if link => &xs[1],
            _ => body,
        };
        let wanted: FxHashSet<LocalId> = free_set(elementary);
        let prim = pattern_subst_for(p, v, Some(&wanted));
        let ids: FxHashSet<LocalId> = prim.keys().copied().collect();
        let (tp, tan) = mirror(p, Some(&ids));
        let tterm = pattern_term(&tp);
        let at = At {
            ids,
            prim,
            tan,
            whole: matches!(p.kind, PatKind::Var(..)),
            y: p.clone(),
            v: v.clone(),
            tterm: tterm.clone(),
        };
        if link {
            let ExprKind::Tuple(xs) = &body.kind else { return Ok(None) };
            let e = &xs[1];
            if !mentions_any(e, &at.ids) {
                // (20b)
                let s = chain_pair(tterm, zero(&e.ty));
                return Ok(Some(("20b".into(), dual(tp, s, app(w, chain_pair(v.clone(), e.clone()))))));
            }
            return Ok(match self.elem(&at, e)? {
                // (20a), with E's rule as its premise.
                Elem::Jac { label, s, primal } => Some((
                    format!("20a, {label}"),
                    dual(tp, chain_pair(tterm, s), app(w, chain_pair(v.clone(), primal))),
                )),
                Elem::Zero { primal } => Some((
                    "20a, 9".into(),
                    dual(tp, chain_pair(tterm, zero(&e.ty)), app(w, chain_pair(v.clone(), primal))),
                )),
                // ⟨y, E⟩ ≡ let x = E in ⟨y, x⟩, with E's equivalent series.
                Elem::Rewrite { label, series } => {
                    let name = self.fresh_name();
                    let body = append_tail(&series, &name, &|x| chain_pair(pattern_term(p), x));
                    Some((label, app(&pullback(lam(p.clone(), body), w.clone()), v.clone())))
                }
                Elem::Stuck => None,
            });
        }
        let dual_ty = Type::dual(p.ty.clone());
        if !mentions_any(body, &at.ids) {
            // (9)
            return Ok(Some(("9".into(), zero(&dual_ty))));
        }
        Ok(match self.elem(&at, body)? {
            Elem::Jac { label, s, primal } => Some((label, dual(tp, s, app(w, primal)))),
            Elem::Zero { .. } => Some(("9".into(), zero(&dual_ty))),
            Elem::Rewrite { label, series } => {
                Some((label, app(&pullback(lam(p.clone(), series), w.clone()), v.clone())))
            }
            Elem::Stuck => None,
        })
    }

    /// Rules 9–19 (and the extensions) for an elementary term `e` that mentions `y`.
    fn elem(&mut self, at: &At, e: &E) -> R<Elem> {
        let jac_of = |label: &str, s: E, primal: E| Ok(Elem::Jac { label: label.into(), s, primal });
        if e.ty.is_discrete() {
            // (9): a discrete result has the zero tangent space.
            return Ok(Elem::Zero { primal: at.primal(e) });
        }
        match &e.kind {
            // (11) y ↦ v; (12) yᵢ ↦ vᵢ.
            ExprKind::Var(_, VarRef::Local(_)) => {
                let rule = if at.whole { "11" } else { "12" };
                jac_of(rule, at.tan(e), at.prim(e))
            }
            // (10a) z + yⱼ ↦ vⱼ; (10b) yᵢ + yⱼ ↦ vᵢ + vⱼ.
            ExprKind::Sum(a, b) | ExprKind::Bin(BinOp::Add, a, b) => {
                let (ta, tb) = (at.tan(a), at.tan(b));
                let rule = if !is_zero(&ta) && !is_zero(&tb) { "10b" } else { "10a" };
                let s = match (is_zero(&ta), is_zero(&tb)) {
                    (true, _) => tb,
                    (_, true) => ta,
                    _ => mk(e.kind.clone_with(ta, tb), e.ty.clone()),
                };
                jac_of(rule, s, at.primal(e))
            }
            // (10) ext: a difference is linear too.
            ExprKind::Bin(BinOp::Sub, a, b) => {
                let (ta, tb) = (at.tan(a), at.tan(b));
                let s = match (is_zero(&ta), is_zero(&tb)) {
                    (_, true) => ta,
                    (true, _) => mk(ExprKind::Neg(tb), e.ty.clone()),
                    _ => mk(ExprKind::Bin(BinOp::Sub, ta, tb), e.ty.clone()),
                };
                jac_of("10", s, at.primal(e))
            }
            // (10) ext: -yᵢ ↦ -vᵢ.
            ExprKind::Neg(a) => jac_of("10", mk(ExprKind::Neg(at.tan(a)), e.ty.clone()), at.primal(e)),
            // (12) πi yⱼ ↦ πi vⱼ.
            ExprKind::Proj(a, i) => {
                let ta = at.tan(a);
                let s = if is_zero(&ta) { zero(&e.ty) } else { proj(&ta, *i) };
                jac_of("12", s, at.primal(e))
            }
            // (13a–c) ⟨yᵢ, z⟩ ↦ ⟨vᵢ, 0⟩, ⟨z, yⱼ⟩ ↦ ⟨0, vⱼ⟩, ⟨yᵢ, yⱼ⟩ ↦ ⟨vᵢ, vⱼ⟩; ext: n-ary and nested.
            ExprKind::Tuple(xs) => {
                let rule = match xs.as_slice() {
                    [a, b] if !xs.iter().any(|x| matches!(x.kind, ExprKind::Tuple(_))) => {
                        match (at.dep(a), at.dep(b)) {
                            (true, false) => "13a",
                            (false, true) => "13b",
                            _ => "13c",
                        }
                    }
                    _ => "13",
                };
                jac_of(rule, self.tangent_tree(at, e), at.primal(e))
            }
            // (13) ext: [a₁, …, aₙ] ↦ [t₁, …, tₙ], an array literal is a tuple.
            ExprKind::Array(xs) => {
                let ts = xs.iter().map(|x| at.tan(x)).collect();
                jac_of("13", mk(ExprKind::Array(ts), e.ty.clone()), at.primal(e))
            }
            // (15) ext: a.[i] is the function symbol (.[]) of ⟨a, i⟩ (its Jacobian needs len a).
            ExprKind::Index(a, i) => self.function_symbol(at, e, Sym::Index(a.ty.clone()), &[a.clone(), i.clone()]),
            // (15) ext: a * b, a / b, a ^ b are function symbols of ⟨a, b⟩.
            ExprKind::Bin(op @ (BinOp::Mul | BinOp::Div | BinOp::Pow), a, b) => {
                self.function_symbol(at, e, Sym::Op(*op, a.ty.clone()), &[a.clone(), b.clone()])
            }
            ExprKind::If(c, l1, l2) => self.conditional(at, e, c, l1, l2),
            ExprKind::Lam(x, l) => self.abstraction(at, x, l),
            ExprKind::Dual(x, l, z) => self.dual_elem(at, e, x, l, z),
            ExprKind::Pullback(f, z) => self.pullback_elem(at, f, z),
            ExprKind::App(..) => self.application_elem(at, e),
            ExprKind::Bin(BinOp::Oplus, a, da) => Ok(match update_term(a, &at.prim(da)) {
                // (⊕) ext: the update the change's value selects, then rules 9, 10, 15 on it.
                Some(t) => Elem::Rewrite { label: "⊕".into(), series: self.anormalise(&t) },
                None => Elem::Stuck,
            }),
            _ => Ok(Elem::Stuck),
        }
    }

    /// The tangent of a tuple of atoms (nested tuples allowed).
    fn tangent_tree(&self, at: &At, e: &E) -> E {
        match &e.kind {
            ExprKind::Tuple(xs) => {
                let ts = xs.iter().map(|x| self.tangent_tree(at, x)).collect();
                Expr::new(ExprKind::Tuple(ts), e.span, e.ty.clone())
            }
            _ => at.tan(e),
        }
    }

    /// (15): `f(a₁, …, aₙ)` for a function symbol.
    fn function_symbol(&mut self, at: &At, e: &E, sym: Sym, args: &[E]) -> R<Elem> {
        let ts: Vec<E> = args.iter().map(|a| at.tan(a)).collect();
        if ts.iter().all(is_zero) {
            return Ok(Elem::Zero { primal: at.primal(e) });
        }
        let ps: Vec<E> = args.iter().map(|a| at.prim(a)).collect();
        let (t, p) = if args.len() == 1 { (ts[0].clone(), ps[0].clone()) } else { (tuple(ts), tuple(ps)) };
        Ok(Elem::Jac { label: "15".into(), s: app(&jac(sym.term(), t), p), primal: at.primal(e) })
    }

    /// Reduces `((Ω λy. l)·ω′) V` with a fresh 1-form `ω′`, the premise of `rule`.
    fn premise_of(&mut self, rule: &str, y: &Rc<Pat>, l: &E, v: &E) -> R<Premise> {
        let w_ty = Type::omega(l.ty.clone());
        let (_, w) = fresh_var("ω′", &w_ty);
        let start = app(&pullback(lam(y.clone(), l.clone()), w.clone()), v.clone());
        let r = self.premise(rule, &start)?;
        Ok(match &r.kind {
            ExprKind::Zero => Premise::Zero,
            ExprKind::Dual(q, s, arg) => match &arg.kind {
                ExprKind::App(f, _) if same(f, &w) => Premise::Dual(q.clone(), s.clone()),
                _ => Premise::Stuck(r.clone()),
            },
            _ => Premise::Stuck(r.clone()),
        })
    }

    /// `(J f · t) p` written as a term: a primitive's derivative, or the Jacobian `S` of the premise
    /// `((Ω f)·ω′) p →* (λv. S)*·(ω′ P)` with `t` for `v`. `None` if the premise is stuck.
    pub(super) fn jvp_term(&mut self, f: &E, p: &E, t: &E) -> R<Option<E>> {
        if let Some(d) = self.symbol_of(f).derivative_term(p, t) {
            return Ok(Some(d));
        }
        let g = match &f.kind {
            ExprKind::Var(_, VarRef::Global(d)) => self.unfold(*d)?,
            ExprKind::Lam(..) => f.clone(),
            _ if is_function_value(f) => eta(f),
            // An unknown function's Jacobian is J z itself.
            _ => return Ok(None),
        };
        let ExprKind::Lam(q, body) = &g.kind else { return Ok(None) };
        Ok(match self.premise_of("J", q, body, p)? {
            Premise::Dual(q2, s) => Some(instantiate(&q2, &s, t)),
            Premise::Zero => Some(zero(&body.ty)),
            Premise::Stuck(_) => None,
        })
    }

    /// A premise's Jacobian `S` in terms of this redex's tangent pattern, or `fallback` (with a
    /// note in the trace) when the premise is stuck.
    fn jacobian_from(&mut self, at: &At, premise: Premise, fallback: E) -> E {
        match premise {
            Premise::Dual(q, s) => instantiate(&q, &s, &at.tterm),
            Premise::Zero => zero(&fallback.ty),
            Premise::Stuck(r) => {
                let text =
                    format!("  (the premise stopped at {}; its Jacobian stays J h · v)", print::abbreviated(&r, 200));
                self.note(&text);
                fallback
            }
        }
    }

    /// `(J (λy. l) · v) V`: the Jacobian of `λy. l` at the point, kept as a J term.
    fn deferred(&self, at: &At, l: &E) -> E {
        app(&jac(lam(at.y.clone(), l.clone()), at.tterm.clone()), at.v.clone())
    }

    /// (18) `λx. L`: by the D-curry rule its Jacobian is `λx. S`, `λv. S` the Jacobian of `λy. L`.
    fn abstraction(&mut self, at: &At, x: &Rc<Pat>, l: &E) -> R<Elem> {
        let (x2, l2) = rename_binder(x, l);
        let premise = self.premise_of("18", &at.y, &l2, &at.v)?;
        let fallback = self.deferred(at, &l2);
        let s = self.jacobian_from(at, premise, fallback);
        Ok(Elem::Jac { label: "18".into(), s: lam(x2.clone(), s), primal: lam(x2, at.primal(&l2)) })
    }

    /// (16a–c) the dual map `(λx. L)*·z`.
    fn dual_elem(&mut self, at: &At, e: &E, x: &Rc<Pat>, l: &E, z: &E) -> R<Elem> {
        let body_dep = mentions_any(&lam(x.clone(), l.clone()), &at.ids);
        let zdep = at.dep(z);
        if !body_dep {
            // (16a) y ∉ FV(λx. L): linear in z.
            return Ok(Elem::Jac {
                label: "16a".into(),
                s: dual(x.clone(), l.clone(), at.tan(z)),
                primal: at.primal(e),
            });
        }
        let (x2, l2) = rename_binder(x, l);
        let rule = if zdep { "16c" } else { "16b" };
        let premise = self.premise_of(rule, &at.y, &l2, &at.v)?;
        let fallback = self.deferred(at, &l2);
        let sl = self.jacobian_from(at, premise, fallback);
        let l_at = at.primal(&l2);
        let primal = dual(x2.clone(), l_at.clone(), at.prim(z));
        if !zdep {
            // (16b) (λv. (λx. S)*·z)*·(ω ((λx. L[V/y])*·z))
            if is_zero(&sl) {
                return Ok(Elem::Zero { primal });
            }
            return Ok(Elem::Jac { label: rule.into(), s: dual(x2, sl, at.prim(z)), primal });
        }
        // (16c) (λv. (λx. L[V/y])*·vᵢ + (λx. S)*·Vᵢ)*·(ω ((λx. L[V/y])*·Vᵢ))
        let first = dual(x2.clone(), l_at, at.tan(z));
        let s = if is_zero(&sl) {
            first
        } else {
            mk(ExprKind::Sum(first, dual(x2, sl, at.prim(z))), Type::dual(x.ty.clone()))
        };
        Ok(Elem::Jac { label: rule.into(), s, primal })
    }

    /// (17) the pullback `(Ω λx. L)·z` becomes the abstraction `λa. (λv. S)*·(z P)`.
    fn pullback_elem(&mut self, at: &At, f: &E, z: &E) -> R<Elem> {
        let ExprKind::Lam(..) = &f.kind else {
            // A named function or a variable: make it a λ first.
            let (label, g) = match &f.kind {
                ExprKind::Var(_, VarRef::Global(d)) => ("δ", self.unfold(*d)?),
                _ => ("η", eta(f)),
            };
            let e2 = pullback(g, z.clone());
            return Ok(Elem::Rewrite { label: label.into(), series: self.anormalise(&e2) });
        };
        let (pa, a) = fresh_var("a", &argument_of(&f.ty));
        let start = app(&pullback(f.clone(), z.clone()), a.clone());
        let r = self.premise("17", &start)?;
        if is_zero(&r) || matches!(r.kind, ExprKind::Dual(..)) && !has_stuck_pullback(&r) {
            let e2 = lam(pa, r);
            return Ok(Elem::Rewrite { label: "17".into(), series: self.anormalise(&e2) });
        }
        // The premise stopped (the fresh point `a` has no shape, so `map`, `fold`, … over it cannot
        // unfold). A λ already of the form `λa. g a` has nothing left to name: rule 17 does not apply.
        if let ExprKind::Lam(q, body) = &f.kind {
            if let ExprKind::App(g, x) = &body.kind {
                if At::var_id(g).is_some()
                    && matches!(&x.kind, ExprKind::Var(_, VarRef::Local(id)) if binds(q).contains(id))
                {
                    return Err(self.error(&format!(
                        "rule 17 is stuck: the nested pullback reduced to {}, not to a dual map",
                        print::abbreviated(&r, 200)
                    )));
                }
            }
        }
        // (A) name the λ, `let g = λx. L in (Ω g)·z`: its Jacobian in the premise is then `J g` (15,
        // a function not depending on `a`), which rule J takes at each concrete point's shape.
        self.note("  (rule 17's premise stopped at a point of unknown shape: the function is named first)");
        let (pg, g) = fresh_var("g", &f.ty);
        let ty = Type::omega(argument_of(&f.ty));
        let named = mk(ExprKind::Let(pg, f.clone(), pullback(g, z.clone())), ty);
        let _ = at;
        Ok(Elem::Rewrite { label: "A".into(), series: self.anormalise(&named) })
    }

    /// (if) and (if′).
    fn conditional(&mut self, at: &At, e: &E, c: &E, l1: &E, l2: &E) -> R<Elem> {
        let cv = at.prim(c);
        match &cv.kind {
            ExprKind::Lit(Lit::Bool(b)) => {
                Ok(Elem::Rewrite { label: "if".into(), series: if *b { l1.clone() } else { l2.clone() } })
            }
            _ => {
                let p1 = self.premise_of("if′", &at.y, l1, &at.v)?;
                let p2 = self.premise_of("if′", &at.y, l2, &at.v)?;
                let (f1, f2) = (self.deferred(at, l1), self.deferred(at, l2));
                let s1 = self.jacobian_from(at, p1, f1);
                let s2 = self.jacobian_from(at, p2, f2);
                let s = mk(ExprKind::If(cv, s1, s2), e.ty.clone());
                Ok(Elem::Jac { label: "if′".into(), s, primal: at.primal(e) })
            }
        }
    }

    /// Applications: function symbols (15), builtins, and `z z` (19).
    fn application_elem(&mut self, at: &At, e: &E) -> R<Elem> {
        let (head, args) = spine(e);
        let rewrite =
            |red: &mut Self, label: &str, t: &E| Ok(Elem::Rewrite { label: label.into(), series: red.anormalise(t) });
        if let Some(b) = builtin_head(&head) {
            if args.len() < b.arity() {
                // A partially applied builtin is a function: λa. b … a.
                return rewrite(self, "η", &eta(e));
            }
            use Builtin as B;
            return match b {
                _ if is_prim(b) => self.function_symbol(at, e, Sym::Prim(b, head.ty.clone()), &args),
                // (A) J's function written as a λ that depends on y: name it, so that rule 18 gives
                // its tangent and rules 14 and J see a variable of y.
                B::Jac if At::var_id(&args[0]).is_none() && mentions_any(&args[0], &at.ids) => {
                    let (pg, g) = fresh_var("g", &args[0].ty);
                    let t =
                        mk(ExprKind::Let(pg, args[0].clone(), app_n(&app(&head, g), args[1..].to_vec())), e.ty.clone());
                    rewrite(self, "A", &t)
                }
                // (14) J f · yᵢ ↦ J f · vᵢ; J is linear in f too, so a function that depends on y
                // adds J v_f · Vᵢ.
                B::Jac if args.len() == 2 => {
                    let f = at.prim(&args[0]);
                    let mut s = jac(f.clone(), at.tan(&args[1]));
                    if at.dep(&args[0]) {
                        s = mk(ExprKind::Sum(s, jac(at.tan(&args[0]), at.prim(&args[1]))), e.ty.clone());
                    }
                    Ok(Elem::Jac { label: "14".into(), s, primal: jac(f, at.prim(&args[1])) })
                }
                // (J) (J f · t) p: with f fixed, the derivative of f written as a term, along which the
                // pullback continues; with f depending on y, J v_f · T at P plus the Jacobian of
                // ⟨t, p⟩ ↦ (J f · t) p, kept as a J term.
                B::Jac => {
                    let f = at.prim(&args[0]);
                    if is_zero(&f) && !at.dep(&args[0]) {
                        return Ok(Elem::Zero { primal: at.primal(e) });
                    }
                    if !at.dep(&args[0]) && matches!(self.symbol_of(&f), Sym::Index(_) | Sym::Prim(B::Sum, _)) {
                        // (14) ext: (J f · t) p for f = (.[]) or sum is linear in t and depends on p only
                        // through its length (discrete): J f · t′ at P, which keeps the length for
                        // reduction 5 (the derivative as a term, t.[i] or sum t, would lose it).
                        let (t, p) = (&args[1], &args[2]);
                        if is_zero(&at.tan(t)) && !matches!(t.kind, ExprKind::Tuple(_)) {
                            return Ok(Elem::Zero { primal: at.primal(e) });
                        }
                        let s = app(&jac(f.clone(), self.tangent_tree(at, t)), at.prim(p));
                        return Ok(Elem::Jac { label: "14".into(), s, primal: at.primal(e) });
                    }
                    if !at.dep(&args[0]) {
                        // The point's arrays have the lengths they have at V (locally constant).
                        let p = at.shaped(&args[2]);
                        return match self.jvp_term(&f, &p, &args[1])? {
                            Some(d) => rewrite(self, "J", &d),
                            None => Ok(Elem::Stuck),
                        };
                    }
                    let (t, p) = (at.prim(&args[1]), at.prim(&args[2]));
                    let own = app(&jac(at.tan(&args[0]), t.clone()), p.clone());
                    let (pq, q) = fresh_var("q", &Type::tuple(vec![t.ty.clone(), p.ty.clone()]));
                    let inner = lam(pq, app(&jac(f.clone(), proj(&q, 0)), proj(&q, 1)));
                    let rest = app(&jac(inner, tuple(vec![at.tan(&args[1]), at.tan(&args[2])])), tuple(vec![t, p]));
                    let s = mk(ExprKind::Sum(own, rest), e.ty.clone());
                    Ok(Elem::Jac { label: "J".into(), s, primal: at.primal(e) })
                }
                // (lin) star, unstar and `(Ω r) x = r*` are linear.
                B::Star | B::Unstar => {
                    let s = app(&head, at.tan(&args[0]));
                    let s = if is_zero(&at.tan(&args[0])) { zero(&e.ty) } else { s };
                    Ok(Elem::Jac { label: "lin".into(), s, primal: at.primal(e) })
                }
                B::Omega => {
                    let t = at.tan(&args[0]);
                    let s = if is_zero(&t) { zero(&e.ty) } else { star(t) };
                    Ok(Elem::Jac { label: "lin".into(), s, primal: at.primal(e) })
                }
                B::Map | B::ZipWith | B::Build | B::Fold | B::Iterate | B::While => self.unfold_at(at, e, b, &args),
                B::Grad | B::Vjp => {
                    let c = if b == B::Grad { real(1.0) } else { args[2].clone() };
                    let u = self.unstarred_pullback(&args[0], c, &args[1]);
                    rewrite(self, b.name(), &u)
                }
                B::Jacobian => {
                    let y = self.quietly(|r| r.eval(&app(&at.prim(&args[0]), at.prim(&args[1]))))?;
                    let ExprKind::Array(ys) = &y.kind else { return Ok(Elem::Stuck) };
                    let ty = argument_of(&args[0].ty);
                    let rows = (0..ys.len())
                        .map(|p| {
                            let ep = super::vector::one_hot(ys.len(), p, &real(1.0), &y.ty);
                            let ep = super::vector::materialise(&ep, &y);
                            let d = app(&pullback(args[0].clone(), omega(ep)), args[1].clone());
                            app(&builtin(B::Unstar, Type::fun(Type::dual(ty.clone()), ty.clone())), d)
                        })
                        .collect();
                    rewrite(self, "jacobian", &mk(ExprKind::Array(rows), e.ty.clone()))
                }
                // (9) on the arguments: a primitive whose arguments all have the zero tangent (discrete
                // ones: a map's `lookup` with a Real in its value) has the zero tangent too.
                _ if args.iter().all(|a| is_zero(&at.tan(a))) => Ok(Elem::Zero { primal: at.primal(e) }),
                _ => {
                    self.note(&format!("  (no pullback rule for `{}` with a continuous result)", b.name()));
                    Ok(Elem::Stuck)
                }
            };
        }
        if let ExprKind::Var(_, VarRef::Global(d)) = &head.kind {
            if self.is_symbol(*d) && args.len() == 1 {
                return self.function_symbol(at, e, Sym::Global(head.clone()), &args);
            }
            // A higher-order definition is a value like any other: name it, then apply it.
            let (pg, g) = fresh_var("g", &head.ty);
            let t = mk(ExprKind::Let(pg, head.clone(), app_n(&g, args.clone())), e.ty.clone());
            return rewrite(self, "A", &t);
        }
        let [a] = args.as_slice() else { return Ok(Elem::Stuck) };
        let f = &head;
        if matches!(f.ty, Type::Dual(_)) {
            return Ok(self.dual_application(at, e, f, a));
        }
        if !at.dep(f) {
            // (15) ext: a function not depending on y, applied to yᵢ: its Jacobian is J z.
            if is_zero(&at.tan(a)) {
                return Ok(Elem::Zero { primal: at.primal(e) });
            }
            return self.function_symbol(at, e, Sym::Fun(at.prim(f)), std::slice::from_ref(a));
        }
        let fv = at.prim(f);
        let av = at.prim(a);
        let own = app(&at.tan(f), av.clone());
        if is_zero(&at.tan(a)) {
            // (19a) (λv. vᵢ z)*·(ω (Vᵢ z))
            return Ok(Elem::Jac { label: "19a".into(), s: own, primal: app(&fv, av) });
        }
        // (19b/c) by the D-eval rule: (λv. vᵢ Vⱼ + S′[vⱼ/v′])*·(ω (Vᵢ Vⱼ)).
        if is_zero(&fv) {
            // The zero function is constant: (19c).
            return Ok(Elem::Jac { label: "19c".into(), s: own, primal: zero(&e.ty) });
        }
        let g = match &fv.kind {
            ExprKind::Lam(..) => fv.clone(),
            // (19b) ext: a function chosen by an `if` whose condition the point leaves symbolic
            // (a nested premise): `λq. if c then l₁ q else l₂ q`, the application pushed into the
            // branches, whose premise rule if′ differentiates.
            ExprKind::If(c, l1, l2) => {
                let (pq, q) = fresh_var("q", &argument_of(&fv.ty));
                lam(pq, mk(ExprKind::If(c.clone(), app(l1, q.clone()), app(l2, q)), e.ty.clone()))
            }
            _ if is_function_value(&fv) => eta(&fv),
            _ => return Ok(Elem::Stuck), // Remark 3.6, value 2
        };
        let ExprKind::Lam(q, body) = &g.kind else { return Ok(Elem::Stuck) };
        let premise = self.premise_of("19b", q, body, &av)?;
        let ta = at.tan(a);
        let (rule, s) = match premise {
            Premise::Zero => ("19c", own),
            Premise::Dual(q2, s2) => ("19b", mk(ExprKind::Sum(own, instantiate(&q2, &s2, &ta)), e.ty.clone())),
            Premise::Stuck(r) => {
                let text =
                    format!("  (the premise stopped at {}; its Jacobian stays J h · v)", print::abbreviated(&r, 200));
                self.note(&text);
                ("19b", mk(ExprKind::Sum(own, app(&jac(g.clone(), ta), av.clone())), e.ty.clone()))
            }
        };
        Ok(Elem::Jac { label: rule.into(), s, primal: app(&fv, av) })
    }

    /// (lin) `f a` with `f` of a dual type: a dual is linear (Lemma 4.4(2)) and applying it to a
    /// tangent is the pairing `r* V → ⟨r, V⟩`, bilinear, so its Jacobian is `vᵢ Vⱼ + Vᵢ vⱼ` (the
    /// D-eval rule with the dual as its own Jacobian). Rule 19b would η-expand the dual to
    /// `λa. Vᵢ a`, whose premise meets `Vᵢ a` again (once its A-normal form names `Vᵢ`): no end.
    fn dual_application(&self, at: &At, e: &E, f: &E, a: &E) -> Elem {
        let (fv, av) = (at.prim(f), at.prim(a));
        let (tf, ta) = (at.tan(f), at.tan(a));
        let own = (!is_zero(&tf)).then(|| app(&tf, av.clone()));
        let arg = (!is_zero(&ta)).then(|| app(&fv, ta));
        let primal = app(&fv, av);
        let s = match (own, arg) {
            (None, None) => return Elem::Zero { primal },
            (Some(s), None) | (None, Some(s)) => s,
            (Some(s1), Some(s2)) => mk(ExprKind::Sum(s1, s2), e.ty.clone()),
        };
        Elem::Jac { label: "lin".into(), s, primal }
    }

    /// (map), (zipWith), (build), (fold), (iterate): the applications the primitive performs at the
    /// point, as a let-series over the same variables.
    fn unfold_at(&mut self, at: &At, e: &E, b: Builtin, args: &[E]) -> R<Elem> {
        let len = |x: &E| match &at.prim(x).kind {
            ExprKind::Array(xs) => Some(xs.len()),
            _ => None,
        };
        let count = |x: &E| match &at.prim(x).kind {
            ExprKind::Lit(Lit::Int(n)) if *n >= 0 => Some(*n as usize),
            _ => None,
        };
        let elem = |xs: &E, i: usize| {
            let ty = match &xs.ty {
                Type::Array(t) => (**t).clone(),
                _ => Type::Unit,
            };
            mk(ExprKind::Index(xs.clone(), int(i as i64)), ty)
        };
        use Builtin as B;
        // A negative size is the primal's error, located at the builtin as the forward evaluation
        // and compiled code report it (else the unfolding would be stuck).
        if let (B::Build | B::Iterate, ExprKind::Lit(Lit::Int(n))) = (b, &at.prim(&args[0]).kind) {
            if *n < 0 {
                let msg = if b == B::Build {
                    format!("build: negative array size {n}")
                } else {
                    format!("iterate: negative count {n}")
                };
                return Err(self.error_at(e, msg));
            }
        }
        let term = match b {
            // (map) map f xs ↦ [f xs.[0], …, f xs.[n-1]], n = len xs at the point.
            B::Map => len(&args[1])
                .map(|n| mk(ExprKind::Array((0..n).map(|i| app(&args[0], elem(&args[1], i))).collect()), e.ty.clone())),
            // (zipWith) zipWith f xs ys ↦ [f xs.[0] ys.[0], …, f xs.[n-1] ys.[n-1]].
            B::ZipWith => match (len(&args[1]), len(&args[2])) {
                (Some(n), Some(m)) if n == m => Some(mk(
                    ExprKind::Array(
                        (0..n).map(|i| app_n(&args[0], vec![elem(&args[1], i), elem(&args[2], i)])).collect(),
                    ),
                    e.ty.clone(),
                )),
                (Some(n), Some(m)) => {
                    // Located at the `zipWith`, as the forward evaluation and compiled code report it.
                    return Err(self.error_at(e, format!("zipWith: arrays have different lengths {n} and {m}")));
                }
                _ => None,
            },
            // (build) build n f ↦ [f 0, …, f (n-1)], n its value at the point.
            B::Build => count(&args[0])
                .map(|n| mk(ExprKind::Array((0..n).map(|i| app(&args[1], int(i as i64))).collect()), e.ty.clone())),
            // (fold) fold f b xs ↦ f (… (f b xs.[0]) …) xs.[n-1].
            B::Fold => len(&args[2])
                .map(|n| (0..n).fold(args[1].clone(), |acc, i| app_n(&args[0], vec![acc, elem(&args[2], i)]))),
            // (iterate) iterate n f x ↦ f (… (f x)), n applications.
            B::Iterate => count(&args[0]).map(|n| (0..n).fold(args[2].clone(), |x, _| app(&args[1], x))),
            // (while) while p f x ↦ f (… (f x)), n applications, n the iterations taken at the point.
            B::While => self
                .iterations(&at.prim(&args[0]), &at.prim(&args[1]), at.prim(&args[2]))?
                .map(|n| (0..n).fold(args[2].clone(), |x, _| app(&args[1], x))),
            _ => None,
        };
        match term {
            Some(t) => Ok(Elem::Rewrite { label: b.name().into(), series: self.anormalise(&t) }),
            None => {
                let what = if b == Builtin::While { "iteration count" } else { "size" };
                self.note(&format!("  (`{}` cannot unfold: its {what} is not known at this point)", b.name()));
                Ok(Elem::Stuck)
            }
        }
    }
}

impl Reducer<'_, '_> {
    /// How many times `while p f x` applies `f`, `p`, `f` and `x` being values at the point: the
    /// loop run there (not traced). `None` when a condition is not a literal (a symbolic point).
    fn iterations(&mut self, p: &E, f: &E, x: E) -> R<Option<usize>> {
        let mut x = x;
        let mut n = 0usize;
        loop {
            let c = self.quietly(|r| r.eval(&app(p, x.clone())))?;
            match &c.kind {
                ExprKind::Lit(Lit::Bool(true)) => {
                    x = self.quietly(|r| r.eval(&app(f, x.clone())))?;
                    n += 1;
                }
                ExprKind::Lit(Lit::Bool(false)) => return Ok(Some(n)),
                _ => return Ok(None),
            }
        }
    }
}

/// Does `e` hold a pullback applied to a point that did not reduce (a premise that stopped)?
fn has_stuck_pullback(e: &E) -> bool {
    let mut found = false;
    let mut seen = FxHashSet::default();
    fn go(e: &E, found: &mut bool, seen: &mut FxHashSet<*const Expr>) {
        if *found || !seen.insert(Rc::as_ptr(e)) {
            return;
        }
        if let ExprKind::App(f, _) = &e.kind {
            if matches!(f.kind, ExprKind::Pullback(..)) {
                *found = true;
                return;
            }
        }
        frontend::lin::for_each_child(e, &mut |c| go(c, found, seen));
    }
    go(e, &mut found, &mut seen);
    found
}

/// A copy of `λx. l` with fresh binders (so `x ∉ FV(V)`, as rules 16 and 18 require).
fn rename_binder(x: &Rc<Pat>, l: &E) -> (Rc<Pat>, E) {
    let mut s = FxHashMap::default();
    fn go(p: &Pat, s: &mut FxHashMap<LocalId, E>) -> Pat {
        let kind = match &p.kind {
            PatKind::Var(n, id) => {
                let nid = fresh_id();
                s.insert(*id, var(n.clone(), nid, &p.ty));
                PatKind::Var(n.clone(), nid)
            }
            PatKind::Tuple(ps) => PatKind::Tuple(ps.iter().map(|q| go(q, s)).collect()),
            k => k.clone(),
        };
        Pat { kind, span: p.span, ty: p.ty.clone(), ann: None }
    }
    let x2 = Rc::new(go(x, &mut s));
    (x2, subst(l, &s))
}

/// The let-series `L` with its result `x` replaced by `f(x)`: `let …; x = E; r = f(x) in r`.
fn append_tail(series: &E, name: &str, f: &dyn Fn(E) -> E) -> E {
    match &series.kind {
        ExprKind::Let(p, rhs, rest) => {
            let rest2 = match &rest.kind {
                ExprKind::Var(_, VarRef::Local(id)) if binds(p).contains(id) => {
                    let fx = f(rest.clone());
                    let (pr, r) = fresh_var(name, &fx.ty);
                    mk(ExprKind::Let(pr, fx, r.clone()), r.ty.clone())
                }
                _ => append_tail(rest, name, f),
            };
            mk(ExprKind::Let(p.clone(), rhs.clone(), rest2.clone()), rest2.ty.clone())
        }
        _ => {
            let fx = f(series.clone());
            let (pr, r) = fresh_var(name, &fx.ty);
            mk(ExprKind::Let(pr, fx, r.clone()), r.ty.clone())
        }
    }
}

trait CloneWith {
    fn clone_with(&self, a: E, b: E) -> ExprKind;
}

impl CloneWith for ExprKind {
    /// The same binary node with new operands.
    fn clone_with(&self, a: E, b: E) -> ExprKind {
        match self {
            ExprKind::Bin(op, ..) => ExprKind::Bin(*op, a, b),
            _ => ExprKind::Sum(a, b),
        }
    }
}

/// Rule (⊕) ext: `a ⊕ da` at a continuous type is, near the point, the update `d` (the value of
/// `da` there) selects, written as a term in `a`. A change has a discrete type, so `d` is
/// constant near the point (as `if`'s condition and `while`'s count are): `replace v` gives `v`;
/// `gchange g dv` gives `g`'s operation on `a` and `dv` (`a + dv` for `realGroup`, `op a dv`
/// for `group op inverse zero`: `gchange` takes base types only); a tuple of changes updates
/// componentwise. `None` for a change the reducer cannot see (not a value at the point).
fn update_term(a: &E, d: &E) -> Option<E> {
    match &d.kind {
        ExprKind::Tuple(ds) => {
            let parts =
                ds.iter().enumerate().map(|(i, di)| update_term(&proj(a, i), di)).collect::<Option<Vec<E>>>()?;
            Some(tuple(parts))
        }
        ExprKind::App(..) => {
            let (head, args) = spine(d);
            match (builtin_head(&head)?, args.as_slice()) {
                (Builtin::Replace, [v]) => Some(v.clone()),
                (Builtin::GChange, [g, dv]) => group_update(g, a, dv),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `a ⊕ gchange g dv`: the operation of the group value `g` on `a` and `dv`.
fn group_update(g: &E, a: &E, dv: &E) -> Option<E> {
    let (head, args) = spine(g);
    match (builtin_head(&head)?, args.as_slice()) {
        (Builtin::RealGroup | Builtin::IntGroup, []) => {
            Some(mk(ExprKind::Bin(BinOp::Add, a.clone(), dv.clone()), a.ty.clone()))
        }
        (Builtin::MkGroup, [op, _, _]) => Some(app_n(op, vec![a.clone(), dv.clone()])),
        _ => None,
    }
}
