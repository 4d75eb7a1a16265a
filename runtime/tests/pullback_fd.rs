//! Gradients from the paper's reduction strategy agree with central finite differences on 150
//! random well-typed first-order programs per run (seeded; `NABLA_FD_SEED` picks another seed,
//! `NABLA_FD_PROGRAMS` another count). The programs use every Real primitive, variable exponents
//! (`x ^ y` in `y`), negative denominators and both arguments of `max`/`min`; a program whose value
//! does not move with one of its inputs at the point is resampled (a few times at most), and at
//! least 95% of the partial derivatives checked must be non-zero.
//! The compiled gradient (`adjoint::reverse` then the JIT) agrees with the reducer's within 1e-9
//! relative on each of them, with no fallback to the interpreter.
//!
//! Tolerance: the central difference at step h has truncation error h²·|f‴|/6 and rounding error
//! about ε·|f|/h. Each partial is estimated at h = 1e-4 and h/2; when the two estimates disagree by
//! more than the tolerance the difference quotient itself is unreliable there (a steep third
//! derivative) and the sample is skipped — at most 5% may be. Otherwise the reverse-mode value must
//! match the h/2 estimate within 1e-5·(1 + |∂f| + |f|), far above both error terms for these
//! bounded programs and far below any real mistake in a derivative.

mod pullback_gen;

use pullback_gen::{close, eval, eval_compiled, lit, program, reals, Options, Rng};

/// Programs per run (`NABLA_FD_PROGRAMS` overrides it for longer runs).
const PROGRAMS: usize = 150;
const H: f64 = 1e-4;
/// Programs drawn at most per test case until every partial derivative is non-zero.
const RESAMPLE: usize = 6;

fn point_literal(p: &[f64]) -> String {
    if p.len() == 1 {
        lit(p[0])
    } else {
        format!("({})", p.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(", "))
    }
}

fn value_at(src: &str, p: &[f64]) -> Result<f64, String> {
    let v = eval(&format!("{src}def main = f {}\n", point_literal(p)))?;
    Ok(reals(&v)[0])
}

#[test]
fn gradients_agree_with_central_differences() {
    let seed = std::env::var("NABLA_FD_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_ab1e_u64);
    frontend::with_big_stack(move || {
        let mut rng = Rng::new(seed);
        let mut skipped = 0;
        let (mut partials, mut nonzero) = (0, 0);
        let mut failures = Vec::new();
        let verbose = std::env::var_os("NABLA_FD_VERBOSE").is_some();
        let programs: usize = std::env::var("NABLA_FD_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(PROGRAMS);
        for k in 0..programs {
            // A program whose gradient has a zero component (an input used only in a condition,
            // a dead `let`, a closure ignoring its argument) is resampled, a few times at most.
            let mut attempt = 0;
            let p = loop {
                attempt += 1;
                let p = program(&mut rng, &Options::default());
                // Cheaply, by values: f must change when any one input moves a little.
                let moves = |p: &pullback_gen::Program| -> bool {
                    let Ok(f0) = value_at(&p.source, &p.point) else { return true };
                    (0..p.inputs).all(|i| {
                        let mut q = p.point.clone();
                        q[i] += 1e-3;
                        value_at(&p.source, &q).map_or(true, |f1| (f1 - f0).abs() > 1e-12)
                    })
                };
                if attempt >= RESAMPLE || moves(&p) {
                    break p;
                }
            };
            if verbose {
                eprintln!("#{k} starts\n{}at {:?}", p.source, p.point);
            }
            let ad = eval(&format!("{}def main = grad f {}\n", p.source, point_literal(&p.point))).map(|v| reals(&v));
            let started = std::time::Instant::now();
            let ad = match ad {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("#{k}: grad failed: {e}\n{}at {:?}", p.source, p.point));
                    continue;
                }
            };
            // The compiled gradient (adjoint::reverse, then the JIT) equals the reducer's.
            let grad_src = format!("{}def main = grad f {}\n", p.source, point_literal(&p.point));
            match eval_compiled(&grad_src) {
                Ok(v) if close(&reals(&v), &ad) => {}
                Ok(v) => failures.push(format!(
                    "#{k}: compiled gradient {:?}, reducer's {:?}\n{}at {:?}",
                    reals(&v),
                    ad,
                    p.source,
                    p.point
                )),
                Err(e) => failures.push(format!("#{k}: compiled grad failed: {e}\n{}at {:?}", p.source, p.point)),
            }
            let f0 = match value_at(&p.source, &p.point) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("#{k}: f failed: {e}\n{}", p.source));
                    continue;
                }
            };
            for i in 0..p.inputs {
                partials += 1;
                if ad[i].abs() > 1e-9 {
                    nonzero += 1;
                }
                let at = |d: f64| {
                    let mut q = p.point.clone();
                    q[i] += d;
                    value_at(&p.source, &q)
                };
                let quotient = |h: f64| -> Result<f64, String> { Ok((at(h)? - at(-h)?) / (2.0 * h)) };
                let (fd1, fd2) = match (quotient(H), quotient(H / 2.0)) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => {
                        failures.push(format!("#{k}: f failed near the point: {e}\n{}", p.source));
                        continue;
                    }
                };
                let tol = 1e-5 * (1.0 + ad[i].abs() + f0.abs());
                if !((fd1 - fd2).abs() <= tol) {
                    skipped += 1;
                    continue;
                }
                if verbose && i + 1 == p.inputs {
                    eprintln!("#{k} {:?}\n{}", started.elapsed(), p.source);
                }
                if !((ad[i] - fd2).abs() <= tol) {
                    failures.push(format!(
                        "#{k}: ∂f/∂x{} = {} by reverse mode, {} by central differences\n{}at {:?}",
                        i + 1,
                        ad[i],
                        fd2,
                        p.source,
                        p.point
                    ));
                }
            }
        }
        assert!(failures.is_empty(), "{} of {programs} programs failed:\n\n{}", failures.len(), failures.join("\n\n"));
        assert!(skipped * 20 <= programs, "{skipped} partial derivatives had unreliable finite differences");
        // A zero partial checks little (an input the result does not depend on there): most must
        // be non-zero.
        assert!(nonzero * 100 >= partials * 95, "only {nonzero} of {partials} partial derivatives are non-zero");
        eprintln!("{nonzero} of {partials} partial derivatives are non-zero, {skipped} skipped");
    });
}
