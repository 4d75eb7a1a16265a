//! The plugin (ILC Sec. 3.7): each primitive's derivative, the nil-change specialisations that make
//! the collection primitives self-maintainable (ILC Sec. 4.3–4.4), the base arguments each
//! derivative primitive never reads on group changes, and the canonical groups of base types.
//!
//! The derivative primitives are internal builtins evaluated by the runtime
//! (`runtime::interp::incremental`); this table says which one stands for which primitive.

use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::Span;

use super::term::*;

/// `Derive(c)` for a builtin `c` at its monomorphic type `ty` (ILC Fig. 4g: Derive(c) = ...).
pub fn derive_builtin(b: Builtin, ty: &Type, span: Span) -> E {
    let own = match b {
        // ILC Sec. 3.7: Derive(merge) = λu du v dv. merge du dv (on bag-group changes).
        Builtin::Merge => Some(Builtin::DMerge),
        // ILC Sec. 4.4: negate is the bag group's inverse, a homomorphism: the negated change.
        Builtin::Negate => Some(Builtin::DNegate),
        // ILC Sec. 4.4: singleton builds a bag; its change is {x ⊕ dx} minus {x}.
        Builtin::Singleton => Some(Builtin::DSingleton),
        // ILC Sec. 2.1: negation is the integers' group inverse.
        Builtin::Neg => Some(Builtin::DNeg),
        _ => None,
    };
    match own {
        Some(d) => builtin(d, Type::delta(ty), span),
        // ILC Sec. 3.2: Derive(c) = c ⊖ c = 0_c, the nil change (Theorem 2.10: it is c's derivative).
        // The nil-change pass replaces it by a specialised derivative where one applies.
        None => nil(builtin(b, ty.clone(), span), span),
    }
}

/// Does `Derive(b a1 ... ak)`, with the `ak`s fixed (nil changes), have a better derivative than
/// recomputation? (The runtime asks before deriving a partial application of `b`.)
pub fn has_efficient_derivative(b: Builtin, fixed_args: usize) -> bool {
    match b {
        Builtin::Merge | Builtin::Negate | Builtin::Singleton | Builtin::Neg => true,
        _ => specialisation(b).is_some_and(|sp| sp.nil_changes.iter().all(|i| *i < fixed_args)),
    }
}

/// `Derive(op)` for an arithmetic operator at operand type `ty`, when it has its own derivative.
pub fn derive_binop(op: BinOp, ty: &Type, span: Span) -> Option<E> {
    let d = match op {
        BinOp::Add => Builtin::DAdd,
        BinOp::Sub => Builtin::DSub,
        BinOp::Mul => Builtin::DMul,
        _ => return None,
    };
    if !matches!(ty, Type::Int | Type::Real) {
        return None;
    }
    Some(builtin(d, Type::delta(&Type::fun(ty.clone(), Type::fun(ty.clone(), ty.clone()))), span))
}

/// `Derive(-x)`: the derivative of negation at `ty`.
pub fn derive_neg(ty: &Type, span: Span) -> E {
    builtin(Builtin::DNeg, Type::delta(&Type::fun(ty.clone(), ty.clone())), span)
}

/// A derivative that applies when some arguments' changes are nil: `base`'s derivative with those
/// change arguments dropped (ILC Sec. 4.4: foldBag' when dG and df are nil).
#[derive(Clone, Copy, Debug)]
pub struct Special {
    pub deriv: Builtin,
    /// The base primitive's arity.
    pub arity: usize,
    /// Argument positions (0-based, of the base primitive) whose changes must be nil.
    pub nil_changes: &'static [usize],
}

pub fn specialisation(b: Builtin) -> Option<Special> {
    let (deriv, arity, nil_changes): (Builtin, usize, &'static [usize]) = match b {
        // ILC Sec. 4.4: foldBag' G dG f df zs dzs = GroupChange G (foldBag G f dzs) when dG, df are nil.
        Builtin::FoldBag => (Builtin::DFoldBag, 3, &[0, 1]),
        // mapBag, filterBag, flatMapBag are foldBag into bagGroup: homomorphisms for a fixed function.
        Builtin::MapBag => (Builtin::DMapBag, 2, &[0]),
        Builtin::FilterBag => (Builtin::DFilterBag, 2, &[0]),
        Builtin::FlatMapBag => (Builtin::DFlatMapBag, 2, &[0]),
        // foldMap g1 g2 f: a homomorphism from mapGroup g1 to g2 (the user's promise) for fixed f.
        Builtin::FoldMap => (Builtin::DFoldMap, 4, &[0, 1, 2]),
        // lookup g k: a homomorphism from mapGroup g to g for a fixed key.
        Builtin::Lookup => (Builtin::DLookup, 3, &[0, 1]),
        // singletonMap k: a homomorphism from g to mapGroup g for a fixed key.
        Builtin::SingletonMap => (Builtin::DSingletonMap, 2, &[0]),
        _ => return None,
    };
    Some(Special { deriv, arity, nil_changes })
}

/// The type of a specialised derivative, from the base primitive's monomorphic type.
pub fn specialised_type(base_ty: &Type, sp: &Special) -> Type {
    let (args, res) = arrows(base_ty, sp.arity);
    let mut params = Vec::new();
    for (i, a) in args.iter().enumerate() {
        params.push(a.clone());
        if !sp.nil_changes.contains(&i) {
            params.push(Type::delta(a));
        }
    }
    params.into_iter().rev().fold(Type::delta(&res), |r, a| Type::fun(a, r))
}

/// Argument positions of a derivative primitive that its fast path (changes in the expected group,
/// or whole replacements where no other base is needed) never reads. Dead-code elimination puts `_`
/// there; the runtime reports that it needs the base if a change falls outside the fast path.
pub fn unread_args(d: Builtin) -> &'static [usize] {
    match d {
        Builtin::DMerge | Builtin::DAdd | Builtin::DSub => &[0, 2],
        Builtin::DNegate | Builtin::DNeg => &[0],
        Builtin::DFoldBag => &[2],
        Builtin::DMapBag | Builtin::DFilterBag | Builtin::DFlatMapBag => &[1],
        Builtin::DSingletonMap => &[1],
        Builtin::DFoldMap => &[3],
        Builtin::DLookup => &[2],
        _ => &[],
    }
}

/// Why a derivative primitive in a position that reads a base value is not self-maintainable.
pub fn describe_read(head: &E) -> String {
    match &head.kind {
        ExprKind::App(f, c) if matches!(f.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))) => match &c.kind {
            ExprKind::Var(_, VarRef::Builtin(b)) if specialisation(*b).is_some() => format!(
                "`{}` has a self-maintainable derivative only while its function and group arguments do not \
                 change; here they may, so its derivative recomputes it",
                b.name()
            ),
            ExprKind::Var(_, VarRef::Builtin(b)) => {
                format!("`{}` has no efficient derivative: its derivative recomputes it", b.name())
            }
            _ => "a nil change that reads its base value".to_string(),
        },
        ExprKind::Var(_, VarRef::Builtin(Builtin::DMul)) => "`*` reads its operands".to_string(),
        ExprKind::Var(_, VarRef::Builtin(Builtin::DSingleton)) => "`singleton` reads its element".to_string(),
        ExprKind::Var(_, VarRef::Builtin(b)) if b.is_internal() => format!("`{}` reads this argument", b.name()),
        ExprKind::Var(_, VarRef::Builtin(Builtin::Nil)) => {
            "the nil change of a value without a group is `replace` of the value".to_string()
        }
        ExprKind::Derive(_) => "the derivative of a definition that was not inlined reads its arguments".to_string(),
        _ => "a function change is applied to this base value".to_string(),
    }
}

/// The canonical group of a base type (docs/language.md §6: `b <-> a` is a group change there), as a term.
pub fn canonical_group(ty: &Type, span: Span) -> Option<E> {
    Some(match ty {
        Type::Int => builtin(Builtin::IntGroup, Type::Group(ty.clone().into()), span),
        Type::Real => builtin(Builtin::RealGroup, Type::Group(ty.clone().into()), span),
        Type::Bag(_) => builtin(Builtin::BagGroup, Type::Group(ty.clone().into()), span),
        Type::Map(_, v) => {
            let gv = canonical_group(v, span)?;
            let f = builtin(Builtin::MapGroup, Type::fun(gv.ty.clone(), Type::Group(ty.clone().into())), span);
            app(f, gv, span)
        }
        Type::Tuple(ts) if ts.len() == 2 => {
            let g1 = canonical_group(&ts[0], span)?;
            let g2 = canonical_group(&ts[1], span)?;
            let gty = Type::Group(ty.clone().into());
            let f = builtin(Builtin::PairGroup, Type::fun(g1.ty.clone(), Type::fun(g2.ty.clone(), gty)), span);
            app_n(f, [g1, g2], span)
        }
        _ => return None,
    })
}

/// The zero of the canonical group of `ty`, as a term.
pub fn canonical_zero(ty: &Type, span: Span) -> Option<E> {
    Some(match ty {
        Type::Int => Expr::new(ExprKind::Lit(Lit::Int(0)), span, Type::Int),
        Type::Real => Expr::new(ExprKind::Lit(Lit::Real(0.0)), span, Type::Real),
        Type::Bag(_) => builtin(Builtin::EmptyBag, ty.clone(), span),
        Type::Map(_, v) => {
            canonical_group(v, span)?;
            builtin(Builtin::EmptyMap, ty.clone(), span)
        }
        Type::Tuple(ts) if ts.len() == 2 => {
            let z1 = canonical_zero(&ts[0], span)?;
            let z2 = canonical_zero(&ts[1], span)?;
            Expr::new(ExprKind::Tuple(vec![z1, z2]), span, ty.clone())
        }
        _ => return None,
    })
}

/// The nil change of every value of a base type with a canonical group, `gchange g zero`: it does
/// not depend on the value, so it reads nothing.
pub fn nil_constant(ty: &Type, span: Span) -> Option<E> {
    if matches!(ty, Type::Tuple(_) | Type::Fun(..)) {
        return None;
    }
    let g = canonical_group(ty, span)?;
    let z = canonical_zero(ty, span)?;
    let f = builtin(Builtin::GChange, Type::fun(g.ty.clone(), Type::fun(ty.clone(), Type::delta(ty))), span);
    Some(app_n(f, [g, z], span))
}
