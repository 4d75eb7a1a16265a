//! The `nabla` command line (docs/language.md §8). It is the only place that reads files and renders
//! diagnostics. Exit status: 0 success, 1 an error in the program or its data, 2 a usage error.

mod gradbench_cli;
mod ilc_cli;
mod jit_cli;
mod pullback_cli;
mod repl;

/// The reference interpreter and the pullback reducer allocate and free many small terms; mimalloc
/// frees them in about half the time of the system allocator (the reducer's gradient of a fold).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e`; the sys crate names no constant
/// for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory stays with the process instead of going back to the OS 10 ms later: the reducer
/// frees and reallocates hundreds of megabytes of terms, and returning them cost more system time
/// (the kernel zeroing the pages again) than its own work — Rosenbrock's gradient at n = 300
/// under `--interp`: 1.0–1.6 s of system time before, 0.03–0.3 s after. The resident size stays
/// at the peak; the interpreter's `--max-memory` meters values, not pages.
fn keep_freed_memory() {
    // SAFETY: sets a process-wide option; mimalloc reads it each time it considers purging.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

use std::io::Write;
use std::process::ExitCode;

use codespan_reporting::diagnostic::{Diagnostic as Report, Label};
use codespan_reporting::files::{self, Files, SimpleFile};
use codespan_reporting::term::{self, Chars, Config};
use frontend::Diagnostic;

const USAGE: &str = "\
usage: nabla <command> [arguments]

commands:
  run FILE [--interp] [--max-memory SIZE]
                        evaluate `main` (compiled by default; --interp uses the reference interpreter)
  check FILE            print each definition's inferred type
  anf FILE [DEF]        print the A-normal let-series of each definition (or DEF)
  ir FILE [DEF] [--raw] print the first-order SSA IR of `main` (or DEF) as the JIT compiles it
                        (after inlining and clean-up; --raw: as lowering made it)
  trace FILE [--max-steps N]
                        print `main`'s reduction sequence, one step a line with its rule
  derive FILE DEF       print DEF's derivative (ILC) and whether it is self-maintainable
  incr FILE DEF --input F --changes F [--interp] [--final] [--deltas] [--stats]
                        keep DEF's output up to date under a stream of input changes
  bench FILE [--runs N] [--engine jit|interp|both] [--budget SECONDS]
                        time `main` under the JIT and the interpreter, side by side
  gradbench             act as a GradBench tool: JSON messages on stdin, answers on stdout
  repl                  read-eval-print loop
  help                  print this message

options: -h, --help (here or after any command: that command's options), -V, --version
";

/// Each command's own help (`nabla COMMAND --help`); its first line is its usage.
const COMMAND_HELP: &[(&str, &str)] = &[
    (
        "run",
        "usage: nabla run FILE [--interp] [--max-memory SIZE]\n\n\
         Evaluates `main` and prints its value. Compiled by the JIT unless the program uses a construct\n\
         the compiler does not handle yet (then the interpreter runs it, with a note).\n\n\
         options:\n  \
         --interp           use the reference interpreter\n  \
         --max-memory SIZE  the most memory the program's values may take, in bytes or with a K, M or\n                     \
         G suffix (512M, 2G; default 4G); more is the error \"out of memory\", in either engine\n",
    ),
    ("check", "usage: nabla check FILE\n\nPrints each definition's inferred type, `name : type`, one a line.\n"),
    (
        "anf",
        "usage: nabla anf FILE [DEF]\n\nPrints each definition (or DEF) as an A-normal let-series, in the \
         paper's notation.\n",
    ),
    (
        "ir",
        "usage: nabla ir FILE [DEF] [--raw]\n\nPrints the first-order SSA IR of `main` (or DEF) as the JIT \
         compiles it.\n\noptions:\n  --raw  as lowering made it, before inlining and clean-up\n",
    ),
    (
        "trace",
        "usage: nabla trace FILE [--max-steps N]\n\n\
         Prints `main`'s reduction sequence under the paper's strategy, one step a line with its rule.\n\n\
         options:\n  \
         --max-steps N  stop after N printed steps with a summary line (default 10000; 0: no bound)\n",
    ),
    (
        "derive",
        "usage: nabla derive FILE DEF\n\nPrints Derive(DEF) after simplification, and whether it is \
         self-maintainable.\n",
    ),
    (
        "incr",
        "usage: nabla incr FILE DEF --input F --changes F\n\n\
         Prints DEF's output on the input in F, then the output after each change (one literal a line).\n",
    ),
    (
        "bench",
        "usage: nabla bench FILE [--runs N] [--engine jit|interp|both] [--budget SECONDS]\n\n\
         Times `main` under the JIT and the interpreter, side by side, and checks that they agree.\n\n\
         options:\n  \
         --runs N          time N runs of each engine (default: as many as fit in about a second, 3 to 1000)\n  \
         --engine E        jit, interp or both (default both)\n  \
         --budget SECONDS  stop timing an engine once its runs took this long, after at least one run\n                    \
         (default 10): a slow interpreter is timed once, not three times\n",
    ),
    (
        "gradbench",
        "usage: nabla gradbench\n\nActs as a GradBench tool: reads one JSON message a line on stdin and answers \
         each on stdout\n(docs/gradbench.md).\n",
    ),
    (
        "repl",
        "usage: nabla repl\n\nA read-eval-print loop (:help inside lists its commands). History is kept in\n\
         $NABLA_HISTORY, or else ~/.nabla_history.\n",
    ),
    ("help", "usage: nabla help [COMMAND]\n\nPrints the list of commands, or COMMAND's options.\n"),
];

/// The help of `cmd`, when it is a command.
fn command_help(cmd: &str) -> Option<&'static str> {
    COMMAND_HELP.iter().find(|(c, _)| *c == cmd).map(|(_, h)| *h)
}

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
    keep_freed_memory();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A usage error shows the usage of the command it is about, when that is a command.
    let help = args.first().and_then(|c| command_help(c)).unwrap_or(USAGE);
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
            to_stderr(&format!("error: {msg}\n\n{help}\n"));
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
    if let Some(help) = command_help(cmd).filter(|_| rest.iter().any(|a| a == "--help" || a == "-h")) {
        return Ok(help.to_string());
    }
    match cmd.as_str() {
        "run" => run(rest),
        "check" => check(rest),
        "bench" => bench(rest),
        "anf" => pullback_cli::anf(rest),
        "ir" => jit_cli::ir(rest),
        "trace" => pullback_cli::trace(rest),
        "derive" => ilc_cli::derive(rest),
        "gradbench" => gradbench_cli::run(rest),
        "incr" => ilc_cli::incr(rest),
        "repl" => repl(rest),
        "help" => help(rest),
        "--help" | "-h" => help(rest),
        "--version" | "-V" => Ok(format!("nabla {}\n", env!("CARGO_PKG_VERSION"))),
        other => Err(Failure::Usage(format!("unknown command `{other}`"))),
    }
}

/// `nabla help [COMMAND]`.
fn help(args: &[String]) -> Result<String, Failure> {
    match args {
        [] => Ok(USAGE.to_string()),
        [cmd] => {
            command_help(cmd).map(str::to_string).ok_or_else(|| Failure::Usage(format!("unknown command `{cmd}`")))
        }
        _ => Err(Failure::Usage("usage: nabla help [COMMAND]".into())),
    }
}

/// `nabla run FILE [--interp] [--max-memory SIZE]`.
fn run(args: &[String]) -> Result<String, Failure> {
    let mut file = None;
    let mut interp = false;
    let mut limit = runtime::value::meter::DEFAULT_LIMIT;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--interp" => interp = true,
            "--max-memory" => {
                let v = option_value(a, it.next())?;
                limit = parse_size(&v).ok_or_else(|| {
                    Failure::Usage(format!("`--max-memory` needs a size in bytes, like 4096, 512M or 2G, not `{v}`"))
                })?;
            }
            s if s.starts_with("--") => return Err(Failure::Usage(format!("unknown option `{s}`"))),
            _ if file.is_none() => file = Some(a.clone()),
            _ => return Err(Failure::Usage(format!("unexpected argument `{a}`"))),
        }
    }
    let file = file.ok_or_else(|| Failure::Usage("missing FILE".into()))?;
    let src = read(&file)?;
    let on_file = |d: Diagnostic| Failure::Program { path: file.clone(), src: src.clone(), diag: d };
    let (_, mono) = runtime::prepare(&src, "main").map_err(on_file)?;
    runtime::value::meter::set_limit(limit);
    let v = if interp {
        runtime::interp::run(&mono).map_err(on_file)?
    } else {
        jit_cli::run(&mono, Some(&src), limit).map_err(on_file)?
    };
    Ok(format!("{v}\n"))
}

/// A size in bytes: digits with an optional binary suffix `K`, `M`, `G` or `T` (`KiB`, ... too).
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: usize = s[..digits].parse().ok()?;
    let shift = match s[digits..].to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return None,
    };
    n.checked_mul(1usize.checked_shl(shift)?)
}

/// `nabla check FILE`.
fn check(args: &[String]) -> Result<String, Failure> {
    let (file, _) = file_and_flags(args, &[])?;
    let src = read(&file)?;
    let program =
        frontend::check_source(&src).map_err(|d| Failure::Program { path: file.clone(), src: src.clone(), diag: d })?;
    Ok(frontend::signatures(&program))
}

/// `nabla bench FILE [--runs N] [--engine jit|interp|both] [--budget SECONDS]`.
fn bench(args: &[String]) -> Result<String, Failure> {
    let mut options = runtime::bench::Options::default();
    let mut file = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => {
                let n = option_value(a, it.next())?;
                match n.parse::<usize>() {
                    Ok(n) if n >= 1 => options.runs = Some(n),
                    _ => {
                        return Err(Failure::Usage(format!(
                            "`--runs` needs a whole number of runs, at least 1, not `{n}`"
                        )))
                    }
                }
            }
            "--engine" => {
                let e = option_value(a, it.next())?;
                options.engines = match e.as_str() {
                    "jit" => runtime::bench::Engines::Jit,
                    "interp" => runtime::bench::Engines::Interp,
                    "both" => runtime::bench::Engines::Both,
                    _ => return Err(Failure::Usage(format!("`--engine` is `jit`, `interp` or `both`, not `{e}`"))),
                };
            }
            "--budget" => {
                let s = option_value(a, it.next())?;
                match s.parse::<f64>() {
                    Ok(x) if x.is_finite() && x >= 0.0 && x < 1e9 => {
                        options.budget = std::time::Duration::from_secs_f64(x)
                    }
                    _ => return Err(Failure::Usage(format!("`--budget` needs a number of seconds, not `{s}`"))),
                }
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(Failure::Usage(format!("unknown option `{s}`"))),
            _ if file.is_none() => file = Some(a.clone()),
            _ => return Err(Failure::Usage(format!("unexpected argument `{a}`"))),
        }
    }
    let file = file.ok_or_else(|| Failure::Usage("missing FILE".into()))?;
    let src = read(&file)?;
    let report = runtime::bench::bench(&src, &options).map_err(|d| Failure::Program {
        path: file.clone(),
        src: src.clone(),
        diag: d,
    })?;
    Ok(report.to_string())
}

/// `nabla repl`.
fn repl(args: &[String]) -> Result<String, Failure> {
    if !args.is_empty() {
        return Err(Failure::Usage("`repl` takes no arguments".into()));
    }
    repl::run(&render).map_err(Failure::Plain)?;
    Ok(String::new())
}

/// The value after an option that takes one.
pub(crate) fn option_value(option: &str, value: Option<&String>) -> Result<String, Failure> {
    match value {
        Some(v) if !v.starts_with("--") => Ok(v.clone()),
        _ => Err(Failure::Usage(format!("`{option}` needs a value"))),
    }
}

/// Evaluates the root of a monomorphised program with the default engine.
fn engine_eval(mono: &anf::mono::MonoProgram) -> Result<runtime::value::Value, Diagnostic> {
    jit_cli::run(mono, None, runtime::value::meter::limit())
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

/// The largest source (or data) file read: more is an error rather than reading until memory
/// runs out (`nabla run /dev/zero`).
pub(crate) const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Reads a source file; bytes that are not UTF-8 are a located error.
fn read(path: &str) -> Result<String, Failure> {
    use std::io::Read;
    let cannot = |e: std::io::Error| Failure::Plain(format!("cannot read `{path}`: {e}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(Failure::Plain(format!(
            "cannot read `{path}`: it is larger than {} MiB, the limit for a source or data file",
            MAX_SOURCE_BYTES >> 20
        )));
    }
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

/// `error: MESSAGE`, `--> FILE:LINE:COL`, the source line with a caret (docs/language.md §8). A
/// line longer than `WINDOW` characters is shown as a window around the first place a label points
/// at, `...` marking what is left out; the location stays that of the whole file.
fn render(path: &str, src: &str, d: &Diagnostic) -> String {
    let clamp = |s: frontend::Span| {
        let lo = floor_char(src, (s.lo as usize).min(src.len()));
        let hi = floor_char(src, (s.hi as usize).clamp(lo, src.len()));
        lo..hi
    };
    let mut spans = vec![clamp(d.span)];
    spans.extend(d.labels.iter().map(|(s, _)| clamp(*s)));
    let shown = Windowed::new(path, src, &spans);
    let mut labels = vec![Label::primary((), shown.map_range(&spans[0]))];
    for ((_, text), span) in d.labels.iter().zip(&spans[1..]) {
        labels.push(Label::secondary((), shown.map_range(span)).with_message(text.clone()));
    }
    let report = Report::error().with_message(d.message.clone()).with_labels(labels).with_notes(d.notes.clone());
    let config = Config { chars: Chars::ascii(), ..Config::default() };
    term::emit_into_string(&config, &shown, &report).unwrap_or_else(|_| format!("error: {}\n", d.message))
}

/// Lines longer than this many bytes are shown as a window of about this width.
const WINDOW: usize = 160;

/// The largest char boundary at or before `i`.
fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The source with each long line cut to a window, as codespan sees it: the text it prints is the
/// cut one, the locations it prints (`location`) are those of the original.
struct Windowed<'a> {
    inner: SimpleFile<&'a str, String>,
    original: &'a str,
    /// Pieces kept: (start in the shown text, start in the original, length), in order.
    pieces: Vec<(usize, usize, usize)>,
}

impl<'a> Windowed<'a> {
    fn new(path: &'a str, src: &'a str, spans: &[std::ops::Range<usize>]) -> Windowed<'a> {
        let mut shown = String::new();
        let mut pieces = Vec::new();
        let mut at = 0;
        for line in src.split_inclusive('\n') {
            let (lo, hi) = (at, at + line.len());
            at = hi;
            if line.len() <= WINDOW {
                pieces.push((shown.len(), lo, line.len()));
                shown.push_str(line);
                continue;
            }
            // Centre on the first span starting on this line, else on the first ending on it.
            let focus = spans
                .iter()
                .map(|r| r.start)
                .find(|&p| (lo..hi).contains(&p))
                .or_else(|| spans.iter().map(|r| r.end).find(|&p| (lo..=hi).contains(&p)))
                .unwrap_or(lo);
            let start = floor_char(src, focus.saturating_sub(WINDOW / 3).max(lo));
            let mut end = floor_char(src, (start + WINDOW).min(hi));
            if end <= focus && focus < hi {
                end = floor_char(src, (focus + 1).min(hi)).max(focus);
            }
            if start > lo {
                shown.push_str("...");
            }
            pieces.push((shown.len(), start, end - start));
            shown.push_str(src[start..end].trim_end_matches(['\n', '\r']));
            if end < hi && !src[end..hi].trim_end_matches(['\n', '\r']).is_empty() {
                shown.push_str("...");
            }
            if line.ends_with('\n') {
                shown.push('\n');
            }
        }
        Windowed { inner: SimpleFile::new(path, shown), original: src, pieces }
    }

    /// A position in the original as a position in the shown text (clamped into its window).
    fn map(&self, p: usize) -> usize {
        let i = self.pieces.partition_point(|&(_, orig, _)| orig <= p).saturating_sub(1);
        match self.pieces.get(i) {
            Some(&(shown, orig, len)) if p >= orig => shown + (p - orig).min(len),
            _ => 0,
        }
    }

    fn map_range(&self, r: &std::ops::Range<usize>) -> std::ops::Range<usize> {
        let lo = self.map(r.start);
        lo..self.map(r.end).max(lo)
    }

    /// A position in the shown text as a position in the original.
    fn unmap(&self, p: usize) -> usize {
        let i = self.pieces.partition_point(|&(shown, _, _)| shown <= p).saturating_sub(1);
        match self.pieces.get(i) {
            Some(&(shown, orig, len)) if p >= shown => orig + (p - shown).min(len),
            _ => 0,
        }
    }
}

impl<'a> Files<'a> for Windowed<'a> {
    type FileId = ();
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, _: ()) -> Result<&'a str, files::Error> {
        Ok(self.inner.name())
    }
    fn source(&'a self, _: ()) -> Result<&'a str, files::Error> {
        Ok(self.inner.source())
    }
    fn line_index(&'a self, id: (), byte_index: usize) -> Result<usize, files::Error> {
        self.inner.line_index(id, byte_index)
    }
    fn line_range(&'a self, id: (), line_index: usize) -> Result<std::ops::Range<usize>, files::Error> {
        self.inner.line_range(id, line_index)
    }
    fn location(&'a self, _: (), byte_index: usize) -> Result<files::Location, files::Error> {
        let p = floor_char(self.original, self.unmap(byte_index).min(self.original.len()));
        let before = &self.original[..p];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Ok(files::Location {
            line_number: before.matches('\n').count() + 1,
            column_number: before[line_start..].chars().count() + 1,
        })
    }
}
