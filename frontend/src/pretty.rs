//! The pretty printer: terms in source syntax (ASCII mode, re-parseable for surface terms) or in
//! the papers' notation (paper mode: λ, Ω, ⟨⟩, ⊕, r*, (λv. S)*·w, J f · s, let-series with `;`).

use crate::builtins::Builtin;
use crate::span::Span;
use crate::syntax::*;
use crate::types::TypePrinter;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ascii,
    Paper,
}

/// Prints a term on one line.
pub fn expr(e: &E, mode: Mode) -> String {
    let mut p = Printer::new(mode);
    p.expr(e, TOP);
    p.out
}

/// Prints a pattern.
pub fn pattern(p: &Pat, mode: Mode) -> String {
    let mut pr = Printer::new(mode);
    pr.pat(p);
    pr.out
}

/// Prints a real the way values print (Rust's `{:?}`): `660.0`, `0.1`, `1e-7`.
pub fn real(r: f64) -> String {
    format!("{r:?}")
}

/// Prints a definition as `def name = body` with its inferred type as a comment line above.
pub fn def(d: &Def, mode: Mode) -> String {
    let ty = TypePrinter::new().scheme(&d.scheme);
    format!("-- {} : {}\ndef {} = {}", d.name, ty, d.name, expr(&d.body, mode))
}

/// What a printer built on this one prints its own way (the runtime's pullback tracer writes
/// function symbols as `g(z1)` and flattens the pairs its reductions build). The defaults print
/// as `expr` does.
pub trait Hooks {
    /// Prints the application `e` at precedence `prec` and returns true, or returns false to
    /// leave it to the printer.
    fn app(&self, _p: &mut Printer, _e: &E, _prec: u8) -> bool {
        false
    }
    /// Prints the function `f` of `(Ω f)·w`.
    fn function(&self, p: &mut Printer, f: &E) {
        p.expr(f, ATOM)
    }
    /// Whether a pair made at `span` prints flattened into its left component: `⟨⟨x, y⟩, z1, z2⟩`
    /// for `⟨⟨⟨x, y⟩, z1⟩, z2⟩` when both outer pairs are.
    fn flattens(&self, _span: Span) -> bool {
        false
    }
}

struct NoHooks;
impl Hooks for NoHooks {}

/// The printer, for printers built on this one; its output accumulates in `out`.
pub struct Printer<'h> {
    pub mode: Mode,
    pub out: String,
    /// Sub-terms nested deeper than this, except variables and literals, print as `…`.
    pub max_depth: usize,
    /// Printing stops (the output is cut short) once `out` is longer than this many bytes.
    pub limit: usize,
    /// Whether `(e : t)` keeps its type; without, it prints as `e`.
    pub annotations: bool,
    depth: usize,
    hooks: &'h dyn Hooks,
}

// Precedences: 0 = top (λ, let, if extend to the right), 1..=6 binary levels, 7 = unary,
// 8 = `^`, 9 = application, 10 = atoms and postfix.
pub const TOP: u8 = 0;
pub const UNARY: u8 = 7;
pub const APP: u8 = 9;
pub const ATOM: u8 = 10;

impl<'h> Printer<'h> {
    pub fn new(mode: Mode) -> Printer<'static> {
        Printer::with_hooks(mode, &NoHooks)
    }

    pub fn with_hooks(mode: Mode, hooks: &'h dyn Hooks) -> Printer<'h> {
        Printer {
            mode,
            out: String::new(),
            max_depth: usize::MAX,
            limit: usize::MAX,
            annotations: true,
            depth: 0,
            hooks,
        }
    }

    pub fn s(&mut self, s: &str) {
        self.out.push_str(s);
    }
    fn paper(&self) -> bool {
        self.mode == Mode::Paper
    }

    pub fn open(&mut self, need: bool) {
        if need {
            self.s("(");
        }
    }
    pub fn close(&mut self, need: bool) {
        if need {
            self.s(")");
        }
    }

    /// Terms separated by `, `.
    pub fn list(&mut self, xs: &[E]) {
        for (i, x) in xs.iter().enumerate() {
            if i > 0 {
                self.s(", ");
            }
            self.expr(x, TOP);
        }
    }

    pub fn pat(&mut self, p: &Pat) {
        match &p.kind {
            PatKind::Var(n, _) => self.s(n),
            PatKind::Wild => self.s("_"),
            PatKind::Unit => self.s(if self.paper() { "⟨⟩" } else { "()" }),
            PatKind::Tuple(_) => {
                let mut items = Vec::new();
                self.pat_items(p, &mut items);
                self.s(if self.paper() { "⟨" } else { "(" });
                for (i, q) in items.iter().enumerate() {
                    if i > 0 {
                        self.s(", ");
                    }
                    self.pat(q);
                }
                self.s(if self.paper() { "⟩" } else { ")" });
            }
        }
    }

    /// A binder in `fun`/`λ` position: tuple patterns are already parenthesised. In ASCII mode a
    /// variable of tuple type carries its type, so projections from it type-check when re-read.
    fn binder(&mut self, p: &Pat) {
        if let (Mode::Ascii, PatKind::Var(n, _), crate::types::Type::Tuple(ts)) = (self.mode, &p.kind, &p.ty) {
            if !ts.is_empty() {
                let t = TypePrinter::new().ty(&p.ty);
                self.s(&format!("({n} : {t})"));
                return;
            }
        }
        self.pat(p)
    }

    /// Prints `e` at precedence `prec` (see the constants).
    pub fn expr(&mut self, e: &E, prec: u8) {
        if self.out.len() > self.limit {
            return;
        }
        if self.depth >= self.max_depth && !matches!(e.kind, ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Zero) {
            return self.s("…");
        }
        self.depth += 1;
        self.expr_inner(e, prec);
        self.depth -= 1;
    }

    fn expr_inner(&mut self, e: &E, prec: u8) {
        match &e.kind {
            ExprKind::Var(n, r) => {
                if self.paper() {
                    if let VarRef::Builtin(b) = r {
                        if let Some(sym) = paper_builtin(*b) {
                            return self.s(sym);
                        }
                    }
                }
                self.s(n)
            }
            ExprKind::Lit(l) => self.lit(*l, prec),
            ExprKind::Lam(..) => {
                self.open(prec > TOP);
                let mut body = e;
                let mut binders = Vec::new();
                while let ExprKind::Lam(p, b) = &body.kind {
                    binders.push(p.clone());
                    body = b;
                }
                self.s(if self.paper() { "λ" } else { "fun " });
                for (i, p) in binders.iter().enumerate() {
                    if i > 0 {
                        self.s(" ");
                    }
                    self.binder(p);
                }
                self.s(if self.paper() { ". " } else { " -> " });
                self.expr(body, TOP);
                self.close(prec > TOP);
            }
            ExprKind::App(f, a) => self.app(e, f, a, prec),
            ExprKind::Let(..) => {
                self.open(prec > TOP);
                if self.paper() {
                    // let-series: let x = E1; y = E2 in L
                    self.s("let ");
                    let mut cur = e;
                    let mut first = true;
                    while let ExprKind::Let(p, a, b) = &cur.kind {
                        if !first {
                            self.s("; ");
                        }
                        first = false;
                        self.pat(p);
                        self.s(" = ");
                        self.expr(a, TOP + 1);
                        cur = b;
                    }
                    self.s(" in ");
                    self.expr(cur, TOP);
                } else {
                    let ExprKind::Let(p, a, b) = &e.kind else { unreachable!() };
                    self.s("let ");
                    self.pat(p);
                    self.s(" = ");
                    self.expr(a, TOP);
                    self.s(" in ");
                    self.expr(b, TOP);
                }
                self.close(prec > TOP);
            }
            ExprKind::If(c, a, b) => {
                self.open(prec > TOP);
                self.s("if ");
                self.expr(c, TOP);
                self.s(" then ");
                self.expr(a, TOP);
                self.s(" else ");
                self.expr(b, TOP);
                self.close(prec > TOP);
            }
            ExprKind::Bin(op, a, b) => {
                let p = op.prec();
                self.open(prec > p);
                // Left-associative except `^`; comparisons do not chain.
                let (lp, rp) = match op {
                    BinOp::Pow => (p + 1, UNARY),
                    BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => (p + 1, p + 1),
                    _ => (p, p + 1),
                };
                self.expr(a, lp);
                self.s(" ");
                self.s(if self.paper() { op.paper() } else { op.ascii() });
                self.s(" ");
                self.expr(b, rp);
                self.close(prec > p);
            }
            ExprKind::Sum(a, b) => {
                self.open(prec > 5);
                self.expr(a, 5);
                self.s(" + ");
                self.expr(b, 6);
                self.close(prec > 5);
            }
            ExprKind::Zero => self.s("0"),
            ExprKind::Neg(a) => {
                self.open(prec > UNARY);
                self.s("-");
                // `--` would start a comment: a negated negation keeps its parentheses.
                self.expr(a, UNARY + 1);
                self.close(prec > UNARY);
            }
            ExprKind::Not(a) => {
                self.open(prec > UNARY);
                self.s("not ");
                self.expr(a, UNARY);
                self.close(prec > UNARY);
            }
            ExprKind::Tuple(_) => {
                let mut items = Vec::new();
                self.tuple_items(e, &mut items);
                self.s(if self.paper() { "⟨" } else { "(" });
                self.list(&items);
                self.s(if self.paper() { "⟩" } else { ")" });
            }
            ExprKind::Proj(a, i) => {
                if self.paper() {
                    self.open(prec > APP);
                    self.s(&format!("π{} ", i + 1));
                    self.expr(a, ATOM);
                    self.close(prec > APP);
                } else {
                    self.expr(a, ATOM);
                    self.s(&format!(".{}", i + 1));
                }
            }
            ExprKind::Index(a, i) => {
                self.expr(a, ATOM);
                self.s(".[");
                self.expr(i, TOP);
                self.s("]");
            }
            ExprKind::Array(xs) => {
                self.s("[");
                self.list(xs);
                self.s("]");
            }
            ExprKind::Bag(xs) => {
                self.s("bag{");
                for (i, (x, n)) in xs.iter().enumerate() {
                    if i > 0 {
                        self.s(", ");
                    }
                    self.expr(x, TOP + 1);
                    if *n != 1 {
                        self.s(&format!(" # {n}"));
                    }
                }
                self.s("}");
            }
            ExprKind::Map(xs) => {
                self.s("map{");
                for (i, (k, v)) in xs.iter().enumerate() {
                    if i > 0 {
                        self.s(", ");
                    }
                    self.expr(k, TOP + 1);
                    self.s(" -> ");
                    self.expr(v, TOP + 1);
                }
                self.s("}");
            }
            ExprKind::Pullback(f, w) => {
                if self.paper() {
                    // (Ω f)·w — parenthesised when applied, as the paper writes ((Ω f)·w) V
                    self.open(prec >= APP);
                    self.s("(Ω ");
                    let hooks = self.hooks;
                    hooks.function(self, f);
                    self.s(")·");
                    self.expr(w, ATOM);
                    self.close(prec >= APP);
                } else {
                    self.open(prec > APP);
                    self.s("pullback ");
                    self.expr(f, ATOM);
                    self.s(" ");
                    self.expr(w, ATOM);
                    self.close(prec > APP);
                }
            }
            ExprKind::Dual(p, s, w) => {
                if self.paper() {
                    // (λv. S)*·w
                    self.open(prec >= APP);
                    self.s("(λ");
                    self.pat(p);
                    self.s(". ");
                    self.expr(s, TOP);
                    self.s(")*·");
                    self.expr(w, ATOM);
                    self.close(prec >= APP);
                } else {
                    self.open(prec > APP);
                    self.s("dual (fun ");
                    self.pat(p);
                    self.s(" -> ");
                    self.expr(s, TOP);
                    self.s(") ");
                    self.expr(w, ATOM);
                    self.close(prec > APP);
                }
            }
            ExprKind::Derive(a) => {
                if self.paper() {
                    self.s("Derive(");
                    self.expr(a, TOP);
                    self.s(")");
                } else {
                    self.open(prec > APP);
                    self.s("derive ");
                    self.expr(a, ATOM);
                    self.close(prec > APP);
                }
            }
            ExprKind::Ann(a, _) if !self.annotations => self.expr(a, prec),
            ExprKind::Ann(a, t) => {
                self.s("(");
                self.expr(a, TOP);
                self.s(" : ");
                self.s(&TypePrinter::new().ty(t));
                self.s(")");
            }
        }
    }

    fn lit(&mut self, l: Lit, prec: u8) {
        match l {
            Lit::Int(n) => {
                self.open(n < 0 && prec > UNARY);
                self.s(&n.to_string());
                self.close(n < 0 && prec > UNARY);
            }
            Lit::Real(r) => {
                let neg = r.is_sign_negative();
                self.open(neg && prec > UNARY);
                self.s(&real(r));
                self.close(neg && prec > UNARY);
            }
            Lit::Bool(b) => self.s(if b { "true" } else { "false" }),
            Lit::Unit => self.s(if self.paper() { "⟨⟩" } else { "()" }),
        }
    }

    fn app(&mut self, e: &E, f: &E, a: &E, prec: u8) {
        let hooks = self.hooks;
        if hooks.app(self, e, prec) {
            return;
        }
        if self.paper() {
            // r*, Ω r and J f · s read as in the paper.
            if let ExprKind::Var(_, VarRef::Builtin(b)) = &f.kind {
                match b {
                    Builtin::Star => {
                        self.expr(a, ATOM);
                        return self.s("*");
                    }
                    Builtin::Omega => {
                        self.open(prec > APP);
                        self.s("Ω ");
                        self.expr(a, ATOM);
                        return self.close(prec > APP);
                    }
                    _ => {}
                }
            }
            if let ExprKind::App(g, x) = &f.kind {
                if let ExprKind::Var(_, VarRef::Builtin(Builtin::Jac)) = &g.kind {
                    self.open(true);
                    self.s("J ");
                    self.expr(x, ATOM);
                    self.s(" · ");
                    self.expr(a, ATOM);
                    return self.close(true);
                }
            }
        }
        self.open(prec > APP);
        self.expr(f, APP);
        self.s(" ");
        self.expr(a, ATOM);
        self.close(prec > APP);
    }
}

impl Printer<'_> {
    /// The components of a tuple, with the pairs the hooks flatten flattened.
    fn tuple_items(&self, e: &E, out: &mut Vec<E>) {
        match &e.kind {
            ExprKind::Tuple(xs) if self.hooks.flattens(e.span) && xs.len() == 2 => {
                if self.hooks.flattens(xs[0].span) && matches!(xs[0].kind, ExprKind::Tuple(_)) {
                    self.tuple_items(&xs[0], out);
                } else {
                    out.push(xs[0].clone());
                }
                out.push(xs[1].clone());
            }
            ExprKind::Tuple(xs) => out.extend(xs.iter().cloned()),
            _ => out.push(e.clone()),
        }
    }

    fn pat_items(&self, p: &Pat, out: &mut Vec<Pat>) {
        match &p.kind {
            PatKind::Tuple(ps) if self.hooks.flattens(p.span) && ps.len() == 2 => {
                if self.hooks.flattens(ps[0].span) && matches!(ps[0].kind, PatKind::Tuple(_)) {
                    self.pat_items(&ps[0], out);
                } else {
                    out.push(ps[0].clone());
                }
                out.push(ps[1].clone());
            }
            PatKind::Tuple(ps) => out.extend(ps.iter().cloned()),
            _ => out.push(p.clone()),
        }
    }
}

fn paper_builtin(b: Builtin) -> Option<&'static str> {
    match b {
        Builtin::Omega => Some("Ω"),
        _ => None,
    }
}
