//! Second derivatives by nesting over array inputs: on random programs `f : Array Real -> Real`
//! built from `map`, `fold`, `zipWith`, `build`, `iterate`, indexing and closures capturing the
//! input, the Hessian-vector product `grad (fun q -> dot (grad f q) v) p` (nested pullbacks,
//! reduction 17 and rule J) must match the central difference of the gradient along `v`,
//! `(∇f(p + hv) − ∇f(p − hv)) / 2h` (the gradients by reverse mode, which `pullback_fd.rs` checks
//! against finite differences of `f`). So must the same product written with the inner pullback on
//! an explicit λ, `unstar ((pullback (fun xs -> …) (omega 1.0)) q)` (rule 17, named first (A) when
//! its premise meets a point of unknown length). Seeded; `NABLA_HVP_SEED` picks another seed.
//!
//! Tolerance, as in `pullback_fd.rs`: each difference quotient is taken at h = 1e-4 and h/2; where
//! the two disagree by more than the tolerance the quotient is unreliable there and the component
//! is skipped (at most 5% may be). Otherwise the nested value must match the h/2 quotient within
//! 1e-5·(1 + |Hv| + |∇f|): truncation (h²·|f⁗|/6 ≈ 1e-9) and rounding (ε·|∇f|/h ≈ 1e-11) are far
//! below it, any wrong second derivative far above.

#[allow(dead_code)] // shared with pullback_fd.rs, which uses the rest
mod pullback_gen;

use pullback_gen::{close, eval, eval_compiled, lit, reals, Rng};

/// Nested pullbacks compose Jacobians symbolically (their cost grows quickly with the inner body),
/// so the programs are small: one array primitive with a shallow closure.
const PROGRAMS: usize = 24;
const H: f64 = 1e-4;

fn array(p: &[f64]) -> String {
    format!("[{}]", p.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(", "))
}

struct Gen<'r> {
    rng: &'r mut Rng,
    n: usize,
    fresh: u32,
}

impl Gen<'_> {
    fn name(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{base}{}", self.fresh)
    }

    fn constant(&mut self) -> String {
        lit(((self.rng.unit() * 4.0 - 2.0) * 4.0).round() / 4.0)
    }

    /// A scalar over the variables in `env` and the elements of `xs`.
    fn scalar(&mut self, env: &[String], depth: u32) -> String {
        if depth == 0 || self.rng.chance(0.2) {
            return match self.rng.below(5) {
                0 => self.constant(),
                1 | 2 if !env.is_empty() => env[self.rng.below(env.len() as u64) as usize].clone(),
                _ => format!("xs.[{}]", self.rng.below(self.n as u64)),
            };
        }
        let d = depth - 1;
        match self.rng.below(8) {
            0 | 1 => format!("({} + {})", self.scalar(env, d), self.scalar(env, d)),
            2 | 3 => format!("({} * {})", self.scalar(env, d), self.scalar(env, d)),
            4 => format!("sin ({})", self.scalar(env, d)),
            5 => format!("tanh ({})", self.scalar(env, d)),
            6 => {
                let b = self.scalar(env, d);
                format!("({} / (1.0 + {b} * {b}))", self.scalar(env, d))
            }
            _ => format!("exp (sin ({}))", self.scalar(env, d)),
        }
    }

    /// A term of the body: an array primitive looping over `xs`, its function a closure that may
    /// capture `xs`.
    fn piece(&mut self) -> String {
        match self.rng.below(7) {
            0 => {
                let u = self.name("u");
                format!("sum (map (fun {u} -> {}) xs)", self.scalar(&[u.clone()], 1))
            }
            1 => {
                let (acc, u) = (self.name("acc"), self.name("u"));
                let body = self.scalar(&[acc.clone(), u.clone()], 1);
                format!("fold (fun {acc} {u} -> 0.5 * {acc} + {body}) {} xs", self.constant())
            }
            2 => {
                let (p, q) = (self.name("p"), self.name("q"));
                let body = self.scalar(&[q.clone()], 1);
                format!("sum (zipWith (fun {p} {q} -> {p} * {body}) xs (map (fun {q} -> {q} * {q}) xs))")
            }
            3 => {
                let i = self.name("i");
                format!("sum (build (len xs) (fun {i} -> xs.[{i}] * {}))", self.scalar(&[], 1))
            }
            4 => {
                let u = self.name("u");
                let body = self.scalar(&[u.clone()], 1);
                format!("dot xs (map (fun {u} -> {body}) xs)")
            }
            5 => {
                let u = self.name("u");
                let body = self.scalar(&[u.clone()], 1);
                format!("iterate 2 (fun {u} -> 0.5 * {u} + 0.25 * tanh ({body})) (sum xs)")
            }
            _ => self.scalar(&[], 2),
        }
    }
}

#[test]
fn nested_gradients_over_arrays_agree_with_differences_of_gradients() {
    let seed = std::env::var("NABLA_HVP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x4e55_1a2b_u64);
    frontend::with_big_stack(move || {
        let mut rng = Rng::new(seed);
        let mut skipped = 0;
        let mut checked = 0;
        let mut failures = Vec::new();
        let mut not_compiled = Vec::new();
        for k in 0..PROGRAMS {
            let n = 2 + rng.below(2) as usize;
            let mut g = Gen { rng: &mut rng, n, fresh: 0 };
            let body = g.piece();
            let point: Vec<f64> = (0..n).map(|_| ((rng.unit() * 2.0 - 1.0) * 8.0).round() / 8.0).collect();
            let dir: Vec<f64> = (0..n).map(|_| ((rng.unit() * 2.0 - 1.0) * 4.0).round() / 4.0).collect();
            let src = format!("def f (xs : Array Real) : Real = {body}\n");
            let hvp = format!(
                "{src}def main = grad (fun (q : Array Real) -> dot (grad f q) {}) {}\n",
                array(&dir),
                array(&point)
            );
            // The same product with the inner pullback written out on a λ (rule 17 on an explicit
            // `pullback (fun xs -> …) w`, whose premise meets a point of unknown length).
            let explicit = format!(
                "def main = grad (fun (q : Array Real) -> dot (unstar ((pullback (fun (xs : Array Real) -> {body}) \
                 (omega 1.0)) q)) {}) {}\n",
                array(&dir),
                array(&point)
            );
            let mut products = Vec::new();
            for prog in [&hvp, &explicit] {
                let started = std::time::Instant::now();
                let result = eval(prog);
                if std::env::var_os("NABLA_HVP_VERBOSE").is_some() {
                    eprintln!("#{k} {:?}\n{prog}", started.elapsed());
                }
                match result {
                    Ok(v) => products.push((prog, reals(&v))),
                    Err(e) => failures.push(format!("#{k}: the nested gradient failed: {e}\n{prog}")),
                }
            }
            if products.len() < 2 {
                continue;
            }
            // Compiled reverse mode (nested: the inner gradient's reverse phase differentiated
            // again) gives the reducer's product, without falling back to the interpreter.
            for (prog, hv) in &products {
                match eval_compiled(prog) {
                    Ok(v) if close(&reals(&v), hv) => {}
                    Ok(v) => failures.push(format!("#{k}: compiled {:?}, reducer's {hv:?}\n{prog}", reals(&v))),
                    Err(e) => not_compiled.push(format!("#{k}: {e}\n{prog}")),
                }
            }
            let grad_at = |t: f64| -> Result<Vec<f64>, String> {
                let q: Vec<f64> = point.iter().zip(&dir).map(|(p, v)| p + t * v).collect();
                Ok(reals(&eval(&format!("{src}def main = grad f {}\n", array(&q)))?))
            };
            let quotient = |h: f64| -> Result<Vec<f64>, String> {
                let (a, b) = (grad_at(h)?, grad_at(-h)?);
                Ok(a.iter().zip(&b).map(|(x, y)| (x - y) / (2.0 * h)).collect())
            };
            let (g0, fd1, fd2) = match (grad_at(0.0), quotient(H), quotient(H / 2.0)) {
                (Ok(g0), Ok(a), Ok(b)) => (g0, a, b),
                (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => {
                    failures.push(format!("#{k}: a gradient failed: {e}\n{src}"));
                    continue;
                }
            };
            for (prog, hv) in &products {
                if hv.len() != n {
                    failures.push(format!("#{k}: the nested gradient has {} components, not {n}\n{prog}", hv.len()));
                    continue;
                }
                for i in 0..n {
                    checked += 1;
                    let tol = 1e-5 * (1.0 + hv[i].abs() + g0[i].abs());
                    if !((fd1[i] - fd2[i]).abs() <= tol) {
                        skipped += 1;
                        continue;
                    }
                    if !((hv[i] - fd2[i]).abs() <= tol) {
                        failures.push(format!(
                            "#{k}: (Hv){} = {} by nested pullbacks, {} by differences of gradients\n{prog}",
                            i + 1,
                            hv[i],
                            fd2[i]
                        ));
                    }
                }
            }
        }
        assert!(failures.is_empty(), "{} failures:\n\n{}", failures.len(), failures.join("\n\n"));
        assert!(not_compiled.is_empty(), "{} not compiled:\n\n{}", not_compiled.len(), not_compiled.join("\n\n"));
        assert!(skipped * 20 <= checked, "{skipped} of {checked} components had unreliable differences");
    });
}
