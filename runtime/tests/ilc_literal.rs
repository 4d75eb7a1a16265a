//! The fast reader of data literals (`runtime::incr::data_literal`) agrees with the front end and
//! the interpreter (`evaluate_literal`) wherever it accepts a text, and leaves the rest to them.

use frontend::types::Type;
use runtime::incr::{data_literal, evaluate_literal};

fn ty(surface: &str) -> Type {
    let p = frontend::check_source(&format!("def t (x : {surface}) = x")).expect("a type");
    match &p.defs[0].scheme.ty {
        Type::Fun(a, _) => (**a).clone(),
        t => t.clone(),
    }
}

#[test]
fn data_literals_agree_with_the_interpreter() {
    let cases: &[(&str, &str, bool)] = &[
        ("Int", "42", true),
        ("Int", " -7 -- a comment", true),
        ("Int", "1 + 2", false),
        ("Real", "1e10", true),
        ("Real", "-0.0", true),
        ("Real", "3", true),
        ("Real", "-2.5e-3", true),
        ("Bool", "true", true),
        ("Int * Bag Int", "(1, bag{1, 2 # 3, 1 # -1})", true),
        ("Array Real", "[1.0, 2, -3.5]", true),
        ("Array Int", "[]", true),
        ("Map Int (Bag Int)", "map{1 -> bag{1, 2}, 2 -> bag{}}", true),
        ("Map Int Int", "map{1 -> 2, 1 -> 3}", false),
        ("Delta (Map Int (Bag Int))", "gchange (mapGroup bagGroup) map{4 -> bag{1, 5 # -2}}", true),
        ("Delta Int", "replace 3", true),
        ("Delta Int", "gchange intGroup -3", false),
        ("Delta Int", "gchange intGroup (-3)", false),
        ("Delta (Bag Int)", "gchange bagGroup bag{3 # -1}", true),
        ("Delta Int", "gchange bagGroup 3", false),
        ("Delta (Int * Bag Int)", "(gchange intGroup 1, replace bag{2})", true),
        ("Delta (Map Int (Int * Int))", "gchange (mapGroup (pairGroup intGroup intGroup)) map{1 -> (2, 3)}", true),
        ("Delta Int", "gchange (group (fun a b -> a + b) (fun a -> 0 - a) 0) 1", false),
        ("Bag Int", "bag{1, 2", false),
        ("Int", "12abc", false),
    ];
    for (t, text, fast) in cases {
        let ty = ty(t);
        let quick = data_literal(text, &ty);
        assert_eq!(quick.is_some(), *fast, "{t}: {text}");
        let full = evaluate_literal(text, &ty, 0);
        if let Some(v) = quick {
            let (w, _) = full.unwrap_or_else(|d| panic!("{t}: {text}: the interpreter refuses it: {}", d.message));
            assert_eq!(v.to_string(), w.to_string(), "{t}: {text}");
            if let (runtime::value::Value::Real(x), runtime::value::Value::Real(y)) = (&v, &w) {
                assert_eq!(x.to_bits(), y.to_bits(), "{t}: {text}");
            }
        }
    }
}
