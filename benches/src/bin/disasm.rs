//! Machine code of a program's optimised IR functions:
//! `cargo run -p benches --release --bin disasm FILE [DEF [FUNCTION]]` — `@main` of FILE, or of the
//! program rooted at definition DEF, or the IR function named FUNCTION (as `nabla ir FILE DEF`
//! prints it, without the `@`) of that program.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().expect("a file");
    let def = args.get(1).map_or("main", String::as_str);
    let src = std::fs::read_to_string(path).expect("readable");
    let (_, mono) = runtime::prepare(&src, def).unwrap_or_else(|d| panic!("program: {}", d.message));
    // Compiled reverse mode first, as the engine does (the program unchanged when it has no site).
    let mono = adjoint::reverse::transform(&mono).expect("reverse mode compiles").unwrap_or(mono);
    let mut lowered = anf::lower::lower(&mono, &anf::lower::LowerOptions::default()).expect("lowers");
    let map = anf::opt::optimize(&mut lowered.module, &[lowered.main], &anf::opt::OptOptions::default());
    let f = match args.get(2) {
        Some(name) => lowered.module.func_by_name(name).expect("no IR function of that name"),
        None => map.get(lowered.main).expect("main"),
    };
    let mut jit = jit::Jit::new(jit::JitConfig::default(), runtime::native::support_table()).expect("jit");
    println!("{}", jit.disassemble(&lowered.module, f).expect("compiles"));
}
