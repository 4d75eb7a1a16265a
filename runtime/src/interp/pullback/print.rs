//! Terms in the paper's notation, for `nabla trace` and `nabla anf`.
//!
//! Like `frontend::pretty`'s paper mode (λ, ⟨⟩, πi, `(Ω f)·w`, `(λv. S)*·w`, `r*`, `J f · s`,
//! let-series with `;`), and in addition: primitives and definitions applied as function symbols,
//! `g(z1)`, `max(a, b)`; operators inside `J` as `(*)`; the pairs made by reductions 8 and 20
//! flattened as the paper writes them, `⟨⟨x, y⟩, z1, z2⟩` for `⟨⟨⟨x, y⟩, z1⟩, z2⟩`; and terms wider
//! than a limit abbreviated by eliding their deepest sub-terms as `…`.

use frontend::builtins::Builtin;
use frontend::syntax::*;

use super::prim::Sym;
use super::term::{spine, CHAIN};

/// `e` on one line.
pub fn term(e: &E) -> String {
    let mut p = Printer { out: String::new(), depth: 0, max_depth: usize::MAX, limit: usize::MAX };
    p.expr(e, TOP);
    p.out
}

/// `e` on one line of at most about `width` characters: the deepest sub-terms are elided (`…`)
/// until it fits.
pub fn abbreviated(e: &E, width: usize) -> String {
    // Terms share sub-terms, so printed in full they can be far larger than in memory: stop early.
    let mut p = Printer { out: String::new(), depth: 0, max_depth: usize::MAX, limit: 4 * width + 16 };
    p.expr(e, TOP);
    if p.out.chars().count() <= width {
        return p.out;
    }
    let (mut lo, mut hi) = (1usize, 64usize);
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let mut p = Printer { out: String::new(), depth: 0, max_depth: mid, limit: 4 * width + 16 };
        p.expr(e, TOP);
        if p.out.chars().count() <= width {
            best = Some(p.out);
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    best.unwrap_or_else(|| "…".to_string())
}

/// A let-series with one binding per line, for `nabla anf` when a definition does not fit on a line.
pub fn series_lines(e: &E, indent: usize) -> Vec<String> {
    let pad = " ".repeat(indent);
    let mut lines = Vec::new();
    let mut cur = e;
    let mut first = true;
    while let ExprKind::Let(p, rhs, rest) = &cur.kind {
        let mut pr = Printer { out: String::new(), depth: 0, max_depth: usize::MAX, limit: usize::MAX };
        pr.pat(p);
        pr.out.push_str(" = ");
        pr.expr(rhs, TOP + 1);
        let sep = if matches!(rest.kind, ExprKind::Let(..)) { ";" } else { "" };
        lines.push(format!("{pad}{}{}{sep}", if first { "let " } else { "    " }, pr.out));
        first = false;
        cur = rest;
    }
    lines.push(format!("{pad}in {}", term(cur)));
    lines
}

const TOP: u8 = 0;
const UNARY: u8 = 7;
const APP: u8 = 9;
const ATOM: u8 = 10;

struct Printer {
    out: String,
    depth: usize,
    max_depth: usize,
    /// Stop printing (the caller abbreviates) past this many bytes.
    limit: usize,
}

impl Printer {
    fn s(&mut self, s: &str) {
        self.out.push_str(s);
    }
    fn open(&mut self, need: bool) {
        if need {
            self.s("(");
        }
    }
    fn close(&mut self, need: bool) {
        if need {
            self.s(")");
        }
    }

    fn pat(&mut self, p: &Pat) {
        match &p.kind {
            PatKind::Var(n, _) => self.s(n),
            PatKind::Wild => self.s("_"),
            PatKind::Unit => self.s("⟨⟩"),
            PatKind::Tuple(_) => {
                let mut items = Vec::new();
                pat_items(p, &mut items);
                self.s("⟨");
                for (i, q) in items.iter().enumerate() {
                    if i > 0 {
                        self.s(", ");
                    }
                    self.pat(q);
                }
                self.s("⟩");
            }
        }
    }

    fn expr(&mut self, e: &E, prec: u8) {
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

    fn list(&mut self, xs: &[E]) {
        for (i, x) in xs.iter().enumerate() {
            if i > 0 {
                self.s(", ");
            }
            self.expr(x, TOP);
        }
    }

    fn expr_inner(&mut self, e: &E, prec: u8) {
        match &e.kind {
            ExprKind::Var(n, VarRef::Builtin(Builtin::Omega)) if n.as_ref() == "omega" => self.s("Ω"),
            ExprKind::Var(n, _) => self.s(n),
            ExprKind::Lit(l) => match l {
                Lit::Int(n) => {
                    self.open(*n < 0 && prec > UNARY);
                    self.s(&n.to_string());
                    self.close(*n < 0 && prec > UNARY);
                }
                Lit::Real(r) => {
                    let neg = r.is_sign_negative();
                    self.open(neg && prec > UNARY);
                    self.s(&format!("{r:?}"));
                    self.close(neg && prec > UNARY);
                }
                Lit::Bool(b) => self.s(if *b { "true" } else { "false" }),
                Lit::Unit => self.s("⟨⟩"),
            },
            ExprKind::Zero => self.s("0"),
            ExprKind::Lam(..) => {
                self.open(prec > TOP);
                let mut body = e;
                self.s("λ");
                let mut first = true;
                while let ExprKind::Lam(p, b) = &body.kind {
                    if !first {
                        self.s(" ");
                    }
                    first = false;
                    self.pat(p);
                    body = b;
                }
                self.s(". ");
                self.expr(body, TOP);
                self.close(prec > TOP);
            }
            ExprKind::Let(..) => {
                self.open(prec > TOP);
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
                let (lp, rp) = match op {
                    BinOp::Pow => (p + 1, UNARY),
                    BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => (p + 1, p + 1),
                    _ => (p, p + 1),
                };
                self.expr(a, lp);
                self.s(" ");
                self.s(op.paper());
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
            ExprKind::Neg(a) => {
                self.open(prec > UNARY);
                self.s("-");
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
                tuple_items(e, &mut items);
                self.s("⟨");
                self.list(&items);
                self.s("⟩");
            }
            ExprKind::Proj(a, i) => {
                self.open(prec > APP);
                self.s(&format!("π{} ", i + 1));
                self.expr(a, ATOM);
                self.close(prec > APP);
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
                self.open(prec >= APP);
                self.s("(Ω ");
                self.function(f);
                self.s(")·");
                self.expr(w, ATOM);
                self.close(prec >= APP);
            }
            ExprKind::Dual(p, s, w) => {
                self.open(prec >= APP);
                self.s("(λ");
                self.pat(p);
                self.s(". ");
                self.expr(s, TOP);
                self.s(")*·");
                self.expr(w, ATOM);
                self.close(prec >= APP);
            }
            ExprKind::Derive(a) => {
                self.s("Derive(");
                self.expr(a, TOP);
                self.s(")");
            }
            ExprKind::Ann(a, _) => self.expr(a, prec),
            ExprKind::App(..) => self.app(e, prec),
        }
    }

    /// The function of `(Ω f)` or `J f`: a λ without parentheses, a symbol by its name.
    fn function(&mut self, f: &E) {
        match &f.kind {
            ExprKind::Lam(..) => {
                if let Some(n) = Sym::from_term(f, &|_| false).name() {
                    return self.s(&n);
                }
                self.expr(f, TOP)
            }
            _ => self.expr(f, ATOM),
        }
    }

    fn app(&mut self, e: &E, prec: u8) {
        let (head, args) = spine(e);
        if let ExprKind::Var(n, r @ (VarRef::Builtin(_) | VarRef::Global(_))) = &head.kind {
            let arity = match r {
                VarRef::Builtin(b) => b.arity(),
                _ => 1,
            };
            // Ω r and r* take one argument as the paper writes them; J f · s takes two.
            let k = match r {
                VarRef::Builtin(Builtin::Omega | Builtin::Star) => 1,
                VarRef::Builtin(Builtin::Jac) => args.len().min(2),
                _ => args.len().min(arity.max(1)),
            };
            let (now, later) = args.split_at(k);
            let paren = !later.is_empty() && prec >= APP;
            self.open(paren);
            match r {
                VarRef::Builtin(Builtin::Star) => {
                    self.expr(&now[0], ATOM);
                    self.s("*");
                }
                VarRef::Builtin(Builtin::Omega) => {
                    let inner = later.is_empty() && prec >= APP || !later.is_empty();
                    self.open(inner);
                    self.s("Ω ");
                    self.expr(&now[0], ATOM);
                    self.close(inner);
                }
                VarRef::Builtin(Builtin::Jac) if now.len() == 2 => {
                    self.s("(J ");
                    self.function(&now[0]);
                    self.s(" · ");
                    self.expr(&now[1], ATOM);
                    self.s(")");
                }
                _ => {
                    self.s(n);
                    self.s("(");
                    self.list(now);
                    self.s(")");
                }
            }
            for a in later {
                self.s(" ");
                self.expr(a, ATOM);
            }
            self.close(paren);
            return;
        }
        self.open(prec >= APP);
        self.expr(&head, APP);
        for a in &args {
            self.s(" ");
            self.expr(a, ATOM);
        }
        self.close(prec >= APP);
    }
}

/// The components of a tuple, with the pairs of reductions 8 and 20 flattened.
fn tuple_items(e: &E, out: &mut Vec<E>) {
    match &e.kind {
        ExprKind::Tuple(xs) if e.span == CHAIN && xs.len() == 2 => {
            if xs[0].span == CHAIN && matches!(xs[0].kind, ExprKind::Tuple(_)) {
                tuple_items(&xs[0], out);
            } else {
                out.push(xs[0].clone());
            }
            out.push(xs[1].clone());
        }
        ExprKind::Tuple(xs) => out.extend(xs.iter().cloned()),
        _ => out.push(e.clone()),
    }
}

fn pat_items(p: &Pat, out: &mut Vec<Pat>) {
    match &p.kind {
        PatKind::Tuple(ps) if p.span == CHAIN && ps.len() == 2 => {
            if ps[0].span == CHAIN && matches!(ps[0].kind, PatKind::Tuple(_)) {
                pat_items(&ps[0], out);
            } else {
                out.push(ps[0].clone());
            }
            out.push(ps[1].clone());
        }
        PatKind::Tuple(ps) => out.extend(ps.iter().cloned()),
        _ => out.push(p.clone()),
    }
}
