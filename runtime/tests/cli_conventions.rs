//! Command-line conventions: `--help`/`-h` and `--version`, `nabla bench` and `nabla trace` options,
//! long source lines shown as a window, and the notes that help with common mistakes.

use std::path::PathBuf;
use std::process::Command;

struct Run {
    stdout: String,
    stderr: String,
    status: i32,
}

fn nabla(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_nabla")).args(args).output().expect("runs nabla");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status.code().unwrap_or(-1),
    }
}

/// A file with `text` in a folder of this test's own.
fn file(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("nabla-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creates the folder");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writes the file");
    path.display().to_string()
}

const COMMANDS: &[&str] = &["run", "check", "anf", "ir", "trace", "derive", "incr", "bench", "repl", "help"];

#[test]
fn help_and_version() {
    for flag in ["--help", "-h", "help"] {
        let r = nabla(&[flag]);
        assert_eq!(r.status, 0, "{flag}: {}", r.stderr);
        assert!(r.stdout.starts_with("usage: nabla <command>"), "{flag}: {}", r.stdout);
        for cmd in COMMANDS {
            assert!(r.stdout.contains(&format!("\n  {cmd} ")), "{flag} does not list `{cmd}`:\n{}", r.stdout);
        }
    }
    for cmd in COMMANDS {
        for flag in ["--help", "-h"] {
            // Help wins over everything else on the line, even a missing or bogus file.
            let r = nabla(&[cmd, "no-such-file.nbl", flag]);
            assert_eq!(r.status, 0, "{cmd} {flag}: {}", r.stderr);
            assert!(r.stdout.starts_with(&format!("usage: nabla {cmd}")), "{cmd} {flag}: {}", r.stdout);
            assert_eq!(r.stderr, "");
        }
        let r = nabla(&["help", cmd]);
        assert!(r.stdout.starts_with(&format!("usage: nabla {cmd}")), "help {cmd}: {}", r.stdout);
    }
    for flag in ["--version", "-V"] {
        let r = nabla(&[flag]);
        assert_eq!((r.status, r.stdout.as_str()), (0, concat!("nabla ", env!("CARGO_PKG_VERSION"), "\n")));
    }
    // A usage error shows the usage of the command it is about.
    let r = nabla(&["trace"]);
    assert_eq!(r.status, 2);
    assert!(r.stderr.contains("\nusage: nabla trace FILE [--max-steps N]"), "{}", r.stderr);
    let r = nabla(&["help", "frob"]);
    assert_eq!(r.status, 2);
    assert!(r.stderr.starts_with("error: unknown command `frob`"), "{}", r.stderr);
}

#[test]
fn bench_options() {
    let f = file("loop.nbl", "def main = iterate 100 (fun x -> x * 0.5 + 1.0) 0.0\n");
    let r = nabla(&["bench", &f, "--runs", "2"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.contains("interpreter  median") && r.stdout.contains("over 2 runs\n"), "{}", r.stdout);
    assert_eq!(r.stdout.matches("over 2 runs\n").count(), 2, "{}", r.stdout);
    let r = nabla(&["bench", &f, "--engine", "jit", "--runs", "1"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("main = 2.0\nJIT          median"), "{}", r.stdout);
    assert!(!r.stdout.contains("interpreter") && !r.stdout.contains("speed-up"), "{}", r.stdout);
    // The budget stops the runs after the first one.
    let r = nabla(&["bench", &f, "--engine", "interp", "--runs", "50", "--budget", "0"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("main = 2.0\ninterpreter  median"), "{}", r.stdout);
    assert!(r.stdout.contains("over 1 run (stopped by the"), "{}", r.stdout);
    assert!(!r.stdout.contains("JIT"), "{}", r.stdout);
    for bad in [vec!["--runs", "0"], vec!["--runs"], vec!["--engine", "gpu"], vec!["--budget", "soon"], vec!["--frob"]]
    {
        let mut args = vec!["bench", f.as_str()];
        args.extend(bad.iter().copied());
        let r = nabla(&args);
        assert_eq!(r.status, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("usage: nabla bench"), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn trace_is_bounded() {
    let f = file("pb.nbl", "def f x = x * x * x\ndef main = grad f 3.0\n");
    let full = nabla(&["trace", &f]);
    assert_eq!(full.status, 0, "{}", full.stderr);
    let steps: usize = full
        .stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("-- ")?.strip_suffix(" steps")?.parse().ok())
        .unwrap_or_else(|| panic!("no step count:\n{}", full.stdout));
    assert!(steps > 5, "{}", full.stdout);
    let r = nabla(&["trace", &f, "--max-steps", "4"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    // The start, four steps, the summary; the same first lines as the whole trace.
    assert_eq!(lines.len(), 6, "{}", r.stdout);
    assert!(lines[5].starts_with("-- cut after 4 steps"), "{}", r.stdout);
    let whole: Vec<&str> = full.stdout.lines().take(5).collect();
    assert_eq!(&lines[..5], &whole[..]);
    // 0 is no bound; a bound larger than the trace changes nothing.
    assert_eq!(nabla(&["trace", &f, "--max-steps", "0"]).stdout, full.stdout);
    assert_eq!(nabla(&["trace", &f, "--max-steps", &steps.to_string()]).stdout, full.stdout);
    assert_eq!(nabla(&["trace", &f, "--max-steps", "-1"]).status, 2);
}

/// A one-line program of more than a megabyte: the excerpt is a window around the caret, and the
/// location is the real one.
#[test]
fn long_lines_are_shown_as_a_window() {
    let ones = vec!["1"; 200_000].join(", ");
    let f = file("long.nbl", &format!("-- a comment\ndef main = ({ones}, 1 + true, {ones})\n"));
    for engine in [&[][..], &["--interp"][..]] {
        let mut args = vec!["run", f.as_str()];
        args.extend(engine);
        let r = nabla(&args);
        assert_eq!(r.status, 1);
        assert!(r.stderr.len() < 1000, "{} bytes of diagnostics:\n{}", r.stderr.len(), r.stderr);
        let col = "def main = (".len() + ones.len() + ", 1 + ".len() + 1;
        assert!(r.stderr.contains(&format!("--> {f}:2:{col}\n")), "{}", r.stderr);
        let shown = r.stderr.lines().find(|l| l.starts_with("2 | ")).expect("the source line");
        let caret = r.stderr.lines().find(|l| l.contains('^')).expect("the caret line");
        assert!(shown.starts_with("2 | ...") && shown.ends_with("..."), "{shown}");
        // The caret is under `true`.
        let at = caret.find('^').expect("a caret");
        assert_eq!(&shown[at..at + 4], "true", "{}", r.stderr);
    }
    // Short lines are shown whole, as before.
    let f = file("short.nbl", "def main = 1 + true\n");
    let r = nabla(&["run", &f]);
    assert!(r.stderr.contains("1 | def main = 1 + true\n"), "{}", r.stderr);
}

#[test]
fn no_definition_named_lists_the_definitions() {
    let f = file("defs.nbl", "-- no main here\ndef f x = x + 1\ndef mian = f 1\n");
    let r = nabla(&["run", &f]);
    assert_eq!(r.status, 1);
    assert!(r.stderr.starts_with("error: no definition named `main`"), "{}", r.stderr);
    // At the definition whose name is close, which the notes name.
    assert!(r.stderr.contains(&format!("--> {f}:3:5")), "{}", r.stderr);
    assert!(r.stderr.contains("= did you mean `mian`?"), "{}", r.stderr);
    assert!(r.stderr.contains("= the definitions are `f`, `mian`"), "{}", r.stderr);
    let r = nabla(&["derive", &f, "histogram"]);
    assert!(r.stderr.contains(&format!("--> {f}:3:5")) && !r.stderr.contains("did you mean"), "{}", r.stderr);
    let f = file("empty.nbl", "-- nothing\n");
    let r = nabla(&["run", &f]);
    assert!(r.stderr.contains("= the file has no definitions"), "{}", r.stderr);
}

#[test]
fn a_negative_literal_after_an_application_gets_a_hint() {
    let hint = "write it in parentheses: `(-1)`";
    let f = file("neg.nbl", "def main = gchange intGroup -1\n");
    let r = nabla(&["run", &f]);
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains(hint), "{}", r.stderr);
    let f = file("neg_real.nbl", "def main = sin -2.5\n");
    assert!(nabla(&["run", &f]).stderr.contains("`(-2.5)`"));
    // Subtraction of numbers, and other type errors, get no such note.
    let f = file("sub.nbl", "def main = (1, 2) -1\n");
    let r = nabla(&["run", &f]);
    assert_eq!(r.status, 1);
    assert!(!r.stderr.contains("parentheses"), "{}", r.stderr);
    let f = file("fine.nbl", "def f x = x\ndef main = f (-1)\n");
    assert_eq!(nabla(&["run", &f]).stdout, "-1\n");
}
