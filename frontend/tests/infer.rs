//! Principal types as `nabla check` prints them.

fn check(src: &str) -> String {
    match frontend::check_source(src) {
        Ok(p) => frontend::signatures(&p),
        Err(d) => format!("error: {}", d.message),
    }
}

#[test]
fn paper_example() {
    let src = "def g (x, y) = (x + 1.0, 2.0 * x + y * y)\n\
               def mult (a, b) = a * b\n\
               def pow2 z = z * z\n\
               def f p = pow2 (mult (g p))\n\
               def main = (pullback f (omega 1.0)) (1.0, 3.0)\n";
    assert_eq!(
        check(src),
        "g : Real * Real -> Real * Real\n\
         mult : Num 'a => 'a * 'a -> 'a\n\
         pow2 : Num 'a => 'a -> 'a\n\
         f : Real * Real -> Real\n\
         main : Dual (Real * Real)\n"
    );
}

#[test]
fn let_polymorphism() {
    assert_eq!(check("def main = let id = fun x -> x in (id 1, id true, id 2.5)"), "main : Int * Bool * Real\n");
    assert_eq!(check("def k x y = x"), "k : 'a -> 'b -> 'a\n");
    assert_eq!(check("def main = 1 + 2"), "main : Int\n");
    assert_eq!(check("def one = 1\ndef main = one + 1.5"), "one : Num 'a => 'a\nmain : Real\n");
}

#[test]
fn church_sum() {
    let src = "def sum (l : (Real -> Real -> Real) -> Real -> Real) = l (fun x y -> x + y) 0.0\n\
               def xs = fun f d -> f (-1.0) (f 7.0 d)\n\
               def main = ((pullback sum (omega 1.0)) xs) (fun f d -> f 2.0 (f 3.0 d))\n";
    assert_eq!(
        check(src),
        "sum : ((Real -> Real -> Real) -> Real -> Real) -> Real\n\
         xs : (Real -> 'a -> 'a) -> 'a -> 'a\n\
         main : Real\n"
    );
}

#[test]
fn bags_and_changes() {
    let src = "def grand_total xs ys = foldBag intGroup (fun x -> x) (merge xs ys)\n\
               def main = grand_total bag{1, 1} bag{2, 3, 4}\n\
               def main2 = (derive grand_total) bag{1, 1} (gchange bagGroup bag{1 # -1}) bag{2, 3, 4} (gchange bagGroup bag{5})\n";
    assert_eq!(
        check(src),
        "grand_total : Bag Int -> Bag Int -> Int\n\
         main : Int\n\
         main2 : Delta Int\n"
    );
}

#[test]
fn errors() {
    assert_eq!(
        check("def main = bag{1.5}"),
        "error: bag elements must be an equality type (Int, Bool, Unit or tuples of them), but this has type Real"
    );
    assert_eq!(check("def main = 1 + true"), "error: expected a numeric type (Int or Real), found Bool");
    assert_eq!(
        check("def main = sin 1.0 2.0"),
        "error: this expression has type Real and cannot be applied to an argument"
    );
    assert_eq!(
        check("def main = dual (fun v -> v * v) (star 1.0)"),
        "error: the body of this `dual` is not linear in `v`"
    );
    assert_eq!(check("def main = dual (fun v -> 2.0 * v) (star 1.0)"), "main : Dual Real\n");
    assert_eq!(check("def f p = p.1"), "error: cannot tell which tuple type `.1` projects from here");
    assert_eq!(check("def main = (1, 2).3"), "error: this tuple has 2 components, so `.3` does not exist");
    assert_eq!(
        check("def main = fun x -> derive x"),
        "error: `derive` needs a closed term, but `x` is a local variable here"
    );
}

#[test]
fn histogram() {
    let src = "def mapReduce g1 g3 mapper reducer input =\n\
  let mapPerKey    = foldMap g1 bagGroup mapper in\n\
  let groupByKey   = foldBag (mapGroup bagGroup) (fun (k, v) -> singletonMap k (singleton v)) in\n\
  let reducePerKey = foldMap bagGroup (mapGroup g3) (fun k b -> singletonMap k (reducer k b)) in\n\
  reducePerKey (groupByKey (mapPerKey input))\n\
def histogram (input : Map Int (Bag Int)) : Map Int Int =\n\
  mapReduce bagGroup intGroup\n\
    (fun _ doc -> foldBag bagGroup (fun w -> singleton (w, 1)) doc)\n\
    (fun _ b -> foldBag intGroup (fun n -> n) b)\n\
    input\n";
    let out = check(src);
    assert!(out.contains("histogram : Map Int (Bag Int) -> Map Int Int"), "{out}");
}

#[test]
fn mismatch_message() {
    assert_eq!(check("def main = (1.0 + 2.0) + 3"), "main : Real\n");
    assert_eq!(check("def main = if true then 1.0 else false"), "error: type mismatch: expected Real, found Bool");
}

#[test]
fn exponential_types_are_refused_not_hung() {
    let mut src = String::from("def f0 x = (x, x)\n");
    for i in 1..40 {
        src.push_str(&format!("def f{i} x = f{} (f{} x)\n", i - 1, i - 1));
    }
    assert!(check(&src).starts_with("error: the type of this expression is too large"));
    let mut src = String::from("def main = let a0 = (1, 1) in\n");
    for i in 1..60 {
        src.push_str(&format!("let a{i} = (a{}, a{}) in\n", i - 1, i - 1));
    }
    src.push_str("0\n");
    assert!(check(&src).starts_with("error: the type of this expression is too large"));
}
