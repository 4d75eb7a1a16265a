//! ILC Theorem 3.11 (docs/language.md §6) as a property: for generated programs `f`, inputs `a` and
//! changes `da`, `f (a ⊕ da) == f a ⊕ (derive f) a da`; and the incremental driver (the
//! self-maintainable derivative after dead-code elimination, falling back to the total derivative)
//! gives the same output. Programs are generated as source text over every primitive with an ILC
//! derivative and the higher-order constructs (closures capturing variables, let-bound functions,
//! iterate, while, array maps and folds, function-typed inputs with function changes).
//!
//! A case is *substantive* when the total derivative (after nil propagation and simplification)
//! still reads the input or its change, and the change alters the output; a case that is not is
//! resampled (a few times at most), and every input type must reach a floor of substantive cases —
//! including `Map Int (Bag Int)` inputs through nested `foldMap`/`foldBag`, pair inputs (tuple
//! changes) and function inputs (function changes). Every tenth case also sends a stream of 10–50
//! changes through the incremental driver, each step compared with recomputation.
//!
//! Coverage of the ILC table is counted on the derivative after dead-code elimination (what the
//! driver runs), not on the source text: every derivative primitive must occur in a share of the
//! substantive cases, and every input type must reach a derivative primitive in a share of its
//! substantive cases. `--nocapture` prints the counts.
//!
//! Seeded and deterministic; `NABLA_ILC_SEED=n` picks another seed, `NABLA_ILC_CASES=n` another count.

use std::collections::{BTreeMap, BTreeSet};

use frontend::types::Type;
use runtime::incr::{literal, Incr, Path};
use runtime::interp::Interp;
use runtime::value::{Change, Value};

/// Triples checked per run (each a fresh program, input and change).
const CASES: usize = 600;

#[test]
fn theorem_3_11_on_generated_programs() {
    let seed: u64 = std::env::var("NABLA_ILC_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x1c_2014);
    let cases: usize = std::env::var("NABLA_ILC_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(CASES);
    frontend::with_big_stack(move || run(seed, cases));
}

/// Programs drawn at most per case until one is substantive.
const RESAMPLE: usize = 20;

fn run(seed: u64, cases: usize) {
    let mut rng = Rng::new(seed);
    let mut checked = 0;
    let mut skipped = 0;
    let mut coverage: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut paths = [0usize; 2];
    let mut attempts = 0;
    let mut substantive: BTreeMap<&'static str, usize> = BTreeMap::new();
    // Coverage of the ILC table, counted on the derivative after dead-code elimination (what the
    // driver runs), over substantive cases: each entry, and per input type the cases whose
    // derivative uses a derivative primitive (not only recomputation, `nil c`).
    let mut table: BTreeMap<String, usize> = BTreeMap::new();
    let mut with_derivative: BTreeMap<&'static str, usize> = BTreeMap::new();
    let (mut nested_map_bag, mut streams, mut stream_steps) = (0, 0, 0);
    let mut tries = 0;
    let mut input_ty = Ty::Int;
    while checked < cases {
        attempts += 1;
        assert!(attempts < cases * RESAMPLE * 4, "too many generated programs fail on their own ({skipped} skipped)");
        // The input type is drawn once per case and kept while resampling, so every type gets
        // its share of substantive cases.
        if tries == 0 {
            input_ty =
                *rng.pick(&[Ty::Int, Ty::Real, Ty::Bool, Ty::Bag, Ty::MapII, Ty::MapIB, Ty::Pair, Ty::Arr, Ty::Fun]);
        }
        let mut case = Case::generate(&mut rng, input_ty);
        if checked % 10 == 0 {
            case.stream = 10 + rng.below(41);
            case.stream_seed = rng.next();
        }
        if std::env::var_os("NABLA_ILC_TRACE").is_some() {
            eprintln!("--- case {checked}\n{}", case.describe());
        }
        // The compiled driver runs on every fourth case (each start compiles `f` and its derivative).
        match case.check(checked % 4 == 0) {
            Outcome::Checked { substantive: false, .. } if tries + 1 < RESAMPLE => tries += 1,
            Outcome::Checked { path, substantive: sub, steps, entries } => {
                tries = 0;
                checked += 1;
                paths[path as usize] += 1;
                if steps > 0 {
                    streams += 1;
                    stream_steps += steps;
                }
                if sub {
                    *substantive.entry(case.input_ty.surface()).or_default() += 1;
                    for e in &entries {
                        *table.entry(e.clone()).or_default() += 1;
                    }
                    if entries.iter().any(|e| !e.starts_with("nil ")) {
                        *with_derivative.entry(case.input_ty.surface()).or_default() += 1;
                    }
                    if case.input_ty == Ty::MapIB && case.source.contains("foldMap") && case.source.contains("foldBag")
                    {
                        nested_map_bag += 1;
                    }
                }
                let text = format!("{}{}", case.source, case.change);
                for name in PRIMITIVES {
                    if text.contains(name) {
                        *coverage.entry(name).or_default() += 1;
                    }
                }
            }
            Outcome::Skipped => {
                skipped += 1;
                tries = 0;
            }
            Outcome::Failed(msg) => panic!("seed {seed}, case {checked}:\n{}\n{msg}", case.describe()),
        }
    }
    for name in PRIMITIVES {
        let n = coverage.get(name).copied().unwrap_or(0);
        assert!(n >= 3, "the generator exercised `{name}` in only {n} checked cases: {coverage:?}");
    }
    // Both of the driver's paths are exercised (the total one by foreign-group and mixed changes).
    assert!(paths[0] >= cases / 10 && paths[1] >= 5, "driver paths (fast, total): {paths:?}");
    // A floor of substantive cases for every input type (each type is drawn for about a ninth of
    // the cases).
    let total: usize = substantive.values().sum();
    eprintln!(
        "{total} of {checked} cases substantive: {substantive:?}; {nested_map_bag} on Map Int (Bag Int) through nested \
         foldMap/foldBag; {streams} streams of {stream_steps} changes"
    );
    eprintln!("ILC table entries in the derivatives after DCE (substantive cases): {table:?}");
    eprintln!("substantive cases whose derivative after DCE uses a derivative primitive: {with_derivative:?}");
    // Every derivative primitive of the table runs in the derivatives the driver runs (default
    // seed: each in at least 8 of 600 cases), and every input type reaches one in a share of its
    // substantive cases (default seed: at least 15 for each type).
    for d in DERIVATIVE_PRIMITIVES {
        let n = table.get(*d).copied().unwrap_or(0);
        assert!(n * 100 >= cases, "`{d}` is in only {n} derivatives after DCE: {table:?}");
    }
    for ty in [Ty::Int, Ty::Real, Ty::Bool, Ty::Bag, Ty::MapII, Ty::MapIB, Ty::Pair, Ty::Arr, Ty::Fun] {
        let n = with_derivative.get(ty.surface()).copied().unwrap_or(0);
        assert!(
            n * 60 >= cases,
            "only {n} substantive cases with input type {} use a derivative primitive after DCE: {with_derivative:?}",
            ty.surface()
        );
    }
    for ty in [Ty::Int, Ty::Real, Ty::Bool, Ty::Bag, Ty::MapII, Ty::MapIB, Ty::Pair, Ty::Arr, Ty::Fun] {
        let n = substantive.get(ty.surface()).copied().unwrap_or(0);
        assert!(n * 9 * 3 >= cases, "only {n} substantive cases with input type {}: {substantive:?}", ty.surface());
    }
    assert!(total * 4 >= cases * 3, "only {total} of {cases} cases are substantive");
    assert!(
        nested_map_bag * 100 >= cases,
        "only {nested_map_bag} substantive Map Int (Bag Int) cases through foldMap/foldBag"
    );
    assert!(streams * 20 >= cases, "only {streams} change streams");
    let native = NATIVE_STEPS.with(|c| *c.borrow());
    assert!(native[0] >= cases / 40 && native[1] >= 1 && native[2] >= 2, "compiled driver steps: {native:?}");
}

/// The ILC table's derivative primitives (`adjoint::incremental::table`), each required in the
/// derivatives after DCE of the substantive cases.
const DERIVATIVE_PRIMITIVES: &[&str] = &[
    "merge'",
    "negate'",
    "singleton'",
    "neg'",
    "add'",
    "sub'",
    "mul'",
    "foldBag'",
    "mapBag'",
    "filterBag'",
    "flatMapBag'",
    "foldMap'",
    "lookup'",
    "singletonMap'",
];

/// Names whose presence in checked programs the test requires (each at least three times).
const PRIMITIVES: &[&str] = &[
    "merge",
    "negate",
    "singleton ",
    "foldBag ",
    "foldMap ",
    "foldMapGen",
    "mapBag",
    "filterBag",
    "flatMapBag",
    "lookup",
    "singletonMap",
    " + ",
    " - ",
    " * ",
    "if ",
    "iterate",
    "while",
    " % ",
    " != ",
    "map (",
    "fold (",
    "sum ",
    "build",
    "abs ",
    "max ",
    "sin ",
    "toReal",
    " && ",
    " || ",
    "not ",
    " == ",
    " < ",
    "fun ",
    "let ",
    "(group ",
    "realGroup",
    "mapGroup intGroup",
    "mapGroup bagGroup",
    ".1",
    ".2",
    "(x : Int -> Int)",
    "<->",
    "nil ",
    "replace",
];

enum Outcome {
    /// Checked; `substantive` when the derivative reads the input or its change and the change
    /// alters the output; `steps` changes of a stream checked after it.
    Checked {
        path: Path,
        substantive: bool,
        steps: usize,
        /// The ILC table entries the derivative uses after dead-code elimination.
        entries: BTreeSet<String>,
    },
    /// `f a` or `f (a ⊕ da)` fails on its own (e.g. a huge `iterate`): nothing to compare.
    Skipped,
    Failed(String),
}

struct Case {
    source: String,
    input_ty: Ty,
    input: String,
    change: String,
    /// How many further changes to send through the driver after the first (0: none).
    stream: usize,
    stream_seed: u64,
}

impl Case {
    fn generate(rng: &mut Rng, input_ty: Ty) -> Case {
        let mut out_ty = *rng.pick(&[Ty::Int, Ty::Real, Ty::Bool, Ty::Bag, Ty::MapII, Ty::MapIB, Ty::Pair, Ty::Arr]);
        let nested = input_ty == Ty::MapIB && rng.below(3) == 0;
        let mut g = Gen { rng, fresh: 0 };
        let env = vec![("x".to_string(), input_ty)];
        let body = if nested {
            // The input through nested foldMap/foldBag (the histogram's shape).
            let env2 = Gen::with(&Gen::with(&env, "k0", Ty::Int), "y0", Ty::Int);
            let inner = g.expr(Ty::Int, &env2, 3);
            if g.rng.below(2) == 0 {
                out_ty = Ty::Int;
                format!("foldMap bagGroup intGroup (fun k0 b0 -> foldBag intGroup (fun y0 -> {inner}) b0) x")
            } else {
                out_ty = Ty::MapII;
                format!(
                    "foldMap bagGroup (mapGroup intGroup) (fun k0 b0 -> singletonMap k0 (foldBag intGroup (fun y0 -> {inner}) b0)) x"
                )
            }
        } else {
            g.expr(out_ty, &env, 4)
        };
        let source =
            format!("def f (x : {}) : {} =\n  {body}\ndef df = derive f\n", input_ty.surface(), out_ty.surface());
        let input = g.value(input_ty);
        let change = g.change(input_ty, &input);
        Case { source, input_ty, input, change, stream: 0, stream_seed: 0 }
    }

    fn describe(&self) -> String {
        format!("{}-- input: {}\n-- change: {}", self.source, self.input, self.change)
    }

    fn check(&self, native_driver: bool) -> Outcome {
        let program = match frontend::check_source(&self.source) {
            Ok(p) => p,
            Err(d) => return Outcome::Failed(format!("the generated program does not check: {}", d.message)),
        };
        let ty = self.input_ty.ty();
        let (a, next_a) = match literal(&self.input, &ty, 0) {
            Ok(v) => v,
            Err(d) => return Outcome::Failed(format!("the input does not check: {}", d.message)),
        };
        let (da, next_da) = match literal(&self.change, &Type::delta(&ty), 0) {
            Ok(v) => v,
            Err(d) => return Outcome::Failed(format!("the change does not check: {}", d.message)),
        };
        let df_id = program.lookup("df").expect("df");
        let mono = match anf::mono::monomorphise(&program, df_id) {
            Ok(m) => m,
            Err(d) => return Outcome::Failed(format!("monomorphisation: {}", d.message)),
        };
        let f_id = mono.find("f").expect("f");
        let mut it = Interp::new(&mono);
        let span = frontend::Span::SYNTHETIC;
        // Globals are values: `f` and `derive f`.
        if let Err(d) = it.eval_globals() {
            return Outcome::Failed(format!("evaluating f and derive f: {}", d.message));
        }
        runtime::interp::incremental::reserve_locals(&mut it, next_a.max(next_da));
        let f = it.globals[f_id.0 as usize].clone();
        let df = it.globals.last().cloned().expect("df");
        let out_ty = match &mono.def(f_id).ty {
            Type::Fun(_, b) => (**b).clone(),
            t => return Outcome::Failed(format!("f has type {t}")),
        };
        let Ok(a_new) = it.oplus(&a, &da, &ty, span) else { return Outcome::Skipped };
        let Ok(lhs) = it.apply(&f, a_new, span) else { return Outcome::Skipped };
        let Ok(out) = it.apply(&f, a.clone(), span) else { return Outcome::Skipped };
        if !finite(&lhs) || !finite(&out) {
            return Outcome::Skipped;
        }
        let dout = match it.apply_n(&df, vec![a.clone(), da.clone()], span) {
            Ok(d) => d,
            Err(d) => return Outcome::Failed(format!("(derive f) a da fails: {}", d.message)),
        };
        let rhs = match it.oplus(&out, &dout, &out_ty, span) {
            Ok(v) => v,
            Err(d) => return Outcome::Failed(format!("f a <+> (derive f) a da fails: {}", d.message)),
        };
        if !same(&lhs, &rhs) {
            return Outcome::Failed(format!(
                "Theorem 3.11 fails:\n  f (a <+> da)            = {lhs}\n  f a                     = {out}\n  (derive f) a da         = {dout}\n  f a <+> (derive f) a da = {rhs}"
            ));
        }
        // Compiled: the same derivative through expand, lowering, opt and Cranelift.
        let input_surface = self.input_ty.surface();
        let compiled_src = format!(
            "{}def a0 : {input_surface} =\n  {}\ndef da0 : Delta ({input_surface}) =\n  {}\ndef main = (f (a0 <+> da0), f a0 <+> df a0 da0)\n",
            self.source, self.input, self.change
        );
        let compiled = runtime::prepare(&compiled_src, "main").and_then(|(_, m)| runtime::engine::run(&m));
        match compiled {
            Ok(run) => {
                if let Some(note) = run.note {
                    return Outcome::Failed(format!("not compiled: {note}"));
                }
                let Value::Tuple(vs) = &run.value else {
                    return Outcome::Failed(format!("compiled main gave {}", run.value));
                };
                if !same(&vs[0], &lhs) || !same(&vs[1], &lhs) {
                    return Outcome::Failed(format!(
                        "compiled code disagrees: f (a <+> da) = {}, f a <+> (derive f) a da = {}, interpreter {lhs}",
                        vs[0], vs[1]
                    ));
                }
            }
            Err(e) => return Outcome::Failed(format!("compiled: {}", e.message)),
        }
        // The driver: the derivative after all passes (fast, then total if needed), applied in place.
        let root = match anf::mono::monomorphise(&program, program.lookup("f").expect("f")) {
            Ok(m) => m,
            Err(d) => return Outcome::Failed(format!("monomorphisation at f: {}", d.message)),
        };
        let d = match adjoint::incremental::derive_definition(&root, root.root()) {
            Ok(d) => d,
            Err(e) => return Outcome::Failed(format!("derive_definition: {}", e.message)),
        };
        for t in [&d.total, &d.fast] {
            if let Err(e) = adjoint::incremental::term::unique_binders(t) {
                return Outcome::Failed(format!("a derivative binds a variable twice: {e}"));
            }
        }
        let free_inputs = adjoint::incremental::term::free_locals_typed(&strip(&d.fast, d.inputs.len()))
            .iter()
            .any(|(_, id, _)| d.inputs.iter().any(|(_, x)| x == id));
        // Does the total derivative still read the input or its change?
        let binders = binder_ids(&d.total, 2 * d.inputs.len());
        let reads_input = adjoint::incremental::term::free_locals_typed(&strip(&d.total, d.inputs.len()))
            .iter()
            .any(|(_, id, _)| binders.contains(id));
        let substantive = reads_input && !same(&lhs, &out);
        if d.report.self_maintainable == free_inputs {
            return Outcome::Failed(format!(
                "the analysis says self-maintainable = {}, but after DCE the inputs are {}free",
                d.report.self_maintainable,
                if free_inputs { "" } else { "not " }
            ));
        }
        let mut state = match Incr::new(&root, a.clone()) {
            Ok(s) => s,
            Err(e) => return Outcome::Failed(format!("the driver cannot start: {}", e.message)),
        };
        state.reserve_locals(next_a.max(next_da));
        let path = match state.update(da.clone()) {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(format!("the driver's update fails: {}", e.message)),
        };
        if !same(state.output(), &lhs) {
            return Outcome::Failed(format!(
                "the driver disagrees ({path:?} path): output {} but f (a <+> da) = {lhs}",
                state.output()
            ));
        }
        // The compiled driver (data inputs only: it does not take functions).
        if native_driver && self.input_ty != Ty::Fun {
            let mut native = match runtime::api::Incremental::new(&root, &a) {
                Ok(s) => s,
                Err(e) => return Outcome::Failed(format!("the compiled driver cannot start: {}", e.message)),
            };
            match native.update(&da) {
                Ok(step) => {
                    if !same(&native.output(), &lhs) {
                        return Outcome::Failed(format!(
                            "the compiled driver disagrees ({step:?}): output {} but f (a <+> da) = {lhs}",
                            native.output()
                        ));
                    }
                    NATIVE_STEPS.with(|c| c.borrow_mut()[step as usize] += 1);
                }
                Err(e) => return Outcome::Failed(format!("the compiled driver's update fails: {}", e.message)),
            }
        }
        // A stream of changes, each applied by the driver and compared with recomputation. (A
        // function input prints as `<fun>`, which is no literal to write changes against.)
        let mut steps = 0;
        if self.stream > 0 && self.input_ty != Ty::Fun {
            let mut rng = Rng::new(self.stream_seed);
            let Ok(mut cur) = it.oplus(&a, &da, &ty, span) else { return Outcome::Skipped };
            for step in 0..self.stream {
                let text = Gen { rng: &mut rng, fresh: 0 }.change(self.input_ty, &format!("({cur})"));
                let (dv, next) = match literal(&text, &Type::delta(&ty), 0) {
                    Ok(v) => v,
                    Err(d) => {
                        return Outcome::Failed(format!("stream change {step} `{text}` does not check: {}", d.message))
                    }
                };
                runtime::interp::incremental::reserve_locals(&mut it, next);
                state.reserve_locals(next);
                let Ok(new) = it.oplus(&cur, &dv, &ty, span) else { break };
                let Ok(want) = it.apply(&f, new.clone(), span) else { break };
                if !finite(&want) {
                    break;
                }
                if let Err(e) = state.update(dv) {
                    return Outcome::Failed(format!(
                        "stream change {step} `{text}`: the driver's update fails: {}",
                        e.message
                    ));
                }
                if !same(state.output(), &want) {
                    return Outcome::Failed(format!(
                        "stream change {step} `{text}` to input {cur}: the driver's output is {} but f of the new input is {want}",
                        state.output()
                    ));
                }
                cur = new;
                steps += 1;
            }
        }
        let mut entries = BTreeSet::new();
        table_entries(&d.fast, &mut entries);
        Outcome::Checked { path, substantive, steps, entries }
    }
}

/// The ILC table entries (adjoint::incremental::table) in a derivative term: each derivative
/// primitive (`merge'`, `foldBag'`, `add'`, …, and `nil'` of a function), and `nil c` for a builtin
/// `c` whose derivative is recomputation (Derive(c) = 0_c).
fn table_entries(e: &frontend::syntax::E, out: &mut BTreeSet<String>) {
    use frontend::builtins::Builtin;
    use frontend::syntax::{ExprKind, VarRef};
    match &e.kind {
        ExprKind::Var(_, VarRef::Builtin(b)) if b.is_internal() && *b != Builtin::NoBase => {
            out.insert(b.name().to_string());
        }
        ExprKind::App(f, c) if matches!(f.kind, ExprKind::Var(_, VarRef::Builtin(Builtin::Nil))) => {
            if let ExprKind::Var(_, VarRef::Builtin(b)) = &c.kind {
                out.insert(format!("nil {}", b.name()));
            }
        }
        _ => {}
    }
    frontend::lin::for_each_child(e, &mut |c| table_entries(c, out));
}

/// The local ids bound by the first `n` leading λs of `e` (plain variable patterns only).
fn binder_ids(e: &frontend::syntax::E, n: usize) -> Vec<frontend::syntax::LocalId> {
    use frontend::syntax::{ExprKind, PatKind};
    let mut ids = Vec::new();
    let mut cur = e.clone();
    for _ in 0..n {
        match &cur.kind {
            ExprKind::Lam(p, b) => {
                if let PatKind::Var(_, id) = &p.kind {
                    ids.push(*id);
                }
                cur = b.clone();
            }
            _ => break,
        }
    }
    ids
}

thread_local! {
    /// Updates of the compiled driver by step: fast, total, recomputed.
    static NATIVE_STEPS: std::cell::RefCell<[usize; 3]> = const { std::cell::RefCell::new([0; 3]) };
}

/// The body under the derivative's `2n` leading binders (inputs and their changes).
fn strip(e: &frontend::syntax::E, n: usize) -> frontend::syntax::E {
    let mut cur = e.clone();
    for _ in 0..2 * n {
        match &cur.kind {
            frontend::syntax::ExprKind::Lam(_, b) => cur = b.clone(),
            _ => break,
        }
    }
    cur
}

fn finite(v: &Value) -> bool {
    match v {
        Value::Real(r) => r.is_finite() && r.abs() < 1e12,
        Value::Tuple(vs) => vs.iter().all(finite),
        Value::Array(vs) => vs.iter().all(finite),
        Value::Map(m) => m.entries.values().all(finite),
        _ => true,
    }
}

/// Equality of first-order outputs: maps are finite maps into a group, so an entry holding the
/// group's zero equals an absent one; reals agree to a relative 1e-9.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        (Value::Tuple(xs), Value::Tuple(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| same(x, y))
        }
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| same(x, y))
        }
        (Value::Map(m), Value::Map(n)) => {
            let keys: std::collections::BTreeSet<_> = m.entries.keys().chain(n.entries.keys()).collect();
            keys.into_iter().all(|k| match (m.entries.get(k), n.entries.get(k)) {
                (Some(x), Some(y)) => same(x, y),
                (Some(x), None) | (None, Some(x)) => is_zero(x),
                (None, None) => true,
            })
        }
        (Value::Change(c), Value::Change(d)) => match (&**c, &**d) {
            (Change::Replace(x), Change::Replace(y)) => same(x, y),
            _ => a.equals(b),
        },
        _ => a.equals(b),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Int(0) => true,
        Value::Real(r) => *r == 0.0,
        Value::Bag(b) => b.entries.is_empty(),
        Value::Map(m) => m.entries.values().all(is_zero),
        Value::Tuple(vs) => vs.iter().all(is_zero),
        _ => false,
    }
}

/// The types programs are generated at.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    Int,
    Real,
    Bool,
    Bag,
    MapII,
    MapIB,
    /// Int * Bag Int
    Pair,
    Arr,
    /// Int -> Int
    Fun,
}

impl Ty {
    fn surface(self) -> &'static str {
        match self {
            Ty::Int => "Int",
            Ty::Real => "Real",
            Ty::Bool => "Bool",
            Ty::Bag => "Bag Int",
            Ty::MapII => "Map Int Int",
            Ty::MapIB => "Map Int (Bag Int)",
            Ty::Pair => "Int * Bag Int",
            Ty::Arr => "Array Int",
            Ty::Fun => "Int -> Int",
        }
    }
    fn ty(self) -> Type {
        let p = frontend::check_source(&format!("def t (x : {}) = x", self.surface())).expect("a type");
        match &p.defs[0].scheme.ty {
            Type::Fun(a, _) => (**a).clone(),
            t => t.clone(),
        }
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64, so nearby seeds start far apart
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng(z ^ (z >> 31) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

struct Gen<'r> {
    rng: &'r mut Rng,
    fresh: usize,
}

type Env = Vec<(String, Ty)>;

impl Gen<'_> {
    fn name(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{base}{}", self.fresh)
    }

    fn with(env: &Env, name: &str, ty: Ty) -> Env {
        let mut e = env.clone();
        e.push((name.to_string(), ty));
        e
    }

    fn var(&mut self, ty: Ty, env: &Env) -> Option<String> {
        let mut cands: Vec<String> = env.iter().filter(|(_, t)| *t == ty).map(|(n, _)| n.clone()).collect();
        for (n, t) in env {
            if *t == Ty::Pair && ty == Ty::Int {
                cands.push(format!("{n}.1"));
            }
            if *t == Ty::Pair && ty == Ty::Bag {
                cands.push(format!("{n}.2"));
            }
            if *t == Ty::Fun && ty == Ty::Int {
                let arg = self.value(Ty::Int);
                cands.push(format!("({n} {arg})"));
            }
        }
        if cands.is_empty() {
            None
        } else {
            Some(self.rng.pick(&cands).clone())
        }
    }

    fn leaf(&mut self, ty: Ty, env: &Env) -> String {
        if self.rng.below(3) > 0 {
            if let Some(v) = self.var(ty, env) {
                return v;
            }
        }
        self.value(ty)
    }

    fn expr(&mut self, ty: Ty, env: &Env, depth: usize) -> String {
        if depth == 0 || self.rng.below(5) == 0 {
            return self.leaf(ty, env);
        }
        let d = depth - 1;
        // A let or a conditional at any type.
        match self.rng.below(12) {
            0 => {
                let t = *self.rng.pick(&[Ty::Int, Ty::Bag, Ty::Fun, Ty::MapII]);
                let n = self.name("z");
                let rhs = if t == Ty::Fun { self.fun(env, d) } else { self.expr(t, env, d) };
                let body = self.expr(ty, &Self::with(env, &n, t), d);
                return format!("(let {n} = {rhs} in {body})");
            }
            1 => {
                let c = self.expr(Ty::Bool, env, d);
                return format!("(if {c} then {} else {})", self.expr(ty, env, d), self.expr(ty, env, d));
            }
            _ => {}
        }
        match ty {
            Ty::Int => self.int_expr(env, d),
            Ty::Real => self.real_expr(env, d),
            Ty::Bool => self.bool_expr(env, d),
            Ty::Bag => self.bag_expr(env, d),
            Ty::MapII => self.map_ii_expr(env, d),
            Ty::MapIB => self.map_ib_expr(env, d),
            Ty::Pair if self.rng.below(3) == 0 => {
                let y = self.name("y");
                let body = self.expr(Ty::Int, &Self::with(env, &y, Ty::Int), d);
                format!(
                    "(foldBag (pairGroup intGroup bagGroup) (fun {y} -> ({body}, singleton {y})) {})",
                    self.expr(Ty::Bag, env, d)
                )
            }
            Ty::Pair => format!("({}, {})", self.expr(Ty::Int, env, d), self.expr(Ty::Bag, env, d)),
            Ty::Arr => self.arr_expr(env, d),
            Ty::Fun => self.fun(env, d),
        }
    }

    /// A function `Int -> Int`: a closure over the environment, or a function-typed variable.
    fn fun(&mut self, env: &Env, d: usize) -> String {
        if let Some(v) = env.iter().rev().find(|(_, t)| *t == Ty::Fun).map(|(n, _)| n.clone()) {
            if self.rng.below(2) == 0 {
                return v;
            }
        }
        let y = self.name("y");
        format!("(fun {y} -> {})", self.expr(Ty::Int, &Self::with(env, &y, Ty::Int), d))
    }

    fn int_expr(&mut self, env: &Env, d: usize) -> String {
        let e = |g: &mut Self, t| g.expr(t, env, d);
        match self.rng.below(28) {
            0 => format!("({} + {})", e(self, Ty::Int), e(self, Ty::Int)),
            1 => format!("({} - {})", e(self, Ty::Int), e(self, Ty::Int)),
            2 => format!("({} * {})", e(self, Ty::Int), e(self, Ty::Int)),
            3 => format!("(-{})", e(self, Ty::Int)),
            4 => {
                let y = self.name("y");
                let body = self.expr(Ty::Int, &Self::with(env, &y, Ty::Int), d);
                format!("(foldBag intGroup (fun {y} -> {body}) {})", e(self, Ty::Bag))
            }
            5 => {
                // A user group acting like intGroup: changes in it take the slow paths.
                let y = self.name("y");
                let body = self.expr(Ty::Int, &Self::with(env, &y, Ty::Int), d);
                format!(
                    "(foldBag (group (fun p q -> p + q) (fun p -> 0 - p) 0) (fun {y} -> {body}) {})",
                    e(self, Ty::Bag)
                )
            }
            6 => format!("(lookup intGroup {} {})", e(self, Ty::Int), e(self, Ty::MapII)),
            7 => {
                // foldMap promises `f k` is a homomorphism: linear in the value.
                let (k, v) = (self.name("k"), self.name("v"));
                let c = if self.rng.below(2) == 0 { k.clone() } else { self.rng.int(-2, 3).to_string() };
                format!("(foldMap intGroup intGroup (fun {k} {v} -> {c} * {v}) {})", e(self, Ty::MapII))
            }
            8 => {
                // foldMapGen sees every stored entry, and a map may store a zero (`singletonMap k 0`)
                // where a group operation would have dropped it; ILC's maps are finitely supported
                // functions, so the generated `f k 0` is 0 and the fold cannot tell the two apart.
                let (k, v) = (self.name("k"), self.name("v"));
                let env2 = Self::with(&Self::with(env, &k, Ty::Int), &v, Ty::Int);
                let body = self.expr(Ty::Int, &env2, d);
                format!("(foldMapGen 0 (fun p q -> p + q) (fun {k} {v} -> {v} * {body}) {})", e(self, Ty::MapII))
            }
            9 => {
                let (k, b, y) = (self.name("k"), self.name("b"), self.name("y"));
                let body = self.expr(Ty::Int, &Self::with(env, &y, Ty::Int), d);
                format!(
                    "(foldMap bagGroup intGroup (fun {k} {b} -> foldBag intGroup (fun {y} -> {body}) {b}) {})",
                    e(self, Ty::MapIB)
                )
            }
            10 => format!("(abs {})", e(self, Ty::Int)),
            11 => format!("(max {} {})", e(self, Ty::Int), e(self, Ty::Int)),
            12 => format!("(min {} {})", e(self, Ty::Int), e(self, Ty::Int)),
            13 => {
                let f = self.fun(env, d);
                format!("({f} {})", e(self, Ty::Int))
            }
            14 => {
                let f = self.fun(env, d);
                format!("(iterate 2 {f} {})", e(self, Ty::Int))
            }
            15 => format!("(sum {})", e(self, Ty::Arr)),
            16 => format!("(len {})", e(self, Ty::Arr)),
            17 => format!("(fold (fun p q -> p + q * 2) 0 {})", e(self, Ty::Arr)),
            18 => format!("({}.1)", e(self, Ty::Pair)),
            19 => {
                // A let-bound function used twice.
                let (h, y) = (self.name("h"), self.name("y"));
                let body = self.expr(Ty::Int, &Self::with(env, &y, Ty::Int), d);
                format!("(let {h} = fun {y} -> {body} in {h} {} + {h} {})", e(self, Ty::Int), e(self, Ty::Int))
            }
            20 => format!("(foldBag intGroup (fun y -> y) (merge {} {}))", e(self, Ty::Bag), e(self, Ty::Bag)),
            21 => {
                // Changes inside the program: derive, <+>, <-> and nil of a function. Their
                // derivatives are second order and recompute at every level, which is exponential in
                // the nesting of higher-order primitives, so these functions stay arithmetic.
                let (a0, a1) = (e(self, Ty::Int), e(self, Ty::Int));
                let y = self.name("y");
                let (c, k) = (self.value(Ty::Int), self.value(Ty::Int));
                let body = match self.rng.below(3) {
                    0 => format!("{y} * {c} + {k}"),
                    1 => format!("if {y} < {c} then {y} else {k}"),
                    _ => format!("max {y} {c}"),
                };
                if self.rng.below(2) == 0 {
                    format!("({a0} <+> ((derive (fun ({y} : Int) -> {body})) {a0} ({a1} <-> {a0})))")
                } else {
                    // The function captures a variable (its change need not be nil).
                    let ints: Vec<String> = env.iter().filter(|(_, t)| *t == Ty::Int).map(|(n, _)| n.clone()).collect();
                    let captured = if ints.is_empty() { self.value(Ty::Int) } else { self.rng.pick(&ints).clone() };
                    format!("({a0} <+> nil (fun ({y} : Int) -> {body} + {captured}) {a0} (gchange intGroup 2))")
                }
            }
            22 => format!("(neg {})", e(self, Ty::Int)),
            23 => {
                let z = self.name("z");
                format!("(let {z} = {} in dot {z} {z})", e(self, Ty::Arr))
            }
            24 => {
                let z = self.name("z");
                format!("(let {z} = {} in if len {z} > 0 then {z}.[0] else 0)", e(self, Ty::Arr))
            }
            // Remainder by a divisor that is never 0 (`abs` of the least Int is itself).
            25 => format!("({} % (abs {} + 1))", e(self, Ty::Int), e(self, Ty::Int)),
            26 => {
                // `while` counting to 3 (recomputed: `nil while`).
                let (f, p) = (self.fun(env, d), self.name("p"));
                format!(
                    "((while (fun ({p} : Int * Int) -> {p}.1 < 3) (fun ({p} : Int * Int) -> ({p}.1 + 1, {f} {p}.2)) (0, {})).2)",
                    e(self, Ty::Int)
                )
            }
            _ => self.leaf(Ty::Int, env),
        }
    }

    fn real_expr(&mut self, env: &Env, d: usize) -> String {
        let e = |g: &mut Self, t| g.expr(t, env, d);
        match self.rng.below(10) {
            0 => format!("({} + {})", e(self, Ty::Real), e(self, Ty::Real)),
            1 => format!("({} - {})", e(self, Ty::Real), e(self, Ty::Real)),
            2 => format!("({} * {})", e(self, Ty::Real), e(self, Ty::Real)),
            3 => format!("(toReal {})", e(self, Ty::Int)),
            4 => format!("(sin {})", e(self, Ty::Real)),
            5 => format!("(foldBag realGroup (fun y -> toReal y * 0.5) {})", e(self, Ty::Bag)),
            6 => format!("(-{})", e(self, Ty::Real)),
            7 => {
                let f = *self.rng.pick(&["cos", "tanh", "sigmoid", "exp"]);
                format!("({f} (sin {}))", e(self, Ty::Real))
            }
            _ => self.leaf(Ty::Real, env),
        }
    }

    fn bool_expr(&mut self, env: &Env, d: usize) -> String {
        let e = |g: &mut Self, t| g.expr(t, env, d);
        match self.rng.below(9) {
            0 => format!("({} < {})", e(self, Ty::Int), e(self, Ty::Int)),
            1 => format!("({} == {})", e(self, Ty::Int), e(self, Ty::Int)),
            2 => format!("({} && {})", e(self, Ty::Bool), e(self, Ty::Bool)),
            3 => format!("({} || {})", e(self, Ty::Bool), e(self, Ty::Bool)),
            4 => format!("(not {})", e(self, Ty::Bool)),
            5 => format!("({} < {})", e(self, Ty::Real), e(self, Ty::Real)),
            6 => format!("({} == {})", e(self, Ty::Bag), e(self, Ty::Bag)),
            7 => format!("({} != {})", e(self, Ty::MapII), e(self, Ty::MapII)),
            _ => self.leaf(Ty::Bool, env),
        }
    }

    fn bag_expr(&mut self, env: &Env, d: usize) -> String {
        let e = |g: &mut Self, t| g.expr(t, env, d);
        let y = self.name("y");
        let env_y = Self::with(env, &y, Ty::Int);
        match self.rng.below(12) {
            0 => format!("(merge {} {})", e(self, Ty::Bag), e(self, Ty::Bag)),
            1 => format!("(negate {})", e(self, Ty::Bag)),
            2 => format!("(singleton {})", e(self, Ty::Int)),
            3 => {
                let body = self.expr(Ty::Int, &env_y, d);
                format!("(mapBag (fun {y} -> {body}) {})", e(self, Ty::Bag))
            }
            4 => {
                let body = self.expr(Ty::Bool, &env_y, d);
                format!("(filterBag (fun {y} -> {body}) {})", e(self, Ty::Bag))
            }
            5 => {
                let body = self.expr(Ty::Bag, &env_y, d);
                format!("(flatMapBag (fun {y} -> {body}) {})", e(self, Ty::Bag))
            }
            6 => {
                let body = self.expr(Ty::Int, &env_y, d);
                format!("(foldBag bagGroup (fun {y} -> singleton ({body})) {})", e(self, Ty::Bag))
            }
            7 => format!("({}.2)", e(self, Ty::Pair)),
            8 => format!("(lookup bagGroup {} {})", e(self, Ty::Int), e(self, Ty::MapIB)),
            9 => format!("(merge emptyBag {})", e(self, Ty::Bag)),
            _ => self.leaf(Ty::Bag, env),
        }
    }

    fn map_ii_expr(&mut self, env: &Env, d: usize) -> String {
        let e = |g: &mut Self, t| g.expr(t, env, d);
        match self.rng.below(7) {
            0 => format!("(singletonMap {} {})", e(self, Ty::Int), e(self, Ty::Int)),
            1 => {
                let y = self.name("y");
                let env_y = Self::with(env, &y, Ty::Int);
                let k = self.expr(Ty::Int, &env_y, d);
                format!("(foldBag (mapGroup intGroup) (fun {y} -> singletonMap ({k}) 1) {})", e(self, Ty::Bag))
            }
            2 => {
                let (k, v) = (self.name("k"), self.name("v"));
                let c = self.rng.int(-2, 3);
                format!(
                    "(foldMap intGroup (mapGroup intGroup) (fun {k} {v} -> singletonMap {k} ({v} * {c})) {})",
                    e(self, Ty::MapII)
                )
            }
            3 => {
                let (k, b) = (self.name("k"), self.name("b"));
                format!(
                    "(foldMap bagGroup (mapGroup intGroup) (fun {k} {b} -> singletonMap {k} (foldBag intGroup (fun n -> n) {b})) {})",
                    e(self, Ty::MapIB)
                )
            }
            4 => format!("(if {} then emptyMap else {})", e(self, Ty::Bool), e(self, Ty::MapII)),
            _ => self.leaf(Ty::MapII, env),
        }
    }

    fn map_ib_expr(&mut self, env: &Env, d: usize) -> String {
        let e = |g: &mut Self, t| g.expr(t, env, d);
        match self.rng.below(5) {
            0 => format!("(singletonMap {} {})", e(self, Ty::Int), e(self, Ty::Bag)),
            1 => {
                let y = self.name("y");
                let env_y = Self::with(env, &y, Ty::Int);
                let v = self.expr(Ty::Int, &env_y, d);
                format!(
                    "(foldBag (mapGroup bagGroup) (fun {y} -> singletonMap ({y} - 1) (singleton ({v}))) {})",
                    e(self, Ty::Bag)
                )
            }
            2 => {
                let (k, b) = (self.name("k"), self.name("b"));
                format!(
                    "(foldMap bagGroup (mapGroup bagGroup) (fun {k} {b} -> singletonMap {k} (mapBag (fun w -> w + {k}) {b})) {})",
                    e(self, Ty::MapIB)
                )
            }
            _ => self.leaf(Ty::MapIB, env),
        }
    }

    fn arr_expr(&mut self, env: &Env, d: usize) -> String {
        let e = |g: &mut Self, t| g.expr(t, env, d);
        match self.rng.below(6) {
            0 => format!("[{}, {}]", e(self, Ty::Int), e(self, Ty::Int)),
            1 => {
                let f = self.fun(env, d);
                format!("(map ({f}) {})", e(self, Ty::Arr))
            }
            2 => {
                let i = self.name("i");
                let body = self.expr(Ty::Int, &Self::with(env, &i, Ty::Int), d);
                format!("(build 3 (fun {i} -> {body}))")
            }
            3 => {
                let z = self.name("z");
                format!("(let {z} = {} in zipWith (fun p q -> p * q + 1) {z} {z})", e(self, Ty::Arr))
            }
            _ => self.leaf(Ty::Arr, env),
        }
    }

    /// A literal value of the type.
    fn value(&mut self, ty: Ty) -> String {
        match ty {
            Ty::Int => {
                let n = self.rng.int(-4, 5);
                if n < 0 {
                    format!("({n})")
                } else {
                    n.to_string()
                }
            }
            Ty::Real => format!("({:.1})", self.rng.int(-30, 30) as f64 / 10.0),
            Ty::Bool => self.rng.pick(&["true", "false"]).to_string(),
            Ty::Bag => self.bag_lit(),
            Ty::MapII => {
                let keys = self.keys();
                let entries: Vec<String> = keys.iter().map(|k| format!("{k} -> {}", self.value(Ty::Int))).collect();
                format!("map{{{}}}", entries.join(", "))
            }
            Ty::MapIB => {
                let keys = self.keys();
                let entries: Vec<String> = keys.iter().map(|k| format!("{k} -> {}", self.bag_lit())).collect();
                format!("map{{{}}}", entries.join(", "))
            }
            Ty::Pair => format!("({}, {})", self.value(Ty::Int), self.bag_lit()),
            Ty::Arr => {
                let n = self.rng.below(4);
                let xs: Vec<String> = (0..n).map(|_| self.value(Ty::Int)).collect();
                format!("[{}]", xs.join(", "))
            }
            Ty::Fun => {
                let (c, k) = (self.rng.int(-2, 3), self.rng.int(-3, 3));
                match self.rng.below(3) {
                    0 => format!("(fun y -> y * {c} + {k})"),
                    1 => format!("(fun y -> if y < {k} then y else {c})"),
                    _ => format!("(fun y -> {k})"),
                }
            }
        }
    }

    fn keys(&mut self) -> Vec<i64> {
        let mut ks: Vec<i64> = (0..self.rng.below(4)).map(|_| self.rng.int(0, 4)).collect();
        ks.sort();
        ks.dedup();
        ks
    }

    fn bag_lit(&mut self) -> String {
        let n = self.rng.below(4);
        let xs: Vec<String> = (0..n)
            .map(|_| {
                let x = self.rng.int(0, 4);
                let m = *self.rng.pick(&[1, 1, 2, -1, 3]);
                if m == 1 {
                    x.to_string()
                } else {
                    format!("{x} # {m}")
                }
            })
            .collect();
        format!("bag{{{}}}", xs.join(", "))
    }

    /// A change literal for a value `a` of the type: group changes (in the canonical group and in an
    /// equivalent user group), replacements, nil, and differences `b <-> a`.
    fn change(&mut self, ty: Ty, a: &str) -> String {
        let other = self.value(ty);
        match self.rng.below(8) {
            0 => return format!("nil {a}"),
            1 => return format!("{other} <-> {a}"),
            _ => {}
        }
        match ty {
            Ty::Int => match self.rng.below(3) {
                0 => format!("replace {}", self.value(Ty::Int)),
                1 => format!("gchange (group (fun p q -> p + q) (fun p -> 0 - p) 0) {}", self.value(Ty::Int)),
                _ => format!("gchange intGroup {}", self.value(Ty::Int)),
            },
            Ty::Real => match self.rng.below(2) {
                0 => format!("replace {}", self.value(Ty::Real)),
                _ => format!("gchange realGroup {}", self.value(Ty::Real)),
            },
            Ty::Bag => match self.rng.below(4) {
                0 => format!("replace {}", self.bag_lit()),
                1 => format!("gchange (group merge negate emptyBag) {}", self.bag_lit()),
                _ => format!("gchange bagGroup {}", self.bag_lit()),
            },
            Ty::MapII => match self.rng.below(3) {
                0 => format!("replace {}", self.value(Ty::MapII)),
                _ => format!("gchange (mapGroup intGroup) {}", self.value(Ty::MapII)),
            },
            Ty::MapIB => match self.rng.below(3) {
                0 => format!("replace {}", self.value(Ty::MapIB)),
                _ => format!("gchange (mapGroup bagGroup) {}", self.value(Ty::MapIB)),
            },
            Ty::Pair => {
                let d1 = self.change(Ty::Int, &format!("({a}).1"));
                let d2 = self.change(Ty::Bag, &format!("({a}).2"));
                format!("({d1}, {d2})")
            }
            Ty::Arr => format!("replace {}", self.value(Ty::Arr)),
            Ty::Bool => format!("replace {}", self.value(Ty::Bool)),
            Ty::Fun => format!("{other} <-> {a}"),
        }
    }
}
