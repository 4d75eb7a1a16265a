//! `nabla bench FILE`: `main` timed under the compiled engine and the reference interpreter, side by
//! side, in one process. Each engine runs until about a second has passed (at least 3 and at most
//! 1000 runs); medians are reported, and the speed-up is the ratio of the medians. The machine may be
//! shared and noisy: quote the ratio, not one absolute time.

use std::fmt;
use std::time::{Duration, Instant};

use anf::lower::{self, LowerOptions};
use anf::mono::MonoProgram;
use frontend::Diagnostic;

use crate::engine::{root_span, Machine, BIG_STACK_BUDGET};
use crate::native::{CallCtx, DEFAULT_ARENA_LIMIT};
use crate::value::Value;

/// What `nabla bench` measured.
pub struct Report {
    /// The printed value of `main` (both engines agree, or `bench` fails).
    pub value: String,
    /// Median time from source to machine code, when the program compiles.
    pub compile: Option<Duration>,
    pub interp: Timing,
    /// `Err(reason)` when the program uses a construct the compiler does not handle yet.
    pub jit: Result<Timing, String>,
}

/// The median of some runs.
pub struct Timing {
    pub median: Duration,
    pub runs: usize,
}

const BUDGET: Duration = Duration::from_secs(1);
const MIN_RUNS: usize = 3;
const MAX_RUNS: usize = 1000;

fn time_runs(mut f: impl FnMut() -> Result<(), Diagnostic>) -> Result<Timing, Diagnostic> {
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < MIN_RUNS || (start.elapsed() < BUDGET && times.len() < MAX_RUNS) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(Timing { median: times[times.len() / 2], runs: times.len() })
}

/// Times `main` of `src` under both engines. Must run on a big stack (`frontend::with_big_stack`).
pub fn bench(src: &str) -> Result<Report, Diagnostic> {
    let (_, mono) = crate::prepare(src, "main")?;
    let value = crate::interp::run(&mono)?;
    let interp = time_runs(|| crate::interp::run(&mono).map(|_| ()))?;
    let jit = match adjoint::reverse::transform(&mono) {
        Err(nc) => Err(format!("{} is not compiled yet", nc.what)),
        Ok(t) => match lower::unsupported(t.as_ref().unwrap_or(&mono)) {
            Some(u) => Err(format!("{} is not compiled yet", u.what)),
            None => Ok(()),
        },
    };
    let (compile, jit) = match jit {
        Err(e) => (None, Err(e)),
        Ok(()) => {
            let compile_time = time_runs(|| compile(src).map(|_| ()))?;
            let machine = compile(src)?;
            let mut ctx = CallCtx::new(DEFAULT_ARENA_LIMIT);
            let compiled_value = machine.run_main(&mut ctx)?;
            if !values_close(&compiled_value, &value) {
                return Err(Diagnostic::error(
                    root_span(&mono),
                    format!("internal: the engines disagree: interpreter {value}, JIT {compiled_value}"),
                ));
            }
            let timing = time_runs(|| {
                ctx.reset();
                machine.run_main(&mut ctx).map(|_| ())
            })?;
            (Some(compile_time.median), Ok(timing))
        }
    };
    Ok(Report { value: value.to_string(), compile, interp, jit })
}

/// Source to machine code, as a user waits for it before the first call.
fn compile(src: &str) -> Result<Machine, Diagnostic> {
    let (_, mono): (_, MonoProgram) = crate::prepare(src, "main")?;
    let span = root_span(&mono);
    let mono = adjoint::reverse::transform(&mono)
        .map_err(|nc| Diagnostic::error(nc.span, format!("{} is not compiled yet", nc.what)))?
        .unwrap_or(mono);
    let lowered = lower::lower(&mono, &LowerOptions::default())
        .map_err(|e| Diagnostic::error(span, format!("internal compiler error: {}", e.message)))?;
    Machine::new(&lowered, span, BIG_STACK_BUDGET).map_err(|e| Diagnostic::error(span, e))
}

/// Equal, or equal up to 1e-9 relative in every Real (compiled gradients sum cotangents in another
/// order than the reducer).
fn values_close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => {
            x.to_bits() == y.to_bits() || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()) || (x.is_nan() && y.is_nan())
        }
        (Value::Tuple(xs), Value::Tuple(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| values_close(x, y))
        }
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| values_close(x, y))
        }
        _ => a.to_string() == b.to_string(),
    }
}

fn human(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "main = {}", self.value)?;
        writeln!(f, "interpreter  median {:>12} over {} runs", human(self.interp.median), self.interp.runs)?;
        match &self.jit {
            Ok(t) => {
                writeln!(f, "JIT          median {:>12} over {} runs", human(t.median), t.runs)?;
                if let Some(c) = self.compile {
                    writeln!(f, "compile      median {:>12} (source to machine code)", human(c))?;
                }
                let ratio = self.interp.median.as_secs_f64() / t.median.as_secs_f64().max(1e-12);
                writeln!(f, "JIT speed-up {ratio:.1}x (ratio of medians, one run)")
            }
            Err(why) => writeln!(f, "JIT          not timed: {why}"),
        }
    }
}
