//! Independent reductions several rows at a time (`anf::opt::jam`: a loop whose body sums an
//! inner loop runs four rows' inner loops as one, each row's sum in its own order). Each program
//! runs under the interpreter and compiled (optimised, unoptimised, compacting after every
//! iteration), which must agree exactly: the same bits of every result (negative zeros,
//! infinities and NaN among the data), or the same error at the same span — at row counts that
//! are and are not multiples of four, inner lengths 0, 1 and odd, triangles (rows of different
//! lengths), and checks failing in a row of a group of four, in its prefix, its inner loop or
//! after it. A separate test checks that the jam happens for each shape.

mod program_gen;

use program_gen::both_engines;

/// `m` rows of `n` columns, row-major in `w` and as rows in `rs`; `x` of length `n`. The data
/// holds `-0.0`, infinities and NaN among ordinary values.
fn data(m: usize, n: usize) -> String {
    format!(
        "def m = {m}
def n = {n}
def val (i : Int) = if i % 11 == 3 then -0.0 else if i % 13 == 5 then 1.0 / 0.0 else if i % 17 == 7 then 0.0 / 0.0 else toReal (i * 5 % 13) * 0.25 - 1.0
def w = build (m * n) (fun i -> val (i + 1))
def rs = build m (fun j -> build n (fun k -> val (j * n + k + 2)))
def x = build n (fun k -> if k % 5 == 2 then -0.0 else toReal (k * 3 % 7) - 2.5)
def b = build m (fun j -> val (j + 40))
"
    )
}

/// (name, `main`); each shows its whole result.
const PROGRAMS: &[(&str, &str)] = &[
    // The MLP's dense layer.
    ("dense layer", "def main = build m (fun j -> b.[j] + sum (build n (fun k -> w.[j * n + k] * x.[k])))"),
    // Logistic regression's rows: `dot` (its length check in the prefix).
    ("dot of rows", "def main = build m (fun j -> dot rs.[j] x)"),
    // An outer reduction over rows: the rows' results added in order after their sums.
    ("sum of row sums", "def main = sum (build m (fun j -> log (1.0 + exp (0.0 - dot rs.[j] x))))"),
    // kmeans' nearest centroid: an `iterate` over rows carrying the best so far.
    (
        "nearest row",
        "def dist (p : Array Real) (c : Array Real) = sum (build (len p) (fun i -> (p.[i] - c.[i]) * (p.[i] - c.[i])))
def main = let r = iterate m (fun (j, bi, bd) -> let d = dist x rs.[j] in if d < bd then (j + 1, j, d) else (j + 1, bi, bd)) (0, -1, 1.0 / 0.0) in (r.2, r.3)",
    ),
    // gmm's triangle: row r sums r elements.
    (
        "triangle",
        "def main = build m (fun r -> b.[r] * 2.0 + sum (build r (fun c -> w.[r * (r - 1) / 2 + c] * b.[c])))",
    ),
    // Squares of sums, two sums per row.
    (
        "two sums a row",
        "def main = build m (fun j -> let s = sum (build n (fun k -> w.[j * n + k] * x.[k])) in s * s + sum rs.[j])",
    ),
    // Failing: `w` one element short (the last row's last element), and a row past the data.
    (
        "last element missing",
        "def main = let ws = build (m * n - 1) (fun i -> w.[i]) in build m (fun j -> sum (build n (fun k -> ws.[j * n + k] * x.[k])))",
    ),
    ("a row past the end", "def main = build (m + 1) (fun j -> dot rs.[j] x)"),
    // Failing in row 2's inner loop (an index before the start), row 1 fine.
    ("row two reads before the start", "def main = let t = 3 * n in build m (fun j -> let o = if j == 2 then t else 0 in sum (build n (fun k -> w.[j * n - o + k] * x.[k])))"),
    // Failing after row 5's sum (an Int division by zero) where row 6's inner loop would fail too:
    // row 5's error comes first.
    (
        "after the sum before a later row's check",
        "def main = let t = m * n in build m (fun j -> let o = if j == 6 then t else 0 in let s = sum (build n (fun k -> w.[j * n + o + k] * x.[k])) in s + toReal (10 / (j - 5)))",
    ),
    // A row of another length than `x`: `dot`'s length error at that row.
    ("a short row", "def main = build m (fun j -> dot (if j == 3 then build (n - 1) (fun k -> x.[k]) else rs.[j]) x)"),
];

fn program(m: usize, n: usize, main: &str) -> String {
    format!("{}{main}\n", data(m, n))
}

#[test]
fn jammed_rows_agree_with_the_interpreter_exactly() {
    let mut cases = Vec::new();
    for m in [0, 1, 3, 4, 5, 7, 8, 9, 13] {
        for n in [0, 1, 2, 5, 8] {
            for (name, main) in PROGRAMS {
                cases.push((format!("{name} (m = {m}, n = {n})"), program(m, n, main)));
            }
        }
    }
    program_gen::assert_engines_agree(cases.iter().map(|(name, src)| (name.as_str(), src.clone())));
}

/// The failing programs fail, the others do not, so both kinds of outcome are compared.
#[test]
fn programs_reach_their_cases() {
    for (name, main) in PROGRAMS {
        let (interp, _, _) = both_engines(&program(9, 5, main)).expect("compiles");
        let expected = match *name {
            "last element missing" | "a row past the end" | "row two reads before the start" => Some("out of bounds"),
            "after the sum before a later row's check" => Some("division by zero"),
            "a short row" => Some("different lengths"),
            _ => None,
        };
        match (interp, expected) {
            (Ok(_), None) => {}
            (Err((e, _, _)), Some(what)) => assert!(e.contains(what), "{name}: {e}"),
            (other, _) => panic!("{name}: expected {expected:?}, got {other:?}"),
        }
    }
}

/// The optimised IR of `main`'s definition.
fn optimised_ir(src: &str) -> String {
    let src = src.to_string();
    frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(&src, "main").expect("checks");
        runtime::engine::ir_text(&mono, true).expect("lowers")
    })
}

/// Each shape is jammed: four rows' additions in one block. (In "a short row" the prefix builds
/// row 3 on one side of an `if`: the jammed rows take the other side, and a group holding row 3
/// runs the loop as it was for that row.)
#[test]
fn each_shape_is_jammed() {
    for (name, main) in PROGRAMS {
        let ir = optimised_ir(&program(9, 5, main));
        let most =
            ir.split("\nb").map(|block| block.lines().filter(|l| l.contains(" = fadd ")).count()).max().unwrap_or(0);
        assert!(most >= 4, "{name}: not jammed ({most} additions in one block)\n{ir}");
    }
    // A sum alone is not jammed (nothing to jam it with).
    let ir = optimised_ir(&program(9, 5, "def main = sum (build n (fun k -> x.[k] * x.[k]))"));
    let fadds = ir.lines().filter(|l| l.contains(" = fadd ")).count();
    assert!(fadds <= 2, "{ir}");
}
