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
    assert_eq!(check("def main = 1 + true"), "error: type mismatch: expected a numeric type (Int or Real), found Bool");
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

/// Checks each program on its own and reports every mismatch at once.
fn check_all(cases: &[(&str, &str)]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(src, want)| {
            let got = check(src);
            (got != *want).then(|| format!("program:\n{src}\nexpected:\n{want}\nfound:\n{got}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n----\n"));
}

#[test]
fn polymorphic_combinators() {
    check_all(&[
        ("def s f g x = f x (g x)", "s : ('a -> 'b -> 'c) -> ('a -> 'b) -> 'a -> 'c\n"),
        (
            "def s f g x = f x (g x)\ndef k x y = x\ndef i = s k k",
            "s : ('a -> 'b -> 'c) -> ('a -> 'b) -> 'a -> 'c\nk : 'a -> 'b -> 'a\ni : 'a -> 'a\n",
        ),
        ("def compose f g x = f (g x)", "compose : ('a -> 'b) -> ('c -> 'a) -> 'c -> 'b\n"),
        ("def flip f a b = f b a", "flip : ('a -> 'b -> 'c) -> 'b -> 'a -> 'c\n"),
        (
            "def twice f x = f (f x)\ndef main = twice (twice (fun n -> n * 2)) 1",
            "twice : ('a -> 'a) -> 'a -> 'a\nmain : Int\n",
        ),
        ("def swap (a, b) = (b, a)", "swap : 'a * 'b -> 'b * 'a\n"),
        ("def first3 (a, _, _) = a", "first3 : 'a * 'b * 'c -> 'a\n"),
        (
            "def fold2 f z xs ys = fold (fun acc p -> f acc p) z (zipWith (fun a b -> (a, b)) xs ys)",
            "fold2 : ('a -> 'b * 'c -> 'a) -> 'a -> Array 'b -> Array 'c -> 'a\n",
        ),
    ]);
}

#[test]
fn numeric_and_equality_constraints() {
    check_all(&[
        ("def eq a b = a == b", "eq : Eq 'a => 'a -> 'a -> Bool\n"),
        ("def lt a b = a < b", "lt : Num 'a => 'a -> 'a -> Bool\n"),
        ("def sq x = x * x", "sq : Num 'a => 'a -> 'a\n"),
        ("def norm (x, y) = sqrt (x * x + y * y)", "norm : Real * Real -> Real\n"),
        ("def mean xs = sum xs / toReal (len xs)", "mean : Array Real -> Real\n"),
        ("def mean xs = sum xs / len xs", "mean : Array Int -> Int\n"),
        (
            "def axpy a x y = zipWith (fun u v -> a * u + v) x y",
            "axpy : Num 'a => 'a -> Array 'a -> Array 'a -> Array 'a\n",
        ),
        ("def sq x = x * x\ndef main = (sq 3, sq 1.5)", "sq : Num 'a => 'a -> 'a\nmain : Int * Real\n"),
        (
            "def countBy f b = foldBag (mapGroup intGroup) (fun x -> singletonMap (f x) 1) b",
            "countBy : (Key 'a, Key 'b) => ('a -> 'b) -> Bag 'a -> Map 'b Int\n",
        ),
        ("def look g k m = lookup g k m", "look : Key 'b => Group 'a -> 'b -> Map 'b 'a -> 'a\n"),
        ("def fm = foldMapGen 0 (fun a b -> a + b)", "fm : (Key 'a, Num 'c) => ('a -> 'b -> 'c) -> Map 'a 'b -> 'c\n"),
        ("def pairs b = mapBag (fun x -> (x, true)) b", "pairs : Key 'a => Bag 'a -> Bag ('a * Bool)\n"),
    ]);
}

#[test]
fn let_polymorphism_nested() {
    check_all(&[
        (
            "def poly x = let twice = fun f y -> f (f y) in (twice (fun z -> z + 1) x, twice (fun b -> not b) true)",
            "poly : Num 'a => 'a -> 'a * Bool\n",
        ),
        (
            "def main = let pair = fun x -> (x, x) in let p = pair (pair 1.5) in (p.1.2, pair ())",
            "main : Real * (Unit * Unit)\n",
        ),
        // A lambda-bound name is monomorphic: using it at two types is an error.
        ("def bad f = (f 1, f true)", "error: type mismatch: expected a numeric type (Int or Real), found Bool"),
    ]);
}

#[test]
fn church_encodings() {
    check_all(&[
        ("def ctrue a b = a\ndef cfalse a b = b\ndef cif c t e = c t e", "ctrue : 'a -> 'b -> 'a\ncfalse : 'a -> 'b -> 'b\ncif : ('a -> 'b -> 'c) -> 'a -> 'b -> 'c\n"),
        ("def cpair a b = fun sel -> sel a b\ndef cfst p = p (fun a b -> a)", "cpair : 'a -> 'b -> ('a -> 'b -> 'c) -> 'c\ncfst : (('a -> 'b -> 'a) -> 'c) -> 'c\n"),
        (
            "def cnil = fun f d -> d\ndef ccons x xs = fun f d -> f x (xs f d)\ndef clen l = l (fun _ n -> n + 1) 0",
            "cnil : 'a -> 'b -> 'b\n\
             ccons : 'a -> (('a -> 'b -> 'c) -> 'd -> 'b) -> ('a -> 'b -> 'c) -> 'd -> 'c\n\
             clen : (Num 'b, Num 'c) => (('a -> 'b -> 'b) -> 'c -> 'd) -> 'd\n",
        ),
        (
            "def zero = fun f x -> x\ndef succ n = fun f x -> f (n f x)\ndef main = (succ (succ zero)) (fun k -> k + 1) 0",
            "zero : 'a -> 'b -> 'b\nsucc : (('a -> 'b) -> 'c -> 'a) -> ('a -> 'b) -> 'c -> 'b\nmain : Int\n",
        ),
    ]);
}

#[test]
fn delta_types() {
    check_all(&[
        (
            "def upd (x : Int -> Int) (dx : Delta (Int -> Int)) = dx",
            "upd : (Int -> Int) -> (Int -> Delta Int -> Delta Int) -> Int -> Delta Int -> Delta Int\n",
        ),
        ("def dpair (p : Delta (Real * Bool)) = p", "dpair : Delta Real * Delta Bool -> Delta Real * Delta Bool\n"),
        ("def dbag (b : Delta (Bag Int)) = b", "dbag : Delta (Bag Int) -> Delta (Bag Int)\n"),
        ("def ch x = x <-> x\ndef ap x d = x <+> d", "ch : 'a -> Delta 'a\nap : 'a -> Delta 'a -> 'a\n"),
        (
            "def reset x = replace x\ndef bump g x d = x <+> gchange g d",
            "reset : Base 'a => 'a -> Delta 'a\nbump : Base 'a => Group 'a -> 'a -> 'a -> 'a\n",
        ),
        ("def dv = derive (fun x -> x + 1)", "dv : Num 'a => 'a -> Delta 'a -> Delta 'a\n"),
        ("def main = (3, true) <+> (gchange intGroup 1, replace false)", "main : Int * Bool\n"),
    ]);
}

#[test]
fn dual_and_omega_types() {
    check_all(&[
        ("def w = omega 1.0", "w : Real -> Dual Real\n"),
        ("def st x = star x", "st : FirstOrder 'a => 'a -> Dual 'a\n"),
        ("def pb f = pullback f (omega 1.0)", "pb : ('a -> Real) -> 'a -> Dual 'a\n"),
        ("def gr f x = grad f x", "gr : FirstOrder 'a => ('a -> Real) -> 'a -> 'a\n"),
        ("def du (w : Dual (Real * Real)) = dual (fun v -> (v, 2.0 * v)) w", "du : Dual (Real * Real) -> Dual Real\n"),
        (
            "def om (f : Omega (Real * Real)) = f",
            "om : (Real * Real -> Dual (Real * Real)) -> Real * Real -> Dual (Real * Real)\n",
        ),
        ("def main = grad (fun (x, y) -> x * y) (2.0, 3.0)", "main : Real * Real\n"),
    ]);
}

#[test]
fn group_types() {
    check_all(&[
        ("def grp = pairGroup intGroup (mapGroup realGroup)", "grp : Key 'a => Group (Int * Map 'a Real)\n"),
        ("def mk = group (fun a b -> a + b) (fun a -> 0 - a) 0", "mk : Num 'a => Group 'a\n"),
        ("def g = mapGroup (mapGroup bagGroup)", "g : (Key 'a, Key 'b, Key 'c) => Group (Map 'a (Map 'b (Bag 'c)))\n"),
        ("def total g m = foldMap g g (fun _ v -> v) m", "total : Key 'b => Group 'a -> Map 'b 'a -> 'a\n"),
    ]);
}
