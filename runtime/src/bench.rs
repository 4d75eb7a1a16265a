//! `nabla bench FILE`: `main` timed under the compiled engine and the reference interpreter, side by
//! side, in one process. By default each engine runs until about a second has passed (at least 3
//! and at most 1000 runs); `--runs N` asks for N runs. Either way an engine stops being timed once
//! its runs have taken the time budget (after at least one run), so a program the interpreter
//! takes a minute for costs one run, not three. Medians are reported, and the speed-up is the
//! ratio of the medians. The machine may be shared and noisy: quote the ratio, not one absolute
//! time.

use std::fmt;
use std::time::{Duration, Instant};

use anf::lower::{self, LowerOptions};
use anf::mono::MonoProgram;
use frontend::Diagnostic;

use crate::engine::{root_span, Machine, BIG_STACK_BUDGET};
use crate::native::{CallCtx, DEFAULT_ARENA_LIMIT};
use crate::value::Value;

/// Which engines `nabla bench` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engines {
    Jit,
    Interp,
    Both,
}

/// How `nabla bench` times.
#[derive(Clone, Debug)]
pub struct Options {
    /// Exactly this many runs of each engine (`None`: about a second's worth, 3 to 1000).
    pub runs: Option<usize>,
    pub engines: Engines,
    /// An engine is not run again once its runs took this long (it always runs once).
    pub budget: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options { runs: None, engines: Engines::Both, budget: DEFAULT_BUDGET }
    }
}

/// The default time budget of one engine.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);

/// What `nabla bench` measured.
pub struct Report {
    /// The printed value of `main` (both engines agree, or `bench` fails).
    pub value: String,
    /// Median time from source to machine code, when the program compiles.
    pub compile: Option<Duration>,
    /// `None` when the interpreter was not asked for.
    pub interp: Option<Timing>,
    /// `Err(reason)` when the program uses a construct the compiler does not handle yet; `None`
    /// when the JIT was not asked for.
    pub jit: Option<Result<Timing, String>>,
    pub budget: Duration,
}

/// The median of some runs.
pub struct Timing {
    pub median: Duration,
    pub runs: usize,
    /// The time budget ended the runs before the number asked for.
    pub cut: bool,
}

/// Without `--runs`: run for about this long.
const TARGET: Duration = Duration::from_secs(1);
const MIN_RUNS: usize = 3;
const MAX_RUNS: usize = 1000;

/// Times `f`, returning the timing and the value of its first run.
fn time_runs<T>(options: &Options, mut f: impl FnMut() -> Result<T, Diagnostic>) -> Result<(Timing, T), Diagnostic> {
    let start = Instant::now();
    let mut times = Vec::new();
    let mut first = None;
    let wanted = options.runs.unwrap_or(MIN_RUNS);
    let cut = loop {
        let t = Instant::now();
        let v = f()?;
        times.push(t.elapsed());
        first.get_or_insert(v);
        let elapsed = start.elapsed();
        let more = match options.runs {
            Some(n) => times.len() < n,
            None => times.len() < MIN_RUNS || (elapsed < TARGET && times.len() < MAX_RUNS),
        };
        if !more {
            break false;
        }
        if elapsed >= options.budget {
            break times.len() < wanted;
        }
    };
    times.sort();
    let timing = Timing { median: times[times.len() / 2], runs: times.len(), cut };
    Ok((timing, first.expect("at least one run")))
}

/// Times `main` of `src` under the engines `options` names. Must run on a big stack
/// (`frontend::with_big_stack`).
pub fn bench(src: &str, options: &Options) -> Result<Report, Diagnostic> {
    let (_, mono) = crate::prepare(src, "main")?;
    let mut value: Option<Value> = None;
    let interp = if options.engines != Engines::Jit {
        let (timing, v) = time_runs(options, || crate::interp::run(&mono))?;
        value = Some(v);
        Some(timing)
    } else {
        None
    };
    // A differentiation site the reverse-mode transform does not compile leaves the program, or
    // that site (per-site fallback), to the interpreter; either counts as not compiled here: the
    // JIT column times compiled code only.
    let not_compiled = crate::engine::uncompiled_site(&mono);
    let jit = match (options.engines, not_compiled) {
        (Engines::Interp, _) => None,
        (_, Some(why)) => Some(Err(why)),
        (_, None) => Some(Ok(())),
    };
    let (compile, jit) = match jit {
        None => (None, None),
        Some(Err(e)) => (None, Some(Err(e))),
        Some(Ok(())) => {
            let (compile_time, machine) = time_runs(options, || compile(src))?;
            let mut ctx = CallCtx::new(DEFAULT_ARENA_LIMIT);
            let (timing, compiled_value) = time_runs(options, || {
                ctx.reset();
                machine.run_main(&mut ctx)
            })?;
            match &value {
                Some(v) if !values_close(v, &compiled_value) => {
                    return Err(Diagnostic::error(
                        root_span(&mono),
                        format!("internal: the engines disagree: interpreter {v}, JIT {compiled_value}"),
                    ))
                }
                Some(_) => {}
                None => value = Some(compiled_value),
            }
            (Some(compile_time.median), Some(Ok(timing)))
        }
    };
    // Only the interpreter can run a program the JIT does not compile.
    let value = match value {
        Some(v) => v,
        None => crate::interp::run(&mono)?,
    };
    Ok(Report { value: value.to_string(), compile, interp, jit, budget: options.budget })
}

/// Source to machine code, as a user waits for it before the first call.
fn compile(src: &str) -> Result<Machine, Diagnostic> {
    let (_, mono): (_, MonoProgram) = crate::prepare(src, "main")?;
    let mono = adjoint::reverse::transform(&mono)
        .map_err(|nc| Diagnostic::error(nc.span, format!("{} is not compiled yet", nc.what)))?
        .unwrap_or(mono);
    let mono = adjoint::incremental::expand(&mono)?;
    let span = root_span(&mono);
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

impl Report {
    fn timing(&self, f: &mut fmt::Formatter<'_>, name: &str, t: &Timing) -> fmt::Result {
        let runs = if t.runs == 1 { "1 run".to_string() } else { format!("{} runs", t.runs) };
        write!(f, "{name} median {:>12} over {runs}", human(t.median))?;
        if t.cut {
            write!(f, " (stopped by the {} budget; --budget SECONDS)", human(self.budget))?;
        }
        writeln!(f)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "main = {}", self.value)?;
        if let Some(t) = &self.interp {
            self.timing(f, "interpreter ", t)?;
        }
        match &self.jit {
            None => Ok(()),
            Some(Ok(t)) => {
                self.timing(f, "JIT         ", t)?;
                if let Some(c) = self.compile {
                    writeln!(f, "compile      median {:>12} (source to machine code)", human(c))?;
                }
                if let Some(i) = &self.interp {
                    let ratio = i.median.as_secs_f64() / t.median.as_secs_f64().max(1e-12);
                    writeln!(f, "JIT speed-up {ratio:.1}x (ratio of medians, one run)")?;
                }
                Ok(())
            }
            Some(Err(why)) => writeln!(f, "JIT          not timed: {why}"),
        }
    }
}
