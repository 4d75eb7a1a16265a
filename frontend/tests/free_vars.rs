//! The one free-variable walk (`lin::visit_free_vars`) and the one fresh-binder supply
//! (`syntax::fresh_local`) that every pass uses.

use frontend::lin::{free_locals, visit_free_vars};
use frontend::syntax::*;

fn body(src: &str, name: &str) -> E {
    let p = frontend::check_source(src).expect("type-checks");
    p.defs.iter().find(|d| &*d.name == name).expect("the definition").body.clone()
}

/// Free occurrences in order — locals not bound where they occur, definitions, builtins —
/// with binders of `fun`, `let` (its body only) and patterns respected.
#[test]
fn free_variables_in_order() {
    let src = "def g = 2\ndef f x = fun y -> let z = x + y + g in (let w = z in w) + (let (a, b) = (x, z) in a + b) + sin 1.0 * 0.0 + y";
    let f = body(src, "f");
    // Inside `f`'s own λx: only `g` and `sin` are free; under it, `x` is free too.
    let mut seen = Vec::new();
    visit_free_vars(&f, &mut |v| match &v.kind {
        ExprKind::Var(n, _) => seen.push(n.to_string()),
        _ => unreachable!("only variables are visited"),
    });
    assert_eq!(seen, ["g", "sin"]);
    let ExprKind::Lam(_, inner) = &f.kind else { panic!("a function") };
    let names: Vec<String> = free_locals(inner).into_iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names, ["x"]);
    // A `let` binds in its body, not in its right-hand side.
    let e = body("def h x = let x = x + 1 in x", "h");
    let ExprKind::Lam(p, inner) = &e.kind else { panic!("a function") };
    let outer = p.binders()[0].1;
    assert_eq!(free_locals(inner).into_iter().map(|(_, id)| id).collect::<Vec<_>>(), [outer]);
}

#[test]
fn fresh_binders_continue_the_numbering() {
    let p = frontend::check_source("def f x = fun y -> x + y").expect("type-checks");
    let mut next = p.next_local;
    let (a, b) = (fresh_local(&mut next), fresh_local(&mut next));
    assert_eq!((a.0, b.0, next), (p.next_local, p.next_local + 1, p.next_local + 2));
    // Every binder the front end made is below the program's `next_local`.
    let mut all = Vec::new();
    fn binders(e: &E, out: &mut Vec<LocalId>) {
        if let ExprKind::Lam(p, _) | ExprKind::Let(p, _, _) = &e.kind {
            out.extend(p.binders().into_iter().map(|(_, id)| id));
        }
        frontend::lin::for_each_child(e, &mut |c| binders(c, out));
    }
    binders(&p.defs[0].body, &mut all);
    assert!(!all.is_empty() && all.iter().all(|id| id.0 < p.next_local), "{all:?}");
}
