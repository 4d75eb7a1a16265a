//! Constant results across calls: when every `return` of a function gives the same constant at
//! some position, its callers use that constant for the call's result there (the call stays).
//!
//! Lowering applies a λ whose body is another λ (`fun (acc, c) -> fun j -> …`, what a curried
//! fold function is) by calling the outer body function, which returns a closure — a tag and an
//! environment — and then dispatching on that tag with a `switch` over every tag of the closure
//! type. When the type has one tag the dispatch is a direct call from the start; when the program
//! makes two λs of that type (a primal loop and its copy in a reverse phase), the call's tag is
//! known only once the outer function is inlined, after the inliner has counted call sites and
//! chosen. Knowing the tag before inlining folds each `switch` to the one case it takes, so each
//! inner λ keeps the single call site it really has and is inlined where it is applied (its
//! environment record is then forwarded and never made).

use rustc_hash::FxHashMap;

use crate::ir::{FuncId, Function, InstData, Module, Op, Value, ValueData, ValueDef};

use super::inline::map_operands;
use super::simplify::{simplify_function, ModuleFacts};

/// The constant operation `v` is defined by, if any.
fn constant(f: &Function, v: Value) -> Option<Op> {
    let ValueDef::Result(i, _) = f.values[v].def else { return None };
    match &f.insts[i].op {
        op @ (Op::Iconst(_) | Op::Fconst(_) | Op::Bconst(_) | Op::Null | Op::TagConst(_)) => Some(op.clone()),
        _ => None,
    }
}

/// Per result position, the constant every `return` of `f` gives there (`None` when some
/// `return` gives something else, or when `f` never returns).
fn constant_results(f: &Function) -> Vec<Option<Op>> {
    let mut out: Option<Vec<Option<Op>>> = None;
    for &b in &f.layout {
        let Some(&last) = f.blocks[b].insts.last() else { continue };
        let Op::Return(vs) = &f.insts[last].op else { continue };
        let here: Vec<Option<Op>> = vs.iter().map(|v| constant(f, *v)).collect();
        out = Some(match out {
            None => here,
            Some(prev) => prev.into_iter().zip(here).map(|(a, b)| if a == b { a } else { None }).collect(),
        });
    }
    out.unwrap_or_default()
}

/// Gives the callers of each function its constant results, callees first (`order`), so that a
/// function returning what a callee always returns has a constant result too. A function that
/// received a constant is simplified (its `switch`es on it fold); `check` runs after each change.
/// Returns whether anything changed.
pub(super) fn propagate<E>(
    module: &mut Module,
    order: &[FuncId],
    facts: &ModuleFacts,
    check: &mut dyn FnMut(&Module, &str, FuncId) -> Result<(), E>,
) -> Result<bool, E> {
    let mut known: FxHashMap<FuncId, Vec<Option<Op>>> = FxHashMap::default();
    let mut any = false;
    for &f in order {
        if substitute(&mut module.funcs[f], &known) {
            check(module, "constant results", f)?;
            simplify_function(module, f, facts);
            check(module, "simplification", f)?;
            any = true;
        }
        let results = constant_results(&module.funcs[f]);
        if results.iter().any(Option::is_some) {
            known.insert(f, results);
        }
    }
    Ok(any)
}

/// After each call of a function in `known`, defines its constant results anew and makes every
/// use of the call's result read the constant instead. True if some used result was replaced.
fn substitute(func: &mut Function, known: &FxHashMap<FuncId, Vec<Option<Op>>>) -> bool {
    if known.is_empty() {
        return false;
    }
    let mut map: FxHashMap<Value, Value> = FxHashMap::default();
    for b in func.layout.clone() {
        let mut at = 0;
        while at < func.blocks[b].insts.len() {
            let inst = func.blocks[b].insts[at];
            at += 1;
            let Op::Call(g, _) = &func.insts[inst].op else { continue };
            let Some(consts) = known.get(g) else { continue };
            let results = func.insts[inst].results.clone();
            for (r, c) in results.into_iter().zip(consts) {
                let Some(op) = c else { continue };
                let ni = func.insts.push(InstData { op: op.clone(), results: Vec::new() });
                let v = func.values.push(ValueData { ty: func.values[r].ty, def: ValueDef::Result(ni, 0) });
                func.insts[ni].results.push(v);
                func.blocks[b].insts.insert(at, ni);
                at += 1;
                map.insert(r, v);
            }
        }
    }
    if map.is_empty() {
        return false;
    }
    let mut used = false;
    let m = |v: Value| map.get(&v).copied().unwrap_or(v);
    for b in func.layout.clone() {
        for &i in &func.blocks[b].insts {
            let op = &func.insts[i].op;
            let mut reads = false;
            op.for_each_operand(|v| reads |= map.contains_key(&v));
            if reads {
                func.insts[i].op = map_operands(op, &m);
                used = true;
            }
        }
    }
    used
}
