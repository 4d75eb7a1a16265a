//! Golden files: every `examples/*.nbl` carries its expected stdout in `-- expect: LINE` comments and,
//! optionally, `-- command: SUBCOMMAND [ARGS...]` (default: `run`). The real `nabla` binary runs each
//! file; plain `run` files run under both engines (`--interp` and the default) and must agree.
//!
//! `NABLA_BLESS=1 cargo test -p runtime --test golden` rewrites each file's `-- expect:` lines from the
//! actual output, leaving every other line as it was.

use std::path::{Path, PathBuf};
use std::process::Command;

const EXPECT: &str = "-- expect:";
const COMMAND: &str = "-- command:";

#[test]
fn golden_examples() {
    let dir = examples_dir();
    let bless = std::env::var_os("NABLA_BLESS").is_some_and(|v| v == "1");
    let files = nbl_files(&dir);
    assert!(!files.is_empty(), "no examples found in {}", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        if let Err(msg) = check_file(file, &dir, bless) {
            failures.push(format!("=== {}\n{msg}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden files failed (NABLA_BLESS=1 rewrites the expectations):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

fn examples_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("examples");
    dir.canonicalize().unwrap_or(dir)
}

fn nbl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "nbl"))
        .collect();
    files.sort();
    files
}

/// The directives of one golden file.
struct Golden {
    expect: Vec<String>,
    /// `None`: plain `nabla run FILE`, checked under both engines.
    command: Option<Vec<String>>,
}

fn parse(src: &str, dir: &Path) -> Golden {
    let mut expect = Vec::new();
    let mut command = None;
    for line in src.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix(EXPECT) {
            expect.push(rest.strip_prefix(' ').unwrap_or(rest).trim_end_matches('\r').to_string());
        } else if let Some(rest) = line.strip_prefix(COMMAND) {
            let words: Vec<String> =
                rest.split_whitespace().map(|w| w.replace("{dir}", &dir.display().to_string())).collect();
            // `-- command: run` with no arguments is the plain case.
            if words.len() != 1 || words[0] != "run" {
                command = Some(words);
            }
        }
    }
    Golden { expect, command }
}

fn check_file(file: &Path, dir: &Path, bless: bool) -> Result<(), String> {
    let src = std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))?;
    let golden = parse(&src, dir);
    let actual = match &golden.command {
        None => {
            let interp = run(&["run", &path_str(file), "--interp"])?;
            let (default, note) = run_with_stderr(&["run", &path_str(file)])?;
            // ILC compiles: no construct of it sends a program to the interpreter.
            // (A note about reverse mode names its site as "a gradient through …".)
            if note.contains("not compiled yet")
                && !note.contains("a gradient through")
                && ["`derive`", "`nil`", "on functions", "'`"].iter().any(|w| note.contains(w))
            {
                return Err(format!("an ILC construct fell back to the interpreter:\n{note}"));
            }
            if interp != default {
                return Err(format!(
                    "`nabla run` and `nabla run --interp` disagree (- interpreter, + default engine):\n{}",
                    diff(&interp, &default)
                ));
            }
            interp
        }
        Some(words) => {
            let Some((sub, args)) = words.split_first() else {
                return Err("`-- command:` names no subcommand".into());
            };
            let mut argv = vec![sub.clone(), path_str(file)];
            argv.extend(args.iter().cloned());
            run(&argv.iter().map(String::as_str).collect::<Vec<_>>())?
        }
    };
    let expected: String = golden.expect.iter().map(|l| format!("{l}\n")).collect();
    if actual == expected {
        return Ok(());
    }
    if bless {
        std::fs::write(file, bless_text(&src, &actual)).map_err(|e| format!("cannot bless: {e}"))?;
        return Ok(());
    }
    if golden.expect.is_empty() {
        return Err(format!("no `-- expect:` lines; the program printed:\n{actual}"));
    }
    if expected.lines().eq(actual.lines()) {
        return Err("stdout differs only in its line endings (every line should end with a newline)".into());
    }
    Err(format!("stdout differs (- expected, + actual):\n{}", diff(&expected, &actual)))
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// Runs the binary; a nonzero exit is a failure that shows stderr.
fn run(args: &[&str]) -> Result<String, String> {
    run_with_stderr(args).map(|(out, _)| out)
}

/// Runs the binary: stdout and stderr; a nonzero exit is a failure that shows stderr.
fn run_with_stderr(args: &[&str]) -> Result<(String, String), String> {
    let out = Command::new(env!("CARGO_BIN_EXE_nabla"))
        .args(args)
        .output()
        .map_err(|e| format!("cannot start nabla: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "`nabla {}` exited with {}\n--- stdout\n{stdout}--- stderr\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((stdout, String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// `src` with its `-- expect:` lines replaced by `actual`'s lines: where the first one stood, or at the end.
fn bless_text(src: &str, actual: &str) -> String {
    let new: Vec<String> = actual.lines().map(|l| format!("{EXPECT} {l}").trim_end().to_string()).collect();
    let mut out: Vec<String> = Vec::new();
    let mut placed = false;
    for line in src.lines() {
        if line.trim_start().starts_with(EXPECT) {
            if !placed {
                out.extend(new.iter().cloned());
                placed = true;
            }
        } else {
            out.push(line.to_string());
        }
    }
    if !placed {
        out.extend(new);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// A line diff (longest common subsequence): ` ` common, `-` only in `a`, `+` only in `b`.
fn diff(a: &str, b: &str) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut out = String::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        }
    }
    out
}
