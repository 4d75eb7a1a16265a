//! Compiled reverse mode against the reference interpreter's pullback reducer on random programs:
//! 300 per run (seeded; `NABLA_REV_SEED` picks another seed, `NABLA_REV_PROGRAMS` another count).
//! Each draws a first-order body `f` from the generator `pullback_fd.rs` uses (every Real
//! primitive, closures, `fold`/`map`/`zipWith`/`build`/`iterate`, `if`, nested `grad`) and
//! differentiates it in one of several contexts a user writes: `grad` at a scalar or tuple point,
//! `grad` over an array whose elements feed `f`, `vjp` of a tuple-valued function with a
//! cotangent, `jacobian` of an array-valued map, `f` passed as a function-typed argument to a
//! higher-order helper (and as a closure through `fold`), and a gradient nested around it; and 60
//! (`compiled_gradients_through_changes_and_dual_maps_equal_the_reducers`) through `<+>` of `f`
//! and a change read from an array of changes, or an array of arrays of them (or a `fold` over
//! them), through a dual map on an
//! array space with `f` in it applied to a tangent or `unstar`red (its vector compiled where
//! reduction 5 gives it without the array's length), and through a dual vector of nested data
//! paired with a tangent that may not have its shape (both engines then give the same first
//! mismatch).
//!
//! The compiled result (`adjoint::reverse`, then lowering, `anf::opt` and the JIT) must equal the
//! reducer's within 1e-9 relative (NaN matching NaN), and the engine must not fall back to the
//! interpreter. Errors must be identical.
//!
//! A third test (`sites_left_to_the_interpreter_agree_with_the_reducer`, 60 programs) puts each
//! `f` behind a site the transform does not compile, inside compiled loops and tuples: per-site
//! fallback, the site on the interpreter and the rest compiled.
//!
//! A second test draws 150 programs (or `NABLA_REV_PROGRAMS`) over `Array (Array Real)` and
//! arrays of tuples `(Int, Real, …)` inputs: entries `m.[i].[j]`, `map`/`fold` over rows, rows
//! rebuilt and put in literals, rows captured by loops, `dot` of rows, `vjp` with a nested
//! cotangent, a loop carrying a nested array, nested gradients (within 1e-9 of the result's
//! largest component: those forms sum terms that cancel). Another draws 60 over inputs nested
//! deeper: `Array (Array (Array Real))` (entries, maps and folds over blocks and rows, a block
//! captured by a loop, a new 3-deep array, an outer gradient through one, a gradient of a
//! gradient, a `vjp` whose deep cotangent may not match the output) and arrays of tuples holding arrays (`Array (Real * Array Real)`, `Array (Array Real
//! * Array Real)`).

mod pullback_gen;

use pullback_gen::{close, eval, lit, program, reals, Options, Rng};

const PROGRAMS: usize = 300;

fn tuple_literal(p: &[f64]) -> String {
    if p.len() == 1 {
        lit(p[0])
    } else {
        format!("({})", p.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(", "))
    }
}

fn array_literal(p: &[f64]) -> String {
    format!("[{}]", p.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(", "))
}

/// `f` applied to the elements `xs.[0] … xs.[n-1]` of an array named `xs`.
fn f_of_array(n: usize, xs: &str) -> String {
    let args: Vec<String> = (0..n).map(|i| format!("{xs}.[{i}]")).collect();
    if n == 1 {
        format!("f {}", args[0])
    } else {
        format!("f ({})", args.join(", "))
    }
}

/// `f` applied to `n` arguments, the first `y` and the rest the point's other coordinates.
fn f_through(n: usize, y: &str, point: &[f64]) -> String {
    if n == 1 {
        format!("f {y}")
    } else {
        let rest: Vec<String> = point[1..].iter().map(|x| lit(*x)).collect();
        format!("f ({y}, {})", rest.join(", "))
    }
}

/// The `main` of one case: a context around `f` (of `n` inputs, at `point`) chosen by `form`.
fn context(form: u64, n: usize, point: &[f64], rng: &mut Rng) -> String {
    let scale = lit(((rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0);
    match form {
        // grad at the point (scalar or tuple).
        0 => format!("def main = grad f {}\n", tuple_literal(point)),
        // grad over an array whose elements are f's inputs.
        1 => format!(
            "def g (xs : Array Real) : Real = {} * {scale}\ndef main = grad g {}\n",
            f_of_array(n, "xs"),
            array_literal(point)
        ),
        // vjp of a tuple-valued function, with a cotangent.
        2 => {
            let c = (lit(rng.unit() * 2.0 - 1.0), lit(rng.unit() * 2.0 - 1.0));
            format!(
                "def h (xs : Array Real) : Real * Real = let v = {} in (v, v * xs.[0])\n\
                 def main = vjp h {} ({}, {})\n",
                f_of_array(n, "xs"),
                array_literal(point),
                c.0,
                c.1
            )
        }
        // jacobian of an array-valued function built from f.
        3 => format!(
            "def h (xs : Array Real) : Array Real = let v = {} in build (len xs) (fun i -> v * xs.[i])\n\
             def main = jacobian h {}\n",
            f_of_array(n, "xs"),
            array_literal(point)
        ),
        // f as a function-typed argument of a higher-order helper, applied twice.
        4 => format!(
            "def twice (k : Real -> Real) (y : Real) : Real = k y + {scale} * k (0.5 * y)\n\
             def main = grad (fun (y : Real) -> twice (fun (z : Real) -> {}) y) {}\n",
            f_through(n, "z", point),
            lit(point[0])
        ),
        // f inside a closure folded over an array of points.
        5 => format!(
            "def main = grad (fun (xs : Array Real) -> fold (fun acc y -> 0.5 * acc + {}) 0.0 xs) {}\n",
            f_through(n, "y", point),
            array_literal(&[point[0], point[0] * 0.5 + 0.125, -point[0]])
        ),
        // a gradient around the whole gradient: the inner one differentiated again (nested).
        _ => format!(
            "def main = grad (fun (y : Real) -> y * {scale} + (grad (fun (z : Real) -> {}) y)) {}\n",
            f_through(n, "z", point),
            lit(point[0])
        ),
    }
}

fn compiled(src: &str) -> Result<Vec<f64>, String> {
    let (_, mono) = runtime::prepare(src, "main").map_err(|d| d.to_string())?;
    let r = runtime::engine::run(&mono).map_err(|d| d.to_string())?;
    match r.note {
        Some(n) => Err(format!("not compiled: {n}")),
        None => Ok(reals(&r.value)),
    }
}

/// How one random-program test runs: its default seed and count, its `forms` contexts made by
/// `context`, the comparison, and the least share of programs each form must get (1 in `floor`).
struct Sweep {
    seed: u64,
    programs: usize,
    forms: u64,
    context: fn(u64, usize, &[f64], &mut Rng) -> String,
    close: fn(&[f64], &[f64]) -> bool,
    floor: usize,
}

/// Runs `programs` random programs (overridable by `NABLA_REV_SEED`/`NABLA_REV_PROGRAMS`), each in
/// one of the sweep's contexts, under the reducer and compiled: they must agree (or fail alike),
/// every context must be exercised, and three in four results must have a non-zero component.
fn sweep(sw: Sweep) {
    let seed = std::env::var("NABLA_REV_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(sw.seed);
    let programs: usize = std::env::var("NABLA_REV_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(sw.programs);
    frontend::with_big_stack(move || {
        let mut rng = Rng::new(seed);
        let mut failures = Vec::new();
        let mut per_form = vec![0usize; sw.forms as usize];
        let mut nonzero = 0;
        for k in 0..programs {
            let p = program(&mut rng, &Options { nested: true, depth: 3 });
            let form = rng.below(sw.forms);
            let src = format!("{}{}", p.source, (sw.context)(form, p.inputs, &p.point, &mut rng));
            let reducer = eval(&src).map(|v| reals(&v));
            let jit = compiled(&src);
            match (&reducer, &jit) {
                (Ok(a), Ok(b)) if (sw.close)(a, b) => {
                    per_form[form as usize] += 1;
                    if a.iter().any(|x| x.abs() > 1e-9) {
                        nonzero += 1;
                    }
                }
                (Err(a), Err(b)) if a == b => per_form[form as usize] += 1,
                _ => failures.push(format!("#{k} (form {form}): reducer {reducer:?}, compiled {jit:?}\n{src}")),
            }
        }
        assert!(failures.is_empty(), "{} of {programs} failed:\n\n{}", failures.len(), failures.join("\n\n"));
        // Every context was exercised, and the gradients compared are not all zero.
        assert!(per_form.iter().all(|&c| c * sw.floor >= programs), "contexts per form: {per_form:?}");
        assert!(nonzero * 4 >= programs * 3, "only {nonzero} of {programs} results had a non-zero component");
    });
}

#[test]
fn compiled_gradients_of_random_programs_equal_the_reducers() {
    sweep(Sweep { seed: 0x7e57_0bad_u64, programs: PROGRAMS, forms: 7, context, close, floor: 20 });
}

/// Contexts around `f` through ILC's changes and dual maps: `<+>` of `f` and a change read from
/// an array literal of changes whose values depend on the input (constants at the point), at
/// each index or folded over; a dual map on an array space with `f` in its coefficients and its
/// tangent, applied (let-bound and applied twice, or not).
fn change_and_dual_context(form: u64, n: usize, point: &[f64], rng: &mut Rng) -> String {
    let scale = lit(((rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0);
    match form {
        // `<+>` of a change read from an array of changes (ILC's rule (⊕) at the point): an
        // array literal of changes whose values depend on the input (constants at the point),
        // read at each index, or folded over.
        0 => {
            let cs: Vec<String> = (0..3)
                .map(|_| match rng.below(4) {
                    0 => format!("replace {scale}"),
                    1 => format!("gchange (group (fun a b -> a * b) (fun a -> 1.0 / a) 1.0) ({scale} * y)"),
                    _ => format!("gchange realGroup (y * {scale})"),
                })
                .collect();
            let (body, cs) = match rng.below(3) {
                0 => (format!("({} <+> cs.[k]) + 0.5 * y", f_through(n, "y", point)), format!("[{}]", cs.join(", "))),
                // An array of arrays of changes: row k / 2, element k mod 2 (rows of 2 and 1).
                1 => (
                    format!("({} <+> cs.[k / 2].[k - 2 * (k / 2)]) + 0.5 * y", f_through(n, "y", point)),
                    format!("[[{}, {}], [{}]]", cs[0], cs[1], cs[2]),
                ),
                _ => (
                    format!(
                        "fold (fun acc d -> (acc * 0.5) <+> d) ({}) cs + 0.5 * y + toReal k",
                        f_through(n, "y", point)
                    ),
                    format!("[{}]", cs.join(", ")),
                ),
            };
            format!(
                "def main = build 3 (fun k -> grad (fun (y : Real) -> let cs = {cs} in {body}) {})\n",
                lit(point[0])
            )
        }
        // A dual vector of nested data (a pullback at a point of `Array (Array Real)`, f its
        // 1-form's coefficient) paired with a tangent of its shape or (one in three) with a row one
        // shorter: the same value, or the same first mismatch with its path, in both engines.
        2 => {
            let short = (rng.below(3) == 0).then(|| rng.below(2) as usize);
            let rows = |len: &dyn Fn(usize) -> usize, k0: f64, dk: f64| -> String {
                let rs: Vec<String> = (0..2)
                    .map(|r| array_literal(&(0..len(r)).map(|k| k0 + dk * (k + r) as f64).collect::<Vec<_>>()))
                    .collect();
                format!("[{}]", rs.join(", "))
            };
            let m = rows(&|_| n, -0.5, 0.25);
            let t = rows(&|r| if short == Some(r) { n - 1 } else { n }, 0.5, -0.125);
            format!(
                "def main = grad (fun (y : Real) -> ((pullback (fun (m : Array (Array Real)) -> \
                 sum (map (fun r -> y * dot r r) m)) (omega ({}))) {m}) {t} + 0.5 * y) {}\n",
                f_through(n, "y", point),
                lit(point[0])
            )
        }
        // `unstar` of a dual map on an array space whose vector reduction 5 gives without the
        // length (the array's adjoint from a coefficient, or from W's part), f in its coefficient
        // and in W; or such a map let-bound and applied to tangents (its vector paired).
        3 => {
            let f = f_through(n, "y", point);
            let d = if rng.below(2) == 0 {
                format!("dual (fun (v : Array Real) -> ({f}) * dot v [1.0, y, {scale}]) (star y)")
            } else {
                format!("dual (fun ((x : Real), (v : Array Real)) -> (v, {scale} * x)) (star ([y, {f}], y * y))")
            };
            let body = match rng.below(3) {
                0 if d.contains("dot") => format!("let d = {d} in d [1.0, y, 0.5] + d [y, 0.25, y]"),
                _ if d.contains("dot") => format!("sum (unstar ({d}))"),
                _ => format!("let u = unstar ({d}) in u.1 * sum u.2"),
            };
            format!("def main = grad (fun (y : Real) -> {body} + 0.5 * y) {}\n", lit(point[0]))
        }
        // A dual map on an array space applied to a tangent, with f in its coefficients and in
        // the tangent (precomposition, ⟨w, S[t/v]⟩), let-bound and applied twice or not.
        _ => {
            let d = format!(
                "dual (fun (v : Array Real) -> v.[0] * ({}) + {scale} * sum v) (star y)",
                f_through(n, "y", point)
            );
            let body = if rng.below(2) == 0 {
                format!("({d}) [y, {}]", f_through(n, "y", point))
            } else {
                format!("let d = {d} in d [1.0, y] + d [y * y]")
            };
            format!("def main = grad (fun (y : Real) -> {body} + 0.5 * y) {}\n", lit(point[0]))
        }
    }
}

#[test]
fn compiled_gradients_through_changes_and_dual_maps_equal_the_reducers() {
    sweep(Sweep {
        seed: 0xc4a9_6e00_u64,
        programs: PROGRAMS / 5,
        forms: 4,
        context: change_and_dual_context,
        close,
        floor: 6,
    });
}

/// `f` applied to `args`.
fn f_of(args: &[String]) -> String {
    if args.len() == 1 {
        format!("f {}", args[0])
    } else {
        format!("f ({})", args.join(", "))
    }
}

/// A matrix literal of `rows` rows of `n` columns, each row the point moved a little.
fn matrix_literal(rows: usize, point: &[f64]) -> String {
    let rs: Vec<String> = (0..rows)
        .map(|r| {
            array_literal(&point.iter().map(|x| x * (1.0 - 0.25 * r as f64) + 0.125 * r as f64).collect::<Vec<_>>())
        })
        .collect();
    format!("[{}]", rs.join(", "))
}

/// The `main` of one case over an `Array (Array Real)` input `m` (`rows` × `n`): a context
/// around `f` chosen by `form`, reading `m.[i].[j]`, mapping and folding over its rows, building
/// nested arrays, capturing rows in loops, `vjp` with a nested cotangent, nested gradients — or
/// over an array of tuples `(Int, Real, …)`.
fn nested_context(form: u64, n: usize, point: &[f64], rng: &mut Rng) -> String {
    let scale = lit(((rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0);
    let rows = 2 + rng.below(2) as usize;
    let m = matrix_literal(rows, point);
    // f of entries spread over the rows: m.[k mod rows].[k].
    let spread = |v: &str| f_of(&(0..n).map(|k| format!("{v}.[{}].[{k}]", k % rows)).collect::<Vec<_>>());
    let row = |r: &str| f_of(&(0..n).map(|k| format!("{r}.[{k}]")).collect::<Vec<_>>());
    match form {
        0 => format!("def g (m : Array (Array Real)) : Real = {} * {scale}\ndef main = grad g {m}\n", spread("m")),
        1 => format!(
            "def main = grad (fun (m : Array (Array Real)) -> sum (map (fun r -> {}) m)) {m}\n",
            row("r")
        ),
        2 => format!(
            "def main = grad (fun (m : Array (Array Real)) -> fold (fun acc r -> 0.5 * acc + {}) 0.0 m) {m}\n",
            row("r")
        ),
        // Rows rebuilt, reversed and scaled, and put in an array literal with a row of m.
        3 => format!(
            "def main = grad (fun (m : Array (Array Real)) ->\n  \
             let m2 = build (len m) (fun i -> map (fun x -> x * {scale}) m.[len m - 1 - i]) in\n  \
             let m3 = [m2.[1], m.[0]] in {} + sum (map sum m2)) {m}\n",
            f_of(&(0..n).map(|k| format!("m3.[{}].[{k}]", k % 2)).collect::<Vec<_>>())
        ),
        // A row captured by a loop body, and `dot` of two rows.
        4 => format!(
            "def main = grad (fun (m : Array (Array Real)) ->\n  \
             let r = m.[1] in sum (build (len m.[0]) (fun j -> r.[j] * m.[0].[j] * {})) + dot m.[0] r) {m}\n",
            spread("m")
        ),
        // vjp of a function to nested arrays, with a nested cotangent.
        5 => {
            let ct: Vec<String> = (0..rows)
                .map(|_| array_literal(&(0..n).map(|_| (rng.unit() * 4.0 - 2.0).round() / 2.0).collect::<Vec<_>>()))
                .collect();
            format!(
                "def h (m : Array (Array Real)) : Array (Array Real) =\n  \
                 let v = {} in map (fun r -> map (fun x -> v * x) r) m\n\
                 def main = vjp h {m} [{}]\n",
                spread("m"),
                ct.join(", ")
            )
        }
        // A loop carrying a nested array (the reverse reads the carry).
        6 => format!(
            "def main = grad (fun (m : Array (Array Real)) ->\n  \
             let c = iterate 2 (fun c -> build (len c) (fun i -> map (fun x -> 0.5 * x + 0.25 * c.[0].[0]) c.[i])) m in\n  \
             {}) {m}\n",
            spread("c")
        ),
        // An array of tuples with a discrete component: read by projections, mapped to another
        // array of tuples, folded.
        7 => {
            let ts: Vec<String> = (0..rows)
                .map(|r| {
                    let xs: Vec<String> =
                        point.iter().map(|x| lit(x * (1.0 - 0.25 * r as f64) + 0.125 * r as f64)).collect();
                    format!("({r}, {})", xs.join(", "))
                })
                .collect();
            let ty = vec!["Real"; n].join(" * ");
            format!(
                "def main = grad (fun (ps : Array (Int * {ty})) ->
                   let q = map (fun t -> (t.2 * {scale}, t.1 + 1)) ps in
                   sum (map (fun t -> {} * toReal (t.1 + 1)) ps) + fold (fun acc u -> 0.5 * acc + u.1 * toReal u.2) 0.0 q) [{}]
",
                f_of(&(0..n).map(|k| format!("t.{}", k + 2)).collect::<Vec<_>>()),
                ts.join(", ")
            )
        }
        // A gradient over nested arrays differentiated again.
        _ => format!(
            "def g (m : Array (Array Real)) : Real = {} * {scale} + sum (map (fun r -> {}) m)\n\
             def main = grad (fun (m : Array (Array Real)) -> sum (map sum (grad g m))) {m}\n",
            spread("m"),
            row("r")
        ),
    }
}

/// Equal within 1e-9 relative to the largest component (NaN matching NaN): the matrix forms sum
/// terms that cancel (`-f(m.[0].[0], …) + Σ_r f(r.[0], …)`), and the engines sum them in different
/// orders, so a zero component may come out as 1e-15 in one of them. When every component is
/// such a zero, the scale is that of the terms that cancelled: 1e-3 at least (an absolute 1e-12).
fn close_normwise(a: &[f64], b: &[f64]) -> bool {
    let scale = a.iter().chain(b).filter(|x| x.is_finite()).fold(1e-3f64, |m, x| m.max(x.abs()));
    close(a, b)
        || (a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * scale))
}

#[test]
fn compiled_gradients_over_arrays_of_arrays_and_tuples_equal_the_reducers() {
    sweep(Sweep {
        seed: 0x4e57_ed00_u64,
        programs: PROGRAMS / 2,
        forms: 9,
        context: nested_context,
        close: close_normwise,
        floor: 25,
    });
}

/// An `Array (Array (Array Real))` literal: `blocks` matrices of `rows` rows, each the point moved.
fn tensor_literal(blocks: usize, rows: usize, point: &[f64]) -> String {
    let bs: Vec<String> = (0..blocks)
        .map(|b| {
            let moved: Vec<f64> = point.iter().map(|x| x * (1.0 - 0.125 * b as f64) + 0.0625 * b as f64).collect();
            matrix_literal(rows, &moved)
        })
        .collect();
    format!("[{}]", bs.join(", "))
}

/// The `main` of one case over an input nested deeper than `Array (Array Real)`: an
/// `Array (Array (Array Real))` `t` (2 × `rows` × `n`) — entries `t.[b].[i].[j]`, `map`/`fold`
/// over blocks and rows, a block read whole and captured by a loop, a new 3-deep array made by
/// `map`, an outer gradient through one, a `vjp` with a deep cotangent (of the output's shape or
/// not) — or an array of tuples holding arrays (`Array (Real * Array Real)`, `Array (Array Real
/// * Array Real)`), read by projections, `map` and `fold`.
fn deep_context(form: u64, n: usize, point: &[f64], rng: &mut Rng) -> String {
    let scale = lit(((rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0);
    let rows = 2 + rng.below(2) as usize;
    let t = tensor_literal(2, rows, point);
    let ty = "Array (Array (Array Real))";
    // f of entries spread over the blocks and rows: t.[k mod 2].[k mod rows].[k].
    let spread = |v: &str| f_of(&(0..n).map(|k| format!("{v}.[{}].[{}].[{k}]", k % 2, k % rows)).collect::<Vec<_>>());
    let row = |r: &str| f_of(&(0..n).map(|k| format!("{r}.[{k}]")).collect::<Vec<_>>());
    let pairs = |first: &dyn Fn(usize) -> String| -> String {
        let ps: Vec<String> = (0..rows)
            .map(|r| {
                let xs: Vec<f64> = point.iter().map(|x| x * (1.0 - 0.25 * r as f64) + 0.125 * r as f64).collect();
                format!("({}, {})", first(r), array_literal(&xs))
            })
            .collect();
        format!("[{}]", ps.join(", "))
    };
    match form {
        0 => format!("def g (t : {ty}) : Real = {} * {scale}\ndef main = grad g {t}\n", spread("t")),
        1 => format!(
            "def main = grad (fun (t : {ty}) -> sum (map (fun m -> sum (map (fun r -> {}) m)) t)) {t}\n",
            row("r")
        ),
        2 => format!(
            "def main = grad (fun (t : {ty}) ->\n  \
             fold (fun acc m -> 0.5 * acc + fold (fun a r -> a + {}) 0.0 m) 0.0 t) {t}\n",
            row("r")
        ),
        // A block read whole, captured by a loop body; `dot` of rows of two blocks.
        3 => format!(
            "def main = grad (fun (t : {ty}) ->\n  \
             let b = t.[1] in sum (build (len b) (fun i -> {} * b.[i].[0])) + dot t.[0].[0] b.[1]) {t}\n",
            row("b.[i]")
        ),
        // A new 3-deep array made by `map`, read by entries and summed.
        4 => format!(
            "def main = grad (fun (t : {ty}) ->\n  \
             let u = map (fun m -> map (fun r -> map (fun x -> x * {scale}) r) m) t in\n  \
             {} + sum (map (fun m -> sum (map sum m)) u)) {t}\n",
            spread("u")
        ),
        // An outer gradient over a scale through a 3-deep array made from it.
        5 => format!(
            "def g (t : {ty}) : Real = {} + sum (map (fun m -> dot m.[0] m.[1]) t)\n\
             def main = grad (fun (s : Real) -> g (map (fun m -> map (fun r -> map (fun x -> x * s) r) m) {t})) {}\n",
            spread("t"),
            lit(point[0])
        ),
        // An array of (scale, weights) pairs: projections, `map` over pairs, an entry by index.
        6 => format!(
            "def main = grad (fun (ps : Array (Real * Array Real)) ->\n  \
             sum (map (fun (a, v) -> a * {}) ps) + ps.[0].1 * ps.[1].2.[0] * {scale}) {}\n",
            row("v"),
            pairs(&|r| lit(0.5 + 0.25 * r as f64))
        ),
        // A gradient over a 3-deep array differentiated again.
        8 => format!(
            "def g (t : {ty}) : Real = {} * {scale} + sum (map (fun m -> sum (map (fun r -> {}) m)) t)\n\
             def main = grad (fun (t : {ty}) -> sum (map (fun m -> sum (map sum m)) (grad g t))) {t}\n",
            spread("t"),
            row("r")
        ),
        // vjp of a function to a 3-deep array or to an array of pairs holding arrays, with a
        // cotangent of the output's shape or (one in three) with an entry's array one shorter:
        // then both engines report the same first mismatch, with its path.
        9 => {
            let short = (rng.below(3) == 0).then(|| (rng.below(2) as usize, rng.below(rows as u64) as usize));
            let entries = |k: usize, rng: &mut Rng| -> String {
                array_literal(&(0..k).map(|_| (rng.unit() * 4.0 - 2.0).round() / 2.0).collect::<Vec<_>>())
            };
            let width = |b: usize, r: usize| if short == Some((b, r)) { n - 1 } else { n };
            if rng.below(2) == 0 {
                let ct: Vec<String> = (0..2)
                    .map(|b| {
                        format!("[{}]", (0..rows).map(|r| entries(width(b, r), rng)).collect::<Vec<_>>().join(", "))
                    })
                    .collect();
                format!(
                    "def h (t : {ty}) : {ty} =\n  \
                     let v = {} in map (fun m -> map (fun r -> map (fun x -> v * x) r) m) t\n\
                     def main = vjp h {t} [{}]\n",
                    spread("t"),
                    ct.join(", ")
                )
            } else {
                let ct: Vec<String> =
                    (0..rows).map(|r| format!("({}, {})", lit(rng.unit() - 0.5), entries(width(0, r), rng))).collect();
                format!(
                    "def h (ps : Array (Real * Array Real)) : Array (Real * Array Real) =\n  \
                     map (fun (a, v) -> (a * {}, map (fun x -> x * a) v)) ps\n\
                     def main = vjp h {} [{}]\n",
                    row("v"),
                    pairs(&|r| lit(0.5 + 0.25 * r as f64)),
                    ct.join(", ")
                )
            }
        }
        // An array of pairs of vectors, folded.
        _ => format!(
            "def main = grad (fun (qs : Array (Array Real * Array Real)) ->\n  \
             fold (fun acc (u, v) -> 0.5 * acc + {} * v.[0] + dot u v) 0.0 qs) {}\n",
            row("u"),
            pairs(&|r| array_literal(&(0..n).map(|k| 0.25 * (k + r) as f64 - 0.5).collect::<Vec<_>>()))
        ),
    }
}

#[test]
fn compiled_gradients_over_deeper_arrays_and_tuples_of_arrays_equal_the_reducers() {
    sweep(Sweep {
        seed: 0xdee9_a77a_u64,
        programs: PROGRAMS / 5,
        forms: 10,
        context: deep_context,
        close: close_normwise,
        floor: 30,
    });
}

/// Contexts around `f` through functions built at run time, which compile (companions): a `fold`
/// whose carry is a function composing one closure per element of a literal of 0 to 3 elements
/// (`f` the initial function), an `iterate` composing `f` into every step, a `fold` over
/// functions of arrays, closures capturing the differentiated input, and a built function mapped
/// over points (`map h xs`) in the gradient.
fn built_context(form: u64, n: usize, point: &[f64], rng: &mut Rng) -> String {
    let scale = lit(((rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0);
    let depth = rng.below(4) as usize;
    let ks: Vec<String> = (0..depth).map(|_| lit(((rng.unit() * 3.0 - 1.5) * 4.0).round() / 4.0)).collect();
    let ks = format!("[{}]", ks.join(", "));
    match form {
        0 => format!(
            "def main = grad (fun (y : Real) -> (fold (fun (h : Real -> Real) (k : Real) -> fun (z : Real) -> h (z * k) + {scale} * z) (fun (z : Real) -> {}) {ks}) y) {}\n",
            f_through(n, "z", point),
            lit(point[0])
        ),
        1 => format!(
            "def main = grad (fun (y : Real) -> (iterate {depth} (fun (h : Real -> Real) -> fun (z : Real) -> h (0.5 * z) * {scale} + {}) (fun (z : Real) -> z)) y) {}\n",
            f_through(n, "z", point),
            lit(point[0])
        ),
        2 => format!(
            "def main = grad (fun (xs : Array Real) -> (fold (fun (h : Array Real -> Real) (k : Real) -> fun (v : Array Real) -> h (map (fun a -> a * k) v) + {scale} * sum v) (fun (v : Array Real) -> {}) {ks}) xs) {}\n",
            f_of_array(n, "v"),
            array_literal(point)
        ),
        // Closures whose environment depends on the input (`y`, captured by every step).
        4 => format!(
            "def main = grad (fun (y : Real) -> (fold (fun (h : Real -> Real) (k : Real) -> let w = k * y in fun (z : Real) -> h (z * k) + w * z) (fun (z : Real) -> {} * y) {ks}) (0.5 * y)) {}\n",
            f_through(n, "z", point),
            lit(point[0])
        ),
        _ => format!(
            "def main = grad (fun (xs : Array Real) -> let h = fold (fun (h : Real -> Real) (k : Real) -> fun (z : Real) -> h (z + k) * {scale}) (fun (z : Real) -> {}) {ks} in sum (map h xs)) {}\n",
            f_through(n, "z", point),
            array_literal(&[point[0], point[0] * 0.5 + 0.125])
        ),
    }
}

/// Random programs through functions built at run time (`built_context`): compiled, no fallback,
/// equal to the reducer's.
#[test]
fn compiled_gradients_through_functions_built_at_run_time_equal_the_reducers() {
    sweep(Sweep { seed: 0xb017_f00d_u64, programs: 60, forms: 5, context: built_context, close, floor: 10 });
}

/// Contexts around `f` for per-site fallback: `f` is differentiated through `<+>` of a change a
/// loop returns (a site the transform does not compile), inside compiled code that passes
/// the site its free locals (an `Int` index, a Real, an array, a tuple) and uses its value (a
/// Real, an array, a tuple), in `build`, `fold` and `iterate` loops.
fn fallback_context(form: u64, n: usize, point: &[f64], rng: &mut Rng) -> String {
    // `v <+> d`, the change `d` made by a `fold` (so chosen at run time): `gchange realGroup 0.5`
    // when `c` holds (`v + 0.5`), else `replace 1.0` (a constant).
    let built = |c: &str, v: &str| {
        format!(
            "({v}) <+> fold (fun d (k : Real) -> if k > 0.75 then d else gchange realGroup k) (replace 1.0) [if {c} then 0.5 else 1.0]"
        )
    };
    let scale = lit(((rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0);
    match form {
        // A Real site per element of a `build`, its index a free local.
        0 => format!(
            "def main = build 3 (fun i -> grad (fun (y : Real) -> {}) ({} + 0.125 * toReal i))\n",
            built("i == 1", &f_through(n, "y", point)),
            lit(point[0])
        ),
        // An array-valued site (a gradient over an array) beside compiled work, in a tuple.
        1 => format!(
            "def g (c : Bool) (xs : Array Real) : Real = {}\n\
             def main = let p = {} in (sum (map (fun x -> x * x) p), grad (g (len p > 5)) p, grad (g true) p)\n",
            built("c", &format!("{} * {scale}", f_of_array(n, "xs"))),
            array_literal(point)
        ),
        // A site in a `fold` over indices: the accumulator and the index cross into it.
        2 => format!(
            "def main = fold (fun acc i -> acc + grad (fun (y : Real) -> {}) (acc * 0.01 + {})) 0.0 [0, 1, 2]\n",
            built("i > 1", &f_through(n, "y", point)),
            lit(point[0])
        ),
        // A tuple-valued site (a vjp) in an `iterate` whose carry holds an array.
        _ => format!(
            "def h (c : Bool) (xs : Array Real) : Real * Real = let v = {} in ({}, v * xs.[0])\n\
             def main = iterate 2 (fun (k, ys) -> (k + 1, map (fun y -> 0.5 * y) (vjp (h (k == 0)) ys (1.0, {scale})))) (0, {})\n",
            f_of_array(n, "xs"),
            built("c", "v"),
            array_literal(point)
        ),
    }
}

/// Per-site fallback on random programs: each `f` sits in a site the transform does not compile
/// (`fallback_context`); the compiled run leaves that site to the interpreter — its note names
/// every site so left, and nothing else — and must agree with the reducer's run of the whole
/// program (within 1e-9 relative; errors identical), with eager compaction.
#[test]
fn sites_left_to_the_interpreter_agree_with_the_reducer() {
    let seed = std::env::var("NABLA_REV_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5173_fa11_u64);
    let programs: usize = std::env::var("NABLA_REV_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    frontend::with_big_stack(move || {
        let mut rng = Rng::new(seed);
        let mut failures = Vec::new();
        let mut per_form = [0usize; 4];
        let mut interpreted = 0;
        for k in 0..programs {
            let p = program(&mut rng, &Options { nested: true, depth: 3 });
            let form = rng.below(4);
            let src = format!("{}{}", p.source, fallback_context(form, p.inputs, &p.point, &mut rng));
            let reducer = eval(&src).map(|v| reals(&v));
            let jit = (|| {
                let (_, mono) = runtime::prepare(&src, "main").map_err(|d| d.to_string())?;
                let mut ctx = runtime::native::CallCtx::new(runtime::native::DEFAULT_ARENA_LIMIT);
                ctx.set_compact_min(64);
                let r = runtime::engine::run_in(&mono, &mut ctx).map_err(|d| d.to_string())?;
                // No note: the change's site was inactive (`f` ignores its input), so it compiled.
                let note = r.note.unwrap_or_default();
                match note.lines().find(|l| !l.contains("a gradient through `<+>` of a change chosen at run time")) {
                    Some(l) => Err(format!("another fallback: {l}")),
                    None => Ok((reals(&r.value), !note.is_empty())),
                }
            })();
            match (&reducer, &jit) {
                (Ok(a), Ok((b, left))) if close_normwise(a, b) => {
                    per_form[form as usize] += 1;
                    interpreted += usize::from(*left);
                }
                (Err(a), Err(b)) if a == b => per_form[form as usize] += 1,
                _ => failures.push(format!("#{k} (form {form}): reducer {reducer:?}, compiled {jit:?}\n{src}")),
            }
        }
        assert!(failures.is_empty(), "{} of {programs} failed:\n\n{}", failures.len(), failures.join("\n\n"));
        assert!(per_form.iter().all(|&c| c * 8 >= programs), "contexts per form: {per_form:?}");
        assert!(interpreted * 4 >= programs * 3, "only {interpreted} of {programs} left a site to the interpreter");
    });
}
