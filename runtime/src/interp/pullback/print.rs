//! Terms in the paper's notation, for `nabla trace` and `nabla anf`.
//!
//! Like `frontend::pretty`'s paper mode (λ, ⟨⟩, πi, `(Ω f)·w`, `(λv. S)*·w`, `r*`, `J f · s`,
//! let-series with `;`), and in addition: primitives and definitions applied as function symbols,
//! `g(z1)`, `max(a, b)`; operators inside `J` as `(*)`; the pairs made by reductions 8 and 20
//! flattened as the paper writes them, `⟨⟨x, y⟩, z1, z2⟩` for `⟨⟨⟨x, y⟩, z1⟩, z2⟩`; and terms wider
//! than a limit abbreviated by eliding their deepest sub-terms as `…`.

use frontend::builtins::Builtin;
use frontend::pretty::{Hooks, Mode, Printer, APP, ATOM, TOP};
use frontend::span::Span;
use frontend::syntax::*;

use super::prim::Sym;
use super::term::{spine, CHAIN};

/// `e` on one line.
pub fn term(e: &E) -> String {
    let mut p = printer();
    p.expr(e, TOP);
    p.out
}

/// `e` on one line of at most about `width` characters: the deepest sub-terms are elided (`…`)
/// until it fits.
pub fn abbreviated(e: &E, width: usize) -> String {
    // Terms share sub-terms, so printed in full they can be far larger than in memory: stop early.
    let mut p = printer();
    p.limit = 4 * width + 16;
    p.expr(e, TOP);
    if p.out.chars().count() <= width {
        return p.out;
    }
    let (mut lo, mut hi) = (1usize, 64usize);
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let mut p = printer();
        (p.max_depth, p.limit) = (mid, 4 * width + 16);
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
        let mut pr = printer();
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

/// `frontend::pretty`'s paper mode with the tracer's hooks; type annotations are left out.
fn printer() -> Printer<'static> {
    let mut p = Printer::with_hooks(Mode::Paper, &Symbols);
    p.annotations = false;
    p
}

/// Function symbols applied as `g(z1)`, the functions of `Ω` and `J` by name, and the pairs of
/// reductions 8 and 20 flattened.
struct Symbols;

impl Hooks for Symbols {
    fn app(&self, p: &mut Printer, e: &E, prec: u8) -> bool {
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
            p.open(paren);
            match r {
                VarRef::Builtin(Builtin::Star) => {
                    p.expr(&now[0], ATOM);
                    p.s("*");
                }
                VarRef::Builtin(Builtin::Omega) => {
                    let inner = later.is_empty() && prec >= APP || !later.is_empty();
                    p.open(inner);
                    p.s("Ω ");
                    p.expr(&now[0], ATOM);
                    p.close(inner);
                }
                VarRef::Builtin(Builtin::Jac) if now.len() == 2 => {
                    p.s("(J ");
                    self.function(p, &now[0]);
                    p.s(" · ");
                    p.expr(&now[1], ATOM);
                    p.s(")");
                }
                _ => {
                    p.s(n);
                    p.s("(");
                    p.list(now);
                    p.s(")");
                }
            }
            for a in later {
                p.s(" ");
                p.expr(a, ATOM);
            }
            p.close(paren);
            return true;
        }
        p.open(prec >= APP);
        p.expr(&head, APP);
        for a in &args {
            p.s(" ");
            p.expr(a, ATOM);
        }
        p.close(prec >= APP);
        true
    }

    /// The function of `(Ω f)` or `J f`: a λ without parentheses, a symbol by its name.
    fn function(&self, p: &mut Printer, f: &E) {
        match &f.kind {
            ExprKind::Lam(..) => {
                if let Some(n) = Sym::from_term(f, &|_| false).name() {
                    return p.s(&n);
                }
                p.expr(f, TOP)
            }
            _ => p.expr(f, ATOM),
        }
    }

    fn flattens(&self, span: Span) -> bool {
        span == CHAIN
    }
}
