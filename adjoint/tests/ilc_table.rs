//! The ILC plugin table (`adjoint::incremental::table`) against the paper and docs/language.md §6:
//! which primitives have a derivative of their own, when a specialised derivative applies, and the
//! canonical groups. Where an entry shows in a derivative, it is checked there: the derived term
//! and the self-maintainability verdict after dead-code elimination (a derivative primitive that
//! ignores its base makes the derivative self-maintainable; recomputation does not).
//!
//! A wrong entry mostly leaves the values right (recomputation is a correct derivative, Theorem
//! 2.10) and costs only efficiency, which the value-level tests (`runtime/tests/ilc_theorem.rs`)
//! cannot see; this test is what catches it.

use adjoint::incremental::table::{
    canonical_group, canonical_zero, has_efficient_derivative, nil_constant, specialisation, specialised_type,
};
use adjoint::incremental::{derive_definition, expand};
use anf::mono::MonoProgram;
use expect_test::{expect, Expect};
use frontend::builtins::Builtin;
use frontend::pretty::{expr, Mode};
use frontend::types::Type;
use frontend::Span;

fn mono(src: &str, def: &str) -> MonoProgram {
    let program = frontend::check_source(src).unwrap_or_else(|d| panic!("{}", d.message));
    let id = program.lookup(def).expect("definition");
    anf::mono::monomorphise(&program, id).expect("monomorphises")
}

/// The total derivative of `f`, the derivative after DCE, and the self-maintainability verdict.
fn derivative(src: &str) -> String {
    let m = mono(src, "f");
    let d = derive_definition(&m, m.root()).unwrap();
    format!(
        "{}\n{}\nself-maintainable: {}",
        expr(&d.total, Mode::Paper),
        expr(&d.fast, Mode::Paper),
        d.report.self_maintainable
    )
}

fn check(src: &str, want: Expect) {
    want.assert_eq(&derivative(src));
}

/// ILC Sec. 2.1 and 4.4: negation and the bag group's inverse are homomorphisms, so their
/// derivatives are the negated change (self-maintainable); merge is the bag group's operation
/// (Sec. 3.7); singleton's change is `{x ⊕ dx} − {x}`, which reads `x`.
#[test]
fn primitives_with_their_own_derivative() {
    check(
        "def f (x : Int) = neg x",
        expect![[r#"
            λx dx. neg' x dx
            λx dx. neg' _ dx
            self-maintainable: true"#]],
    );
    check(
        "def f (b : Bag Int) = negate b",
        expect![[r#"
            λb db. negate' b db
            λb db. negate' _ db
            self-maintainable: true"#]],
    );
    check(
        "def f (a : Bag Int) (b : Bag Int) = merge a b",
        expect![[r#"
            λa da b db. merge' a da b db
            λa da b db. merge' _ da _ db
            self-maintainable: true"#]],
    );
    check(
        "def f (x : Int) = singleton x",
        expect![[r#"
            λx dx. singleton' x dx
            λx dx. singleton' x dx
            self-maintainable: false"#]],
    );
    // Without a derivative of its own: recomputation, `nil c` (Derive(c) = 0_c).
    check(
        "def f (x : Int) = abs x",
        expect![[r#"
            λx dx. nil abs x dx
            λx dx. nil abs x dx
            self-maintainable: false"#]],
    );
}

/// ILC Sec. 4.4: with the function (and groups, key) fixed, the bag and map primitives are
/// homomorphisms, so their specialised derivatives read only the change — self-maintainable.
#[test]
fn specialisations_for_fixed_functions() {
    check(
        "def f (b : Bag Int) = foldBag intGroup (fun x -> x * 2) b",
        expect![[r#"
            λb db. foldBag' intGroup (λx. x * 2) b db
            λb db. foldBag' intGroup (λx. x * 2) _ db
            self-maintainable: true"#]],
    );
    check(
        "def f (b : Bag Int) = mapBag (fun x -> x + 1) b",
        expect![[r#"
        λb db. mapBag' (λx. x + 1) b db
        λb db. mapBag' (λx. x + 1) _ db
        self-maintainable: true"#]],
    );
    check(
        "def f (b : Bag Int) = filterBag (fun x -> x > 0) b",
        expect![[r#"
        λb db. filterBag' (λx. x > 0) b db
        λb db. filterBag' (λx. x > 0) _ db
        self-maintainable: true"#]],
    );
    check(
        "def f (b : Bag Int) = flatMapBag (fun x -> merge (singleton x) (singleton 0)) b",
        expect![[r#"
        λb db. flatMapBag' (λx. merge (singleton x) (singleton 0)) b db
        λb db. flatMapBag' (λx. merge (singleton x) (singleton 0)) _ db
        self-maintainable: true"#]],
    );
    check(
        "def f (m : Map Int Int) = foldMap intGroup intGroup (fun k v -> k * v) m",
        expect![[r#"
            λm dm. foldMap' intGroup intGroup (λk v. k * v) m dm
            λm dm. foldMap' intGroup intGroup (λk v. k * v) _ dm
            self-maintainable: true"#]],
    );
    check(
        "def f (m : Map Int Int) = lookup intGroup 3 m",
        expect![[r#"
        λm dm. lookup' intGroup 3 m dm
        λm dm. lookup' intGroup 3 _ dm
        self-maintainable: true"#]],
    );
    check(
        "def f (x : Int) = singletonMap 3 x",
        expect![[r#"
        λx dx. singletonMap' 3 x dx
        λx dx. singletonMap' 3 _ dx
        self-maintainable: true"#]],
    );
}

/// A specialised derivative's type, made from the base primitive's monomorphic type, is the one
/// `frontend/src/builtins.rs` declares for it: each argument, then a change for each argument that
/// need not be nil, to the change of the result.
#[test]
fn specialised_derivatives_have_their_declared_types() {
    use Builtin as B;
    let (i, b) = (Type::Int, Type::Bool);
    let bag = Type::Bag(i.clone().into());
    let map = Type::Map(i.clone().into(), i.clone().into());
    let g = Type::Group(i.clone().into());
    let d = |t: &Type| Type::delta(t);
    let fun =
        |ts: &[Type]| ts[..ts.len() - 1].iter().rev().fold(ts[ts.len() - 1].clone(), |r, a| Type::fun(a.clone(), r));
    let ii = fun(&[i.clone(), i.clone()]);
    let cases = [
        (
            B::FoldBag,
            fun(&[g.clone(), ii.clone(), bag.clone(), i.clone()]),
            fun(&[g.clone(), ii.clone(), bag.clone(), d(&bag), d(&i)]),
        ),
        (B::MapBag, fun(&[ii.clone(), bag.clone(), bag.clone()]), fun(&[ii.clone(), bag.clone(), d(&bag), d(&bag)])),
        (
            B::FilterBag,
            fun(&[fun(&[i.clone(), b.clone()]), bag.clone(), bag.clone()]),
            fun(&[fun(&[i.clone(), b.clone()]), bag.clone(), d(&bag), d(&bag)]),
        ),
        (
            B::FlatMapBag,
            fun(&[fun(&[i.clone(), bag.clone()]), bag.clone(), bag.clone()]),
            fun(&[fun(&[i.clone(), bag.clone()]), bag.clone(), d(&bag), d(&bag)]),
        ),
        (
            B::FoldMap,
            fun(&[g.clone(), g.clone(), fun(&[i.clone(), i.clone(), i.clone()]), map.clone(), i.clone()]),
            fun(&[g.clone(), g.clone(), fun(&[i.clone(), i.clone(), i.clone()]), map.clone(), d(&map), d(&i)]),
        ),
        (
            B::Lookup,
            fun(&[g.clone(), i.clone(), map.clone(), i.clone()]),
            fun(&[g.clone(), i.clone(), map.clone(), d(&map), d(&i)]),
        ),
        (B::SingletonMap, fun(&[i.clone(), i.clone(), map.clone()]), fun(&[i.clone(), i.clone(), d(&i), d(&map)])),
    ];
    for (base, base_ty, want) in cases {
        let sp = specialisation(base).unwrap_or_else(|| panic!("{} has a specialisation", base.name()));
        assert_eq!(specialised_type(&base_ty, &sp), want, "{}", base.name());
    }
}

/// `has_efficient_derivative b k`: does `b` with its first `k` arguments fixed (nil changes) have
/// a derivative better than recomputation? Own derivatives always; the specialisations once the
/// arguments whose changes they drop are fixed (ILC Sec. 4.4: foldBag' when dG and df are nil;
/// mapBag, filterBag and flatMapBag for a fixed function; foldMap for fixed groups and function;
/// lookup for a fixed group and key; singletonMap for a fixed key); never otherwise.
#[test]
fn efficient_derivatives_need_their_fixed_arguments() {
    use Builtin as B;
    let least: &[(Builtin, usize)] = &[
        (B::Merge, 0),
        (B::Negate, 0),
        (B::Singleton, 0),
        (B::Neg, 0),
        (B::FoldBag, 2),
        (B::MapBag, 1),
        (B::FilterBag, 1),
        (B::FlatMapBag, 1),
        (B::FoldMap, 3),
        (B::Lookup, 2),
        (B::SingletonMap, 1),
    ];
    for b in Builtin::ALL.iter().copied().filter(|b| !b.is_internal()) {
        let from = least.iter().find(|(c, _)| *c == b).map(|(_, k)| *k);
        for k in 0..=b.arity() {
            let want = from.is_some_and(|l| k >= l);
            assert_eq!(has_efficient_derivative(b, k), want, "{} with {k} fixed arguments", b.name());
        }
    }
}

/// Expanding a derivative that recomputes a builtin (compiled ILC) terminates: only a builtin with
/// an efficient derivative is derived again.
#[test]
fn expansion_of_recomputed_builtins_terminates() {
    let src = "def f (x : Int) = abs x + iterate 2 (fun y -> y * 2) x\ndef main = derive f 3 (2 <-> 3)\n";
    let e = frontend::with_big_stack(move || {
        let m = mono(src, "main");
        expand(&m).map(|p| expr(&p.def(p.root()).body, Mode::Paper)).map_err(|d| d.message)
    });
    assert!(e.is_ok(), "{e:?}");
}

/// docs/language.md §6: the canonical groups of the base types with one, their zeros, and the nil
/// change `gchange g zero` of their values.
#[test]
fn canonical_groups_zeros_and_nil_constants() {
    let s = Span::SYNTHETIC;
    let bag = Type::Bag(Type::Int.into());
    let map = |v: Type| Type::Map(Type::Int.into(), v.into());
    let pair = |a: Type, b: Type| Type::Tuple(vec![a, b].into());
    let show = |e: Option<frontend::syntax::E>| e.map(|e| format!("{} : {}", expr(&e, Mode::Paper), e.ty));
    let types = [
        Type::Int,
        Type::Real,
        bag.clone(),
        map(Type::Int),
        map(bag.clone()),
        map(Type::Bool),
        pair(Type::Int, bag.clone()),
        pair(Type::Int, Type::Bool),
        Type::Tuple(vec![Type::Int, Type::Int, Type::Int].into()),
        Type::Bool,
        Type::fun(Type::Int, Type::Int),
    ];
    let got: Vec<String> = types
        .iter()
        .map(|t| {
            format!(
                "{t}: {:?} | {:?} | {:?}",
                show(canonical_group(t, s)),
                show(canonical_zero(t, s)),
                show(nil_constant(t, s))
            )
        })
        .collect();
    expect![[r#"
        Int: Some("intGroup : Group Int") | Some("0 : Int") | Some("gchange intGroup 0 : Delta Int")
        Real: Some("realGroup : Group Real") | Some("0.0 : Real") | Some("gchange realGroup 0.0 : Delta Real")
        Bag Int: Some("bagGroup : Group (Bag Int)") | Some("emptyBag : Bag Int") | Some("gchange bagGroup emptyBag : Delta (Bag Int)")
        Map Int Int: Some("mapGroup intGroup : Group (Map Int Int)") | Some("emptyMap : Map Int Int") | Some("gchange (mapGroup intGroup) emptyMap : Delta (Map Int Int)")
        Map Int (Bag Int): Some("mapGroup bagGroup : Group (Map Int (Bag Int))") | Some("emptyMap : Map Int (Bag Int)") | Some("gchange (mapGroup bagGroup) emptyMap : Delta (Map Int (Bag Int))")
        Map Int Bool: None | None | None
        Int * Bag Int: Some("pairGroup intGroup bagGroup : Group (Int * Bag Int)") | Some("⟨0, emptyBag⟩ : Int * Bag Int") | None
        Int * Bool: None | None | None
        Int * Int * Int: None | None | None
        Bool: None | None | None
        Int -> Int: None | None | None"#]].assert_eq(&got.join("\n"));
}

/// The driver's fold fusion (`adjoint::incremental::fuse`, on the derivative after DCE): a chain
/// of `foldMap'`/`foldBag'` over exact groups becomes one fold of the change whose function
/// adds straight into the output's group (word count: each changed word is one `singletonMap w
/// 1`), while Real groups and a user's group are left alone.
#[test]
fn fold_chains_fuse_into_one_fold_of_the_change() {
    let histogram = "
def mapReduce g1 g3 mapper reducer input =
  let mapPerKey    = foldMap g1 bagGroup mapper in
  let groupByKey   = foldBag (mapGroup bagGroup) (fun (k, v) -> singletonMap k (singleton v)) in
  let reducePerKey = foldMap bagGroup (mapGroup g3) (fun k b -> singletonMap k (reducer k b)) in
  reducePerKey (groupByKey (mapPerKey input))
def f (input : Map Int (Bag Int)) : Map Int Int =
  mapReduce bagGroup intGroup
    (fun _ doc -> foldBag bagGroup (fun w -> singleton (w, 1)) doc)
    (fun _ b -> foldBag intGroup (fun n -> n) b)
    input";
    expect!["λinput dinput. foldMap' bagGroup (mapGroup intGroup) (λk v. foldBag (mapGroup intGroup) (λx. singletonMap x 1) v) _ dinput"].assert_eq(&fused(histogram));
    // foldBag over a bag made by foldBag: one fold.
    expect!["λb db. foldBag' intGroup (λx. x * 2) _ db"].assert_eq(&fused(
        "def f (b : Bag Int) : Int = foldBag intGroup (fun x -> x) (foldBag bagGroup (fun x -> singleton (x * 2)) b)",
    ));
    // Real sums would be reassociated: not fused.
    expect!["λb db. foldBag' (mapGroup realGroup) (λ⟨k, v⟩. singletonMap k (toReal v)) _ (foldBag' bagGroup (λx. singleton ⟨x, x⟩) _ db)"].assert_eq(&fused(
        "def f (b : Bag Int) : Map Int Real = foldBag (mapGroup realGroup) (fun (k, v) -> singletonMap k (toReal v)) (foldBag bagGroup (fun x -> singleton (x, x)) b)",
    ));
}

/// `fuse` on the derivative after DCE of `f` in `src`.
fn fused(src: &str) -> String {
    let m = mono(src, "f");
    let d = derive_definition(&m, m.root()).unwrap();
    let mut cx = adjoint::incremental::Cx::new(&m, d.next_local);
    expr(&adjoint::incremental::fuse(&d.fast, &mut cx), Mode::Paper)
}

/// What fusion refuses: a user's group (its operation is opaque, so no law holds for it) in the
/// inner fold of a derivative chain, or in a static fold met while composing.
#[test]
fn fold_fusion_leaves_user_groups_alone() {
    let ug = "def ug = group (fun a b -> merge a b) (fun a -> negate a) bag{}\n";
    let ugi = "def ugi = group (fun a b -> a + b) (fun a -> 0 - a) 0\n";
    // foldBag' over foldBag' of a user's bag group.
    expect!["λb db. foldBag' intGroup (λx. x) _ (foldBag' ug (λx. singleton (x * 2)) _ db)"].assert_eq(&fused(
        &format!(
            "{ug}def f (b : Bag Int) : Int = foldBag intGroup (fun x -> x) (foldBag ug (fun x -> singleton (x * 2)) b)"
        ),
    ));
    // foldMap' over foldBag' into maps of a user's group (not `mapGroup intGroup`).
    expect!["λb db. foldMap' intGroup intGroup (λk v. k * v) _ (foldBag' (mapGroup ugi) (λx. singletonMap x 1) _ db)"]
        .assert_eq(&fused(&format!(
            "{ugi}def f (b : Bag Int) : Int = foldMap intGroup intGroup (fun k v -> k * v) (foldBag (mapGroup ugi) (fun x -> singletonMap x 1) b)"
        )));
    // Static folds: foldBag over foldMap, foldMap over foldMap, whose inner map has a user's value group.
    expect!["λb db. foldBag' intGroup (λx. foldBag intGroup (λy. y) (foldMap ugi bagGroup (λk v. singleton (k + v)) (singletonMap x x))) _ db"]
        .assert_eq(&fused(&format!(
            "{ugi}def f (b : Bag Int) : Int = foldBag intGroup (fun x -> foldBag intGroup (fun y -> y) (foldMap ugi bagGroup (fun k v -> singleton (k + v)) (singletonMap x x))) b"
        )));
    expect!["λb db. foldBag' intGroup (λx. foldMap intGroup intGroup (λk v. k * v) (foldMap ugi (mapGroup intGroup) (λk v. singletonMap v k) (singletonMap x x))) _ db"]
        .assert_eq(&fused(&format!(
            "{ugi}def f (b : Bag Int) : Int = foldBag intGroup (fun x -> foldMap intGroup intGroup (fun k v -> k * v) (foldMap ugi (mapGroup intGroup) (fun k v -> singletonMap v k) (singletonMap x x))) b"
        )));
}

/// Composing the fold functions reduces β-redexes and `let`s: a parameter or `let` bound to a
/// variable or literal, or used once outside any λ, is substituted; anything else stays bound,
/// so fusion never duplicates work, moves it under a λ (or a `dual`'s body), or drops an
/// expression that may fail (`100 / x` with `x = 0`).
#[test]
fn fold_fusion_substitutes_only_what_it_neither_duplicates_nor_drops() {
    // foldBag intGroup f over a bag of doubled elements: f is applied to `x * 2`.
    let chain = |f: &str| {
        fused(&format!(
            "def f (b : Bag Int) : Int = foldBag intGroup ({f}) (foldBag bagGroup (fun x -> singleton (x * 2)) b)"
        ))
    };
    // A `let` used twice stays; one used once is substituted.
    expect!["λb db. foldBag' intGroup (λx. let y = x * 2 * 3 in y + y) _ db"]
        .assert_eq(&chain("fun x -> let y = x * 3 in y + y"));
    expect!["λb db. foldBag' intGroup (λx. x * 2 * 3 + 1) _ db"].assert_eq(&chain("fun x -> let y = x * 3 in y + 1"));
    // A parameter used twice, applied to a computation: bound once.
    expect!["λb db. foldBag' intGroup (λx. let x = x * 2 in x + x) _ db"].assert_eq(&chain("fun x -> x + x"));
    // Used once but under a `dual`'s body: stays bound.
    expect!["λb db. foldBag' intGroup (λx. let y = toReal (x * 2) * 3.0 in toInt (((λv. y * v)*·1.0*) 1.0)) _ db"]
        .assert_eq(&chain("fun x -> let y = toReal x * 3.0 in toInt ((dual (fun v -> y * v) (star 1.0)) 1.0)"));
    // Used once but under a λ: stays bound.
    expect!["λm dm. foldMap' intGroup (mapGroup intGroup) (λk v. (let k = k + 1 in λv. singletonMap (k * 2) (v * 3)) v) _ dm"].assert_eq(&fused(
        "def f (m : Map Int Int) : Map Int Int = foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k * 2) (v * 3)) (foldMap intGroup (mapGroup intGroup) (fun k v -> singletonMap (k + 1) v) m)",
    ));
    // Ignored components: a literal goes, a division that may fail stays (as a tuple component
    // split from its pattern, and as an argument to an ignored parameter).
    expect!["λb db. foldBag' (mapGroup intGroup) (λx. let _ = 100 / x in singletonMap x 1) _ db"].assert_eq(&fused(
        "def f (b : Bag Int) : Map Int Int = foldBag (mapGroup intGroup) (fun (k, _, _) -> singletonMap k 1) (foldBag bagGroup (fun x -> singleton (x, 1, 100 / x)) b)",
    ));
    expect!["λb db. foldBag' intGroup (λx. (let _ = 100 / x in λv. v) 1) _ db"].assert_eq(&fused(
        "def f (b : Bag Int) : Int = foldMap intGroup intGroup (fun _ v -> v) (foldBag (mapGroup intGroup) (fun x -> singletonMap (100 / x) 1) b)",
    ));
}
