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
    // Located at the failing operation inside the change.
    assert!(r.stderr.contains("ch.txt:2:35"), "{}", r.stderr);
    let i = nabla(&["incr", &p("p.nbl"), "total", "--input", &p("in.txt"), "--changes", &p("ch.txt"), "--interp"]);
    assert_eq!((i.stdout, i.status), (r.stdout, r.status));
}

/// `nabla incr` compiled (the default) and `--interp` print the same, for outputs, deltas and the
/// final output, on changes that take every path: fast, total (a foreign group), replacement,
/// a failing change, a Real output that stops being finite, a polymorphic definition.
#[test]
fn incr_gives_the_same_outputs_under_both_engines() {
    let src = "\
def counts (b : Bag Int) : Map Int Int = foldBag (mapGroup intGroup) (fun w -> singletonMap w 1) b
def avg (b : Bag Int) = toReal (foldBag intGroup (fun x -> x) b) / toReal (foldBag intGroup (fun x -> 1) b)
def poly (x : Real) = x * x + 3.0 * x
def pairs (p : Int * Bag Int) = (p.1 * 2, foldBag intGroup (fun x -> 10 / x) p.2)
def ident x = x
def docs (m : Map Int (Bag Int)) : Map Int Int =
  foldMap bagGroup (mapGroup intGroup) (fun k b -> foldBag (mapGroup intGroup) (fun w -> singletonMap w 1) b) m
";
    let cases: &[(&str, &str, &str)] = &[
        ("counts", "bag{1, 2, 2}", "gchange bagGroup bag{2 # -1, 5}\nreplace bag{7}\ngchange bagGroup bag{7 # -1}\n"),
        ("avg", "bag{2}", "gchange bagGroup bag{2 # -1}\ngchange bagGroup bag{2, 4}\n"),
        ("poly", "1e10", "replace 1.0\ngchange realGroup 2.0\nreplace 1e10\n"),
        ("pairs", "(1, bag{1, 2})", "(gchange intGroup 3, gchange bagGroup bag{5})\n(replace 4, gchange bagGroup bag{0})\n(replace 4, replace bag{10})\n"),
        ("ident", "map{1 -> 2}", "gchange (mapGroup intGroup) map{1 -> 3, 2 -> 1}\ngchange (mapGroup intGroup) map{1 -> -5}\n"),
        ("docs", "map{1 -> bag{1, 2}, 2 -> bag{2}}", "gchange (mapGroup bagGroup) map{1 -> bag{2 # -1, 3}}\nreplace map{}\ngchange (mapGroup bagGroup) map{4 -> bag{4}}\n"),
    ];
    for (i, (def, input, changes)) in cases.iter().enumerate() {
        let dir = files(&format!("both{i}"), &[("p.nbl", src), ("in.txt", input), ("ch.txt", changes)]);
        let p = |f: &str| dir.join(f).display().to_string();
        for extra in [&[][..], &["--deltas"][..], &["--final"][..]] {
            let mut args = vec!["incr", &p("p.nbl"), def, "--input", &p("in.txt"), "--changes", &p("ch.txt")]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>();
            args.extend(extra.iter().map(|s| s.to_string()));
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let compiled = nabla(&argv);
            let mut iargv = argv.clone();
            iargv.push("--interp");
            let interp = nabla(&iargv);
            assert!(compiled.status <= 1 && !compiled.stdout.is_empty(), "{def}: {}", compiled.stderr);
            assert_eq!(
                (&compiled.stdout, compiled.status),
                (&interp.stdout, interp.status),
                "{def} {extra:?}: compiled vs interpreter\n{}\n{}",
                compiled.stderr,
                interp.stderr
            );
        }
    }
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

/// A definition that uses `grad`: its derivative recomputes the gradient. Where the driver can
/// compile it, the outputs are the interpreter's; where it cannot, the refusal is located at the
/// `grad` and says how to run it.
#[test]
fn incr_of_a_definition_using_grad() {
    let dir = files(
        "grad",
        &[
            ("p.nbl", "def sq (x : Real) = x * x\ndef f (x : Real) = grad sq x + x\n"),
            ("in.txt", "3.0"),
            ("ch.txt", "replace 4.0\nreplace 0.5\n"),
        ],
    );
    let p = |f: &str| dir.join(f).display().to_string();
    let args = ["incr", &p("p.nbl"), "f", "--input", &p("in.txt"), "--changes", &p("ch.txt")];
    let interp = nabla(&[&args[..], &["--interp"]].concat());
    assert_eq!(interp.status, 0, "{}", interp.stderr);
    assert_eq!(interp.stdout, "9.0\n12.0\n1.5\n");
    let compiled = nabla(&args);
    if compiled.status == 0 {
        assert_eq!(compiled.stdout, interp.stdout);
    } else {
        assert_eq!(compiled.status, 1);
        assert!(
            compiled.stderr.contains("cannot compile the derivative of `f`")
                && compiled.stderr.contains("--interp")
                && compiled.stderr.contains("p.nbl:2:20"),
            "{}",
            compiled.stderr
        );
    }
}
