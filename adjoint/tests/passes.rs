//! Each ILC pass on its own: Derive (ILC Fig. 4g), inlining of derived definitions, nil-change
//! propagation, simplification, the self-maintainability analysis and dead-code elimination.
//! Terms print in paper notation; every derived term binds each variable once.

use adjoint::incremental::term::unique_binders;
use adjoint::incremental::*;
use anf::mono::MonoProgram;
use expect_test::{expect, Expect};
use frontend::pretty::{expr, Mode};
use frontend::syntax::E;

fn mono(src: &str, def: &str) -> MonoProgram {
    let program = frontend::check_source(src).unwrap_or_else(|d| panic!("{}", d.message));
    let id = program.lookup(def).expect("definition");
    anf::mono::monomorphise(&program, id).expect("monomorphises")
}

fn show(e: &E) -> String {
    unique_binders(e).expect("each binder once");
    expr(e, Mode::Paper)
}

/// Derive(body of `def`), and nothing else.
fn derived(src: &str, def: &str, check: Expect) {
    let m = mono(src, def);
    let mut cx = Cx::new(&m, m.next_local);
    let d = derive(&m.def(m.root()).body, &mut cx).expect("derives");
    check.assert_eq(&show(&d));
}

#[test]
fn derive_follows_figure_4g() {
    // Derive(x) = dx; Derive(λx. t) = λx dx. Derive(t)
    derived("def id (x : Int) = x", "id", expect!["λx dx. dx"]);
    // Derive(s t) = Derive(s) t Derive(t); a constant's change is its nil change.
    derived("def ap (f : Int -> Int) = f 3", "ap", expect!["λf df. df 3 (nil 3)"]);
    // Definitions named in a term are derived too: Derive(d).
    derived(
        "def inc (x : Int) = x + 1\ndef twice (x : Int) = inc (inc x)",
        "twice",
        expect!["λx dx. Derive(inc) (inc x) (Derive(inc) x dx)"],
    );
    // Primitives bring their derivative from the table; the others' is their nil change.
    derived(
        "def t (xs : Bag Int) = merge xs (negate xs)",
        "t",
        expect!["λxs dxs. merge' xs dxs (negate xs) (negate' xs dxs)"],
    );
    derived(
        "def t (xs : Bag Int) = foldBag intGroup (fun x -> x) xs",
        "t",
        expect!["λxs dxs. nil foldBag intGroup (nil intGroup) (λx. x) (λx dx. dx) xs dxs"],
    );
    // let, tuples and projections are structural.
    derived(
        "def t (p : Int * Int) = let (a, b) = p in (b, a + 1).1",
        "t",
        expect!["λp dp. let ⟨a, b⟩ = p; ⟨da, db⟩ = dp in π1 ⟨db, add' a da 1 (nil 1)⟩"],
    );
}

#[test]
fn derive_of_a_conditional_keeps_or_flips_the_branch() {
    derived(
        "def t (x : Int) = if x > 0 then x else 0 - x",
        "t",
        expect!["λx dx. let c = x > 0; dc = (let v1 = x; dv1 = dx; v2 = 0; dv2 = nil 0 in (v1 ⊕ dv1 > v2 ⊕ dv2) ⊖ (v1 > v2)); c_new = c ⊕ dc in if c_new == c then if c then dx else sub' 0 (nil 0) x dx else (if c_new then let x_new = x ⊕ dx in x_new else let x_new = x ⊕ dx in 0 - x_new) ⊖ (if c then x else 0 - x)"],
    );
}

#[test]
fn inlining_replaces_derived_definitions() {
    let m = mono("def inc (x : Int) = x + 1\ndef twice (x : Int) = inc (inc x)", "twice");
    let mut cx = Cx::new(&m, m.next_local);
    let d = derive(&m.def(m.root()).body, &mut cx).unwrap();
    let d = inline_derived(&d, &mut cx).unwrap();
    expect!["λx dx. (λx dx. add' x dx 1 (nil 1)) (inc x) ((λx dx. add' x dx 1 (nil 1)) x dx)"].assert_eq(&show(&d));
    let d = simplify(&simplify(&d, &mut cx), &mut cx);
    expect!["λx dx. let x = inc x; dx = add' x dx 1 (gchange intGroup 0) in add' x dx 1 (gchange intGroup 0)"]
        .assert_eq(&show(&d));
}

/// Derive, inline and simplify, then run nil propagation once.
fn propagated(src: &str, def: &str) -> String {
    let m = mono(src, def);
    let mut cx = Cx::new(&m, m.next_local);
    let d = derive(&m.def(m.root()).body, &mut cx).unwrap();
    let d = inline_derived(&d, &mut cx).unwrap();
    let d = simplify(&simplify(&d, &mut cx), &mut cx);
    show(&propagate(&d, &cx))
}

#[test]
fn nil_propagation_specialises_folds_over_closed_functions() {
    // The function is closed: its change is nil, so foldBag gets its self-maintainable derivative.
    expect!["λxs dxs. foldBag' intGroup (λx. x * 2) xs dxs"]
        .assert_eq(&propagated("def t (xs : Bag Int) = foldBag intGroup (fun x -> x * 2) xs", "t"));
    // It captures `k`, whose change need not be nil: recomputation.
    expect!["λp dp. let ⟨k, xs⟩ = p; ⟨dk, dxs⟩ = dp in nil foldBag intGroup (nil intGroup) (λx. x * k) (λx dx. mul' x dx k dk) xs dxs"]
        .assert_eq(&propagated("def t (p : Int * Bag Int) = let (k, xs) = p in foldBag intGroup (fun x -> x * k) xs", "t"));
    // A let-bound nil change is nil where it is used (mapBag f with f closed, then foldMap).
    expect!["λm dm. mapBag' (λw. w + 1) (lookup bagGroup 1 m) (lookup' bagGroup 1 m dm)"].assert_eq(&propagated(
        "def t (m : Map Int (Bag Int)) = let f = fun w -> w + 1 in mapBag f (lookup bagGroup 1 m)",
        "t",
    ));
}

#[test]
fn simplification_rules() {
    let m = mono("def t (x : Int) = x", "t");
    let mut cx = Cx::new(&m, m.next_local);
    // β to let, value substitution, x ⊕ 0 = x, if true, projections of tuples of values.
    let src = "def t (x : Int) = (fun y -> (if true then (y, 2) else (0, 0)).1) (x <+> nil x)";
    let m2 = mono(src, "t");
    let body = m2.def(m2.root()).body.clone();
    let mut s = body;
    for _ in 0..3 {
        s = simplify(&s, &mut cx);
    }
    expect!["λx. x"].assert_eq(&show(&s));
}

#[test]
fn the_analysis_names_what_reads_a_base_input() {
    let check = |src: &str, sm: bool, reasons: Expect| {
        let m = mono(src, "f");
        let d = derive_definition(&m, m.root()).unwrap();
        assert_eq!(d.report.self_maintainable, sm, "{}", show(&d.fast));
        let text: Vec<String> = d
            .report
            .reasons
            .iter()
            .map(|r| format!("{} at {}..{}: {}", r.input, r.span.lo, r.span.hi, r.what))
            .collect();
        reasons.assert_debug_eq(&text);
    };
    check(
        "def f xs = foldBag intGroup (fun x -> x) (merge xs (negate xs))",
        true,
        expect![[r#"
        []
    "#]],
    );
    check(
        "def f (m : Map Int Int) = foldMapGen 0 (fun a b -> a + b) (fun k v -> v) m",
        false,
        expect![[r#"
        [
            "m at 26..36: `foldMapGen` has no efficient derivative: its derivative recomputes it",
        ]
    "#]],
    );
    check(
        "def f (x : Int) = x * x",
        false,
        expect![[r#"
        [
            "x at 18..23: `*` reads its operands",
        ]
    "#]],
    );
    check(
        "def f (p : Int * Bag Int) = foldBag intGroup (fun y -> y + p.1) p.2",
        false,
        expect![[r#"
        [
            "p at 28..35: `foldBag` has a self-maintainable derivative only while its function and group arguments do not change; here they may, so its derivative recomputes it",
        ]
    "#]],
    );
}

#[test]
fn dead_code_elimination_drops_unread_base_computations() {
    let m = mono("def f xs ys = foldBag intGroup (fun x -> x) (merge (mapBag (fun y -> y + 1) xs) ys)", "f");
    let d = derive_definition(&m, m.root()).unwrap();
    expect!["λxs dxs ys dys. foldBag' intGroup (λx. x) (merge (mapBag (λy. y + 1) xs) ys) (merge' (mapBag (λy. y + 1) xs) (mapBag' (λy. y + 1) xs dxs) ys dys)"]
        .assert_eq(&show(&d.total));
    expect!["λxs dxs ys dys. foldBag' intGroup (λx. x) _ (merge' _ (mapBag' (λy. y + 1) _ dxs) _ dys)"]
        .assert_eq(&show(&d.fast));
    assert!(d.report.self_maintainable);
    // The pass itself: unread arguments become `_`, and lets nobody reads go.
    let m = mono("def f (xs : Bag Int) = let n = foldBag intGroup (fun x -> x) xs in negate xs", "f");
    let mut cx = Cx::new(&m, m.next_local);
    let dd = derive(&m.def(m.root()).body, &mut cx).unwrap();
    expect!["λxs dxs. negate' _ dxs"].assert_eq(&show(&eliminate(&dd)));
}
