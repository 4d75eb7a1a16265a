//! Types of LANGUAGE.md §4, type-variable classes, type schemes and their printing.
//!
//! `Omega t` is not a constructor: it is `t -> Dual t` (the paper's Ω σ ≡ σ ⇒ σ*).
//! `Delta t` is kept in normal form (ILC Fig. 4): `Delta (s -> t) = s -> Delta s -> Delta t`,
//! `Delta (s * t) = Delta s * Delta t`; `Type::Delta` only ever wraps a base type or a type variable.

use std::fmt;
use std::rc::Rc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TyVar(pub u32);

#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    Real,
    Int,
    Bool,
    Unit,
    Var(TyVar),
    Array(Rc<Type>),
    Bag(Rc<Type>),
    Map(Rc<Type>, Rc<Type>),
    Group(Rc<Type>),
    Tuple(Rc<[Type]>),
    Fun(Rc<Type>, Rc<Type>),
    Dual(Rc<Type>),
    /// The change type of a base type or a type variable (see the module comment).
    Delta(Rc<Type>),
}

impl Type {
    pub fn fun(a: Type, b: Type) -> Type {
        Type::Fun(Rc::new(a), Rc::new(b))
    }
    pub fn array(a: Type) -> Type {
        Type::Array(Rc::new(a))
    }
    pub fn dual(a: Type) -> Type {
        Type::Dual(Rc::new(a))
    }
    pub fn tuple(ts: Vec<Type>) -> Type {
        Type::Tuple(ts.into())
    }
    /// `Omega t = t -> Dual t`.
    pub fn omega(t: Type) -> Type {
        Type::fun(t.clone(), Type::dual(t))
    }

    /// `Delta t` in normal form (ILC Fig. 4: Δ(σ → τ) = σ → Δσ → Δτ; products componentwise).
    pub fn delta(t: &Type) -> Type {
        match t {
            Type::Fun(a, b) => Type::fun((**a).clone(), Type::fun(Type::delta(a), Type::delta(b))),
            Type::Tuple(ts) => Type::Tuple(ts.iter().map(Type::delta).collect()),
            _ => Type::Delta(Rc::new(t.clone())),
        }
    }

    /// Is this type free of type variables?
    pub fn is_ground(&self) -> bool {
        let mut ground = true;
        self.visit(&mut |t| {
            if matches!(t, Type::Var(_)) {
                ground = false
            }
        });
        ground
    }

    /// Calls `f` on every sub-type, this one first.
    pub fn visit(&self, f: &mut impl FnMut(&Type)) {
        f(self);
        match self {
            Type::Real | Type::Int | Type::Bool | Type::Unit | Type::Var(_) => {}
            Type::Array(a) | Type::Bag(a) | Type::Group(a) | Type::Dual(a) | Type::Delta(a) => a.visit(f),
            Type::Map(a, b) | Type::Fun(a, b) => {
                a.visit(f);
                b.visit(f)
            }
            Type::Tuple(ts) => ts.iter().for_each(|t| t.visit(f)),
        }
    }

    /// Rebuilds the type bottom-up, replacing each variable by `f(v)` (or keeping it), and
    /// re-normalising `Delta` of whatever a variable became.
    pub fn map_vars(&self, f: &mut impl FnMut(TyVar) -> Option<Type>) -> Type {
        match self {
            Type::Real | Type::Int | Type::Bool | Type::Unit => self.clone(),
            Type::Var(v) => f(*v).unwrap_or_else(|| self.clone()),
            Type::Array(a) => Type::Array(Rc::new(a.map_vars(f))),
            Type::Bag(a) => Type::Bag(Rc::new(a.map_vars(f))),
            Type::Group(a) => Type::Group(Rc::new(a.map_vars(f))),
            Type::Dual(a) => Type::Dual(Rc::new(a.map_vars(f))),
            Type::Delta(a) => Type::delta(&a.map_vars(f)),
            Type::Map(a, b) => Type::Map(Rc::new(a.map_vars(f)), Rc::new(b.map_vars(f))),
            Type::Fun(a, b) => Type::Fun(Rc::new(a.map_vars(f)), Rc::new(b.map_vars(f))),
            Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| t.map_vars(f)).collect()),
        }
    }

    /// First-order data: no functions, duals, groups or changes inside.
    pub fn is_first_order(&self) -> bool {
        match self {
            Type::Real | Type::Int | Type::Bool | Type::Unit => true,
            Type::Array(a) | Type::Bag(a) => a.is_first_order(),
            Type::Map(a, b) => a.is_first_order() && b.is_first_order(),
            Type::Tuple(ts) => ts.iter().all(Type::is_first_order),
            Type::Var(_) => true,
            Type::Fun(..) | Type::Dual(_) | Type::Group(_) | Type::Delta(_) => false,
        }
    }

    /// Discrete types have the zero tangent space (LANGUAGE.md §5).
    pub fn is_discrete(&self) -> bool {
        match self {
            Type::Int | Type::Bool | Type::Unit | Type::Bag(_) | Type::Map(..) | Type::Group(_) | Type::Delta(_) => {
                true
            }
            Type::Tuple(ts) => ts.iter().all(Type::is_discrete),
            Type::Array(a) => a.is_discrete(),
            Type::Real | Type::Fun(..) | Type::Dual(_) | Type::Var(_) => false,
        }
    }

    pub fn fun_parts(&self) -> Option<(&Type, &Type)> {
        match self {
            Type::Fun(a, b) => Some((a, b)),
            _ => None,
        }
    }
}

/// Constraints a type variable can carry (LANGUAGE.md §3, §4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Classes(pub u8);

impl Classes {
    pub const NONE: Classes = Classes(0);
    /// `Int` or `Real`.
    pub const NUM: Classes = Classes(1);
    /// Comparable with `==`: `Int`, `Real`, `Bool`, `Unit`, bags, maps with comparable values, and
    /// tuples of them.
    pub const EQ: Classes = Classes(2);
    /// Bag elements and map keys: `Int`, `Bool`, `Unit` and tuples of them.
    pub const KEY: Classes = Classes(4);
    /// Not a function or tuple type: the types whose changes are `replace`/`gchange`.
    pub const BASE: Classes = Classes(8);
    /// First-order data (the argument of `star`, `omega`, `grad`, ...).
    pub const FO: Classes = Classes(16);

    pub fn contains(self, c: Classes) -> bool {
        self.0 & c.0 == c.0
    }
    pub fn union(self, c: Classes) -> Classes {
        Classes(self.0 | c.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Names for printing, e.g. `Num`.
    pub fn names(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (c, n) in [
            (Classes::NUM, "Num"),
            (Classes::EQ, "Eq"),
            (Classes::KEY, "Key"),
            (Classes::BASE, "Base"),
            (Classes::FO, "FirstOrder"),
        ] {
            if self.contains(c) {
                v.push(n);
            }
        }
        // Key implies Eq: print only the stronger one.
        if self.contains(Classes::KEY) {
            v.retain(|n| *n != "Eq");
        }
        v
    }
    pub fn describe(self) -> String {
        let mut parts = Vec::new();
        if self.contains(Classes::NUM) {
            parts.push("a numeric type (Int or Real)");
        }
        if self.contains(Classes::KEY) {
            parts.push("an equality type (Int, Bool, Unit or tuples of them)");
        } else if self.contains(Classes::EQ) {
            parts.push("a comparable type (Int, Real, Bool, Unit, bags, maps or tuples of them)");
        }
        if self.contains(Classes::BASE) {
            parts.push("a base type (not a function or tuple)");
        }
        if self.contains(Classes::FO) {
            parts.push("first-order data");
        }
        parts.join(" and ")
    }
}

/// A type scheme `∀ vars. ty`, each variable with its classes.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheme {
    pub vars: Vec<(TyVar, Classes)>,
    pub ty: Type,
}

impl Scheme {
    pub fn mono(ty: Type) -> Scheme {
        Scheme { vars: Vec::new(), ty }
    }
}

/// Prints types with variables named `'a`, `'b`, ... in order of first appearance.
pub struct TypePrinter {
    names: Vec<(TyVar, String)>,
}

impl Default for TypePrinter {
    fn default() -> Self {
        TypePrinter::new()
    }
}

impl TypePrinter {
    pub fn new() -> TypePrinter {
        TypePrinter { names: Vec::new() }
    }

    fn name(&mut self, v: TyVar) -> String {
        if let Some((_, n)) = self.names.iter().find(|(w, _)| *w == v) {
            return n.clone();
        }
        let i = self.names.len();
        let letter = (b'a' + (i % 26) as u8) as char;
        let n = if i < 26 { format!("'{letter}") } else { format!("'{letter}{}", i / 26) };
        self.names.push((v, n.clone()));
        n
    }

    pub fn ty(&mut self, t: &Type) -> String {
        let mut s = String::new();
        self.write(&mut s, t, 0);
        s
    }

    /// `Num 'a => 'a * 'a -> 'a` for constrained schemes.
    pub fn scheme(&mut self, s: &Scheme) -> String {
        let body = self.ty(&s.ty);
        let mut cons = Vec::new();
        for (v, c) in &s.vars {
            if c.is_empty() || !self.names.iter().any(|(w, _)| w == v) {
                continue;
            }
            let n = self.name(*v);
            for cn in c.names() {
                cons.push(format!("{cn} {n}"));
            }
        }
        match cons.len() {
            0 => body,
            1 => format!("{} => {}", cons[0], body),
            _ => format!("({}) => {}", cons.join(", "), body),
        }
    }

    // prec: 0 = top or arrow result, 1 = arrow argument, 2 = tuple component, 3 = constructor argument
    fn write(&mut self, out: &mut String, t: &Type, prec: u8) {
        match t {
            Type::Real => out.push_str("Real"),
            Type::Int => out.push_str("Int"),
            Type::Bool => out.push_str("Bool"),
            Type::Unit => out.push_str("Unit"),
            Type::Var(v) => {
                let n = self.name(*v);
                out.push_str(&n)
            }
            Type::Array(a) | Type::Bag(a) | Type::Group(a) | Type::Dual(a) | Type::Delta(a) => {
                let kw = match t {
                    Type::Array(_) => "Array",
                    Type::Bag(_) => "Bag",
                    Type::Group(_) => "Group",
                    Type::Dual(_) => "Dual",
                    _ => "Delta",
                };
                if prec >= 3 {
                    out.push('(');
                }
                out.push_str(kw);
                out.push(' ');
                self.write(out, a, 3);
                if prec >= 3 {
                    out.push(')');
                }
            }
            Type::Map(k, v) => {
                if prec >= 3 {
                    out.push('(');
                }
                out.push_str("Map ");
                self.write(out, k, 3);
                out.push(' ');
                self.write(out, v, 3);
                if prec >= 3 {
                    out.push(')');
                }
            }
            Type::Tuple(ts) => {
                if ts.is_empty() {
                    out.push_str("Unit");
                    return;
                }
                if prec >= 2 {
                    out.push('(');
                }
                for (i, c) in ts.iter().enumerate() {
                    if i > 0 {
                        out.push_str(" * ");
                    }
                    self.write(out, c, 2);
                }
                if prec >= 2 {
                    out.push(')');
                }
            }
            Type::Fun(a, b) => {
                if prec >= 1 {
                    out.push('(');
                }
                self.write(out, a, 1);
                out.push_str(" -> ");
                self.write(out, b, 0);
                if prec >= 1 {
                    out.push(')');
                }
            }
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", TypePrinter::new().ty(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_the_language_reference() {
        let rr = Type::tuple(vec![Type::Real, Type::Real]);
        assert_eq!(Type::fun(rr.clone(), Type::Real).to_string(), "Real * Real -> Real");
        assert_eq!(Type::fun(Type::fun(Type::Int, Type::Int), Type::Int).to_string(), "(Int -> Int) -> Int");
        assert_eq!(Type::array(rr.clone()).to_string(), "Array (Real * Real)");
        assert_eq!(Type::tuple(vec![rr, Type::Int]).to_string(), "(Real * Real) * Int");
        assert_eq!(Type::omega(Type::Real).to_string(), "Real -> Dual Real");
    }

    #[test]
    fn delta_is_structural() {
        let t = Type::fun(Type::Bag(Rc::new(Type::Int)), Type::Int);
        assert_eq!(Type::delta(&t).to_string(), "Bag Int -> Delta (Bag Int) -> Delta Int");
    }
}
