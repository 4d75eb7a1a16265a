//! IR optimisation between lowering and the JIT: constant results of calls given to their callers
//! (a closure's tag known where it is applied, so its `switch` folds before call sites are counted:
//! `returns`), inlining of small non-recursive functions, then
//! local clean-up (copy propagation, constant folding, store-to-load forwarding through fresh
//! records, branch folding, block merging, dead code), redundancy elimination in each block
//! (repeated operations, array lengths, bounds checks and loads; overwritten stores: `cse`),
//! bounds checks that loop guards prove cannot fail (`bounds`), bag fusion (a fresh bag added once into
//! another is never built: `bags`), singleton-map fusion (a one-key map made only to be added
//! into another is never built: `maps`), unsorted iteration of bags in folds that cannot observe the
//! order (`order`), zero fills of fresh accumulators whose first loop adds to each element once
//! (`fresh`), independent inner reductions four rows at a time, each in its own order (`jam`),
//! bounds checks of a loop's counter against another array's length made one
//! comparison before the loop (`hoist`), element addresses carried by the loops that step through them (`strength`),
//! then removal of functions nothing calls.
//!
//! Cranelift does not inline, so without this pass every λ applied in a loop costs a call per
//! iteration, and closures built and applied in the same function still allocate their
//! environments. After inlining, a closure whose tag is a constant at a `switch` calls its code
//! directly, an environment record stored and read back in one function is forwarded (its
//! allocation dies), and a group record's constant kind folds the group dispatch away.
//!
//! The one entry point is [`optimize`]; its output verifies whenever its input does. Every
//! rewrite preserves what the program computes and the first error it reports: nothing that
//! can trap is reordered, and only removed when it repeats, with the same operands, one made
//! earlier in its block (which fails first); unused allocations and loads, which cannot fail in
//! verified IR, disappear.

mod bags;
mod bounds;
mod cse;
mod fresh;
mod guards;
mod hoist;
mod inline;
mod jam;
mod maps;
mod order;
mod returns;
mod scopes;
mod simplify;
mod strength;

#[cfg(test)]
mod tests;

use rustc_hash::FxHashSet;

use crate::ir::{EntityRef, FuncId, Module, Op, PrimaryMap};

pub use simplify::simplify_function;

/// How aggressively to optimise.
#[derive(Clone, Debug)]
pub struct OptOptions {
    /// Master switch: with `false`, [`optimize`] leaves the module as it is.
    pub enabled: bool,
    /// Calls of non-recursive functions of at most this many instructions are inlined.
    pub inline_size: usize,
    /// A function with one call site is inlined whatever its size (its original then dies), as
    /// long as the caller stays within this many instructions.
    pub max_size: usize,
}

impl Default for OptOptions {
    fn default() -> OptOptions {
        OptOptions { enabled: true, inline_size: 40, max_size: 2000 }
    }
}

impl OptOptions {
    /// No optimisation at all.
    pub fn none() -> OptOptions {
        OptOptions { enabled: false, ..OptOptions::default() }
    }
}

/// Where each function of the input went: `new[old]` is its id in the output, `None` if removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncMap {
    pub new: Vec<Option<FuncId>>,
}

impl FuncMap {
    /// The new id of `f` (`None` if it was removed).
    pub fn get(&self, f: FuncId) -> Option<FuncId> {
        self.new.get(f.index()).copied().flatten()
    }
}

/// Optimises `module` in place. `roots` are the entry points (kept, with everything they can
/// call); functions of closure tags are kept too. Returns where every function went.
pub fn optimize(module: &mut Module, roots: &[FuncId], options: &OptOptions) -> FuncMap {
    match run(module, roots, options, &mut |_, _, _| Ok::<(), std::convert::Infallible>(())) {
        Ok(map) => map,
        Err(never) => match never {},
    }
}

/// [`optimize`], verifying the whole module after every pass on every function (for tests): the
/// first failure names the pass and the function.
pub fn optimize_checked(module: &mut Module, roots: &[FuncId], options: &OptOptions) -> Result<FuncMap, String> {
    run(module, roots, options, &mut |m, pass, f| match crate::ir::verify(m) {
        Ok(()) => Ok(()),
        Err(es) => Err(format!("after {pass} on @{}: {}", m.funcs[f].name, es[0])),
    })
}

/// The pipeline, calling `check` after each pass with the pass's name and the function it
/// changed.
fn run<E>(
    module: &mut Module,
    roots: &[FuncId],
    options: &OptOptions,
    check: &mut dyn FnMut(&Module, &str, FuncId) -> Result<(), E>,
) -> Result<FuncMap, E> {
    if !options.enabled {
        return Ok(FuncMap { new: module.funcs.keys().map(Some).collect() });
    }
    let facts = simplify::ModuleFacts::of(module);
    let order = callees_first(module);
    // Before the inliner counts call sites: calls whose tag is known dispatch directly.
    returns::propagate(module, &order, &facts, check)?;
    let recursive = recursive_functions(module);
    let mut call_sites = vec![0usize; module.funcs.len()];
    for f in module.funcs.values() {
        for_each_call(f, |g| call_sites[g.index()] += 1);
    }
    let root_set: FxHashSet<FuncId> = roots.iter().copied().collect();
    // Which functions allocate (callees are final when their callers ask).
    let mut allocating = rustc_hash::FxHashMap::default();
    let mut deferred = Vec::new();
    // The deferred functions not optimised yet.
    let mut pending: FxHashSet<FuncId> = FxHashSet::default();
    for f in order {
        // Callees are final by now (callees first); `f` is simplified once, after inlining.
        loop {
            let size = inline::size(&module.funcs[f]);
            let pick = inline::next_site(module, f, |g| {
                if g == f || recursive[g.index()] {
                    return false;
                }
                let gs = inline::size(&module.funcs[g]);
                gs <= options.inline_size
                    || (call_sites[g.index()] == 1 && !root_set.contains(&g) && size + gs <= options.max_size)
            });
            let Some((block, index, g)) = pick else {
                // A deferred callee too big to inline as it is may fit once optimised (as it
                // would have been before its caller asked): optimise those, and ask again.
                let mut waiting = Vec::new();
                for_each_call(&module.funcs[f], |g| {
                    if pending.contains(&g) && call_sites[g.index()] == 1 {
                        waiting.push(g)
                    }
                });
                if waiting.is_empty() {
                    break;
                }
                for g in waiting {
                    pending.remove(&g);
                    local_passes(module, g, &facts, check)?;
                }
                continue;
            };
            if size > options.max_size || !inline::inline_call(module, f, block, index) {
                break;
            }
            call_sites[g.index()] = call_sites[g.index()].saturating_sub(1);
            for_each_call(&module.funcs[g], |h| call_sites[h.index()] += 1);
            check(module, "inlining", f)?;
        }
        // A function whose one call is about to inline it into its caller is optimised there,
        // once, as part of the caller; optimised here too, its body would be worked over twice
        // (the entry's root, which the apply entry inlines, is the biggest function of all).
        // Those its caller does not inline after all are optimised below.
        if call_sites[f.index()] == 1 && !root_set.contains(&f) && !recursive[f.index()] {
            deferred.push(f);
            pending.insert(f);
            continue;
        }
        local_passes(module, f, &facts, check)?;
    }
    // The deferred functions the roots still call (not inlined after all). One kept only as a
    // closure's code that no `switch` calls any more is never compiled: it stays as it is.
    let kept = reachable_functions(module, roots);
    for f in deferred {
        if kept[f.index()] && pending.contains(&f) {
            local_passes(module, f, &facts, check)?;
        }
    }
    // Last, the compaction scopes of loops that allocate nothing once optimised; the simplifier
    // then folds their constant checks and removes the copying code they guarded.
    // Only in the functions the roots call (the others are never compiled).
    let funcs: Vec<FuncId> = module.funcs.keys().filter(|f| kept[f.index()]).collect();
    for f in funcs {
        if scopes::drop_idle(module, f, &mut allocating) {
            checked_then_simplified(module, f, &facts, check, "idle compaction scopes")?;
            // A loop without its scope may count an index in step with its counter now (the
            // simplifier merges the two), which bounds the index by the loop's test.
            if bounds::eliminate(&mut module.funcs[f]) {
                checked_then_simplified(module, f, &facts, check, "bounds-check elimination")?;
            }
        }
        // Fresh accumulators written in place: a zero fill whose first reader adds to each
        // element once, at its own loop's index, is not run (before strength reduction, which
        // turns the element addresses it reads into carried pointers).
        if fresh::first_writes(&mut module.funcs[f]) {
            checked_then_simplified(module, f, &facts, check, "fresh accumulators")?;
        }
        // Independent inner reductions several rows at a time (before hoisting and strength
        // reduction, which then work on the jammed loop), and the loads the rows share merged.
        if detached(module, f, jam::jam) {
            checked_then_simplified(module, f, &facts, check, "unroll-and-jam")?;
            if cse::eliminate(&mut module.funcs[f], &facts) {
                checked_then_simplified(module, f, &facts, check, "redundancy elimination")?;
            }
        }
        // Once no other check will be eliminated: checks of a loop's counter against another
        // length become one comparison before the loop (the loop's test runs to the smaller).
        if hoist::hoist(&mut module.funcs[f]) {
            checked_then_simplified(module, f, &facts, check, "hoisted bounds checks")?;
        }
        // Last of all, once no pass will look at the loops again: element addresses carried by
        // the loops that step through them.
        if detached(module, f, strength::reduce) {
            checked_then_simplified(module, f, &facts, check, "strength reduction")?;
        }
    }
    Ok(prune(module, roots))
}

/// The clean-up and fusion passes on one function, after inlining into it: simplification,
/// redundancy elimination, decided conditions, bounds checks, bag and map fusion, unsorted
/// iteration (each followed by the simplifier when it changed something).
fn local_passes<E>(
    module: &mut Module,
    f: FuncId,
    facts: &simplify::ModuleFacts,
    check: &mut dyn FnMut(&Module, &str, FuncId) -> Result<(), E>,
) -> Result<(), E> {
    simplify::simplify_function(module, f, facts);
    check(module, "simplification", f)?;
    if cse::eliminate(&mut module.funcs[f], facts) {
        checked_then_simplified(module, f, facts, check, "redundancy elimination")?;
    }
    // Again when the simplifier removed what a decided condition guarded: a block that had
    // several predecessors may have one now, and the facts of its branch reach further.
    for _ in 0..4 {
        if !guards::fold(&mut module.funcs[f]) {
            break;
        }
        checked_then_simplified(module, f, facts, check, "decided conditions")?;
    }
    if bounds::eliminate(&mut module.funcs[f]) {
        checked_then_simplified(module, f, facts, check, "bounds-check elimination")?;
    }
    let fused = detached(module, f, bags::fuse);
    check(module, "bag fusion", f)?;
    if fused {
        simplify::simplify_function(module, f, facts);
        check(module, "simplification", f)?;
    }
    let fused = detached(module, f, maps::fuse);
    check(module, "singleton-map fusion", f)?;
    let fused = detached(module, f, maps::fuse_accumulators) | fused;
    check(module, "map-accumulator fusion", f)?;
    if fused {
        simplify::simplify_function(module, f, facts);
        check(module, "simplification", f)?;
    }
    detached(module, f, order::relax);
    check(module, "unsorted iteration", f)?;
    // The compaction scopes of loops that allocate nothing, before callers ask this function's
    // size: a small function whose loop kept an idle scope would be too big to inline.
    // (Callees are final by now, or not yet optimised, which allocate no less; the memo is this
    // function's own.)
    if scopes::drop_idle(module, f, &mut rustc_hash::FxHashMap::default()) {
        checked_then_simplified(module, f, facts, check, "idle compaction scopes")?;
        if bounds::eliminate(&mut module.funcs[f]) {
            checked_then_simplified(module, f, facts, check, "bounds-check elimination")?;
        }
    }
    Ok(())
}

/// After a pass that changed function `f`: its check, then the simplifier and its check.
fn checked_then_simplified<E>(
    module: &mut Module,
    f: FuncId,
    facts: &simplify::ModuleFacts,
    check: &mut dyn FnMut(&Module, &str, FuncId) -> Result<(), E>,
    pass: &str,
) -> Result<(), E> {
    check(module, pass, f)?;
    simplify::simplify_function(module, f, facts);
    check(module, "simplification", f)
}

/// Runs a pass on function `f` taken out of the module, so that it can read and add the module's
/// other functions while it rewrites `f`; `f` is put back afterwards.
fn detached(module: &mut Module, f: FuncId, pass: fn(&mut Module, &mut crate::ir::Function) -> bool) -> bool {
    let placeholder = crate::ir::Function::empty("", Default::default());
    let mut func = std::mem::replace(&mut module.funcs[f], placeholder);
    let changed = pass(module, &mut func);
    module.funcs[f] = func;
    changed
}

/// Calls `k` on the callee of every call in the function's layout.
fn for_each_call(f: &crate::ir::Function, mut k: impl FnMut(FuncId)) {
    for &b in &f.layout {
        for &i in &f.blocks[b].insts {
            if let Op::Call(g, _) = &f.insts[i].op {
                k(*g);
            }
        }
    }
}

/// The direct callees of every function.
fn call_graph(module: &Module) -> Vec<Vec<usize>> {
    let n = module.funcs.len();
    module
        .funcs
        .values()
        .map(|f| {
            let mut out = Vec::new();
            for_each_call(f, |g| {
                if g.index() < n {
                    out.push(g.index())
                }
            });
            out
        })
        .collect()
}

/// Strongly connected components of the call graph in reverse topological order (callees first;
/// Tarjan's algorithm emits them in that order).
fn sccs(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i < succ[v].len() {
                let w = succ[v][*i];
                *i += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    out.push(component);
                }
            }
        }
    }
    out
}

/// Every function, callees before callers (members of a cycle in some order).
fn callees_first(module: &Module) -> Vec<FuncId> {
    sccs(&call_graph(module)).into_iter().flatten().map(FuncId::new).collect()
}

/// Which functions are on a cycle of the call graph: they are never inlined.
pub fn recursive_functions(module: &Module) -> Vec<bool> {
    let succ = call_graph(module);
    let mut out = vec![false; succ.len()];
    for c in sccs(&succ) {
        let cyclic = c.len() > 1 || succ[c[0]].contains(&c[0]);
        for f in c {
            out[f] = cyclic;
        }
    }
    out
}

/// The functions reachable by calls from `roots`.
pub fn reachable_functions(module: &Module, roots: &[FuncId]) -> Vec<bool> {
    let succ = call_graph(module);
    let mut seen = vec![false; succ.len()];
    let mut work: Vec<usize> = roots.iter().map(|f| f.index()).filter(|&i| i < succ.len()).collect();
    while let Some(f) = work.pop() {
        if std::mem::replace(&mut seen[f], true) {
            continue;
        }
        work.extend(succ[f].iter().copied().filter(|&g| !seen[g]));
    }
    seen
}

/// What [`prune`] keeps: the functions reachable from the roots and from closure tags.
fn kept_functions(module: &Module, roots: &[FuncId]) -> Vec<bool> {
    let mut keep_roots: Vec<FuncId> = roots.to_vec();
    keep_roots.extend(module.tags.values().map(|t| t.func));
    reachable_functions(module, &keep_roots)
}

/// Removes the functions that neither the roots nor any closure tag can reach, renumbering the
/// rest (calls and tags follow).
fn prune(module: &mut Module, roots: &[FuncId]) -> FuncMap {
    let keep = kept_functions(module, roots);
    let mut new = vec![None; module.funcs.len()];
    let mut funcs = PrimaryMap::new();
    let mut old = std::mem::take(&mut module.funcs);
    for (id, f) in old.values_mut().enumerate() {
        if keep[id] {
            new[id] = Some(funcs.next_key());
            funcs.push(std::mem::replace(f, crate::ir::Function::empty("", Default::default())));
        }
    }
    let map = FuncMap { new };
    for f in funcs.values_mut() {
        for data in f.insts.values_mut() {
            if let Op::Call(g, _) = &mut data.op {
                // Calls from kept functions reach kept functions only; an orphaned instruction
                // outside the layout may still name a removed one and keeps its old number.
                if let Some(n) = map.get(*g) {
                    *g = n;
                }
            }
        }
    }
    for t in module.tags.values_mut() {
        if let Some(n) = map.get(t.func) {
            t.func = n;
        }
    }
    module.funcs = funcs;
    map
}
