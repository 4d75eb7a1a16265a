//! The public API: compile once, call many times; errors per call; the call context is reused.

use runtime::api::{Arg, Compiled};

const SRC: &str = "
def poly (x : Real) = 3.0 * x * x - 2.0 * x + 1.0
def norm (xs : Array Real) = sqrt (dot xs xs)
def weights = [0.5, 0.25, 0.25]
def score (xs : Array Real) (b : Real) = fold (fun acc x -> acc + x) b (zipWith (fun w x -> w * x) weights xs)
def count (n : Int) (flag : Bool) = if flag then toReal (sum (build n (fun i -> i))) else 0.0
def pair (p : Real * Real) = p.1 / p.2
def ratio (a : Int) (b : Int) = a / b
def softmax (xs : Array Real) = let e = map exp xs in let s = sum e in map (fun x -> x / s) e
";

#[test]
fn many_calls_of_one_compiled_definition() {
    let mut poly = Compiled::new(SRC, "poly").unwrap();
    for i in 0..10_000 {
        let x = i as f64 / 100.0;
        assert_eq!(poly.call_f64(&[Arg::Real(x)]).unwrap(), 3.0 * x * x - 2.0 * x + 1.0);
    }
    let mut norm = Compiled::new(SRC, "norm").unwrap();
    for n in 0..50 {
        let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let expected = xs.iter().fold(0.0, |s, x| s + x * x).sqrt();
        assert_eq!(norm.call_f64(&[Arg::Reals(&xs)]).unwrap(), expected);
    }
}

#[test]
fn globals_curried_parameters_and_scalars_of_every_kind() {
    let mut score = Compiled::new(SRC, "score").unwrap();
    assert_eq!(score.call_f64(&[Arg::Reals(&[2.0, 4.0, 8.0]), Arg::Real(1.0)]).unwrap(), 1.0 + 1.0 + 1.0 + 2.0);
    let mut count = Compiled::new(SRC, "count").unwrap();
    assert_eq!(count.call_f64(&[Arg::Int(5), Arg::Bool(true)]).unwrap(), 10.0);
    assert_eq!(count.call_f64(&[Arg::Int(5), Arg::Bool(false)]).unwrap(), 0.0);
    let mut pair = Compiled::new(SRC, "pair").unwrap();
    assert_eq!(pair.call_f64(&[Arg::Real(1.0), Arg::Real(4.0)]).unwrap(), 0.25);
    let mut ratio = Compiled::new(SRC, "ratio").unwrap();
    assert_eq!(ratio.call(&[Arg::Int(7), Arg::Int(2)]).unwrap().to_string(), "3");
}

#[test]
fn errors_are_per_call_and_the_context_recovers() {
    let mut ratio = Compiled::new(SRC, "ratio").unwrap();
    let e = ratio.call(&[Arg::Int(7), Arg::Int(0)]).unwrap_err();
    assert_eq!(e.message, "division by zero");
    let at = SRC.find("a / b").unwrap();
    assert_eq!(e.span.lo as usize, at);
    assert_eq!(ratio.call(&[Arg::Int(9), Arg::Int(3)]).unwrap().to_string(), "3");
    let mut score = Compiled::new(SRC, "score").unwrap();
    let e = score.call_f64(&[Arg::Reals(&[1.0]), Arg::Real(0.0)]).unwrap_err();
    assert_eq!(e.message, "zipWith: arrays have different lengths 3 and 1");
    // Usage errors: the wrong number or kind of arguments, a result of another type.
    assert!(score.call_f64(&[Arg::Reals(&[1.0])]).is_err());
    assert!(score.call_f64(&[Arg::Real(1.0), Arg::Real(1.0)]).is_err());
    let mut softmax = Compiled::new(SRC, "softmax").unwrap();
    assert!(softmax.call_f64(&[Arg::Reals(&[1.0])]).is_err());
    // Definitions that cannot be called through the API are refused when compiling.
    assert!(Compiled::new(SRC, "weights").is_err());
    assert!(Compiled::new(SRC, "nothing").is_err());
    assert!(Compiled::new("def f (g : Real -> Real) = g 1.0", "f").is_err());
}

#[test]
fn array_results_and_a_reused_arena() {
    let mut softmax = Compiled::new(SRC, "softmax").unwrap();
    let mut out = Vec::new();
    let xs: Vec<f64> = (0..1000).map(|i| (i % 7) as f64).collect();
    softmax.call_reals(&[Arg::Reals(&xs)], &mut out).unwrap();
    let total: f64 = out.iter().sum();
    assert!((total - 1.0).abs() < 1e-12, "{total}");
    let after_first = softmax.arena_reserved();
    for _ in 0..1000 {
        softmax.call_reals(&[Arg::Reals(&xs)], &mut out).unwrap();
    }
    assert_eq!(softmax.arena_reserved(), after_first, "calls reuse the arena");
}

#[test]
fn closures_nested_without_bound_are_an_error_not_a_crash() {
    let src = "def f (n : Int) = toReal ((iterate n (fun g -> fun x -> g (x + 1)) (fun x -> x)) 0)";
    let mut f = Compiled::new(src, "f").unwrap();
    assert_eq!(f.call_f64(&[Arg::Int(1000)]).unwrap(), 1000.0);
    let e = f.call_f64(&[Arg::Int(10_000_000)]).unwrap_err();
    assert_eq!(e.message, "evaluation nested too deeply");
    assert_eq!(f.call_f64(&[Arg::Int(7)]).unwrap(), 7.0);
}

/// A differentiation site the compiler does not handle yet (here a gradient through `<+>` of a
/// change a `fold` makes) falls back alone, as under `nabla run`: the definition compiles,
/// the site runs on the interpreter at each call's values (a definition it reads included), the
/// note names it with its line and column, and a `Gradient` of a definition that calls such a
/// definition outside what it differentiates compiles too.
#[test]
fn an_uncompiled_site_falls_back_alone_in_the_api() {
    let src = "def ks = [0.5, 2.0]
def built (x : Real) = grad (fun (y : Real) -> (y * y) <+> fold (fun d (k : Real) -> if k > 1.0 then d else gchange realGroup k) (replace 0.0) ks) x
def loop (xs : Array Real) = sum (map (fun x -> x * x) xs) + built (sum xs)
def loss (xs : Array Real) = sum (map (fun x -> x * x * built 1.0) xs)
";
    // y² <+> gchange realGroup 0.5 = y² + 0.5 at x: its gradient is 2x.
    let mut built = Compiled::new(src, "built").unwrap();
    let note = built.note().expect("a note").to_string();
    assert!(
        note.contains("a gradient through `<+>` of a change chosen at run time (at 2:")
            && note.contains("that site is evaluated by the reference interpreter"),
        "{note}"
    );
    for x in [-1.5, 0.0, 3.0] {
        assert_eq!(built.call_f64(&[Arg::Real(x)]).unwrap(), 2.0 * x);
    }
    let mut looped = Compiled::new(src, "loop").unwrap();
    assert_eq!(looped.note().unwrap().lines().count(), 1);
    looped.bind(&[Arg::Reals(&[1.0, 2.0])]).unwrap();
    for _ in 0..3 {
        looped.call_bound().unwrap();
        assert_eq!(looped.last_result().unwrap().to_string(), "11.0");
    }
    // d/dxᵢ Σ x² · built 1.0 = 2xᵢ · 2.
    let mut loss = runtime::api::Gradient::new(src, "loss").unwrap();
    assert!(loss.note().is_some());
    let mut g = [0.0; 2];
    assert_eq!(loss.call(&[Arg::Reals(&[1.0, -3.0])], &mut g).unwrap(), 20.0);
    assert_eq!(g, [4.0, -12.0]);
    // Compiled code alone has no note.
    assert!(Compiled::new(SRC, "poly").unwrap().note().is_none());
    // A gradient through a function a `fold` builds at run time compiles: (y·k₂·k₁)² at x, its
    // gradient 2x(k₁k₂)² = 2x.
    let src = "def ks = [0.5, 2.0]
def built (x : Real) = grad (fold (fun (h : Real -> Real) (k : Real) -> fun (y : Real) -> h (y * k)) (fun (y : Real) -> y * y) ks) x
def loss (xs : Array Real) = sum (map (fun x -> x * x * built 1.0) xs)
";
    let mut built = Compiled::new(src, "built").unwrap();
    assert!(built.note().is_none(), "{:?}", built.note());
    for x in [-1.5, 0.0, 3.0] {
        assert_eq!(built.call_f64(&[Arg::Real(x)]).unwrap(), 2.0 * x);
    }
    // Σ x² · built 1.0 = Σ 2x², differentiated: 4x (the inner gradient compiled, a constant of
    // the outer one).
    let mut loss = runtime::api::Gradient::new(src, "loss").unwrap();
    assert!(loss.note().is_none(), "{:?}", loss.note());
    let mut g = [0.0; 2];
    assert_eq!(loss.call(&[Arg::Reals(&[1.0, -3.0])], &mut g).unwrap(), 20.0);
    assert_eq!(g, [4.0, -12.0]);
}
