//! The `nabla` command line (LANGUAGE.md §8). It is the only place that reads files and renders
//! diagnostics. Exit status: 0 success, 1 an error in the program or its data, 2 a usage error.

mod ilc_cli;
mod jit_cli;
mod pullback_cli;
mod repl;

use std::io::Write;
use std::process::ExitCode;

use codespan_reporting::diagnostic::{Diagnostic as Report, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Chars, Config};
use frontend::Diagnostic;

const USAGE: &str = "\
usage: nabla <command> [arguments]

commands:
  run FILE [--interp]   evaluate `main` (compiled by default; --interp uses the reference interpreter)
  check FILE            print each definition's inferred type
  anf FILE [DEF]        print the A-normal let-series of each definition (or DEF)
  ir FILE [DEF] [--raw] print the first-order SSA IR of `main` (or DEF) as the JIT compiles it
                        (after inlining and clean-up; --raw: as lowering made it)
  trace FILE            print `main`'s reduction sequence, one step a line with its rule
  derive FILE DEF       print DEF's derivative (ILC) and whether it is self-maintainable
  incr FILE DEF --input F --changes F [--interp] [--final] [--deltas] [--stats]
                        keep DEF's output up to date under a stream of input changes
  bench FILE            time `main` under the JIT and the interpreter, side by side
  repl                  read-eval-print loop
  help                  print this message
";

/// A failure of the command: a located program error, or a usage error.
enum Failure {
    /// An error in the program or its data, with the file it refers to.
    Program {
        path: String,
        src: String,
        diag: Diagnostic,
    },
    /// An error reading input that has no location.
    Plain(String),
    Usage(String),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = frontend::with_big_stack(move || dispatch(&args));
    match result {
        Ok(out) => {
            // A closed or full stdout is an error to report, not a panic (`print!` would panic).
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(out.as_bytes()).and_then(|_| stdout.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    to_stderr(&format!("error: cannot write the output: {e}\n"));
                    ExitCode::from(1)
                }
            }
        }
        Err(Failure::Program { path, src, diag }) => {
            to_stderr(&render(&path, &src, &diag));
            ExitCode::from(1)
        }
        Err(Failure::Plain(msg)) => {
            to_stderr(&format!("error: {msg}\n"));
            ExitCode::from(1)
        }
        Err(Failure::Usage(msg)) => {
            to_stderr(&format!("error: {msg}\n\n{USAGE}\n"));
            ExitCode::from(2)
        }
    }
}

/// Writes to stderr, ignoring failure (there is nowhere left to report it; `eprint!` would panic).
pub(crate) fn to_stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

fn dispatch(args: &[String]) -> Result<String, Failure> {
    let Some(cmd) = args.first() else { return Err(Failure::Usage("no command given".into())) };
    let rest = &args[1..];
    match cmd.as_str() {
        "run" => {
            let (file, flags) = file_and_flags(rest, &["--interp"])?;
            let src = read(&file)?;
            let on_file = |d: Diagnostic| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
            let (_, mono) = runtime::prepare(&src, "main").map_err(on_file)?;
            let v = if flags.contains(&"--interp".to_string()) {
                runtime::interp::run(&mono).map_err(on_file)?
            } else {
                jit_cli::run(&mono).map_err(on_file)?
            };
            Ok(format!("{v}\n"))
        }
        "check" => {
            let (file, _) = file_and_flags(rest, &[])?;
            let src = read(&file)?;
            let program = frontend::check_source(&src).map_err(|d| Failure::Program {
                path: file.clone(),
                src: src.clone(),
                diag: d,
            })?;
            Ok(frontend::signatures(&program))
        }
        "bench" => {
            let (file, _) = file_and_flags(rest, &[])?;
            let src = read(&file)?;
            let report = runtime::bench::bench(&src).map_err(|d| Failure::Program {
                path: file.clone(),
                src: src.clone(),
                diag: d,
            })?;
            Ok(report.to_string())
        }
        "anf" => pullback_cli::anf(rest),
        "ir" => jit_cli::ir(rest),
        "trace" => pullback_cli::trace(rest),
        "derive" => ilc_cli::derive(rest),
        "incr" => ilc_cli::incr(rest),
        "repl" => {
            if !rest.is_empty() {
                return Err(Failure::Usage("`repl` takes no arguments".into()));
            }
            repl::run(&render).map_err(Failure::Plain)?;
            Ok(String::new())
        }
        "help" | "--help" | "-h" => Ok(USAGE.to_string()),
        other => Err(Failure::Usage(format!("unknown command `{other}`"))),
    }
}

/// Evaluates the root of a monomorphised program with the default engine.
fn engine_eval(mono: &anf::mono::MonoProgram) -> Result<runtime::value::Value, Diagnostic> {
    jit_cli::run(mono)
}

/// Splits arguments into exactly one file and known flags.
fn file_and_flags(args: &[String], known: &[&str]) -> Result<(String, Vec<String>), Failure> {
    let mut file = None;
    let mut flags = Vec::new();
    for a in args {
        if a.starts_with("--") {
            if !known.contains(&a.as_str()) {
                return Err(Failure::Usage(format!("unknown option `{a}`")));
            }
            flags.push(a.clone());
        } else if file.is_none() {
            file = Some(a.clone());
        } else {
            return Err(Failure::Usage(format!("unexpected argument `{a}`")));
        }
    }
    let file = file.ok_or_else(|| Failure::Usage("missing FILE".into()))?;
    Ok((file, flags))
}

/// Reads a source file; bytes that are not UTF-8 are a located error.
fn read(path: &str) -> Result<String, Failure> {
    let bytes = std::fs::read(path).map_err(|e| Failure::Plain(format!("cannot read `{path}`: {e}")))?;
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => {
            let good = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            // Show the valid prefix so the location points at the first bad byte.
            let src = String::from_utf8_lossy(&bytes).into_owned();
            let lossy_offset = String::from_utf8_lossy(&bytes[..good]).len();
            let diag = Diagnostic::error(
                frontend::Span::new(lossy_offset, lossy_offset + 1),
                "the file is not valid UTF-8 text",
            );
            Err(Failure::Program { path: path.to_string(), src, diag })
        }
    }
}

/// `error: MESSAGE`, `--> FILE:LINE:COL`, the source line with a caret (LANGUAGE.md §8).
fn render(path: &str, src: &str, d: &Diagnostic) -> String {
    let file = SimpleFile::new(path, src);
    let clamp = |s: frontend::Span| {
        let lo = (s.lo as usize).min(src.len());
        let hi = (s.hi as usize).clamp(lo, src.len());
        lo..hi
    };
    let mut labels = vec![Label::primary((), clamp(d.span))];
    for (s, text) in &d.labels {
        labels.push(Label::secondary((), clamp(*s)).with_message(text.clone()));
    }
    let report = Report::error().with_message(d.message.clone()).with_labels(labels).with_notes(d.notes.clone());
    let config = Config { chars: Chars::ascii(), ..Config::default() };
    term::emit_into_string(&config, &file, &report).unwrap_or_else(|_| format!("error: {}\n", d.message))
}
