//! The case study (ILC Sec. 4.4, docs/language.md §6): `histogram`'s derivative is self-maintainable.
//! Under a change that edits one document it never reads the base input: the derivative after
//! dead-code elimination has no free occurrence of it, and evaluating it with the input replaced by
//! a poison value (one that fails whenever it is read) gives the same change as the total
//! derivative with the real input.

use adjoint::incremental::term::free_locals_typed;
use frontend::syntax::{ExprKind, E};
use runtime::incr::{literal, Incr, Path};
use runtime::interp::Interp;
use runtime::value::Value;

fn source() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/histogram.nbl");
    std::fs::read_to_string(path).expect("examples/histogram.nbl")
}

/// Documents 0..n, each a bag of word ids.
fn documents(n: usize) -> String {
    let docs: Vec<String> =
        (0..n).map(|d| format!("{d} -> bag{{{}, {} # 2, {}}}", d % 7, (d * 3) % 11, d % 13 + 20)).collect();
    format!("map{{{}}}", docs.join(", "))
}

fn body_under(e: &E, binders: usize) -> E {
    let mut cur = e.clone();
    for _ in 0..binders {
        let ExprKind::Lam(_, b) = &cur.kind else { panic!("expected a λ") };
        cur = b.clone();
    }
    cur
}

#[test]
fn histogram_is_self_maintainable_and_never_reads_its_input() {
    frontend::with_big_stack(|| {
        let (_, mono) = runtime::prepare(&source(), "histogram").expect("checks");
        let d = adjoint::incremental::derive_definition(&mono, mono.root()).expect("derives");
        assert!(d.report.self_maintainable, "{:?}", d.report);
        assert!(d.report.reasons.is_empty());
        let [(name, input)] = &d.inputs[..] else { panic!("one input: {:?}", d.inputs) };
        assert_eq!(&**name, "input");
        // No free occurrence of the input under `λinput dinput.` after DCE ...
        let body = body_under(&d.fast, 2);
        assert!(free_locals_typed(&body).iter().all(|(_, id, _)| id != input), "reads the input");
        // ... while the total derivative does read it (it recomputes the base of each fold).
        let total_body = body_under(&d.total, 2);
        assert!(free_locals_typed(&total_body).iter().any(|(_, id, _)| id == input));

        // Evaluate both on a one-document change: the fast one with a poison input.
        let ty = match &mono.def(mono.root()).ty {
            frontend::types::Type::Fun(a, _) => (**a).clone(),
            t => panic!("histogram has type {t}"),
        };
        let (docs, _) = literal(&documents(200), &ty, 0).expect("documents");
        let change = "gchange (mapGroup bagGroup) map{17 -> bag{3 # -1, 99, 20}}";
        let (ddocs, _) = literal(change, &frontend::types::Type::delta(&ty), 0).expect("change");
        let mut it = Interp::new(&mono);
        runtime::interp::incremental::reserve_locals(&mut it, d.next_local);
        it.eval_globals().expect("globals");
        let span = frontend::Span::SYNTHETIC;
        let fast = it.eval(&d.fast, &Default::default()).expect("fast derivative");
        let total = it.eval(&d.total, &Default::default()).expect("total derivative");
        // Unit where a map is expected: any read of it is an error.
        let poison = Value::Unit;
        let dout_fast = it.apply_n(&fast, vec![poison.clone(), ddocs.clone()], span).expect("never reads the input");
        let dout_total = it.apply_n(&total, vec![docs.clone(), ddocs.clone()], span).expect("total");
        assert_eq!(dout_fast.to_string(), dout_total.to_string());
        // The poison does fail when read: the total derivative reads it.
        assert!(it.apply_n(&total, vec![poison, ddocs.clone()], span).is_err());
        // Per the theorem, the change updates the histogram to the recomputed one.
        let f = it.globals[mono.root().0 as usize].clone();
        let out = it.apply(&f, docs.clone(), span).unwrap();
        let new_docs = it.oplus(&docs, &ddocs, &ty, span).unwrap();
        let expected = it.apply(&f, new_docs, span).unwrap();
        let out_ty = match &mono.def(mono.root()).ty {
            frontend::types::Type::Fun(_, b) => (**b).clone(),
            _ => unreachable!(),
        };
        let got = it.oplus(&out, &dout_fast, &out_ty, span).unwrap();
        assert_eq!(got.to_string(), expected.to_string());
    })
}

#[test]
fn the_driver_takes_the_self_maintainable_path_for_document_edits() {
    frontend::with_big_stack(|| {
        let (_, mono) = runtime::prepare(&source(), "histogram").expect("checks");
        let ty = match &mono.def(mono.root()).ty {
            frontend::types::Type::Fun(a, _) => (**a).clone(),
            t => panic!("histogram has type {t}"),
        };
        let dty = frontend::types::Type::delta(&ty);
        let (docs, _) = literal(&documents(50), &ty, 0).expect("documents");
        let mut state = Incr::new(&mono, docs).expect("starts");
        let changes = [
            ("gchange (mapGroup bagGroup) map{3 -> bag{7}}", Path::Fast),
            ("gchange (mapGroup bagGroup) map{60 -> bag{1, 2, 2}, 4 -> bag{4 # -1}}", Path::Fast),
            // The same group as mapGroup bagGroup, made by the user: opaque, so outside the fast path.
            (
                "gchange (group (fun a b -> foldBag (mapGroup bagGroup) (fun i -> if i == 0 then a else b) bag{0, 1}) \
                 (fun a -> foldBag (mapGroup bagGroup) (fun i -> a) bag{0 # -1}) emptyMap) map{1 -> bag{5}}",
                Path::Total,
            ),
            // A whole-input replacement is recomputed (exactly f of the new input).
            ("replace map{1 -> bag{1, 1}}", Path::Total),
            ("gchange (mapGroup bagGroup) map{1 -> bag{1 # -2}}", Path::Fast),
        ];
        for (text, path) in changes {
            let (da, next) = literal(text, &dty, 0).expect("change");
            state.reserve_locals(next);
            assert_eq!(state.update(da).expect("applies"), path, "{text}");
            let expected = state.recompute().expect("recomputes");
            assert_eq!(state.output().to_string(), expected.to_string(), "after {text}");
        }
        assert_eq!(state.output().to_string(), "map{}");
    })
}
