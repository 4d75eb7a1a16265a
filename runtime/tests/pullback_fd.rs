//! Gradients from the paper's reduction strategy agree with central finite differences on 300
//! random well-typed first-order programs per run (seeded; `NABLA_FD_SEED` picks another seed),
//! and the compiled gradient (`adjoint::reverse` then the JIT) agrees with the reducer's within
//! 1e-9 relative on each of them, with no fallback to the interpreter.
//!
//! Tolerance: the central difference at step h has truncation error h²·|f‴|/6 and rounding error
//! about ε·|f|/h. Each partial is estimated at h = 1e-4 and h/2; when the two estimates disagree by
//! more than the tolerance the difference quotient itself is unreliable there (a steep third
//! derivative) and the sample is skipped — at most 5% may be. Otherwise the reverse-mode value must
//! match the h/2 estimate within 1e-5·(1 + |∂f| + |f|), far above both error terms for these
//! bounded programs and far below any real mistake in a derivative.

mod pullback_gen;

use pullback_gen::{close, eval, eval_compiled, lit, program, reals, Options, Rng};

const PROGRAMS: usize = 300;
const H: f64 = 1e-4;

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
        let mut failures = Vec::new();
        let verbose = std::env::var_os("NABLA_FD_VERBOSE").is_some();
        for k in 0..PROGRAMS {
            let p = program(&mut rng, &Options::default());
            let started = std::time::Instant::now();
            if verbose {
                eprintln!("#{k} starts\n{}at {:?}", p.source, p.point);
            }
            let ad = match eval(&format!("{}def main = grad f {}\n", p.source, point_literal(&p.point))) {
                Ok(v) => reals(&v),
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
        assert!(failures.is_empty(), "{} of {PROGRAMS} programs failed:\n\n{}", failures.len(), failures.join("\n\n"));
        assert!(skipped * 20 <= PROGRAMS, "{skipped} partial derivatives had unreliable finite differences");
    });
}
