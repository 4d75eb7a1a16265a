//! The front end never panics: random bytes, random soups of the language's own tokens, and random
//! mutations (token deletions, duplications, swaps) of the example programs all give `Ok` or a located
//! `Err`, never a crash. Every input runs under `with_big_stack`, as the `nabla` binary does.

use std::path::Path;
use std::sync::OnceLock;

use frontend::builtins::Builtin;
use frontend::lexer::lex;
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Parses and checks `src`; a diagnostic's span must lie inside the source.
fn check(src: &str) {
    let src = src.to_string();
    frontend::with_big_stack(move || {
        if let Err(d) = frontend::check_source(&src) {
            assert!(
                d.span.lo <= d.span.hi && d.span.hi as usize <= src.len(),
                "span {:?} outside a source of {} bytes ({})",
                d.span,
                src.len(),
                d.message
            );
            assert!(!d.message.is_empty(), "an empty message");
        }
    });
}

fn config() -> Config {
    // No regression files in the shared tree: a failure prints its minimal input.
    Config { cases: 256, failure_persistence: None, ..Config::default() }
}

/// Everything a Nabla program is made of: keywords, punctuation, Unicode spellings, builtins, literals.
fn vocabulary() -> Vec<String> {
    let fixed = [
        "def",
        "let",
        "in",
        "fun",
        "if",
        "then",
        "else",
        "not",
        "true",
        "false",
        "pullback",
        "dual",
        "derive",
        "(",
        ")",
        "[",
        "]",
        "bag{",
        "map{",
        "}",
        ",",
        ".",
        ".[",
        "->",
        "=",
        ":",
        "#",
        "_",
        "||",
        "&&",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "<+>",
        "<->",
        "+",
        "-",
        "*",
        "/",
        "^",
        "λ",
        "Ω",
        "⊕",
        "⊖",
        "→",
        "×",
        "⟨",
        "⟩",
        "Δ",
        "ℝ",
        "ℤ",
        "main",
        "x",
        "y",
        "f",
        "xs",
        "0",
        "1",
        "2",
        "-1",
        "1.5",
        "2.5e-3",
        "1e6",
        "9223372036854775807",
        "Real",
        "Int",
        "Bool",
        "Unit",
        "Array",
        "Bag",
        "Map",
        "Group",
        "Dual",
        "Omega",
        "Delta",
        "'a",
        "'b",
        "\n",
        "-- a comment\n",
        "def main =",
    ];
    let mut v: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
    v.extend(Builtin::ALL.iter().map(|b| b.name().to_string()));
    v
}

/// The token texts of every example program (comments dropped by the lexer), read once.
fn example_tokens() -> &'static [Vec<String>] {
    static TOKENS: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    TOKENS.get_or_init(read_example_tokens)
}

fn read_example_tokens() -> Vec<Vec<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the examples folder")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "nbl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let src = std::fs::read_to_string(&f).expect("an example");
        let Ok(toks) = lex(&src) else { continue };
        let texts: Vec<String> = toks
            .iter()
            .map(|t| src[t.span.lo as usize..t.span.hi as usize].to_string())
            .filter(|s| !s.is_empty())
            .collect();
        out.push(texts);
    }
    assert!(!out.is_empty(), "no examples in {}", dir.display());
    out
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    /// Replace a token by one from the vocabulary.
    Replace(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Replace(a, b)),
    ]
}

fn mutate(mut toks: Vec<String>, ms: &[Mutation], vocab: &[String]) -> Vec<String> {
    for m in ms {
        if toks.is_empty() {
            break;
        }
        let n = toks.len();
        match *m {
            Mutation::Delete(i) => {
                toks.remove(i % n);
            }
            Mutation::Duplicate(i) => {
                let t = toks[i % n].clone();
                toks.insert(i % n, t);
            }
            Mutation::Swap(i, j) => toks.swap(i % n, j % n),
            Mutation::Replace(i, j) => toks[i % n] = vocab[j % vocab.len()].clone(),
        }
    }
    toks
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_text_never_panics(s in "\\PC{0,300}") {
        check(&s);
    }

    #[test]
    fn token_soup_never_panics(
        picks in proptest::collection::vec(any::<usize>(), 0..120),
        glue in proptest::collection::vec(0u8..3, 0..120),
    ) {
        let vocab = vocabulary();
        let mut src = String::from("def main = ");
        for (k, p) in picks.iter().enumerate() {
            src.push_str(&vocab[p % vocab.len()]);
            // Tokens glued together, separated by a space, or by a newline.
            src.push_str(match glue.get(k).copied().unwrap_or(1) { 0 => "", 1 => " ", _ => "\n" });
        }
        check(&src);
    }

    #[test]
    fn mutated_examples_never_panic(
        which in any::<usize>(),
        ms in proptest::collection::vec(mutation(), 1..6),
    ) {
        let examples = example_tokens();
        let toks = examples[which % examples.len()].clone();
        let src = mutate(toks, &ms, &vocabulary()).join(" ");
        check(&src);
    }
}
