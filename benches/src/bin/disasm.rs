//! Machine code of a program's optimised IR functions:
//! `cargo run -p benches --release --bin disasm FILE [DEF [FUNCTION]]` — `@main` of FILE, or of the
//! program rooted at definition DEF, or the IR function named FUNCTION (as `nabla ir FILE DEF`
//! prints it, without the `@`) of that program.
//! `disasm --grad FILE DEF [FUNCTION]` does the same for the value and gradient of DEF as
//! `api::Gradient` compiles it (its `@apply` entry by default); `--ir` instead of `--grad` prints
//! that program's optimised IR. `--fun` and `--fun-ir` do the same for DEF itself as
//! `api::Compiled` compiles it (no gradient: GradBench's primals).
fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, gradient) = match args.first().map(String::as_str) {
        Some("--grad") => (Some(false), true),
        Some("--ir") => (Some(true), true),
        Some("--fun") => (Some(false), false),
        Some("--fun-ir") => (Some(true), false),
        _ => (None, true),
    };
    if mode.is_some() {
        args.remove(0);
    }
    let path = args.first().expect("a file");
    let def = args.get(1).map_or("main", String::as_str);
    let src = std::fs::read_to_string(path).expect("readable");
    let mut jit = jit::Jit::new(jit::JitConfig::default(), runtime::native::support_table()).expect("jit");
    let Some(print_ir) = mode else {
        let (_, mono) = runtime::prepare(&src, def).unwrap_or_else(|d| panic!("program: {}", d.message));
        // Compiled reverse mode first, as the engine does (the program unchanged when it has no site).
        let mono = adjoint::reverse::transform(&mono).expect("reverse mode compiles").unwrap_or(mono);
        let mut lowered = anf::lower::lower(&mono, &anf::lower::LowerOptions::default()).expect("lowers");
        let map = anf::opt::optimize(&mut lowered.module, &[lowered.main], &anf::opt::OptOptions::default());
        let f = match args.get(2) {
            Some(name) => lowered.module.func_by_name(name).expect("no IR function of that name"),
            None => map.get(lowered.main).expect("main"),
        };
        println!("{}", jit.disassemble(&lowered.module, f).expect("compiles"));
        return;
    };
    // As `api::Gradient::new` prepares it.
    let program = frontend::check_source(&src).unwrap_or_else(|d| panic!("program: {}", d.message));
    let id = runtime::find_def(&program, def).unwrap_or_else(|d| panic!("{}", d.message));
    let mono = anf::mono::monomorphise(&program, id).unwrap_or_else(|d| panic!("{}", d.message));
    let mono = if gradient {
        adjoint::reverse::value_and_gradient(&mono, mono.root()).expect("reverse mode compiles")
    } else {
        adjoint::reverse::transform(&mono).expect("reverse mode compiles").unwrap_or(mono)
    };
    let mono = adjoint::incremental::expand(&mono).unwrap_or_else(|d| panic!("{}", d.message));
    let (mut arity, mut ty) = (0, mono.def(mono.root()).ty.clone());
    while let frontend::types::Type::Fun(_, b) = ty {
        arity += 1;
        ty = (*b).clone();
    }
    let options = anf::lower::LowerOptions { apply_arity: Some(arity) };
    let mut lowered = anf::lower::lower(&mono, &options).expect("lowers");
    let apply = lowered.apply.expect("an apply entry");
    let map = anf::opt::optimize(&mut lowered.module, &[lowered.main, apply], &anf::opt::OptOptions::default());
    if print_ir {
        println!("{}", anf::ir::print::print(&lowered.module));
        return;
    }
    let f = match args.get(2) {
        Some(name) => lowered.module.func_by_name(name).expect("no IR function of that name"),
        None => map.get(apply).expect("apply"),
    };
    println!("{}", jit.disassemble(&lowered.module, f).expect("compiles"));
}
