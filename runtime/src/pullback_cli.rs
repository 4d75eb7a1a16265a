//! `nabla anf FILE [DEF]` and `nabla trace FILE` (LANGUAGE.md §8; the formats are in
//! docs/pullback-semantics.md).

use runtime::interp::pullback;

use crate::{read, Failure};

/// `nabla anf FILE [DEF]`: every definition (or DEF) as an A-normal let-series, in paper notation.
pub fn anf(args: &[String]) -> Result<String, Failure> {
    let (file, def) = match args {
        [file] => (file, None),
        [file, def] => (file, Some(def)),
        _ => return Err(Failure::Usage("usage: nabla anf FILE [DEF]".into())),
    };
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let program = frontend::check_source(&src).map_err(on_file)?;
    let only = match def {
        Some(name) => Some(runtime::find_def(&program, name).map_err(on_file)?),
        None => None,
    };
    pullback::anf_listing(&program, only).map_err(on_file)
}

/// `nabla trace FILE`: `main`'s reduction sequence, one step a line with its rule.
pub fn trace(args: &[String]) -> Result<String, Failure> {
    let [file] = args else {
        return Err(Failure::Usage("usage: nabla trace FILE".into()));
    };
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, "main").map_err(on_file)?;
    pullback::trace(&mono, &pullback::Config::default()).map_err(on_file)
}
