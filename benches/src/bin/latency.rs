//! Where compile latency goes: `cargo run -p benches --release --bin latency [FILTER] [RUNS]`.
//!
//! For each of issue 9's reverse-mode benchmarks (`benches::reverse`), the phases of
//! `api::Gradient::new` run one after another as it runs them (front end, monomorphisation, the
//! reverse transform, ILC's expansion, lowering, `anf::opt`, Cranelift, the globals), each timed;
//! prints the median of each phase over RUNS runs (default 21), the whole, the IR's size before and
//! after `anf::opt`, the functions Cranelift compiles, and Cranelift's own pass times (summed over
//! the runs, divided by RUNS). `all` is `Gradient::new` itself, timed separately.
use std::time::Instant;

use anf::ir::{Module, Op};
use anf::lower::{self, LowerOptions};
use anf::opt::{optimize, reachable_functions, OptOptions};
use benches::reverse::{workloads, Scale};
use jit::{Jit, JitConfig};
use runtime::api::Gradient;

const PHASES: [&str; 9] = ["check", "mono", "reverse", "expand", "lower", "opt", "cranelift", "globals", "sum"];

/// This thread's CPU time in ms: unlike the wall clock, not inflated by the other processes that
/// share the cores.
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 * 1e-6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn insts(m: &Module, live: Option<&[bool]>) -> (usize, usize) {
    let mut funcs = 0;
    let mut n = 0;
    for (i, f) in m.funcs.values().enumerate() {
        if live.is_some_and(|l| !l[i]) {
            continue;
        }
        funcs += 1;
        n += f.layout.iter().map(|&b| f.blocks[b].insts.len()).sum::<usize>();
    }
    (funcs, n)
}

/// One run of the phases; their times in ms, and (after the first run) nothing else.
fn phases(src: &str, def: &str, report: bool) -> [f64; 9] {
    let mut t = [0.0; 9];
    let mut clock = cpu_ms();
    let mut lap = |k: usize, t: &mut [f64; 9]| {
        let now = cpu_ms();
        t[k] = now - clock;
        clock = now;
    };
    let program = frontend::check_source(src).expect("check");
    let id = runtime::find_def(&program, def).expect("def");
    lap(0, &mut t);
    let mono = anf::mono::monomorphise(&program, id).expect("mono");
    lap(1, &mut t);
    let mono = adjoint::reverse::value_and_gradient(&mono, mono.root()).expect("reverse");
    lap(2, &mut t);
    let mono = adjoint::incremental::expand(&mono).expect("expand");
    lap(3, &mut t);
    let lowered = lower::lower(&mono, &LowerOptions { apply_arity: Some(1) }).expect("lower");
    lap(4, &mut t);
    let mut module = lowered.module.clone();
    let apply = lowered.apply.expect("apply");
    let moved = optimize(&mut module, &[lowered.main, apply], &OptOptions::default());
    let entries = [moved.get(lowered.main).unwrap(), moved.get(apply).unwrap()];
    lap(5, &mut t);
    let mut jit = Jit::new(JitConfig::default(), runtime::native::support_table()).expect("jit");
    let compiled = jit.compile(&module, &entries).expect("compile");
    lap(6, &mut t);
    let mut ctx = runtime::native::CallCtx::new(runtime::native::DEFAULT_ARENA_LIMIT);
    ctx.reset();
    ctx.limit_stack(runtime::api::STACK_BUDGET);
    let main = compiled.entry(entries[0]).expect("main entry");
    // SAFETY: a live context; `@main` takes no arguments.
    unsafe { main.call(ctx.header(), &[]) }.expect("globals");
    lap(7, &mut t);
    t[8] = t[..8].iter().sum();
    if report && std::env::var_os("IRDUMP").is_some() {
        std::fs::write("/tmp/ir_opt.txt", anf::ir::print(&module)).unwrap();
        std::fs::write("/tmp/ir_raw.txt", anf::ir::print(&lowered.module)).unwrap();
    }
    if report {
        let (f0, i0) = insts(&lowered.module, None);
        let (f1, i1) = insts(&module, None);
        let live = reachable_functions(&module, &entries);
        let (f2, i2) = insts(&module, Some(&live));
        let calls = module
            .funcs
            .values()
            .zip(&live)
            .filter(|(_, l)| **l)
            .flat_map(|(f, _)| {
                f.layout.iter().flat_map(move |&b| f.blocks[b].insts.iter().map(move |&i| &f.insts[i].op))
            })
            .filter(|op| matches!(op, Op::Call(..)))
            .count();
        println!(
            "  IR: lowered {f0} functions / {i0} insts; optimised {f1} / {i1}; compiled {f2} / {i2} ({calls} calls)"
        );
        let mut sizes: Vec<(usize, String)> = module
            .funcs
            .values()
            .zip(&live)
            .filter(|(_, l)| **l)
            .map(|(f, _)| (f.layout.iter().map(|&b| f.blocks[b].insts.len()).sum(), f.name.clone()))
            .collect();
        sizes.sort_by(|a, b| b.cmp(a));
        let top: Vec<String> = sizes.iter().take(6).map(|(n, name)| format!("@{name} {n}")).collect();
        println!("  largest compiled: {}", top.join(", "));
    }
    t
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let runs: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(21);
    for w in workloads(Scale::Full) {
        if !w.name.contains(&filter) {
            continue;
        }
        println!("{} ({})", w.name, w.size);
        let (src, def) = (w.src.clone(), w.def);
        let (times, passes) = frontend::with_big_stack(move || {
            phases(&src, def, true);
            let _ = cranelift_codegen::timing::take_current();
            let times: Vec<[f64; 9]> = (0..runs).map(|_| phases(&src, def, false)).collect();
            (times, cranelift_codegen::timing::take_current())
        });
        let meds: Vec<String> =
            (0..9).map(|k| format!("{} {:.2}", PHASES[k], median(times.iter().map(|t| t[k]).collect()))).collect();
        println!("  median CPU ms: {}", meds.join(", "));
        // Wall time only: `Gradient::new` runs its phases on a thread of its own, whose CPU time
        // this thread's clock does not see.
        let wall: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                Gradient::new(&w.src, w.def).expect("gradient");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        println!("  Gradient::new median {:.2} ms wall", median(wall));
        // The code's speed, for settings that trade it against compile time.
        if std::env::var_os("NO_CALLS").is_some() {
            continue;
        }
        let mut grad = Gradient::new(&w.src, w.def).expect("gradient");
        let args = w.args();
        let mut g = vec![0.0; w.gradient_len()];
        let start = Instant::now();
        let mut calls = Vec::new();
        while calls.len() < 5 || (start.elapsed().as_secs_f64() < 0.5 && calls.len() < 100_000) {
            let t = Instant::now();
            grad.call(&args, &mut g).expect("call");
            calls.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let n = calls.len();
        println!("  gradient call median {:.2} µs ({n} calls)", median(calls));
        if std::env::var_os("PASSES").is_some() {
            println!("  Cranelift passes, total over {runs} runs:\n{passes}");
        }
    }
}
