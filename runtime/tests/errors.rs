//! The malformed-program corpus: every `tests/errors/*.nbl` carries `-- error: MESSAGE` (the first line of
//! stderr after `error: `) and `-- at: LINE:COL` (the location after `--> FILE:`). `nabla run FILE` must exit
//! with status 1, print exactly that message and location, and never panic or overflow its stack; `--interp`
//! must report the same.
//! Files too odd to commit (binary garbage, 100 000-deep nesting) are generated here into a temporary folder.
//!
//! `NABLA_BLESS=1 cargo test -p runtime --test errors` rewrites the `-- error:`/`-- at:` lines from the actual
//! output (adding them at the top of a file that has none); a crash is never blessed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ERROR: &str = "-- error:";
const AT: &str = "-- at:";

#[test]
fn error_corpus() {
    let dir = corpus_dir();
    let bless = std::env::var_os("NABLA_BLESS").is_some_and(|v| v == "1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "nbl"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "the corpus in {} has only {} files", dir.display(), files.len());
    let mut failures = Vec::new();
    for file in &files {
        if let Err(msg) = check_file(file, bless) {
            failures.push(format!("=== {}\n{msg}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} error files failed (NABLA_BLESS=1 rewrites the expectations):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// Inputs generated at test time: they are located errors like any other, never crashes.
#[test]
fn generated_inputs() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nabla-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the temporary folder");
    let mut failures = Vec::new();
    for (name, bytes, message, at) in generated() {
        let path = dir.join(format!("{name}.nbl"));
        std::fs::write(&path, &bytes).expect("writing a generated file");
        let out = nabla(&["run", &path.display().to_string()]);
        let result = crash_free(&out).and_then(|()| {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let first = stderr.lines().next().unwrap_or("");
            let loc = format!("--> {}:{at}", path.display());
            if out.status.code() != Some(1) {
                Err(format!("exit status {}, expected 1", out.status))
            } else if !first.starts_with(&format!("error: {message}")) {
                Err(format!("expected a first line starting with `error: {message}`"))
            } else if !stderr.contains(&loc) {
                Err(format!("expected the location `{loc}`"))
            } else {
                Ok(())
            }
        });
        if let Err(msg) = result {
            failures.push(format!("=== {name}: {msg}\n{}", String::from_utf8_lossy(&out.stderr)));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Usage errors exit with status 2 and print the usage; unreadable files are errors with status 1.
#[test]
fn usage_errors() {
    let example = corpus_dir().join("name_unknown.nbl").display().to_string();
    for args in [
        vec![],
        vec!["frobnicate", example.as_str()],
        vec!["run"],
        vec!["check"],
        vec!["run", example.as_str(), example.as_str()],
        vec!["run", "--no-such-flag", example.as_str()],
    ] {
        let out = nabla(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "nabla {args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains("usage: nabla"), "nabla {args:?}: {stderr}");
        crash_free(&out).unwrap_or_else(|e| panic!("nabla {args:?}: {e}"));
    }
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-file.nbl").display().to_string();
    let out = nabla(&["run", &missing]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with(&format!("error: cannot read `{missing}`")), "{stderr}");
}

fn corpus_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("tests").join("errors");
    dir.canonicalize().unwrap_or(dir)
}

fn nabla(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nabla")).args(args).output().expect("starting nabla")
}

/// A crash is never an acceptable way to report an error.
fn crash_free(out: &Output) -> Result<(), String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    for sign in ["panicked", "RUST_BACKTRACE", "stack overflow"] {
        if stderr.contains(sign) {
            return Err(format!("the binary crashed (`{sign}` on stderr)"));
        }
    }
    if out.status.code().is_none() {
        return Err(format!("the binary was killed: {}", out.status));
    }
    Ok(())
}

/// The expected message and location of one corpus file.
struct Expected {
    message: Option<String>,
    at: Option<String>,
}

fn directives(src: &str) -> Expected {
    let mut e = Expected { message: None, at: None };
    for line in src.lines() {
        let line = line.trim_start();
        if let Some(m) = line.strip_prefix(ERROR) {
            e.message.get_or_insert_with(|| m.trim().to_string());
        } else if let Some(a) = line.strip_prefix(AT) {
            e.at.get_or_insert_with(|| a.trim().to_string());
        }
    }
    e
}

fn check_file(file: &Path, bless: bool) -> Result<(), String> {
    let mut src = std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))?;
    let mut want = directives(&src);
    if bless && (want.message.is_none() || want.at.is_none()) {
        // Placeholders first, so the lines below keep the positions the blessed location refers to.
        src = format!("{ERROR} ?\n{AT} ?\n{src}");
        std::fs::write(file, &src).map_err(|e| format!("cannot bless: {e}"))?;
        want = directives(&src);
    }
    let path = file.display().to_string();
    let out = nabla(&["run", &path]);
    crash_free(&out)?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // Both engines report the same error (docs/language.md §8 does not depend on the engine).
    let interp = nabla(&["run", &path, "--interp"]);
    crash_free(&interp)?;
    if interp.stderr != out.stderr || interp.status.code() != out.status.code() {
        return Err(format!(
            "`nabla run` and `nabla run --interp` report differently\n--- default engine ({})\n{stderr}--- interpreter ({})\n{}",
            out.status,
            interp.status,
            String::from_utf8_lossy(&interp.stderr)
        ));
    }
    let show = || format!("--- stderr\n{stderr}--- stdout\n{}", String::from_utf8_lossy(&out.stdout));
    if out.status.code() != Some(1) {
        return Err(format!("exit status {}, expected 1\n{}", out.status, show()));
    }
    let message = stderr.lines().next().and_then(|l| l.strip_prefix("error: ")).map(str::to_string);
    let prefix = format!("--> {path}:");
    let at = stderr.lines().find_map(|l| l.trim_start().strip_prefix(&prefix)).map(str::to_string);
    let (Some(message), Some(at)) = (message, at) else {
        return Err(format!("stderr lacks `error: MESSAGE` or `{prefix}LINE:COL`\n{}", show()));
    };
    if want.message.as_deref() == Some(message.as_str()) && want.at.as_deref() == Some(at.as_str()) {
        return Ok(());
    }
    if bless {
        std::fs::write(file, bless_text(&src, &message, &at)).map_err(|e| format!("cannot bless: {e}"))?;
        return Ok(());
    }
    let mut msg = String::new();
    if want.message.as_deref() != Some(message.as_str()) {
        msg.push_str(&format!(
            "- error: {}\n+ error: {message}\n",
            want.message.as_deref().unwrap_or("(no `-- error:` line)")
        ));
    }
    if want.at.as_deref() != Some(at.as_str()) {
        msg.push_str(&format!("- at: {}\n+ at: {at}\n", want.at.as_deref().unwrap_or("(no `-- at:` line)")));
    }
    Err(format!("{msg}{}", show()))
}

/// `src` with its first `-- error:` and `-- at:` lines replaced in place.
fn bless_text(src: &str, message: &str, at: &str) -> String {
    let (mut done_error, mut done_at) = (false, false);
    let mut out = String::new();
    for line in src.lines() {
        let t = line.trim_start();
        if t.starts_with(ERROR) && !done_error {
            out.push_str(&format!("{ERROR} {message}\n"));
            done_error = true;
        } else if t.starts_with(AT) && !done_at {
            out.push_str(&format!("{AT} {at}\n"));
            done_at = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !src.ends_with('\n') {
        out.pop();
    }
    out
}

/// Generated inputs: (name, contents, message prefix, location).
fn generated() -> Vec<(&'static str, Vec<u8>, &'static str, String)> {
    const N: usize = 100_000;
    let too_deep = "expression is nested too deeply";
    let mut v: Vec<(&'static str, Vec<u8>, &'static str, String)> = Vec::new();
    // Binary garbage: a valid first line, then bytes that are not UTF-8.
    let mut garbage = b"def main = 1\n".to_vec();
    garbage.extend([0xff, 0xfe, 0x00, 0x9c, 0xc3, 0x28, 0x80, 0x01]);
    v.push(("garbage_invalid_utf8", garbage, "the file is not valid UTF-8 text", "2:1".into()));
    // Garbage that is valid UTF-8 but made of control characters.
    v.push(("garbage_control_chars", b"\x00\x01\x02\x1b[31m".to_vec(), "unexpected character U+0000", "1:1".into()));
    // Pseudo-random bytes (a fixed linear congruential sequence): some error, never a crash.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect();
    v.push(("garbage_random_bytes", random, "", "1:".into()));
    let deep =
        |name: &'static str, text: String, message: &'static str| (name, text.into_bytes(), message, "1:".into());
    v.push(deep("deep_parens", format!("def main = {}1{}", "(".repeat(N), ")".repeat(N)), too_deep));
    v.push(deep("deep_unclosed_parens", format!("def main = {}", "(".repeat(N)), too_deep));
    v.push(deep("deep_brackets", format!("def main = {}1{}", "[".repeat(N), "]".repeat(N)), too_deep));
    v.push(deep("deep_bags", format!("def main = {}1{}", "bag{".repeat(N), "}".repeat(N)), too_deep));
    v.push(deep("deep_negation", format!("def main = {}1", "- ".repeat(N)), too_deep));
    v.push(deep("deep_not", format!("def main = {}true", "not ".repeat(N)), too_deep));
    v.push(deep("deep_lambdas", format!("def main = {}1", "fun x -> ".repeat(N)), too_deep));
    v.push(deep("deep_lets", format!("def main = {}1", "let x = 1 in ".repeat(N)), too_deep));
    v.push(deep("deep_ifs", format!("def main = {}1{}", "if true then ".repeat(N), " else 2".repeat(N)), too_deep));
    v.push(deep("deep_sum_chain", format!("def main = 1{}", " + 1".repeat(N)), too_deep));
    v.push(deep("deep_power_chain", format!("def main = 2.0{}", " ^ 1.0".repeat(N)), too_deep));
    v.push(deep("deep_application", format!("def main = sin{}", " 1.0".repeat(N)), too_deep));
    v.push(deep("deep_projection", format!("def main = (1, 2){}", ".1".repeat(N)), too_deep));
    v.push(deep("deep_indexing", format!("def main = [1]{}", ".[0]".repeat(N)), too_deep));
    v.push(deep("deep_pattern", format!("def f {}x{} = x", "(".repeat(N), ")".repeat(N)), too_deep));
    v.push(deep("deep_type", format!("def f (x : {}Real{}) = x", "Array (".repeat(N), ")".repeat(N)), too_deep));
    v
}
