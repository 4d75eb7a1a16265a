//! Nabla's front end: lexer, parser (every node has a span), name resolution, Hindley–Milner
//! inference, the `lin` check for dual maps, diagnostics as data, and the pretty printer.
//!
//! It knows nothing of A-normal form, the IR or Cranelift, and never panics on any input.

pub mod builtins;
pub mod diag;
pub mod infer;
pub mod lexer;
pub mod lin;
pub mod parser;
pub mod pretty;
pub mod span;
pub mod syntax;
pub mod types;

pub use diag::Diagnostic;
pub use span::Span;

/// Parses and type-checks a program: the front end's one entry point.
pub fn check_source(src: &str) -> Result<syntax::Program, Diagnostic> {
    let program = parser::parse_program(src)?;
    infer::check_program(program)
}

/// `name : type` for each definition, one a line (what `nabla check` prints).
pub fn signatures(program: &syntax::Program) -> String {
    let mut out = String::new();
    for d in &program.defs {
        out.push_str(&format!("{} : {}\n", d.name, types::TypePrinter::new().scheme(&d.scheme)));
    }
    out
}

/// Runs `f` on a thread with a large stack. Every pass recurses over terms, whose depth the parser
/// bounds (`parser::MAX_DEPTH`); a generous stack makes that bound safe for all of them.
pub fn with_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    const STACK: usize = 1 << 30;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(STACK)
            .spawn_scoped(s, f)
            .expect("spawning the compiler thread")
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
