//! Limits that are errors, never aborts, in both engines: `--max-memory` (the interpreter's memory
//! meter and the JIT's arena), the source-size cap, and nesting limits that count what the user
//! wrote.

use std::path::PathBuf;
use std::process::Command;

use runtime::api::{Arg, Compiled};
use runtime::value::meter;

struct Run {
    stdout: String,
    stderr: String,
    status: Option<i32>,
}

fn nabla(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_nabla")).args(args).output().expect("runs nabla");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status.code(),
    }
}

fn file(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("nabla-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creates the folder");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writes the file");
    path.display().to_string()
}

/// The program of issue 12 that aborted the interpreter: now an error, at once, in both engines.
#[test]
fn a_program_too_big_for_memory_is_an_error_in_both_engines() {
    let f = file("big.nbl", "def main = len (build 268435456 (fun i -> (i, i, i)))\n");
    for engine in [&[][..], &["--interp"][..]] {
        let mut args = vec!["run", f.as_str()];
        args.extend(engine);
        let r = nabla(&args);
        assert_eq!(r.status, Some(1), "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("error: out of memory"), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(&format!("--> {f}:1:")), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn max_memory_bounds_both_engines() {
    // 3 000 000 tuples: about 200 MB of values, more than 64 MiB in either engine.
    let f = file("tuples.nbl", "def main = len (build 3000000 (fun i -> (i, i, i)))\n");
    for engine in [&[][..], &["--interp"][..]] {
        let mut args = vec!["run", f.as_str(), "--max-memory", "64M"];
        args.extend(engine);
        let r = nabla(&args);
        assert_eq!(r.status, Some(1), "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("error: out of memory"), "{args:?}: {}", r.stderr);
        // The default limit is enough.
        let r = nabla(&["run", f.as_str()]);
        assert_eq!(r.stdout, "3000000\n");
    }
    let r = nabla(&["run", f.as_str(), "--interp", "--max-memory", "64M"]);
    assert!(r.stderr.contains("more than 64 MiB (--max-memory)"), "{}", r.stderr);
    for bad in ["lots", "12Q", "", "-5"] {
        let r = nabla(&["run", f.as_str(), "--max-memory", bad]);
        assert_eq!(r.status, Some(2), "{bad}: {}", r.stderr);
    }
}

/// The meter counts values alive, not everything allocated: a long run whose live data is small
/// stays under a small limit.
#[test]
fn the_interpreters_meter_counts_live_values() {
    let f = file(
        "churn.nbl",
        "def step a = map (fun (p : Int * Int) -> (p.2 + 1, p.1)) a\n\
         def main = let a = iterate 300 step (build 1000 (fun i -> (i, 0))) in a.[999]\n",
    );
    // 300 arrays of 1000 tuples: about 20 MB allocated in all, a few hundred KB alive at once.
    let r = nabla(&["run", &f, "--interp", "--max-memory", "2M"]);
    assert_eq!((r.status, r.stdout.as_str()), (Some(0), "(1149, 150)\n"), "{}", r.stderr);
    let r = nabla(&["run", &f, "--interp", "--max-memory", "64K"]);
    assert_eq!(r.status, Some(1), "{}", r.stderr);
}

/// The same bounds through the API: the interpreter's meter and a compiled definition's arena.
#[test]
fn max_memory_in_the_api() {
    let src = "def main = len (build 100000 (fun i -> (i, i)))\ndef reals (n : Int) = build n (fun i -> toReal i)\n";
    let r = frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(src, "main").unwrap();
        meter::set_limit(1 << 20);
        let small = runtime::interp::run(&mono).map(|v| v.to_string());
        meter::set_limit(meter::DEFAULT_LIMIT);
        let large = runtime::interp::run(&mono).map(|v| v.to_string());
        (small.map_err(|d| d.message), large.map_err(|d| d.message))
    });
    assert!(r.0.as_ref().is_err_and(|m| m.starts_with("out of memory")), "{:?}", r.0);
    assert_eq!(r.1.as_deref(), Ok("100000"));
    let mut c = Compiled::new(src, "reals").unwrap();
    let mut out = Vec::new();
    // 8 MB of reals do not fit in 1 MiB; a smaller call still does, and a larger limit lets the
    // large call through.
    c.set_max_memory(1 << 20);
    let e = c.call_reals(&[Arg::Int(1_000_000)], &mut out).unwrap_err();
    assert!(e.message.starts_with("out of memory"), "{}", e.message);
    c.call_reals(&[Arg::Int(1000)], &mut out).unwrap();
    assert_eq!(out.len(), 1000);
    c.set_max_memory(64 << 20);
    c.call_reals(&[Arg::Int(1_000_000)], &mut out).unwrap();
    assert_eq!(out.len(), 1_000_000);
}

#[cfg(target_os = "linux")]
#[test]
fn an_endless_source_is_an_error() {
    let r = nabla(&["run", "/dev/zero"]);
    assert_eq!(r.status, Some(1), "{}", r.stderr);
    assert!(r.stderr.starts_with("error: cannot read `/dev/zero`: it is larger than 64 MiB"), "{}", r.stderr);
}

/// Nesting limits count the levels written: 500 (and 999) parentheses are accepted by both
/// engines, 1001 are not.
#[test]
fn nesting_counts_what_the_user_wrote() {
    for n in [500, 999] {
        let f = file(&format!("parens{n}.nbl"), &format!("def main = {}1{}\n", "(".repeat(n), ")".repeat(n)));
        for engine in [&[][..], &["--interp"][..]] {
            let mut args = vec!["run", f.as_str()];
            args.extend(engine);
            let r = nabla(&args);
            assert_eq!((r.status, r.stdout.as_str()), (Some(0), "1\n"), "{n}: {}", r.stderr);
        }
    }
    let f = file("mixed.nbl", &format!("def main = {}-1{}\n", "[(".repeat(300), ")]".repeat(300)));
    assert_eq!(nabla(&["run", &f]).status, Some(0));
    let f = file("parens1001.nbl", &format!("def main = {}1{}\n", "(".repeat(1001), ")".repeat(1001)));
    let r = nabla(&["run", &f]);
    assert_eq!(r.status, Some(1));
    assert!(r.stderr.starts_with("error: expression is nested too deeply (the limit is 1000 levels)"), "{}", r.stderr);
}
