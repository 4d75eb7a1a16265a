//! Monomorphisation: specialisations, polymorphic lets, and the output invariants.

use anf::mono::{monomorphise, verify};

fn mono(src: &str) -> anf::mono::MonoProgram {
    let p = frontend::check_source(src).unwrap_or_else(|d| panic!("{}", d.message));
    let root = p.lookup("main").expect("main");
    let m = monomorphise(&p, root).unwrap_or_else(|d| panic!("{}", d.message));
    verify(&m).unwrap();
    m
}

fn names(m: &anf::mono::MonoProgram) -> Vec<String> {
    m.defs.iter().map(|d| format!("{} : {}", d.name, d.ty)).collect()
}

#[test]
fn specialises_each_use_type_once() {
    let m = mono("def mult (a, b) = a * b\ndef main = (mult (2.0, 3.0), mult (2, 3), mult (1.0, 1.0))");
    assert_eq!(
        names(&m),
        ["mult[Real] : Real * Real -> Real", "mult[Int] : Int * Int -> Int", "main : Real * Int * Real"]
    );
}

#[test]
fn polymorphic_lets_are_copied_per_use() {
    let m = mono("def main = let id = fun x -> x in (id 1, id true, id 2.5, id 3)");
    let body = frontend::pretty::expr(&m.defs[0].body, frontend::pretty::Mode::Ascii);
    assert_eq!(body.matches("fun x -> x").count(), 3, "{body}");
}

#[test]
fn unused_polymorphic_let_still_runs() {
    let m = mono("def main = let e = [].[0] in 1");
    let body = frontend::pretty::expr(&m.defs[0].body, frontend::pretty::Mode::Ascii);
    assert!(body.contains("[].[0]"), "{body}");
}

#[test]
fn only_reachable_definitions() {
    let m = mono("def unused x = x + 1\ndef k x y = x\ndef main = k 1.5 true");
    assert_eq!(names(&m), ["k[Real, Bool] : Real -> Bool -> Real", "main : Real"]);
}

#[test]
fn literals_at_real_become_reals() {
    let m = mono("def inc x = x + 1\ndef main = inc 2.5");
    let body = frontend::pretty::expr(&m.defs[0].body, frontend::pretty::Mode::Ascii);
    assert_eq!(body, "fun x -> x + 1.0");
}

#[test]
fn exponential_specialisation_is_refused() {
    let mut src = String::from("def f0 x = x\n");
    for i in 1..40 {
        src.push_str(&format!("def f{i} x = (f{} x, f{} (x, 1))\n", i - 1, i - 1));
    }
    src.push_str("def main = f39 1\n");
    let p = frontend::with_big_stack(|| {
        frontend::check_source(&src).map(|p| {
            let root = p.lookup("main").unwrap();
            monomorphise(&p, root).err().map(|d| d.message)
        })
    });
    let msg = p.unwrap_or_else(|d| Some(d.message)).unwrap_or_default();
    assert!(msg.contains("more than"), "{msg}");
}
