//! Properties of the pullback semantics:
//! - `grad`, `vjp` and `jacobian` agree with the pullback forms they abbreviate (docs/language.md §5),
//!   on generated programs;
//! - the reductions a construct needs appear, with their numbers, in its trace;
//! - the step budget stops a reduction with a clear error.

mod pullback_gen;

use pullback_gen::{lit, program, Options, Rng};
use runtime::interp::pullback::{trace, Config};

fn run(src: &str) -> Result<String, String> {
    let (_, mono) = runtime::prepare(src, "main").map_err(|d| d.to_string())?;
    runtime::interp::run(&mono).map(|v| v.to_string()).map_err(|d| d.to_string())
}

fn point(p: &[f64]) -> String {
    if p.len() == 1 {
        lit(p[0])
    } else {
        format!("({})", p.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(", "))
    }
}

/// `def NAME` … renamed from `def f`.
fn renamed(src: &str, name: &str) -> String {
    src.replacen("def f ", &format!("def {name} "), 1)
}

#[test]
fn grad_vjp_and_jacobian_are_the_pullbacks_they_abbreviate() {
    frontend::with_big_stack(|| {
        let mut rng = Rng::new(0xab5_7ac7);
        let opts = Options { nested: false, depth: 3, chosen_closures: true };
        let mut failures = Vec::new();
        for k in 0..40 {
            // grad f x = unstar ((pullback f (omega 1.0)) x)
            let p = program(&mut rng, &opts);
            let x = point(&p.point);
            let a = run(&format!("{}def main = grad f {x}\n", p.source));
            let b = run(&format!("{}def main = unstar ((pullback f (omega 1.0)) {x})\n", p.source));
            if a != b || a.is_err() {
                failures.push(format!("#{k} grad: {a:?} vs {b:?}\n{}", p.source));
            }
            // vjp g x c = unstar ((pullback g (omega c)) x), for g x = (f1 x, f2 x).
            let (p1, p2) = (program(&mut rng, &opts), program(&mut rng, &opts));
            let n = p1.inputs.max(p2.inputs);
            let xs: Vec<f64> = (0..n).map(|i| 0.25 * i as f64 - 0.5).collect();
            let args = |m: usize| {
                if m == 1 {
                    "p.1".to_string()
                } else {
                    format!("({})", (1..=m).map(|i| format!("p.{i}")).collect::<Vec<_>>().join(", "))
                }
            };
            let ptype = if n == 1 { "Real".to_string() } else { vec!["Real"; n].join(" * ") };
            let pat = if n == 1 { "(p : Real * Real)".to_string() } else { format!("(p : {ptype})") };
            let (x, pat, a1, a2) = if n == 1 {
                // A one-element input is a pair whose second component is unused.
                (format!("({}, 0.0)", lit(xs[0])), pat, "p.1".to_string(), "p.1".to_string())
            } else {
                (point(&xs), pat, args(p1.inputs), args(p2.inputs))
            };
            let src =
                format!("{}{}def g {pat} = (f1 {a1}, f2 {a2})\n", renamed(&p1.source, "f1"), renamed(&p2.source, "f2"));
            let c = "(0.5, -2.0)";
            let a = run(&format!("{src}def main = vjp g {x} {c}\n"));
            let b = run(&format!("{src}def main = unstar ((pullback g (omega {c})) {x})\n"));
            if a != b || a.is_err() {
                failures.push(format!("#{k} vjp: {a:?} vs {b:?}\n{src}"));
            }
            // jacobian h v: row p is unstar ((pullback h (omega e_p)) v), for h v = [f1 …, f2 …].
            let idx = |m: usize| {
                if m == 1 {
                    "v.[0]".to_string()
                } else {
                    format!("({})", (0..m).map(|i| format!("v.[{i}]")).collect::<Vec<_>>().join(", "))
                }
            };
            let hsrc = format!(
                "{}{}def h (v : Array Real) = [f1 {}, f2 {}]\n",
                renamed(&p1.source, "f1"),
                renamed(&p2.source, "f2"),
                idx(p1.inputs),
                idx(p2.inputs)
            );
            let v = format!("[{}]", xs.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(", "));
            let a = run(&format!("{hsrc}def main = jacobian h {v}\n"));
            let b = run(&format!(
                "{hsrc}def main = [unstar ((pullback h (omega [1.0, 0.0])) {v}), \
                 unstar ((pullback h (omega [0.0, 1.0])) {v})]\n"
            ));
            if a != b || a.is_err() {
                failures.push(format!("#{k} jacobian: {a:?} vs {b:?}\n{hsrc}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    });
}

/// The labels of a program's trace, in order.
fn labels(src: &str) -> Vec<String> {
    frontend::with_big_stack(|| {
        let (_, mono) = runtime::prepare(src, "main").expect("the program checks");
        let out = trace(&mono, &Config::default()).expect("the program reduces");
        out.lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let (lab, rest) = l.strip_prefix('(')?.split_once(')')?;
                // A step's label is short and padded; the first line (the term itself) is not one.
                (!lab.contains(['(', 'Ω', 'λ']) && rest.starts_with(' ')).then(|| lab.to_string())
            })
            .collect()
    })
}

fn has(labels: &[String], wanted: &[&str], what: &str) {
    for w in wanted {
        assert!(labels.iter().any(|l| l == w), "{what}: no ({w}) step in {labels:?}");
    }
}

#[test]
fn example_3_1_reduces_as_examples_3_7_and_3_9() {
    let l = labels(
        "def g (x, y) = (x + 1.0, 2.0 * x + y * y)\ndef mult (a, b) = a * b\ndef pow2 z = z * z\n\
         def f (x, y) = pow2 (mult (g (x, y)))\ndef main = (pullback f (omega 1.0)) (1.0, 3.0)\n",
    );
    let expected =
        ["δ", "A", "8", "8", "8", "7", "20a, 13c", "20a, 15", "3", "20a, 15", "3", "15", "3", "1", "5", "5", "5", "5"];
    assert_eq!(l, expected);
}

#[test]
fn each_construct_uses_its_rules() {
    // A closure capturing the variable: D-curry (18) with its premise, D-eval (19b).
    has(
        &labels("def main = grad (fun w -> let f = fun x -> w * x in f 3.0 + f w) 2.0"),
        &["20a, 18", "20a, 19b", "6"],
        "closure",
    );
    // Nested pullbacks: rule 17, then J differentiated again.
    has(&labels("def main = grad (fun x -> x * grad (fun y -> x * y) 1.0) 3.0"), &["grad", "17", "J"], "nested");
    // Unfolding at the point.
    has(&labels("def main = grad (fun (xs : Array Real) -> fold (fun a x -> a * x) 1.0 (map (fun x -> x + 1.0) xs)) [1.0, 2.0]"), &["map", "fold"], "arrays");
    has(
        &labels("def main = grad (fun x -> iterate 2 (fun y -> y * y) x + sum (build 2 (fun i -> toReal i * x))) 1.0"),
        &["iterate", "build"],
        "iterate, build",
    );
    has(
        &labels("def main = grad (fun (xs : Array Real) -> sum (zipWith (fun a b -> a * b) xs xs)) [1.0, 2.0]"),
        &["zipWith"],
        "zipWith",
    );
    // if on the variable, and if inside a closure body (both branches, in a premise).
    has(&labels("def main = grad (fun x -> if x > 0.0 then x * x else x) 2.0"), &["if"], "if");
    has(
        &labels("def main = grad (fun w -> let f = fun x -> if x > 0.0 then w * x else w in f 2.0) 1.0"),
        &["if′"],
        "if in a closure",
    );
    // Dual maps in the body (16a when the map is constant, 16c when it depends on the variable).
    has(
        &labels("def main = grad (fun x -> unstar (dual (fun v -> v * 2.0) (star x))) 3.0"),
        &["20a, 16a", "lin"],
        "dual map",
    );
    has(
        &labels("def main = grad (fun a -> unstar (dual (fun v -> a * v) (star a))) 3.0"),
        &["20a, 16c"],
        "dual map on the variable",
    );
    // Reduction 5 on dual maps; r* on a dual vector applied to a tangent (D: App. A.2 below).
    has(&labels("def main = dual (fun v -> 2.0 * v) (dual (fun w -> w + w) (star 1.0))"), &["5"], "dual maps");
    has(&labels("def main = ((pullback (fun x -> x * x) (omega 1.0)) 3.0) 2.0"), &["r*"], "dual vector on a tangent");
    // An input of higher type (App. A.2): 19b on the list applied to the function.
    has(&labels("def sum (l : (Real -> Real -> Real) -> Real -> Real) = l (fun x y -> x + y) 0.0\ndef xs = fun f d -> f (-1.0) (f 7.0 d)\ndef main = ((pullback sum (omega 1.0)) xs) (fun f d -> f 2.0 (f 3.0 d))"), &["20a, 19b", "D"], "App. A.2");
}

#[test]
fn the_step_budget_is_a_clear_error() {
    frontend::with_big_stack(|| {
        let (_, mono) =
            runtime::prepare("def main = grad (fun x -> iterate 50 (fun y -> y * 0.5) x) 1.0", "main").unwrap();
        let err = trace(&mono, &Config { budget: 100, ..Config::default() }).expect_err("100 steps are too few");
        assert!(err.message.contains("exceeded its budget of 100 steps"), "{}", err.message);
        assert!(trace(&mono, &Config::default()).is_ok());
    });
}

#[test]
fn an_unused_array_input_gets_a_zero_array_of_its_length() {
    assert_eq!(
        run("def main = grad (fun (p : Real * Array Real) -> p.1 * 2.0) (1.0, [5.0, 6.0])"),
        Ok("(2.0, [0.0, 0.0])".into())
    );
    assert_eq!(
        run("def main : Dual (Real * Array Real) = dual (fun (a, b) -> a * 3.0) (star 1.0)"),
        Ok("(3.0, 0)*".into())
    );
}
