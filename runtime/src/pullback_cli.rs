//! `nabla anf FILE [DEF]` and `nabla trace FILE` (docs/language.md §8; the formats are in
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

/// The most steps `nabla trace` prints unless `--max-steps` says otherwise.
pub const DEFAULT_MAX_STEPS: usize = 10_000;

/// `nabla trace FILE [--max-steps N]`: `main`'s reduction sequence, one step a line with its rule;
/// after N steps the reduction stops and a last line says so (N = 0: no bound).
pub fn trace(args: &[String]) -> Result<String, Failure> {
    let usage = || Failure::Usage("usage: nabla trace FILE [--max-steps N]".into());
    let mut file = None;
    let mut max_steps = Some(DEFAULT_MAX_STEPS);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--max-steps" => {
                let n = crate::option_value(a, it.next())?;
                let n: usize = n.parse().map_err(|_| {
                    Failure::Usage(format!("`--max-steps` needs a whole number of steps (0: no bound), not `{n}`"))
                })?;
                max_steps = (n > 0).then_some(n);
            }
            s if s.starts_with("--") => return Err(Failure::Usage(format!("unknown option `{s}`"))),
            _ if file.is_none() => file = Some(a.clone()),
            _ => return Err(usage()),
        }
    }
    let file = file.ok_or_else(usage)?;
    let src = read(&file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, "main").map_err(on_file)?;
    let config = pullback::Config { max_steps, ..pullback::Config::default() };
    pullback::trace(&mono, &config).map_err(on_file)
}
