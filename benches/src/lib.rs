//! Benchmark support: loading the benchmark programs and compiling them for both engines, shared by
//! the criterion benchmarks (`benches/engines.rs`) and the ratio report (`src/bin/ratios.rs`).

use std::path::PathBuf;

use anf::lower::{self, LowerOptions};
use anf::mono::MonoProgram;
use runtime::engine::{root_span, Machine};
use runtime::native::{CallCtx, DEFAULT_ARENA_LIMIT};
use runtime::value::Value;

/// Stack the compiled code may use on a benchmark thread (the default 8 MiB main thread).
pub const BENCH_STACK_BUDGET: usize = 2 << 20;

/// The benchmark programs, `(name, source)`, from `benches/programs/`.
pub fn programs() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("programs");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("benches/programs exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "nbl"))
        .map(|p| {
            let name = p.file_stem().expect("file name").to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("readable program"))
        })
        .collect();
    out.sort();
    out
}

/// A paper-sized example from `examples/`, by file stem.
pub fn example(stem: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(format!("{stem}.nbl"));
    std::fs::read_to_string(p).expect("example exists")
}

/// Front end and monomorphisation of `main`.
pub fn prepare(src: &str) -> MonoProgram {
    let (_, mono) = runtime::prepare(src, "main").unwrap_or_else(|d| panic!("benchmark program: {}", d.message));
    mono
}

/// Everything from source to machine code: what a user waits for before the first call.
pub fn compile(src: &str) -> Machine {
    let mono = prepare(src);
    let lowered = lower::lower(&mono, &LowerOptions::default()).unwrap_or_else(|e| panic!("lowering: {}", e.message));
    Machine::new(&lowered, root_span(&mono), BENCH_STACK_BUDGET).expect("compiles")
}

/// One run of `main` in compiled code, reusing the call context.
pub fn run_jit(machine: &Machine, ctx: &mut CallCtx) -> Value {
    ctx.reset();
    machine.run_main(ctx).expect("benchmark program runs")
}

/// One run of `main` in the reference interpreter.
pub fn run_interp(mono: &MonoProgram) -> Value {
    runtime::interp::run(mono).expect("benchmark program runs")
}

/// A fresh call context with the default arena limit.
pub fn context() -> Box<CallCtx> {
    CallCtx::new(DEFAULT_ARENA_LIMIT)
}
pub mod reverse;
