//! The typed core syntax shared by every pass: the parser builds it, inference fills in `ty`,
//! A-normalisation, Derive and the reference interpreter's reductions rewrite it.
//!
//! Children are `Rc`, so terms share structure and closures can hold their bodies.
//! Every node has a span; nodes made by a pass carry the span of the source they came from
//! (or `Span::SYNTHETIC`).

use std::rc::Rc;

use crate::builtins::Builtin;
use crate::span::Span;
use crate::types::{Scheme, Type};

pub type Name = Rc<str>;
pub type E = Rc<Expr>;

/// A local binder's identity: unique within a program (fresh ones come from `fresh_local`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);

/// The one supply of fresh binders: the next `LocalId` of the program's numbering, which every
/// pass that makes binders continues (from `Program::next_local`); `next` moves past it.
/// (The pullback reducer's binders come from its own range, far above, `pullback::term::fresh_id`.)
pub fn fresh_local(next: &mut u32) -> LocalId {
    let id = LocalId(*next);
    *next += 1;
    id
}

/// Index of a top-level definition in `Program::defs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DefId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VarRef {
    Local(LocalId),
    Global(DefId),
    Builtin(Builtin),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    Int(i64),
    Real(f64),
    Bool(bool),
    Unit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `<+>` (⊕)
    Oplus,
    /// `<->` (⊖)
    Ominus,
    Add,
    Sub,
    Mul,
    Div,
    /// `%`: Int remainder, truncated (the sign of the dividend), like `/`.
    Rem,
    Pow,
}

impl BinOp {
    pub fn ascii(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Oplus => "<+>",
            BinOp::Ominus => "<->",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Pow => "^",
        }
    }
    pub fn paper(self) -> &'static str {
        match self {
            BinOp::Oplus => "⊕",
            BinOp::Ominus => "⊖",
            op => op.ascii(),
        }
    }
    /// Binding strength, loosest = 1 (docs/language.md §3).
    pub fn prec(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 3,
            BinOp::Oplus | BinOp::Ominus => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
            BinOp::Pow => 8,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Pat {
    pub kind: PatKind,
    pub span: Span,
    /// Filled in by inference.
    pub ty: Type,
    /// A source annotation `(x : T)`; inference checks it and then clears it.
    pub ann: Option<Type>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PatKind {
    Var(Name, LocalId),
    Wild,
    Unit,
    /// Components are shared: cloning a tuple pattern is O(1) (the pullback reducer's rule 8
    /// pairs a growing pattern with each new binder, `⟨y, x⟩`).
    Tuple(Rc<[Pat]>),
}

impl Pat {
    pub fn var(name: Name, id: LocalId, ty: Type) -> Pat {
        Pat { kind: PatKind::Var(name, id), span: Span::SYNTHETIC, ty, ann: None }
    }
    /// The variables the pattern binds, left to right.
    pub fn binders(&self) -> Vec<(Name, LocalId)> {
        let mut out = Vec::new();
        fn go(p: &Pat, out: &mut Vec<(Name, LocalId)>) {
            match &p.kind {
                PatKind::Var(n, id) => out.push((n.clone(), *id)),
                PatKind::Wild | PatKind::Unit => {}
                PatKind::Tuple(ps) => ps.iter().for_each(|p| go(p, out)),
            }
        }
        go(self, &mut out);
        out
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// Filled in by inference; `Type::Unit` placeholder before.
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Var(Name, VarRef),
    Lit(Lit),
    /// `fun p -> e`: one binder; `fun a b -> e` is nested.
    Lam(Rc<Pat>, E),
    App(E, E),
    Let(Rc<Pat>, E, E),
    If(E, E, E),
    Bin(BinOp, E, E),
    Neg(E),
    Not(E),
    Tuple(Vec<E>),
    /// `e.i`: the 0-based component index (the source writes it 1-based).
    Proj(E, usize),
    Index(E, E),
    Array(Vec<E>),
    /// `bag{e # n, ...}`
    Bag(Vec<(E, i64)>),
    /// `map{k -> v, ...}`
    Map(Vec<(E, E)>),
    /// `pullback f w` — the paper's (Ω f)·w.
    Pullback(E, E),
    /// `dual (fun v -> s) w` — the paper's (λv. s)*·w.
    Dual(Rc<Pat>, E, E),
    /// `derive e` — ILC's Derive(e).
    Derive(E),
    /// A source annotation (`let p : T = e`, `def f x : T = e`); inference checks it and
    /// removes it, so no later pass sees one. Type variables `'a` in it are numbered per definition.
    Ann(E, Type),
    // Terms made by the semantics passes; the parser never produces these.
    /// The paper's 0, the unit of sums, at any vector type.
    Zero,
    /// The paper's sum of terms `S + P`, at any vector type.
    Sum(E, E),
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span, ty: Type) -> E {
        Rc::new(Expr { kind, span, ty })
    }
}

#[derive(Clone, Debug)]
pub struct Def {
    pub name: Name,
    pub name_span: Span,
    /// The whole definition, `def` to the end of its body.
    pub span: Span,
    /// Binders of `def f x y = e` are folded into `body` as `fun x -> fun y -> e`;
    /// a return annotation becomes an annotation on the innermost body.
    pub body: E,
    /// Filled in by inference.
    pub scheme: Scheme,
}

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub defs: Vec<Def>,
    /// One past the largest `LocalId` in the program; passes that make fresh binders start here.
    pub next_local: u32,
}

impl Program {
    pub fn def(&self, id: DefId) -> &Def {
        &self.defs[id.0 as usize]
    }
    pub fn lookup(&self, name: &str) -> Option<DefId> {
        self.defs.iter().rposition(|d| &*d.name == name).map(|i| DefId(i as u32))
    }
}
