//! The ASCII printer produces source that parses and type-checks: printing every definition of every
//! example, re-checking the printed program and printing it again gives the same text. (Types may
//! become more general: inference removes annotations before printing.)

use frontend::pretty::{self, Mode};

fn reprint(src: &str) -> Option<(String, String)> {
    let p = frontend::check_source(src).ok()?;
    let printed: String =
        p.defs.iter().map(|d| format!("def {} = {}\n", d.name, pretty::expr(&d.body, Mode::Ascii))).collect();
    Some((frontend::signatures(&p), printed))
}

#[test]
fn ascii_printing_round_trips_on_every_example() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut checked = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(dir).expect("examples directory") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("nbl") {
            continue;
        }
        let src = std::fs::read_to_string(&path).expect("readable example");
        let Some((types, printed)) = frontend::with_big_stack(|| reprint(&src)) else { continue };
        match frontend::with_big_stack(|| reprint(&printed)) {
            Some((types2, printed2)) => {
                let _ = (types, types2);
                if printed != printed2 {
                    failures.push(format!("{}:\n{printed}\n--- reprinted:\n{printed2}", path.display()));
                }
            }
            None => failures.push(format!("{}: the printed program does not check:\n{printed}", path.display())),
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} examples checked");
    assert!(failures.is_empty(), "{}", failures.join("\n=====\n"));
}

#[test]
fn paper_mode_uses_the_papers_notation() {
    let p = frontend::check_source(
        "def f (p : Real * Real) = p.1 * p.2\ndef main = (pullback f (omega 1.0)) (1.0, 3.0)\ndef d = dual (fun v -> (v, 0.0)) (star (1.0, 2.0))",
    )
    .unwrap();
    assert_eq!(pretty::expr(&p.defs[0].body, Mode::Paper), "λp. π1 p * π2 p");
    assert_eq!(pretty::expr(&p.defs[1].body, Mode::Paper), "((Ω f)·(Ω 1.0)) ⟨1.0, 3.0⟩");
    assert_eq!(pretty::expr(&p.defs[2].body, Mode::Paper), "(λv. ⟨v, 0.0⟩)*·⟨1.0, 2.0⟩*");
}

#[test]
fn a_negated_negation_keeps_its_parentheses() {
    // `--` starts a comment, so `- -x` must not print as `--x`.
    let p = frontend::check_source("def f (x : Int) = -(-x)\ndef g = -(-1)").unwrap();
    assert_eq!(pretty::expr(&p.defs[0].body, Mode::Ascii), "fun x -> -(-x)");
    assert_eq!(pretty::expr(&p.defs[1].body, Mode::Ascii), "-(-1)");
}
