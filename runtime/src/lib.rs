//! The engine users touch: values, the reference interpreter, (soon) the JIT-backed engine,
//! the incremental driver and the public API. The `nabla` binary's CLI lives in `main.rs`.

pub mod api;
pub mod bench;
pub mod driver;
pub mod engine;
pub mod incr;
pub mod interp;
pub mod native;
pub mod value;

use frontend::syntax::{DefId, Program};
use frontend::Diagnostic;

/// Parses, type-checks and monomorphises `src` for evaluating definition `root` (by name).
pub fn prepare(src: &str, root: &str) -> Result<(Program, anf::mono::MonoProgram), Diagnostic> {
    let program = frontend::check_source(src)?;
    let id = find_def(&program, root)?;
    let mono = anf::mono::monomorphise(&program, id)?;
    Ok((program, mono))
}

/// The definition named `name`, or an error naming what exists.
pub fn find_def(program: &Program, name: &str) -> Result<DefId, Diagnostic> {
    program.lookup(name).ok_or_else(|| {
        let end = program.defs.last().map(|d| d.span.hi as usize).unwrap_or(0);
        Diagnostic::error(frontend::Span::new(end, end), format!("no definition named `{name}`"))
    })
}
