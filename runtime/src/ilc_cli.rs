//! `nabla derive FILE DEF` and `nabla incr FILE DEF --input F --changes F` (docs/language.md §8; the
//! formats are in docs/incremental-semantics.md).

use std::io::Write;

use frontend::pretty::{expr, Mode};
use frontend::Diagnostic;
use frontend::Span;
use runtime::api::Incremental;
use runtime::incr::{literal, Incr};

use crate::{read, render, Failure};

/// `nabla derive FILE DEF`: the derivative after all passes, in paper notation, and whether it is
/// self-maintainable (and if not, what reads a base input).
pub fn derive(args: &[String]) -> Result<String, Failure> {
    let [file, def] = args else {
        return Err(Failure::Usage("usage: nabla derive FILE DEF".into()));
    };
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, def).map_err(on_file)?;
    let d = adjoint::incremental::derive_definition(&mono, mono.root()).map_err(on_file)?;
    let mut out = format!("Derive({def}) = {}\n", expr(&d.fast, Mode::Paper));
    if d.report.self_maintainable {
        out.push_str(&format!("{def} is self-maintainable\n"));
    } else {
        out.push_str(&format!("{def} is not self-maintainable:\n"));
        for r in &d.report.reasons {
            let (line, col) = line_col(&src, r.span);
            out.push_str(&format!("  {line}:{col} `{}` reads `{}`: {}\n", snippet(&src, r.span), r.input, r.what));
        }
    }
    Ok(out)
}

/// `nabla incr FILE DEF --input F --changes F [--interp] [--final] [--deltas] [--stats]`: prints
/// DEF's output on the input, then the output after each change (`--deltas`: each output change
/// instead; `--final`: only the last output). Compiled by default (`runtime::api::Incremental`),
/// `--interp` runs the reference interpreter's driver. A change that fails (a bad line, invalid
/// UTF-8 included, or an error in the derivative) is reported on stderr with its location and
/// skipped (input and output stay as they were); the run then ends with status 1. `--stats`
/// reports on stderr the changes applied and the median and 99th percentile time per change.
pub fn incr(args: &[String]) -> Result<String, Failure> {
    let mut pos = Vec::new();
    let (mut input, mut changes) = (None, None);
    let (mut interp, mut final_only, mut deltas, mut stats) = (false, false, false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--input" | "--changes" => {
                let v = it.next().ok_or_else(|| Failure::Usage(format!("`{a}` needs a file")))?;
                let slot = if a == "--input" { &mut input } else { &mut changes };
                if slot.replace(v.clone()).is_some() {
                    return Err(Failure::Usage(format!("`{a}` given twice")));
                }
            }
            "--interp" => interp = true,
            "--final" => final_only = true,
            "--deltas" => deltas = true,
            "--stats" => stats = true,
            s if s.starts_with("--") => return Err(Failure::Usage(format!("unknown option `{s}`"))),
            _ => pos.push(a.clone()),
        }
    }
    let ([file, def], Some(input_path), Some(changes_path)) = (&pos[..], input, changes) else {
        return Err(Failure::Usage(
            "usage: nabla incr FILE DEF --input F --changes F [--interp] [--final] [--deltas] [--stats]".into(),
        ));
    };
    if final_only && deltas {
        return Err(Failure::Usage("`--final` and `--deltas` exclude each other".into()));
    }
    let src = read(file)?;
    let on_file = |d| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let input_src = read(&input_path)?;
    let on_input = |d| Failure::Program { path: input_path.clone(), src: input_src.clone(), diag: d };
    let (_, mono, input_ty) = incr_program(&src, def, &input_src).map_err(|e| match e {
        Err(d) => on_file(d),
        Ok(d) => on_input(d),
    })?;
    let (a, next) = literal(&input_src, &input_ty, 0).map_err(on_input)?;
    let mut state = if interp {
        let mut s = Incr::new(&mono, a).map_err(on_file)?;
        s.reserve_locals(next);
        Driver::Interp(Box::new(s))
    } else {
        Driver::Native(Box::new(Incremental::new(&mono, &a).map_err(on_file)?))
    };
    let changes_bytes =
        std::fs::read(&changes_path).map_err(|e| Failure::Plain(format!("cannot read `{changes_path}`: {e}")))?;
    let changes_src = String::from_utf8_lossy(&changes_bytes).into_owned();
    let change_ty = frontend::types::Type::delta(&input_ty);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if !final_only && !deltas {
        let _ = writeln!(out, "{}", state.output());
    }
    let (mut failed, mut total) = (0, 0);
    let mut times = Vec::new();
    let mut offset = 0;
    let mut lossy_offset = 0;
    for raw in changes_bytes.split_inclusive(|b| *b == b'\n') {
        let start = lossy_offset;
        offset += raw.len();
        let lossy = String::from_utf8_lossy(raw);
        lossy_offset += lossy.len();
        let text = lossy.trim_end_matches(['\n', '\r']);
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with("--") {
            continue;
        }
        total += 1;
        let line_span = Span::new(start, start + text.len());
        let result = match std::str::from_utf8(raw) {
            Err(e) => {
                let at = start + String::from_utf8_lossy(&raw[..e.valid_up_to()]).len();
                Err(frontend::Diagnostic::error(Span::new(at, at + 1), "this change is not valid UTF-8 text"))
            }
            Ok(_) => literal(text, &change_ty, start).and_then(|(da, next)| {
                let t = std::time::Instant::now();
                let r = state.update(da, next);
                times.push(t.elapsed());
                r.map_err(|d| {
                    // An error in the change itself (a user group's operation) is located there.
                    if d.span.lo as usize >= start && d.span.hi as usize <= start + text.len() {
                        return d;
                    }
                    // The change failed inside the derivative: point at the change, and say where in
                    // the program.
                    let (line, col) = line_col(&src, d.span);
                    let mut d2 = frontend::Diagnostic::error(line_span, d.message.clone());
                    if d.span != Span::SYNTHETIC {
                        d2.notes
                            .push(format!("the derivative failed at {file}:{line}:{col}: `{}`", snippet(&src, d.span)));
                    }
                    d2
                })
            }),
        };
        match result {
            Ok(()) => {
                if deltas {
                    if let Some(dv) = state.last_change() {
                        let _ = writeln!(out, "{dv}");
                    }
                } else if !final_only {
                    let _ = writeln!(out, "{}", state.output());
                }
            }
            Err(d) => {
                failed += 1;
                let _ = out.flush();
                crate::to_stderr(&render(&changes_path, &changes_src, &d));
            }
        }
    }
    let _ = offset;
    if final_only {
        let _ = writeln!(out, "{}", state.output());
    }
    let _ = out.flush();
    if stats {
        times.sort();
        let pick = |q: f64| {
            if times.is_empty() {
                std::time::Duration::ZERO
            } else {
                times[((times.len() - 1) as f64 * q).round() as usize]
            }
        };
        crate::to_stderr(&format!(
            "changes applied: {} of {total}\ntime per change: median {:?}, p99 {:?}\n",
            total - failed,
            pick(0.5),
            pick(0.99)
        ));
    }
    if failed > 0 {
        return Err(Failure::Plain(format!(
            "{failed} of {total} changes failed; each left the input and output as they were"
        )));
    }
    Ok(String::new())
}

/// The program `nabla incr` keeps current: DEF monomorphised at the input's type. A polymorphic
/// DEF takes its type from the input literal (`def incr_input = TEXT` inferred on its own). Errors
/// in the program are `Err(d)`, in the input `Ok(d)`.
#[allow(clippy::type_complexity)]
fn incr_program(
    src: &str,
    def: &str,
    input_src: &str,
) -> Result<(frontend::syntax::Program, anf::mono::MonoProgram, frontend::types::Type), Result<Diagnostic, Diagnostic>>
{
    use frontend::types::Type;
    let program = frontend::check_source(src).map_err(Err)?;
    let id = runtime::find_def(&program, def).map_err(Err)?;
    let d = &program.defs[id.0 as usize];
    let curried = |t: &Type| matches!(t, Type::Fun(_, r) if matches!(&**r, Type::Fun(..)));
    if !matches!(d.scheme.ty, Type::Fun(..)) {
        return Err(Err(Diagnostic::error(
            d.span,
            format!("`incr` needs a function `{def} : A -> B`, but it has type {}", d.scheme.ty),
        )));
    }
    if curried(&d.scheme.ty) {
        return Err(Err(Diagnostic::error(
            d.span,
            format!(
                "`{def}` is curried (its type is {}): `incr` keeps a function of one input current; \
                 take the inputs as a tuple",
                d.scheme.ty
            ),
        )));
    }
    if d.scheme.vars.is_empty() {
        let mono = anf::mono::monomorphise(&program, id).map_err(Err)?;
        let input_ty = match &mono.def(mono.root()).ty {
            Type::Fun(a, _) => (**a).clone(),
            t => {
                return Err(Err(Diagnostic::error(
                    d.span,
                    format!("`incr` needs a function `{def} : A -> B`, but it has type {t}"),
                )))
            }
        };
        return Ok((program, mono, input_ty));
    }
    // Polymorphic: the input literal's own type instantiates DEF.
    let lit = frontend::check_source(&format!("def incr_input =\n{input_src}")).map_err(|d| {
        let shift = "def incr_input =\n".len() as u32;
        Ok(Diagnostic {
            span: Span::new(d.span.lo.saturating_sub(shift) as usize, d.span.hi.saturating_sub(shift) as usize),
            ..d
        })
    })?;
    let lit_mono = anf::mono::monomorphise(&lit, frontend::syntax::DefId(0)).map_err(Ok)?;
    let input_ty = lit_mono.def(lit_mono.root()).ty.clone();
    let printed = frontend::types::TypePrinter::new().ty(&input_ty);
    let wrapped = format!("{src}\ndef incr_root (x : {printed}) = {def} x\n");
    let program = frontend::check_source(&wrapped).map_err(Err)?;
    let id = runtime::find_def(&program, "incr_root").map_err(Err)?;
    let mono = anf::mono::monomorphise(&program, id).map_err(Err)?;
    Ok((program, mono, input_ty))
}

/// The engine behind `nabla incr`.
enum Driver<'p> {
    Native(Box<Incremental>),
    Interp(Box<Incr<'p>>),
}

impl Driver<'_> {
    fn output(&self) -> runtime::value::Value {
        match self {
            Driver::Native(d) => d.output(),
            Driver::Interp(d) => d.output().clone(),
        }
    }
    fn last_change(&self) -> Option<runtime::value::Value> {
        match self {
            Driver::Native(d) => d.last_change(),
            Driver::Interp(d) => d.last_change().cloned(),
        }
    }
    fn update(&mut self, da: runtime::value::Value, next: u32) -> Result<(), Diagnostic> {
        match self {
            Driver::Native(d) => d.update(&da).map(|_| ()),
            Driver::Interp(d) => {
                d.reserve_locals(next);
                d.update(da).map(|_| ())
            }
        }
    }
}

fn line_col(src: &str, span: Span) -> (usize, usize) {
    let lo = (span.lo as usize).min(src.len());
    let before = &src[..lo];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

/// The source text of a span on one line, shortened.
fn snippet(src: &str, span: Span) -> String {
    let lo = (span.lo as usize).min(src.len());
    let hi = (span.hi as usize).clamp(lo, src.len());
    let text: String = src.get(lo..hi).unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > 40 {
        format!("{}...", text.chars().take(37).collect::<String>())
    } else {
        text
    }
}
