//! `nabla derive` and `nabla incr` through the binary: output formats, errors with locations, the
//! all-or-nothing update and the exit status of a run with failed changes.

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

/// A scratch directory with the given files.
fn files(name: &str, contents: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nabla_ilc_cli_{}_{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (f, text) in contents {
        std::fs::write(dir.join(f), text).expect("write");
    }
    dir
}

const COUNTS: &str =
    "def counts (b : Bag Int) : Map Int Int = foldBag (mapGroup intGroup) (fun w -> singletonMap w 1) b\n";

#[test]
fn incr_prints_the_output_after_each_change() {
    let dir = files(
        "ok",
        &[
            ("p.nbl", COUNTS),
            ("in.txt", "bag{1, 2, 2}"),
            ("ch.txt", "-- changes\ngchange bagGroup bag{2 # -1, 5}\n\n  replace bag{7}   -- a replacement\n"),
        ],
    );
    let p = |f: &str| dir.join(f).display().to_string();
    let r = nabla(&["incr", &p("p.nbl"), "counts", "--input", &p("in.txt"), "--changes", &p("ch.txt")]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "map{1 -> 1, 2 -> 2}\nmap{1 -> 1, 2 -> 1, 5 -> 1}\nmap{7 -> 1}\n");
    assert_eq!(r.stderr, "");
}

#[test]
fn a_failing_change_is_reported_with_its_line_and_leaves_the_state() {
    let changes = "gchange bagGroup bag{1}\ngchange intGroup 3\ngchange bagGroup bag{\ngchange bagGroup bag{1 # -2}\n";
    let dir = files("fail", &[("p.nbl", COUNTS), ("in.txt", "bag{1}"), ("ch.txt", changes)]);
    let p = |f: &str| dir.join(f).display().to_string();
    let r = nabla(&["incr", &p("p.nbl"), "counts", "--input", &p("in.txt"), "--changes", &p("ch.txt")]);
    // Lines 2 and 3 fail; the others apply, each to the state the previous good one left.
    assert_eq!(r.stdout, "map{1 -> 1}\nmap{1 -> 2}\nmap{}\n");
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("ch.txt:2:1"), "{}", r.stderr);
    assert!(r.stderr.contains("expected Delta (Bag Int), found Delta Int"), "{}", r.stderr);
    assert!(r.stderr.contains("ch.txt:3:"), "{}", r.stderr);
    assert!(r.stderr.contains("2 of 4 changes failed"), "{}", r.stderr);
}

#[test]
fn a_change_that_fails_while_applying_leaves_input_and_output() {
    // The user group's operation divides by zero when the change is applied.
    let src = "def total (x : Int) : Int = x * 2\n";
    let changes = "gchange intGroup 1\ngchange (group (fun a b -> a / b) (fun a -> a) 1) 0\ngchange intGroup 1\n";
    let dir = files("apply", &[("p.nbl", src), ("in.txt", "10"), ("ch.txt", changes)]);
    let p = |f: &str| dir.join(f).display().to_string();
    let r = nabla(&["incr", &p("p.nbl"), "total", "--input", &p("in.txt"), "--changes", &p("ch.txt")]);
    assert_eq!(r.stdout, "20\n22\n24\n");
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("division by zero"), "{}", r.stderr);
    assert!(r.stderr.contains("ch.txt:2:1"), "{}", r.stderr);
}

#[test]
fn incr_errors_in_the_input_and_the_arguments() {
    let dir = files("input", &[("p.nbl", COUNTS), ("in.txt", "\n  bag{1, true}"), ("ch.txt", "")]);
    let p = |f: &str| dir.join(f).display().to_string();
    let r = nabla(&["incr", &p("p.nbl"), "counts", "--input", &p("in.txt"), "--changes", &p("ch.txt")]);
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("in.txt:2:"), "{}", r.stderr);
    let r = nabla(&["incr", &p("p.nbl"), "counts", "--input", &p("in.txt")]);
    assert_eq!(r.status, 2, "{}", r.stderr);
    let r = nabla(&["incr", &p("p.nbl"), "nothing", "--input", &p("in.txt"), "--changes", &p("ch.txt")]);
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("no definition named `nothing`"), "{}", r.stderr);
    let dir = files("notfun", &[("p.nbl", "def three = 3\n")]);
    let q = dir.join("p.nbl").display().to_string();
    let r = nabla(&["incr", &q, "three", "--input", &p("in.txt"), "--changes", &p("ch.txt")]);
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("`incr` needs a function"), "{}", r.stderr);
}

#[test]
fn derive_names_what_prevents_self_maintainability() {
    let src = "def f (m : Map Int Int) : Int =\n  foldMapGen 0 (fun a b -> a + b) (fun k v -> v) m\n";
    let dir = files("derive", &[("p.nbl", src)]);
    let p = dir.join("p.nbl").display().to_string();
    let r = nabla(&["derive", &p, "f"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("Derive(f) = λm dm. nil foldMapGen"), "{}", r.stdout);
    assert_eq!(lines[1], "f is not self-maintainable:");
    assert_eq!(
        lines[2],
        "  2:3 `foldMapGen` reads `m`: `foldMapGen` has no efficient derivative: its derivative recomputes it"
    );
    let r = nabla(&["derive", &p]);
    assert_eq!(r.status, 2);
}
