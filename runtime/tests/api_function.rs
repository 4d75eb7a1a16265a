//! `runtime::api::Function`: any data arguments (arrays of arrays, arrays of tuples, Int arrays,
//! tuples), on the JIT when the compiler handles the definition (gradients included) and on the
//! interpreter when it does not; each checked against `nabla run`'s interpreter on the same program, and every bad
//! shape an error.

use std::rc::Rc;

use runtime::api::{Backend, Function};
use runtime::value::Value;

fn reals(xs: &[f64]) -> Value {
    Value::Array(Rc::new(xs.iter().map(|x| Value::Real(*x)).collect()))
}

fn array(vs: Vec<Value>) -> Value {
    Value::Array(Rc::new(vs))
}

const SRC: &str = "
def weighted (m : Array (Array Real)) (w : Array Int) (k : Real) =
  (k * sum (build (len m) (fun i -> toReal w.[i] * sum m.[i])), map len m)
def pairs (ps : Array (Real * Int)) = sum (map (fun (x, n) -> x * toReal n) ps)
def scaleRows ((a, b) : Real * Real) (m : Array (Array Real)) = map (fun r -> map (fun x -> a * x + b) r) m
def gradRows (m : Array (Array Real)) = grad (fun (m : Array (Array Real)) -> sum (map (fun r -> dot r r) m)) m
def main = (weighted [[1.0, 2.0], [], [3.0]] [2, 5, -1] 0.5, pairs [(1.5, 2), (2.0, -1)],
            scaleRows (2.0, 1.0) [[1.0], [2.0, 3.0]], gradRows [[1.0, -2.0], [0.5]])
";

fn interpreted_main() -> String {
    let (_, mono) = runtime::prepare(SRC, "main").unwrap();
    runtime::interp::run(&mono).unwrap().to_string()
}

#[test]
fn nested_data_on_both_engines() {
    frontend::with_big_stack(|| {
        let m = array(vec![reals(&[1.0, 2.0]), reals(&[]), reals(&[3.0])]);
        let w = array(vec![Value::Int(2), Value::Int(5), Value::Int(-1)]);
        let mut weighted = Function::new(SRC, "weighted").unwrap();
        assert_eq!(weighted.backend(), Backend::Compiled);
        assert_eq!(weighted.params().len(), 3);
        let a = weighted.call(&[m.clone(), w.clone(), Value::Real(0.5)]).unwrap();
        // Called twice: the reused buffers give the same answer.
        let b = weighted.call(&[m, w, Value::Real(0.5)]).unwrap();
        assert_eq!(a.to_string(), b.to_string());

        let ps = array(vec![
            Value::tuple(vec![Value::Real(1.5), Value::Int(2)]),
            Value::tuple(vec![Value::Real(2.0), Value::Int(-1)]),
        ]);
        let mut pairs = Function::new(SRC, "pairs").unwrap();
        let p = pairs.call(&[ps]).unwrap();

        let mut scale = Function::new(SRC, "scaleRows").unwrap();
        let rows = array(vec![reals(&[1.0]), reals(&[2.0, 3.0])]);
        let s = scale.call(&[Value::tuple(vec![Value::Real(2.0), Value::Real(1.0)]), rows]).unwrap();

        // A gradient over ragged rows: nested accumulators, compiled.
        let mut g = Function::new(SRC, "gradRows").unwrap();
        assert_eq!(g.backend(), Backend::Compiled, "{:?}", g.note());
        let gr = g.call(&[array(vec![reals(&[1.0, -2.0]), reals(&[0.5])])]).unwrap();

        assert_eq!(format!("({a}, {p}, {s}, {gr})"), interpreted_main());
        assert_eq!(gr.to_string(), "[[2.0, -4.0], [1.0]]");
    });
}

/// A gradient compiled reverse mode (`adjoint::reverse`) handles runs as native code; one it does
/// not (a gradient through `<+>` of a change a `fold` makes) falls back alone, as under `nabla
/// run`: that site runs on the interpreter with a note naming it (with its line and column) and
/// the rest of the definition stays native, a loop included. All compute what `nabla run --interp`
/// does.
#[test]
fn gradients_compile_where_reverse_mode_does() {
    frontend::with_big_stack(|| {
        let src = "def sumsq (xs : Array Real) = grad (fun (v : Array Real) -> sum (map (fun x -> x * x) v)) xs
def built (c : Bool) (g : Real) = grad (fun (y : Real) -> (y * y * (if c then 0.25 else 1.0)) <+> fold (fun d (k : Real) -> if k > 0.75 then gchange realGroup k else d) (gchange realGroup 0.0) [if c then 0.5 else 1.0]) g
def mixed (xs : Array Real) (c : Bool) = (sum (map (fun x -> x * x) xs), built c (sum xs), sumsq xs)
def main = (sumsq [1.0, -2.0], built true 3.0, mixed [1.0, 2.0] false)
";
        let mut sumsq = Function::new(src, "sumsq").unwrap();
        assert_eq!(sumsq.backend(), Backend::Compiled);
        assert!(sumsq.note().is_none());
        let mut built = Function::new(src, "built").unwrap();
        assert_eq!(built.backend(), Backend::Mixed);
        let note = built.note().unwrap();
        assert!(
            note.contains("a gradient through `<+>` of a change chosen at run time")
                && note.contains("(at 2:")
                && note.contains("evaluated by the reference interpreter"),
            "{note}"
        );
        let mut mixed = Function::new(src, "mixed").unwrap();
        assert_eq!(mixed.backend(), Backend::Mixed);
        assert_eq!(mixed.note().unwrap().lines().count(), 1, "{:?}", mixed.note());
        let a = sumsq.call(&[reals(&[1.0, -2.0])]).unwrap();
        let b = built.call(&[Value::Bool(true), Value::Real(3.0)]).unwrap();
        let c = mixed.call(&[reals(&[1.0, 2.0]), Value::Bool(false)]).unwrap();
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        assert_eq!(format!("({a}, {b}, {c})"), runtime::interp::run(&mono).unwrap().to_string());
        assert_eq!(format!("({a}, {b}, {c})"), "([2.0, -4.0], 1.5, (5.0, 6.0, [2.0, 4.0]))");
        // The interpreted site sees each call's arguments, bound or not.
        built.bind(&[Value::Bool(false), Value::Real(-2.0)]).unwrap();
        built.call_bound().unwrap();
        assert_eq!(built.last_result().unwrap().to_string(), "-4.0");
        // An error at the interpreted site is the interpreter's, and the next call goes on.
        let src = "def f (xs : Array Real) (i : Int) = grad (fun (y : Real) -> (y * y * 4.0) <+> fold (fun d (k : Real) -> gchange realGroup k) (replace 0.0) [xs.[i]]) 1.0";
        let mut f = Function::new(src, "f").unwrap();
        assert_eq!(f.backend(), Backend::Mixed);
        let e = f.call(&[reals(&[2.0]), Value::Int(3)]).unwrap_err();
        assert!(e.message.contains("index 3 out of bounds for length 1"), "{}", e.message);
        assert_eq!(f.call(&[reals(&[2.0]), Value::Int(0)]).unwrap().to_string(), "8.0");
    });
}

#[test]
fn wrong_shapes_are_errors() {
    frontend::with_big_stack(|| {
        let mut weighted = Function::new(SRC, "weighted").unwrap();
        let m = array(vec![reals(&[1.0])]);
        let w = array(vec![Value::Int(1)]);
        for args in [
            vec![m.clone(), w.clone()],
            vec![reals(&[1.0]), w.clone(), Value::Real(1.0)],
            vec![m.clone(), reals(&[1.0]), Value::Real(1.0)],
            vec![m.clone(), w.clone(), Value::Int(1)],
            vec![array(vec![Value::Real(1.0)]), w.clone(), Value::Real(1.0)],
        ] {
            let e = weighted.call(&args).unwrap_err();
            assert!(e.message.starts_with("cannot call `weighted` this way"), "{}", e.message);
        }
        // The language's own errors come back as values too.
        let e = weighted.call(&[m, array(vec![]), Value::Real(1.0)]).unwrap_err();
        assert!(e.message.contains("out of bounds"), "{}", e.message);
        let mut g = Function::new(SRC, "gradRows").unwrap();
        assert!(g.call(&[reals(&[1.0])]).is_err());
    });
}

#[test]
fn definitions_that_are_not_data_functions_are_refused() {
    let src = "def k = 3.0\ndef h (f : Real -> Real) = f 1.0\ndef c (x : Real) = (x, fun (y : Real) -> y)";
    for name in ["k", "h", "c", "missing"] {
        assert!(Function::new(src, name).is_err(), "{name}");
    }
}

/// Arguments bound once and called many times (`bind`, `call_bound`, `last_result`), on both
/// engines: every bound call gives what `call` gives (a gradient's reverse phase never writes
/// into the bound input), a result that is one of the inputs outlives the runs, a failed run
/// leaves no result, and a call with nothing bound is an error.
#[test]
fn bound_arguments_are_called_many_times() {
    frontend::with_big_stack(|| {
        let src = "def gradRows (m : Array (Array Real)) =
  grad (fun (m : Array (Array Real)) -> sum (map (fun r -> dot r r) m)) m
def same (m : Array (Array Real)) (k : Int) = (m, k)
def at (xs : Array Real) (i : Int) = xs.[i]
def nested (x : Real) = grad (fun (y : Real) -> (y * y) <+> fold (fun d (k : Real) -> gchange realGroup k) (replace 0.0) [1.0]) x
";
        let m = array(vec![reals(&[1.0, -2.0]), reals(&[0.5])]);
        let mut g = Function::new(src, "gradRows").unwrap();
        assert_eq!(g.backend(), Backend::Compiled);
        assert!(g.call_bound().unwrap_err().message.contains("no arguments are bound"));
        assert!(g.last_result().is_none());
        let expect = g.call(&[m.clone()]).unwrap().to_string();
        g.bind(&[m.clone()]).unwrap();
        assert!(g.last_result().is_none(), "a bind forgets the last result");
        for _ in 0..3 {
            g.call_bound().unwrap();
            assert_eq!(g.last_result().unwrap().to_string(), expect);
        }
        assert_eq!(expect, "[[2.0, -4.0], [1.0]]");

        // The result is the bound input itself: read after the runs, it is still the input.
        let mut same = Function::new(src, "same").unwrap();
        same.bind(&[m.clone(), Value::Int(7)]).unwrap();
        same.call_bound().unwrap();
        same.call_bound().unwrap();
        assert_eq!(same.last_result().unwrap().to_string(), "([[1.0, -2.0], [0.5]], 7)");

        // A run that fails leaves no result; binding other arguments makes the next run succeed.
        let mut at = Function::new(src, "at").unwrap();
        at.bind(&[reals(&[1.0, 2.0]), Value::Int(5)]).unwrap();
        assert!(at.call_bound().unwrap_err().message.contains("out of bounds"));
        assert!(at.last_result().is_none());
        assert!(at.bind(&[reals(&[1.0]), Value::Real(0.0)]).is_err(), "checked like `call`");
        at.bind(&[reals(&[1.0, 2.0]), Value::Int(1)]).unwrap();
        at.call_bound().unwrap();
        assert_eq!(at.last_result().unwrap().to_string(), "2.0");

        // With a site left to the interpreter, bound values and the last result behave the same.
        let mut nested = Function::new(src, "nested").unwrap();
        assert_eq!(nested.backend(), Backend::Mixed);
        assert!(nested.call_bound().is_err());
        nested.bind(&[Value::Real(3.0)]).unwrap();
        nested.call_bound().unwrap();
        nested.call_bound().unwrap();
        assert_eq!(nested.last_result().unwrap().to_string(), "6.0");
    });
}
