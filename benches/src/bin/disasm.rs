//! Machine code of a benchmark program's optimised `@main`: `cargo run -p benches --release --bin disasm FILE`.
fn main() {
    let path = std::env::args().nth(1).expect("a file");
    let src = std::fs::read_to_string(path).expect("readable");
    let mono = benches::prepare(&src);
    // Compiled reverse mode first, as the engine does (the program unchanged when it has no site).
    let mono = adjoint::reverse::transform(&mono).expect("reverse mode compiles").unwrap_or(mono);
    let mut lowered = anf::lower::lower(&mono, &anf::lower::LowerOptions::default()).expect("lowers");
    let map = anf::opt::optimize(&mut lowered.module, &[lowered.main], &anf::opt::OptOptions::default());
    let main = map.get(lowered.main).expect("main");
    let mut jit = jit::Jit::new(jit::JitConfig::default(), runtime::native::support_table()).expect("jit");
    println!("{}", jit.disassemble(&lowered.module, main).expect("compiles"));
}
