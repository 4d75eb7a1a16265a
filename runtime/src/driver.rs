//! The native incremental driver ([`Incremental`], re-exported as `runtime::api::Incremental`):
//! `f : A -> B` and its derivative compiled once, the input and output kept current under a
//! stream of input changes (ILC Sec. 4; ARCHITECTURE.md, the `runtime` crate).
//!
//! # What is compiled
//! One module, one entry: `step x dx m` with
//! - `m = 0`: the self-maintainable derivative after dead-code elimination (`Derivative::fast`);
//! - `m = 1`: the total derivative (when the fast one traps `NeedsBase`);
//! - `m = 2`: `replace (f (x ⊕ dx))`, recomputation (a change that replaces the whole input);
//! - `m = 3`: `replace (f x)` (the first output, and recomputation after a non-finite Real).
//!
//! # State regions and the atomicity rule
//! - The *state* context holds the input and the output and is never reset. Its bags never cache
//!   entry arrays (those would be made in the scratch arena).
//! - The *scratch* context runs every call and is reset after each update: the derivative reads
//!   the state (compiled code never writes a value it did not make) and allocates only here.
//! - An update first runs the derivative in scratch. Any trap (a runtime error in the derivative,
//!   `NeedsBase` on both paths) leaves the state untouched and is reported. Only then does the
//!   commit apply `dinput` to the input and `doutput` to the output *in place*: bags gain the
//!   change's entries, maps combine the changed keys with their inner group, numbers add, and a
//!   `replace` (or a change in a user's group, which needs compiled code) copies the new value
//!   into the state. The commit cannot fail (it calls no user code), so an update is all or
//!   nothing, and costs time proportional to the change for builtin groups.
//! - Values copied into the state are deep copies: input and output never share a collection, so
//!   updating one in place never changes the other.

use adjoint::incremental::{self as ilc, term::*, Derivative};
use anf::lower::{self, LowerOptions};
use anf::mono::{MonoDef, MonoProgram};
use frontend::builtins::Builtin;
use frontend::syntax::*;
use frontend::types::Type;
use frontend::{Diagnostic, Span};
use jit::Word;
use rustc_hash::FxHashMap;

use crate::engine::{to_value, Layout, Machine};
use crate::native::{self, Bag as NBag, CallCtx, Map as NMap, DEFAULT_ARENA_LIMIT};
use crate::value::{Change, Group, Key, Value};

/// Stack compiled derivatives may use below the caller.
pub const DRIVER_STACK_BUDGET: usize = 8 << 20;

/// Which code computed an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The self-maintainable derivative (base computations eliminated).
    Fast,
    /// The total derivative (the change needed a base value the fast one does not keep).
    Total,
    /// Recomputation: the change replaced the whole input, or the output stopped being finite.
    Recomputed,
}

/// How much the driver's state holds ([`Incremental::state_size`]): what compaction bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSize {
    /// Bytes of the state arena in use (arrays, records; replaced values until compaction).
    pub arena_bytes: usize,
    /// Bags and maps the state owns (live ones, and dropped ones until compaction).
    pub collections: usize,
    /// Entries of those bags and maps in all.
    pub entries: usize,
}

/// The state is compacted once its garbage (values replaced, collections dropped from maps)
/// exceeds what is live, plus these allowances (so small states are never copied).
const COMPACT_MIN_BYTES: usize = 1 << 20;
const COMPACT_MIN_COLLECTIONS: usize = 1024;

/// Scratch tables with room for more entries than this are not reused by the next update.
const SMALL_TABLE: usize = 64;
/// At most this many emptied scratch tables are kept for the next update.
const SPARE_TABLES: usize = 256;

/// The last output change: marshalled, or the words compiled code made for it, alive in the
/// scratch context they were made in until that context runs the next call.
enum LastChange {
    None,
    Value(Value),
    /// In `scratch[ctx]`.
    Words {
        ctx: usize,
        words: Vec<Word>,
    },
}

/// A compiled incremental view of `f : A -> B` (see the module comment).
pub struct Incremental {
    machine: Machine,
    /// Holds what `@main` computed (the step closure's environment and the program's globals).
    _globals: Box<CallCtx>,
    closure: [Word; 2],
    state: Box<CallCtx>,
    /// Two scratch contexts: calls run in `scratch[work]`; the other one keeps the words of the
    /// last output change, so it is marshalled only if asked for.
    scratch: [Box<CallCtx>; 2],
    work: usize,
    input_layout: Layout,
    output_layout: Layout,
    /// Layouts of `Delta A` and `Delta B`.
    dinput_layout: Layout,
    doutput_layout: Layout,
    input_ty: Type,
    output_ty: Type,
    input: Vec<Word>,
    output: Vec<Word>,
    last_change: LastChange,
    /// What commits made unreachable in the state since the last compaction.
    garbage: Garbage,
    derivative: Derivative,
    args: Vec<Word>,
    rets: Vec<Word>,
    /// Buffers an update reuses (no allocation per update): the input change's words, a spare
    /// for the output change's, and a key's words while marshalling.
    dwords: Vec<Word>,
    spare_change: Vec<Word>,
    key_buf: Vec<u64>,
    /// Updates per kind of step: fast, total, recomputed.
    counts: [usize; 3],
    /// The records of the canonical group of each component of the input (tuples
    /// componentwise), in `_globals`, for [`GroupDelta`]s; `None` where a component has none.
    delta_groups: Vec<Option<Word>>,
    /// At least the magnitude of every bag multiplicity in the state (input and output): a
    /// change whose multiplicities are at most `i64::MAX - mult_bound` cannot overflow any.
    mult_bound: u64,
    /// This driver's number, which its [`GroupDelta`]s carry.
    id: u64,
    /// Do the input and the output hold bags?
    input_bags: bool,
    output_bags: bool,
}

/// Numbers drivers (so a [`GroupDelta`] is applied only by the driver it was built for).
static DRIVERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Incremental {
    /// Compiles the root definition of `program` (`f : A -> B`) with its derivative and starts
    /// from `input` (the output is computed by compiled code). Run on a big stack (the CLI does).
    pub fn new(program: &MonoProgram, input: &Value) -> Result<Incremental, Diagnostic> {
        let root = program.root();
        let def = program.def(root);
        let span = def.body.span;
        let Type::Fun(a, b) = &def.ty else {
            return Err(Diagnostic::error(
                span,
                format!("`incr` needs a function `{} : A -> B`, but it has type {}", def.name, def.ty),
            ));
        };
        let (input_ty, output_ty) = ((**a).clone(), (**b).clone());
        for (what, t) in [("input", &input_ty), ("output", &output_ty)] {
            if !plain_data(t) {
                let why = if matches!(t, Type::Fun(..)) {
                    format!(
                        "`{}` is curried: its {what} is a function ({t}); `incr` keeps a function of one \
                         input current — take the inputs as a tuple",
                        def.name
                    )
                } else {
                    format!("the compiled incremental driver keeps data; the {what} of `{}` has type {t}", def.name)
                };
                return Err(Diagnostic::error(span, why));
            }
        }
        let derivative = ilc::derive_definition(program, root)?;
        let step = step_program(program, &derivative, &input_ty, &output_ty)?;
        let step = ilc::expand(&step)?;
        // Differentiation sites in `f` (and in its derivative, which recomputes them) are then
        // compiled by reverse mode, as `nabla run` does.
        let step = match adjoint::reverse::transform(&step) {
            Ok(Some(t)) => t,
            Ok(None) => step,
            Err(nc) => {
                return Err(Diagnostic::error(
                    nc.span,
                    format!(
                        "the compiled incremental driver cannot compile the derivative of `{}`: {} is not compiled yet \
                         (`nabla incr --interp` runs it on the reference interpreter)",
                        def.name, nc.what
                    ),
                ))
            }
        };
        let options = LowerOptions { apply_arity: Some(3) };
        let lowered = lower::lower(&step, &options)
            .map_err(|e| Diagnostic::error(span, format!("internal compiler error: {}", e.message)))?;
        let machine = Machine::new(&lowered, span, DRIVER_STACK_BUDGET).map_err(|e| Diagnostic::error(span, e))?;
        let mut globals = CallCtx::new(DEFAULT_ARENA_LIMIT);
        let closure = match machine.main_words(&mut globals)?.as_slice() {
            [tag, env] => [*tag, *env],
            _ => return Err(Diagnostic::error(span, "internal: the step is not a closure")),
        };
        let input_layout = Layout::of(&input_ty);
        let delta_groups = components(&input_layout)
            .into_iter()
            .map(|l| canonical_group(l).and_then(|g| put_group(&mut globals, l, &g).ok()))
            .collect();
        let output_layout = Layout::of(&output_ty);
        let dlayout = Layout::of(&Type::delta(&input_ty));
        let n_args = 2 + input_layout.words() + dlayout.words() + 1;
        let n_rets = Layout::of(&Type::delta(&output_ty)).words();
        let mut state = CallCtx::new(DEFAULT_ARENA_LIMIT);
        let mut words = Vec::new();
        put(&mut state, &input_layout, input, &mut words, true, &mut Vec::new())
            .map_err(|m| Diagnostic::error(span, m))?;
        let (input_bags, output_bags) = (holds_bags(&input_layout), holds_bags(&output_layout));
        let mut d = Incremental {
            machine,
            _globals: globals,
            closure,
            state,
            scratch: [CallCtx::new(DEFAULT_ARENA_LIMIT), CallCtx::new(DEFAULT_ARENA_LIMIT)],
            work: 0,
            input_layout,
            output_layout: output_layout.clone(),
            dinput_layout: dlayout,
            doutput_layout: Layout::of(&Type::delta(&output_ty)),
            input_ty,
            output_ty,
            input: words,
            output: Vec::new(),
            last_change: LastChange::None,
            garbage: Garbage::default(),
            derivative,
            args: vec![Word(0); n_args],
            rets: vec![Word(0); n_rets],
            dwords: Vec::new(),
            spare_change: Vec::new(),
            key_buf: Vec::new(),
            counts: [0; 3],
            delta_groups,
            mult_bound: 0,
            id: DRIVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            input_bags,
            output_bags,
        };
        d.recompute_output()?;
        // SAFETY: the input's words are live in the state.
        d.mult_bound = d.mult_bound.max(unsafe { bag_bound(&d.input_layout, &d.input) });
        d.garbage = Garbage::default();
        Ok(d)
    }

    /// What the state holds now (input, output, and garbage not yet compacted).
    pub fn state_size(&self) -> StateSize {
        let (collections, entries) = self.state.collections();
        StateSize { arena_bytes: self.state.arena_used(), collections, entries }
    }

    pub fn input_type(&self) -> &Type {
        &self.input_ty
    }
    pub fn output_type(&self) -> &Type {
        &self.output_ty
    }
    /// The derivative that was compiled (what `nabla derive` prints).
    pub fn derivative(&self) -> &Derivative {
        &self.derivative
    }
    /// Updates so far by kind: fast, total, recomputed.
    pub fn counts(&self) -> [usize; 3] {
        self.counts
    }

    /// The current input (marshalled: time proportional to its size).
    pub fn input(&self) -> Value {
        // SAFETY: the input's words live in the state context, which is never reset.
        unsafe { to_value(&self.input_layout, &mut self.input.iter().copied()) }
    }

    /// The current output (marshalled: time proportional to its size).
    pub fn output(&self) -> Value {
        // SAFETY: as for `input`.
        unsafe { to_value(&self.output_layout, &mut self.output.iter().copied()) }
    }

    /// The output change of the last successful update (`None` before the first), marshalled
    /// on demand (an update does not pay for it).
    pub fn last_change(&self) -> Option<Value> {
        match &self.last_change {
            LastChange::None => None,
            LastChange::Value(v) => Some(v.clone()),
            // SAFETY: the words were made in `scratch[ctx]`, which has run no call since (calls
            // run in the other context), and refer to no state collection (`keep_change`).
            LastChange::Words { words, .. } => {
                Some(unsafe { to_value(&self.doutput_layout, &mut words.iter().copied()) })
            }
        }
    }

    /// Applies one input change: all or nothing.
    pub fn update(&mut self, dinput: &Value) -> Result<Step, Diagnostic> {
        self.update_inner(ChangeIn::Value(dinput))
    }

    /// An empty change in the canonical group of the input (tuples componentwise), to fill with
    /// [`GroupDelta::add`] and apply with [`Incremental::update_delta`]: the change is written
    /// into native collections directly, without a `Value`. An error if a component of the input
    /// has no canonical group (arrays, `Bool`, `Unit`, tuples of more than two inside maps).
    pub fn delta(&self) -> Result<GroupDelta, Diagnostic> {
        if let Some(i) = self.delta_groups.iter().position(Option::is_none) {
            let what = match &self.input_ty {
                Type::Tuple(ts) if ts.len() > 1 => format!("component {} of the input ({})", i + 1, ts[i]),
                t => format!("the input type {t}"),
            };
            return Err(Diagnostic::error(
                Span::SYNTHETIC,
                format!("{what} has no canonical group: give its changes as values (`update`)"),
            ));
        }
        Ok(GroupDelta::new(self.id, self.input_layout.clone(), &self.delta_groups))
    }

    /// Applies a change built with [`Incremental::delta`]: as [`Incremental::update`] of the
    /// same change as a value (`gchange` in the canonical group of each component), all or
    /// nothing.
    pub fn update_delta(&mut self, delta: &GroupDelta) -> Result<Step, Diagnostic> {
        if delta.driver != self.id {
            return Err(Diagnostic::error(Span::SYNTHETIC, "a change built for another driver's input type"));
        }
        self.update_inner(ChangeIn::Delta(delta))
    }

    /// Empties the working scratch context for the next call. Updates are small: the tables of
    /// a big one (a batch of documents, say) are not kept for the next.
    fn begin(&mut self) {
        self.scratch[self.work].reset_keeping_small(SMALL_TABLE, SPARE_TABLES);
    }

    /// The last change as a value (before its words could be freed or changed).
    fn materialize_change(&mut self) {
        if matches!(self.last_change, LastChange::Words { .. }) {
            self.last_change = self.last_change().map_or(LastChange::None, LastChange::Value);
        }
    }

    /// Applies changes in order, all or nothing: if one fails, the state is as before the batch
    /// (the changes before it are undone by recomputing from a copy of the old input).
    pub fn update_batch(&mut self, changes: &[Value]) -> Result<(), (usize, Diagnostic)> {
        let saved_input = self.input();
        let saved_output = self.output();
        self.materialize_change();
        let saved_change = self.last_change();
        for (i, dv) in changes.iter().enumerate() {
            if let Err(d) = self.update(dv) {
                // Restore: the saved values are copied back into the state.
                let span = d.span;
                let restore = |s: &mut Self| -> Result<(), String> {
                    // SAFETY: the current input and output are live in the state.
                    unsafe {
                        census(&s.input_layout, &s.input, &mut s.garbage);
                        census(&s.output_layout, &s.output, &mut s.garbage);
                    }
                    let mut words = Vec::new();
                    put(&mut s.state, &s.input_layout, &saved_input, &mut words, true, &mut Vec::new())?;
                    s.input = words;
                    let mut words = Vec::new();
                    put(&mut s.state, &s.output_layout, &saved_output, &mut words, true, &mut Vec::new())?;
                    s.output = words;
                    Ok(())
                };
                restore(self).map_err(|m| (i, Diagnostic::error(span, m)))?;
                self.last_change = saved_change.map_or(LastChange::None, LastChange::Value);
                return Err((i, d));
            }
        }
        Ok(())
    }

    /// `f input` computed again from scratch by compiled code (for checking).
    pub fn recompute(&mut self) -> Result<Value, Diagnostic> {
        self.begin();
        let r = self.call(3, None);
        // SAFETY: a `replace` of the output made just now in the scratch context.
        let v = r.map(|words| unsafe { replaced_value(&self.output_layout, &words) });
        // Recomputation's tables are the size of the input: updates should not reuse them.
        self.scratch[self.work].reset_and_drop_spares();
        v
    }

    fn update_inner(&mut self, dinput: ChangeIn) -> Result<Step, Diagnostic> {
        if let ChangeIn::Value(v) = dinput {
            if user_group_change(v) {
                return self.update_by_value(v);
            }
        }
        let mut dwords = std::mem::take(&mut self.dwords);
        let mut dout = std::mem::take(&mut self.spare_change);
        let r = self.update_words(dinput, &mut dwords, &mut dout);
        self.dwords = dwords;
        self.spare_change = dout;
        r
    }

    /// Puts `dinput` into the working scratch context (its words into `dwords`).
    fn put_change(&mut self, dinput: ChangeIn, dwords: &mut Vec<Word>) -> Result<(), Diagnostic> {
        dwords.clear();
        let w = self.work;
        match dinput {
            ChangeIn::Value(v) => put(&mut self.scratch[w], &self.dinput_layout, v, dwords, false, &mut self.key_buf),
            ChangeIn::Delta(d) => d.put(&mut self.scratch[w], &self.delta_groups, dwords, &mut self.key_buf),
        }
        .map_err(|m| Diagnostic::error(self.machine_span(), m))
    }

    /// [`Incremental::update`] with buffers for the change's words and the output change's (the
    /// latter given back as the spare of the previous last change).
    fn update_words(
        &mut self,
        dinput: ChangeIn,
        dwords: &mut Vec<Word>,
        dout: &mut Vec<Word>,
    ) -> Result<Step, Diagnostic> {
        let span = self.machine_span();
        self.begin();
        self.put_change(dinput, dwords)?;
        let w = self.work;
        // A change that replaces the whole input: recomputation gives exactly f's value there.
        let step = if matches!(dinput, ChangeIn::Value(v) if all_replace(v)) {
            self.call_rets(2, Some(dwords))?;
            Step::Recomputed
        } else {
            match self.call_rets(0, Some(dwords)) {
                Ok(()) => Step::Fast,
                Err(_) if self.needs_base() => {
                    // Start the total derivative afresh (the change is made again in scratch).
                    self.begin();
                    self.put_change(dinput, dwords)?;
                    self.call_rets(1, Some(dwords))?;
                    Step::Total
                }
                Err(e) => return Err(e),
            }
        };
        dout.clear();
        dout.extend_from_slice(&self.rets);
        // Bag multiplicities are checked before anything is committed (all or nothing): at once
        // when the change's are small against the state's bound, else entry by entry.
        // SAFETY: the changes were made in the scratch context, not reset since; the state is live.
        let change_bound = unsafe {
            let dout_bound = if self.output_bags { bag_bound(&self.doutput_layout, dout) } else { 0 };
            match dinput {
                ChangeIn::Delta(d) => d.abs_sum,
                _ if !self.input_bags => 0,
                _ => bag_bound(&self.dinput_layout, dwords),
            }
            .max(dout_bound)
        };
        let fits = self.mult_bound.saturating_add(change_bound) <= i64::MAX as u64
            || unsafe {
                commit_fits(&self.input_layout, &self.input, dwords)
                    && (user_group_in(&self.output_layout, dout)
                        || commit_fits(&self.output_layout, &self.output, dout))
            };
        if !fits {
            return Err(crate::value::BagOverflow.at(span));
        }
        // Every multiplicity the commit makes is an old one plus the change's (or the change's).
        self.mult_bound = self.mult_bound.saturating_add(change_bound);
        // The output change stays in this scratch context (the next call runs in the other one)
        // unless it refers to a state collection the commit is about to change: then it is
        // marshalled now.
        // SAFETY: made by compiled code in the scratch context, not reset since.
        self.last_change = if unsafe { refers_to_state(&self.doutput_layout, dout) } {
            LastChange::Value(unsafe { to_value(&self.doutput_layout, &mut dout.iter().copied()) })
        } else {
            // Into the previous last change's buffer (no allocation).
            let mut words = match std::mem::replace(&mut self.last_change, LastChange::None) {
                LastChange::Words { words, .. } => words,
                _ => Vec::new(),
            };
            words.clear();
            words.extend_from_slice(dout);
            LastChange::Words { ctx: w, words }
        };
        self.work = 1 - w;
        // Commit: cannot fail.
        let mut input = std::mem::take(&mut self.input);
        commit(&mut self.state, &self.input_layout, &mut input, &dwords, &mut self.garbage);
        self.input = input;
        let mut step = step;
        // SAFETY: `dout` was made by compiled code in the scratch context, alive until its reset.
        if unsafe { user_group_in(&self.output_layout, &dout) } {
            // Applying a change in a user's group runs user code: recompute instead.
            self.recompute_output()?;
            step = Step::Recomputed;
        } else {
            let mut output = std::mem::take(&mut self.output);
            commit(&mut self.state, &self.output_layout, &mut output, &dout, &mut self.garbage);
            self.output = output;
        }
        if step == Step::Recomputed && matches!(self.last_change, LastChange::Words { .. }) {
            // Recomputation's tables are the size of the input: updates should not reuse them.
            self.materialize_change();
            self.scratch[w].reset_and_drop_spares();
        }
        if !finite_reals(&self.output_layout, &self.output) {
            // A Real that stopped being finite is recomputed, not updated (NaN never recovers).
            self.recompute_output()?;
            self.last_change = LastChange::Value(replace_value(&self.output(), &self.output_layout));
            step = Step::Recomputed;
        }
        self.counts[step as usize] += 1;
        self.compact_if_due();
        Ok(step)
    }

    /// Copies input and output into a fresh state context once the state holds more than twice
    /// what was live after the last compaction (plus an allowance): the garbage of replaced
    /// values, of collections whose key left a map, and of emptied tables is dropped. Amortised,
    /// the cost is proportional to the garbage made.
    fn compact_if_due(&mut self) {
        let g = self.garbage;
        let live_collections = self.state.collection_count().saturating_sub(g.collections);
        let live_bytes = self.state.arena_used().saturating_sub(g.bytes);
        if g.collections > live_collections + COMPACT_MIN_COLLECTIONS || g.bytes > live_bytes + COMPACT_MIN_BYTES {
            self.compact();
        }
    }

    /// Copies input and output into a fresh state context and drops the old one (the public
    /// entry is for tests and for callers that know the state just shrank).
    pub fn compact(&mut self) {
        // The last change may refer to the old state's arrays.
        self.materialize_change();
        let mut fresh = CallCtx::new(self.state.arena_limit());
        // SAFETY: input and output are live words of their layouts in the state context.
        unsafe {
            self.input = copy_into(&mut fresh, &self.input_layout, &self.input);
            self.output = copy_into(&mut fresh, &self.output_layout, &self.output);
        }
        self.state = fresh;
        self.garbage = Garbage::default();
    }

    /// A change in a user's group (interpreter closures compiled code cannot call): the new
    /// input by the reference interpreter's `⊕`, the output recomputed by compiled code. Time
    /// proportional to the input; all or nothing like every update.
    fn update_by_value(&mut self, dinput: &Value) -> Result<Step, Diagnostic> {
        let span = Span::SYNTHETIC;
        let empty = MonoProgram::default();
        let mut it = crate::interp::Interp::new(&empty);
        let new_input = it.oplus(&self.input(), dinput, &self.input_ty, span)?;
        let mut words = Vec::new();
        put(&mut self.state, &self.input_layout, &new_input, &mut words, true, &mut Vec::new())
            .map_err(|m| Diagnostic::error(span, m))?;
        let old_input = std::mem::replace(&mut self.input, words);
        // SAFETY: the old input's words are live in the state.
        unsafe { census(&self.input_layout, &old_input, &mut self.garbage) };
        // SAFETY: the new input's words are live in the state.
        self.mult_bound = self.mult_bound.max(unsafe { bag_bound(&self.input_layout, &self.input) });
        let old_output = self.output();
        if let Err(e) = self.recompute_output() {
            self.input = old_input;
            return Err(e);
        }
        let new_output = self.output();
        let _ = old_output;
        self.last_change = LastChange::Value(replace_value(&new_output, &self.output_layout));
        self.counts[Step::Recomputed as usize] += 1;
        self.compact_if_due();
        Ok(Step::Recomputed)
    }

    /// Did the last call trap because the fast derivative needs a base value it does not keep?
    fn needs_base(&self) -> bool {
        self.scratch[self.work].failure().is_some_and(|e| e.status == anf::ir::TrapCode::NeedsBase.code())
    }

    fn machine_span(&self) -> Span {
        Span::SYNTHETIC
    }

    /// output := f input, by compiled code (mode 3), copied into the state.
    fn recompute_output(&mut self) -> Result<(), Diagnostic> {
        // The working context may hold the last change's words: keep them as a value.
        if matches!(self.last_change, LastChange::Words { ctx, .. } if ctx == self.work) {
            self.materialize_change();
        }
        self.begin();
        let r = self.call(3, None);
        if let Ok(words) = &r {
            let mut out = vec![Word(0); self.output_layout.words()];
            commit(&mut self.state, &self.output_layout, &mut out, words, &mut self.garbage);
            // SAFETY: the old output's words are live in the state.
            if !self.output.is_empty() || self.output_layout.words() == 0 {
                unsafe { census(&self.output_layout, &self.output, &mut self.garbage) };
            }
            self.output = out;
            // SAFETY: the new output's words are live in the state.
            self.mult_bound = self.mult_bound.max(unsafe { bag_bound(&self.output_layout, &self.output) });
        }
        // As in `recompute`.
        self.scratch[self.work].reset_and_drop_spares();
        r.map(|_| ())
    }

    /// Runs `step input dinput mode` in the scratch context; the result's words.
    fn call(&mut self, mode: i64, dinput: Option<&[Word]>) -> Result<Vec<Word>, Diagnostic> {
        self.call_rets(mode, dinput)?;
        Ok(self.rets.clone())
    }

    /// [`Incremental::call`] leaving the result's words in `self.rets`.
    fn call_rets(&mut self, mode: i64, dinput: Option<&[Word]>) -> Result<(), Diagnostic> {
        self.args.clear();
        self.args.extend_from_slice(&self.closure);
        self.args.extend_from_slice(&self.input);
        let dwords = self.dinput_layout.words();
        match dinput {
            Some(d) => self.args.extend_from_slice(d),
            // Modes 3 never reads the change: placeholder words.
            None => self.args.extend(std::iter::repeat_n(Word(0), dwords)),
        }
        self.args.push(Word::from_i64(mode));
        let scratch = &mut self.scratch[self.work];
        self.machine.prepare(scratch);
        let entry = self
            .machine
            .apply_entry()
            .ok_or_else(|| Diagnostic::error(Span::SYNTHETIC, "internal: the driver has no entry"))?;
        // SAFETY: the scratch context is live; the arguments follow `ir::layout` (the input's
        // words live in the state context, which outlives the call).
        let r = unsafe { entry.call_into(scratch.header(), &self.args, &mut self.rets) };
        r.map_err(|e| self.machine.call_error(scratch, e))
    }
}

/// Is `t` data the driver keeps (no functions, groups or changes)?
fn plain_data(t: &Type) -> bool {
    t.is_first_order() && t.is_ground()
}

/// Does the change hold a group of the user's (`group op inverse zero`)?
fn user_group_change(dv: &Value) -> bool {
    fn user(g: &Group) -> bool {
        match g {
            Group::Int | Group::Real | Group::Bag => false,
            Group::Map(g) => user(g),
            Group::Pair(a, b) => user(a) || user(b),
            Group::User { .. } => true,
        }
    }
    match dv {
        Value::Tuple(ds) => ds.iter().any(user_group_change),
        Value::Change(c) => matches!(&**c, Change::GChange(g, _) if user(g)),
        _ => false,
    }
}

/// `replace v`, componentwise on tuples.
fn replace_value(v: &Value, l: &Layout) -> Value {
    match (l, v) {
        (Layout::Tuple(ls), Value::Tuple(vs)) => {
            Value::tuple(ls.iter().zip(vs.iter()).map(|(l, x)| replace_value(x, l)).collect())
        }
        _ => Value::Change(std::rc::Rc::new(Change::Replace(v.clone()))),
    }
}

/// Does the change replace every part of the value (every leaf a `replace`)?
fn all_replace(dv: &Value) -> bool {
    match dv {
        Value::Tuple(ds) => ds.iter().all(all_replace),
        Value::Change(c) => matches!(&**c, Change::Replace(_)),
        _ => false,
    }
}

/// The program with the step definition as its root (module comment).
fn step_program(program: &MonoProgram, d: &Derivative, a: &Type, b: &Type) -> Result<MonoProgram, Diagnostic> {
    let span = program.def(program.root()).body.span;
    let f_id = program.root();
    let f_ty = program.def(f_id).ty.clone();
    let da = Type::delta(a);
    let db = Type::delta(b);
    let d_ty = Type::fun(a.clone(), Type::fun(da.clone(), db.clone()));
    // `fast` and `total` share binders: copy one with fresh ones.
    let mut cx = ilc::Cx::new(program, d.next_local);
    let total = copy_fresh(&d.total, &FxHashMap::default(), &mut cx);
    // The fast derivative's fold chains fused (`ilc::fuse`): no intermediate bag or map per update.
    let fast = ilc::fuse(&d.fast, &mut cx);
    let mut next = cx.next_local();
    let mut fresh = || {
        next += 1;
        LocalId(next - 1)
    };
    let mut defs = program.defs.clone();
    let fast_id = DefId(defs.len() as u32);
    defs.push(MonoDef { name: "incr.fast".into(), source: program.def(f_id).source, body: fast, ty: d_ty.clone() });
    let total_id = DefId(defs.len() as u32);
    defs.push(MonoDef { name: "incr.total".into(), source: program.def(f_id).source, body: total, ty: d_ty.clone() });
    let g =
        |id: DefId, name: &str, ty: &Type| Expr::new(ExprKind::Var(name.into(), VarRef::Global(id)), span, ty.clone());
    let (x, dx, m) = (fresh(), fresh(), fresh());
    let xv = var("x".into(), x, a.clone(), span);
    let dxv = var("dx".into(), dx, da.clone(), span);
    let mv = var("m".into(), m, Type::Int, span);
    let int = |n: i64| Expr::new(ExprKind::Lit(Lit::Int(n)), span, Type::Int);
    let is = |n: i64| Expr::new(ExprKind::Bin(BinOp::Eq, mv.clone(), int(n)), span, Type::Bool);
    let fast = app_n(g(fast_id, "incr.fast", &d_ty), [xv.clone(), dxv.clone()], span);
    let total = app_n(g(total_id, "incr.total", &d_ty), [xv.clone(), dxv.clone()], span);
    let x_new = oplus(xv.clone(), dxv.clone(), span);
    let recompute_new = replace_all(app(g(f_id, "f", &f_ty), x_new, span), b, &mut fresh, span);
    let recompute_old = replace_all(app(g(f_id, "f", &f_ty), xv.clone(), span), b, &mut fresh, span);
    let if_ = |c: E, t: E, e: E| Expr::new(ExprKind::If(c, t, e), span, db.clone());
    let body = if_(is(0), fast, if_(is(1), total, if_(is(2), recompute_new, recompute_old)));
    let step = lam(
        pat_var("x".into(), x, a.clone(), span),
        lam(pat_var("dx".into(), dx, da.clone(), span), lam(pat_var("m".into(), m, Type::Int, span), body, span), span),
        span,
    );
    let step_ty = step.ty.clone();
    defs.push(MonoDef { name: "incr.step".into(), source: program.def(f_id).source, body: step, ty: step_ty });
    let out = MonoProgram { defs, next_local: next, interpreted: program.interpreted.clone() };
    anf::mono::verify(&out).map_err(|e| Diagnostic::error(span, format!("internal: {e}")))?;
    Ok(out)
}

/// `replace e` at type `t`, componentwise on tuples.
fn replace_all(e: E, t: &Type, fresh: &mut dyn FnMut() -> LocalId, span: Span) -> E {
    match t {
        Type::Tuple(ts) => {
            let v = fresh();
            let vv = var("v".into(), v, t.clone(), span);
            let parts = ts
                .iter()
                .enumerate()
                .map(|(i, c)| replace_all(Expr::new(ExprKind::Proj(vv.clone(), i), span, c.clone()), c, fresh, span))
                .collect();
            let body = Expr::new(ExprKind::Tuple(parts), span, Type::delta(t));
            let_(pat_var("v".into(), v, t.clone(), span), e, body, span)
        }
        _ => app(builtin(Builtin::Replace, Type::fun(t.clone(), Type::delta(t)), span), e, span),
    }
}

/// Are the Reals in the output's tuple structure finite?
fn finite_reals(l: &Layout, words: &[Word]) -> bool {
    let mut i = 0;
    fn go(l: &Layout, words: &[Word], i: &mut usize) -> bool {
        match l {
            Layout::Real => {
                let ok = words.get(*i).is_none_or(|w| w.as_f64().is_finite());
                *i += 1;
                ok
            }
            Layout::Tuple(ts) => ts.iter().all(|t| go(t, words, i)),
            l => {
                *i += l.words();
                true
            }
        }
    }
    go(l, words, &mut i)
}

/// The new value of a `replace` change (componentwise on tuples) made by compiled code.
///
/// # Safety
/// `words` must be such a change, alive in its context.
unsafe fn replaced_value(l: &Layout, words: &[Word]) -> Value {
    strip_replace(to_value(&delta_layout(l), &mut words.iter().copied()))
}

fn strip_replace(v: Value) -> Value {
    match &v {
        Value::Tuple(vs) => Value::tuple(vs.iter().cloned().map(strip_replace).collect()),
        Value::Change(c) => match &**c {
            Change::Replace(x) => x.clone(),
            Change::GChange(_, x) => x.clone(),
        },
        _ => v,
    }
}

/// The layout of `Delta t` for the layout of `t` (tuples componentwise).
fn delta_layout(l: &Layout) -> Layout {
    match l {
        Layout::Tuple(ts) => Layout::Tuple(ts.iter().map(delta_layout).collect()),
        l => Layout::Delta(Box::new(l.clone())),
    }
}

// ---- Changes without values ----------------------------------------------------------------------

/// An input change given to an update: a value, or a [`GroupDelta`].
#[derive(Clone, Copy)]
enum ChangeIn<'a> {
    Value(&'a Value),
    Delta(&'a GroupDelta),
}

/// A change in the canonical group of a driver's input (`intGroup`, `realGroup`, `bagGroup`,
/// `mapGroup` and `pairGroup` of those; tuples of the input componentwise), built entry by entry
/// without a `Value` ([`Incremental::delta`]) and applied by [`Incremental::update_delta`].
///
/// An entry is a path to a number of the input and an amount added to it: the key of each map
/// on the way, the component (`Key::Int(i)`, from 0) of each tuple, and for a bag the element,
/// whose multiplicity changes. For `Map Int (Bag Int)`, `add(&[Key::Int(3), Key::Int(7)], -1)`
/// removes one 7 from the bag at 3. Each path is checked against the input type when added.
///
/// The change lives in native bags and maps of its own, written by each `add` in place (nothing
/// is built per update, and `clear` keeps their tables for the next change). They are marked
/// persistent: compiled code never caches their entry arrays, and an output change that holds
/// one is marshalled at once (as one holding the driver's state is), so nothing the driver keeps
/// refers to them after an update.
pub struct GroupDelta {
    /// The driver it was made by ([`Incremental::delta`]), whose input's layout is `layout`.
    driver: u64,
    layout: Layout,
    /// The words of each top-level component of the change (component `c` at `offsets[c]`).
    roots: Vec<u64>,
    offsets: Vec<usize>,
    store: DeltaStore,
    /// A path's words while it is added.
    path: Vec<u64>,
    /// The record `[group, collection]` of each component that is one bag or map.
    #[allow(clippy::type_complexity)]
    records: Vec<Option<Box<[u64; 2]>>>,
    /// Entries added since the last `clear`.
    entries: usize,
    /// The sum of the Int amounts' magnitudes: at least every multiplicity of the change.
    abs_sum: u64,
    /// Does a root hold numbers (which `clear` zeroes), not only collections?
    root_scalars: bool,
    /// Is the input a map of Int keys to bags of Ints (documents as bags of words)?
    int_bags: bool,
    /// For a map of Int keys to bags of Ints: the key and bag of the last `add` since `clear`
    /// (a change usually adds to one document's bag twice: one probe of the map, not two).
    last_bag: Option<(i64, *mut NBag)>,
}

impl std::fmt::Debug for GroupDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupDelta").field("layout", &self.layout).field("entries", &self.entries).finish()
    }
}

impl GroupDelta {
    fn new(driver: u64, layout: Layout, groups: &[Option<Word>]) -> GroupDelta {
        let mut offsets = Vec::new();
        let mut n = 0;
        for l in components(&layout) {
            offsets.push(n);
            n += l.words();
        }
        let mut d = GroupDelta {
            driver,
            layout,
            roots: vec![0; n],
            offsets,
            store: DeltaStore::default(),
            records: Vec::new(),
            path: Vec::new(),
            entries: 0,
            abs_sum: 0,
            root_scalars: false,
            int_bags: false,
            last_bag: None,
        };
        d.int_bags = matches!(&d.layout, Layout::Map(kl, vl)
            if **kl == Layout::Int && matches!(&**vl, Layout::Bag(e) if **e == Layout::Int));
        for (c, l) in components(&d.layout).iter().enumerate() {
            let at = d.offsets[c];
            zero_into(&mut d.store, l, &mut d.roots[at..at + l.words()]);
        }
        d.root_scalars = components(&d.layout).iter().any(|l| {
            let mut words = vec![1; l.words()];
            zero_scalars(l, &mut words);
            words.contains(&0)
        });
        // What the roots hold stays theirs: `clear` empties it in place.
        d.store.roots = (d.store.bags.len(), d.store.maps.len());
        // A component that is one bag or map has a record that never changes: made once here.
        // (Other components' records are made per update in scratch memory, as their words change
        // and the driver may keep the output change's words, which could be the record.)
        d.records = components(&d.layout)
            .iter()
            .zip(groups)
            .enumerate()
            .map(|(c, (l, g))| match (l, g) {
                (Layout::Bag(_) | Layout::Map(..), Some(g)) => Some(Box::new([g.0, d.roots[d.offsets[c]]])),
                _ => None,
            })
            .collect();
        d
    }

    /// Adds `n` to the Int (or bag multiplicity) at `path`.
    pub fn add(&mut self, path: &[Key], n: i64) -> Result<(), String> {
        match (path, self.int_bags) {
            ([Key::Int(k), Key::Int(x)], true) => self.add_to_document(*k, *x, n)?,
            _ => self.push(path, Leaf::Int, n as u64)?,
        }
        self.abs_sum = self.abs_sum.saturating_add(n.unsigned_abs());
        Ok(())
    }

    /// `add` of `n` times word `x` to the bag at `k` of a map of Int keys to bags of Ints
    /// (documents as bags of words), without the walk of `push`.
    #[inline]
    fn add_to_document(&mut self, k: i64, x: i64, n: i64) -> Result<(), String> {
        let bag = match self.last_bag {
            Some((last, bag)) if last == k => bag,
            _ => {
                // SAFETY: the root is the store's map of bags (`GroupDelta::new`).
                let map = unsafe { &mut *(self.roots[0] as *mut NMap) };
                let (slot, new) = map.slot(&[k as u64]).map_err(|e| e.to_string())?;
                if new {
                    slot[0] = self.store.fresh_bag(1) as u64;
                }
                let bag = slot[0] as *mut NBag;
                self.last_bag = Some((k, bag));
                bag
            }
        };
        // SAFETY: a bag of the store, bound at `k` in the root map since the last `clear`.
        unsafe { (*bag).insert(&[x as u64], n) }.map_err(|e| e.to_string())?;
        self.entries += 1;
        Ok(())
    }

    /// Adds `x` to the Real at `path`.
    pub fn add_real(&mut self, path: &[Key], x: f64) -> Result<(), String> {
        self.push(path, Leaf::Real, x.to_bits())
    }

    /// Removes every entry (the change becomes nil), keeping the tables for the next change.
    pub fn clear(&mut self) {
        self.store.release();
        self.last_bag = None;
        if self.root_scalars {
            for (c, l) in components(&self.layout).iter().enumerate() {
                let at = self.offsets[c];
                zero_scalars(l, &mut self.roots[at..at + l.words()]);
            }
        }
        self.entries = 0;
        self.abs_sum = 0;
    }

    /// No entries?
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    fn push(&mut self, path: &[Key], leaf: Leaf, amount: u64) -> Result<(), String> {
        if let ([Key::Int(k), Key::Int(x)], Leaf::Int, true) = (path, leaf, self.int_bags) {
            return self.add_to_document(*k, *x, amount as i64);
        }
        self.path.clear();
        path_words(&self.layout, path, leaf, &mut self.path)?;
        self.path.push(amount);
        let (c, e) = match &self.layout {
            Layout::Tuple(_) => (self.path[0] as usize, &self.path[1..]),
            _ => (0, &self.path[..]),
        };
        let l = &components(&self.layout)[c];
        let at = self.offsets[c];
        // SAFETY: `roots[at..]` holds words of `l` whose collections `store` made.
        unsafe { add_into(&mut self.store, l, &mut self.roots[at..at + l.words()], e)? };
        self.entries += 1;
        Ok(())
    }

    /// The change's words (layout `Delta` of the input): each component's record
    /// `[group, data words…]` made in `ctx`; `groups` are the canonical groups' records of the
    /// input's components; `buf` a reused buffer.
    fn put(
        &self,
        ctx: &mut CallCtx,
        groups: &[Option<Word>],
        out: &mut Vec<Word>,
        buf: &mut Vec<u64>,
    ) -> Result<(), String> {
        // The common case first: one component that is one bag or map (its record made once).
        if let [Some(r)] = &self.records[..] {
            out.push(Word::from_i64(1));
            out.push(Word::from_ptr(r.as_ptr()));
            return Ok(());
        }
        for (c, (l, g)) in components(&self.layout).iter().zip(groups).enumerate() {
            if let Some(r) = &self.records[c] {
                out.push(Word::from_i64(1));
                out.push(Word::from_ptr(r.as_ptr()));
                continue;
            }
            let at = self.offsets[c];
            buf.clear();
            buf.push(g.ok_or("internal: no canonical group")?.0);
            buf.extend_from_slice(&self.roots[at..at + l.words()]);
            out.push(Word::from_i64(1));
            out.push(ctx.record(as_words(buf)).map_err(|e| e.to_string())?);
        }
        Ok(())
    }
}

/// The bags and maps of a [`GroupDelta`]: those in use, and emptied ones kept for the next change.
#[derive(Default)]
struct DeltaStore {
    #[allow(clippy::vec_box)]
    bags: Vec<Box<NBag>>,
    #[allow(clippy::vec_box)]
    maps: Vec<Box<NMap>>,
    #[allow(clippy::vec_box)]
    spare_bags: Vec<Box<NBag>>,
    #[allow(clippy::vec_box)]
    spare_maps: Vec<Box<NMap>>,
    /// The first this many bags and maps are the change's roots (`GroupDelta::new`): emptied in
    /// place by `release`, never given up.
    roots: (usize, usize),
}

impl DeltaStore {
    /// An empty persistent bag (its pointer stays valid until [`DeltaStore::release`]).
    fn fresh_bag(&mut self, key_words: usize) -> *mut NBag {
        let mut b = self.spare_bags.pop().unwrap_or_default();
        b.recycle(key_words);
        b.set_persistent();
        let p: *mut NBag = &mut *b;
        self.bags.push(b);
        p
    }

    /// An empty persistent map (as [`DeltaStore::fresh_bag`]).
    fn fresh_map(&mut self, key_words: usize, value_words: usize) -> *mut NMap {
        let mut m = self.spare_maps.pop().unwrap_or_default();
        m.recycle(key_words, value_words);
        m.set_persistent();
        let p: *mut NMap = &mut *m;
        self.maps.push(m);
        p
    }

    /// Every bag and map is out of use: small ones are kept (emptied when used again).
    fn release(&mut self) {
        let keep = |n: usize, cap: usize| n < SPARE_TABLES && cap <= SMALL_TABLE;
        let (rb, rm) = self.roots;
        for b in &mut self.bags[..rb] {
            let kw = b.key_words();
            b.recycle(kw);
            b.set_persistent();
        }
        for m in &mut self.maps[..rm] {
            let (kw, vw) = (m.key_words(), m.value_words());
            m.recycle(kw, vw);
            m.set_persistent();
        }
        // (Popped, not drained: a change holds a few collections, and a drain costs more.)
        while let Some(b) = if self.bags.len() > rb { self.bags.pop() } else { None } {
            if keep(self.spare_bags.len(), b.capacity()) {
                self.spare_bags.push(b);
            }
        }
        while let Some(m) = if self.maps.len() > rm { self.maps.pop() } else { None } {
            if keep(self.spare_maps.len(), m.capacity()) {
                self.spare_maps.push(m);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Leaf {
    Int,
    Real,
}

/// The top-level components of a layout (a change of a tuple is a tuple of changes).
fn components(l: &Layout) -> &[Layout] {
    match l {
        Layout::Tuple(ts) => ts,
        l => std::slice::from_ref(l),
    }
}

/// The canonical group of a layout, if it has one (docs/language.md §6).
fn canonical_group(l: &Layout) -> Option<Group> {
    use std::rc::Rc;
    Some(match l {
        Layout::Int => Group::Int,
        Layout::Real => Group::Real,
        Layout::Bag(_) => Group::Bag,
        Layout::Map(_, v) => Group::Map(Rc::new(canonical_group(v)?)),
        Layout::Tuple(ts) if ts.len() == 2 => {
            Group::Pair(Rc::new(canonical_group(&ts[0])?), Rc::new(canonical_group(&ts[1])?))
        }
        _ => return None,
    })
}

/// Checks `path` against layout `l` (top-level tuples by component) and writes its words.
fn path_words(l: &Layout, path: &[Key], leaf: Leaf, out: &mut Vec<u64>) -> Result<(), String> {
    let bad = |what: &str| Err(format!("a change path does not fit the input: {what}"));
    match (l, path) {
        // The common case first: an Int key.
        (Layout::Map(kl, vl), [Key::Int(k), rest @ ..]) if **kl == Layout::Int => {
            out.push(*k as u64);
            path_words(vl, rest, leaf, out)
        }
        (Layout::Bag(e), [Key::Int(k)]) if **e == Layout::Int && leaf == Leaf::Int => {
            out.push(*k as u64);
            Ok(())
        }
        (Layout::Int, []) if leaf == Leaf::Int => Ok(()),
        (Layout::Real, []) if leaf == Leaf::Real => Ok(()),
        (Layout::Int | Layout::Real, []) => bad("the amount is of the other number type"),
        (Layout::Bag(e), [k]) if leaf == Leaf::Int => {
            put_key(e, k, out).or_else(|_| bad("an element of the wrong type"))
        }
        (Layout::Bag(_), [_]) => bad("a bag's multiplicity is an Int"),
        (Layout::Map(kl, vl), [k, rest @ ..]) => {
            put_key(kl, k, out).or_else(|_| bad("a key of the wrong type"))?;
            path_words(vl, rest, leaf, out)
        }
        (Layout::Tuple(ts), [Key::Int(i), rest @ ..]) if (*i as usize) < ts.len() && *i >= 0 => {
            out.push(*i as u64);
            path_words(&ts[*i as usize], rest, leaf, out)
        }
        (Layout::Tuple(_), _) => bad("a tuple's component is chosen by `Key::Int(i)`, from 0"),
        _ => bad("too many or too few keys, or a type without a group"),
    }
}

/// Writes the zero of layout `l` into `slot` (fresh collections in `ctx`).
fn zero_into(ctx: &mut DeltaStore, l: &Layout, slot: &mut [u64]) {
    match l {
        Layout::Bag(e) => slot[0] = ctx.fresh_bag(e.words()) as u64,
        Layout::Map(k, v) => slot[0] = ctx.fresh_map(k.words(), v.words()) as u64,
        Layout::Tuple(ts) => {
            let mut i = 0;
            for t in ts {
                let n = t.words();
                zero_into(ctx, t, &mut slot[i..i + n]);
                i += n;
            }
        }
        _ => slot.iter_mut().for_each(|w| *w = 0),
    }
}

/// Zeroes the numbers of `slot` (words of layout `l`), leaving its collections' pointers.
fn zero_scalars(l: &Layout, slot: &mut [u64]) {
    match l {
        Layout::Bag(_) | Layout::Map(..) => {}
        Layout::Tuple(ts) => {
            let mut i = 0;
            for t in ts {
                let n = t.words();
                zero_scalars(t, &mut slot[i..i + n]);
                i += n;
            }
        }
        _ => slot.iter_mut().for_each(|w| *w = 0),
    }
}

/// `slot ⊕ {entry}` in place: `e` is an entry's words below `slot`'s layout `l` (`path_words`).
///
/// # Safety
/// `slot` holds words of layout `l` whose collections `ctx` made for this change.
unsafe fn add_into(ctx: &mut DeltaStore, l: &Layout, slot: &mut [u64], e: &[u64]) -> Result<(), String> {
    match l {
        Layout::Int => slot[0] = (slot[0] as i64).wrapping_add(e[0] as i64) as u64,
        Layout::Real => slot[0] = (f64::from_bits(slot[0]) + f64::from_bits(e[0])).to_bits(),
        Layout::Bag(k) => {
            let n = k.words();
            (*(slot[0] as *mut NBag)).insert(&e[..n], e[n] as i64).map_err(|e| e.to_string())?
        }
        Layout::Map(k, v) => {
            let n = k.words();
            let (s, new) = (*(slot[0] as *mut NMap)).slot(&e[..n]).map_err(|e| e.to_string())?;
            let s: *mut [u64] = s;
            if new {
                zero_into(ctx, v, &mut *s);
            }
            add_into(ctx, v, &mut *s, &e[n..])?
        }
        Layout::Tuple(ts) => {
            let c = e[0] as usize;
            let off: usize = ts[..c].iter().map(Layout::words).sum();
            add_into(ctx, &ts[c], &mut slot[off..off + ts[c].words()], &e[1..])?
        }
        _ => return Err("internal: a change entry below a type without a group".into()),
    }
    Ok(())
}

// ---- Values into a context ---------------------------------------------------------------------

/// The words of `v` (of layout `l`) made in `ctx`; its bags and maps are marked persistent when
/// `ctx` is the state.
/// `kb` is a buffer for keys' words.
fn put(
    ctx: &mut CallCtx,
    l: &Layout,
    v: &Value,
    out: &mut Vec<Word>,
    persistent: bool,
    kb: &mut Vec<u64>,
) -> Result<(), String> {
    match (l, v) {
        (Layout::Int, Value::Int(n)) => out.push(Word::from_i64(*n)),
        (Layout::Real, Value::Real(x)) => out.push(Word::from_f64(*x)),
        (Layout::Bool, Value::Bool(b)) => out.push(Word::from_bool(*b)),
        (Layout::Unit, _) => {}
        (Layout::Tuple(ls), Value::Tuple(vs)) if ls.len() == vs.len() => {
            for (l, v) in ls.iter().zip(vs.iter()) {
                put(ctx, l, v, out, persistent, kb)?;
            }
        }
        (Layout::Array(e), Value::Array(xs)) => {
            let mut words = Vec::new();
            for x in xs.iter() {
                put(ctx, e, x, &mut words, persistent, kb)?;
            }
            let w = ctx.array_from_words(e.words().max(1), &words).map_err(|e| e.to_string())?;
            if e.words() == 0 {
                // `Array Unit`: only the length matters.
                let (p, _) = ctx.new_array_slots(xs.len(), 0).map_err(|e| e.to_string())?;
                out.push(Word::from_ptr(p));
            } else {
                out.push(w);
            }
        }
        (Layout::Bag(e), Value::Bag(b)) => {
            let p = ctx.fresh_bag(e.words());
            // SAFETY: a bag the context owns, alive until its reset; no one else holds it yet.
            let bag = unsafe { &mut *p };
            for (k, m) in &b.entries {
                kb.clear();
                put_key(e, k, kb)?;
                bag.insert(kb, *m).map_err(|e| e.to_string())?;
            }
            if persistent {
                bag.set_persistent();
            }
            out.push(Word::from_ptr(p));
        }
        (Layout::Map(kl, vl), Value::Map(m)) => {
            let p = ctx.fresh_map(kl.words(), vl.words());
            // The value's words are made at the end of `out`, then taken off again.
            let start = out.len();
            for (k, x) in &m.entries {
                put(ctx, vl, x, out, persistent, kb)?;
                kb.clear();
                put_key(kl, k, kb)?;
                // SAFETY: as for bags (`put` of the value made other collections, not this one).
                let r = unsafe { &mut *p }.set(kb, raw(&out[start..]));
                out.truncate(start);
                r.map_err(|e| e.to_string())?;
            }
            if persistent {
                // SAFETY: as above.
                unsafe { &mut *p }.set_persistent();
            }
            out.push(Word::from_ptr(p));
        }
        (Layout::Group(t), Value::Group(g)) => out.push(put_group(ctx, t, g)?),
        (Layout::Delta(t), Value::Change(c)) => match &**c {
            // The payload's words are made at the end of `out`, copied into a record, taken off.
            Change::Replace(x) => {
                let start = out.len();
                put(ctx, t, x, out, persistent, kb)?;
                let r = ctx.record(&out[start..]).map_err(|e| e.to_string());
                out.truncate(start);
                out.push(Word::from_i64(0));
                out.push(r?);
            }
            Change::GChange(g, d) => {
                let start = out.len();
                out.push(put_group(ctx, t, g)?);
                put(ctx, t, d, out, persistent, kb)?;
                let r = ctx.record(&out[start..]).map_err(|e| e.to_string());
                out.truncate(start);
                out.push(Word::from_i64(1));
                out.push(r?);
            }
        },
        (Layout::Fun, _) => return Err("the compiled driver does not take functions as data".into()),
        (l, v) => return Err(format!("internal: value {v} does not have layout {l:?}")),
    }
    Ok(())
}

/// The words of key `k` (of layout `l`: `Int`, `Bool`, `Unit` and tuples of them).
fn put_key(l: &Layout, k: &Key, out: &mut Vec<u64>) -> Result<(), String> {
    match (l, k) {
        (Layout::Int, Key::Int(n)) => out.push(*n as u64),
        (Layout::Bool, Key::Bool(b)) => out.push(Word::from_bool(*b).0),
        (Layout::Unit, _) => {}
        (Layout::Tuple(ls), Key::Tuple(ks)) if ls.len() == ks.len() => {
            for (l, k) in ls.iter().zip(ks.iter()) {
                put_key(l, k, out)?;
            }
        }
        (l, k) => return Err(format!("internal: key {} does not have layout {l:?}", k.to_value())),
    }
    Ok(())
}

fn put_group(ctx: &mut CallCtx, t: &Layout, g: &Group) -> Result<Word, String> {
    let (words, n) = match (g, t) {
        (Group::Int, _) => ([Word::from_i64(0), Word(0), Word(0)], 1),
        (Group::Real, _) => ([Word::from_i64(1), Word(0), Word(0)], 1),
        (Group::Bag, _) => ([Word::from_i64(2), Word(0), Word(0)], 1),
        (Group::Map(inner), Layout::Map(_, v)) => ([Word::from_i64(3), put_group(ctx, v, inner)?, Word(0)], 2),
        (Group::Pair(a, b), Layout::Tuple(ts)) if ts.len() == 2 => {
            ([Word::from_i64(4), put_group(ctx, &ts[0], a)?, put_group(ctx, &ts[1], b)?], 3)
        }
        (Group::User { .. }, _) => {
            return Err("a change in a user's group (`group op inverse zero`) cannot be given to the compiled \
                        driver; use `--interp`"
                .into())
        }
        _ => return Err("internal: a group of the wrong shape".into()),
    };
    ctx.record(&words[..n]).map_err(|e| e.to_string())
}

fn raw(ws: &[Word]) -> &[u64] {
    // SAFETY: `Word` is `repr(transparent)` over `u64`.
    unsafe { std::slice::from_raw_parts(ws.as_ptr() as *const u64, ws.len()) }
}

// ---- The commit ----------------------------------------------------------------------------------

/// `slot := slot ⊕ change` in the state context, in place where the group is builtin; never fails.
/// What a commit made unreachable in the state (counted, reclaimed by compaction).
#[derive(Clone, Copy, Debug, Default)]
struct Garbage {
    collections: usize,
    bytes: usize,
}

fn commit(state: &mut CallCtx, l: &Layout, slot: &mut [Word], change: &[Word], garbage: &mut Garbage) {
    // The common shapes first, without the walk: a `gchange` of one map in `mapGroup intGroup`
    // (the histogram) or `mapGroup bagGroup` (documents as bags).
    if let (Layout::Map(_, vl), [kind, payload], [target]) = (l, change, &mut *slot) {
        if kind.as_i64() == 1 {
            // SAFETY: a group change made for layout `l` (a group record, then the map), and
            // `target` the state's map.
            unsafe {
                let p = payload.as_ptr::<u64>();
                let gp = Word(*p).as_ptr::<u64>();
                if *gp == 3 {
                    let inner = *Word(*gp.add(1)).as_ptr::<u64>();
                    let (dst, src) = (&mut *target.as_ptr::<NMap>(), native::map_ref(Word(*p.add(1))));
                    match (&**vl, inner) {
                        (Layout::Int, 0) => {
                            // Same widths by typing: cannot fail.
                            let _ = dst.add_ints(src);
                            return;
                        }
                        (Layout::Bag(_), 2) => return add_bags(state, vl, dst, src, garbage),
                        _ => {}
                    }
                }
            }
        }
    }
    let mut si = 0;
    let mut ci = 0;
    commit_at(state, l, slot, &mut si, change, &mut ci, garbage);
}

fn commit_at(
    state: &mut CallCtx,
    l: &Layout,
    slot: &mut [Word],
    si: &mut usize,
    change: &[Word],
    ci: &mut usize,
    garbage: &mut Garbage,
) {
    if let Layout::Tuple(ts) = l {
        for t in ts {
            commit_at(state, t, slot, si, change, ci, garbage);
        }
        return;
    }
    let n = l.words();
    let kind = change[*ci].as_i64();
    let payload = change[*ci + 1];
    *ci += 2;
    let target = &mut slot[*si..*si + n];
    *si += n;
    // SAFETY: the change was made by compiled code (or `put`) for layout `l` and is alive.
    unsafe {
        let p = payload.as_ptr::<u64>();
        if kind == 0 {
            let copied = copy_into(state, l, as_words(std::slice::from_raw_parts(p, n)));
            // (The first output has no old value: its slot is zeroed words.)
            if target.iter().any(|w| w.0 != 0) {
                census(l, target, garbage);
            }
            target.copy_from_slice(&copied);
            return;
        }
        let g = Word(*p);
        let d = as_words(std::slice::from_raw_parts(p.add(1), n));
        group_apply(state, l, g, target, d, garbage);
    }
}

/// Raw words as `Word`s (the same representation).
fn as_words(ws: &[u64]) -> &[Word] {
    // SAFETY: `Word` is `repr(transparent)` over `u64`.
    unsafe { std::slice::from_raw_parts(ws.as_ptr() as *const Word, ws.len()) }
}

fn as_words_mut(ws: &mut [u64]) -> &mut [Word] {
    // SAFETY: as for `as_words`.
    unsafe { std::slice::from_raw_parts_mut(ws.as_mut_ptr() as *mut Word, ws.len()) }
}

/// Would `commit` keep every bag multiplicity in Int's range?
///
/// # Safety
/// As [`commit`]: live change words for layout `l`, and `slot` live words of the state.
unsafe fn commit_fits(l: &Layout, slot: &[Word], change: &[Word]) -> bool {
    fn go(l: &Layout, slot: &[Word], si: &mut usize, change: &[Word], ci: &mut usize) -> bool {
        if let Layout::Tuple(ts) = l {
            return ts.iter().all(|t| go(t, slot, si, change, ci));
        }
        let n = l.words();
        let (kind, payload) = (change[*ci].as_i64(), change[*ci + 1]);
        *ci += 2;
        let target = &slot[*si..*si + n];
        *si += n;
        if kind == 0 {
            return true;
        }
        // SAFETY: a group change made for layout `l` (the caller's contract).
        unsafe {
            let p = payload.as_ptr::<u64>();
            group_fits(l, Word(*p), target, as_words(std::slice::from_raw_parts(p.add(1), n)))
        }
    }
    /// Would `slot ·g d` keep every bag multiplicity in range?
    unsafe fn group_fits(l: &Layout, g: Word, slot: &[Word], d: &[Word]) -> bool {
        let gp = g.as_ptr::<u64>();
        match (*gp, l) {
            (2, Layout::Bag(_)) => (*slot[0].as_ptr::<NBag>()).can_add(native::bag_ref(d[0])),
            (3, Layout::Map(_, vl)) => {
                let inner = Word(*gp.add(1));
                if !holds_bags(vl) {
                    return true;
                }
                let (dst, src) = (&*slot[0].as_ptr::<NMap>(), native::map_ref(d[0]));
                src.entries().all(|(k, v)| match dst.get(k) {
                    Some(cur) => group_fits(vl, inner, as_words(cur), as_words(v)),
                    None => true,
                })
            }
            (4, Layout::Tuple(ts)) if ts.len() == 2 => {
                let n1 = ts[0].words();
                group_fits(&ts[0], Word(*gp.add(1)), &slot[..n1], &d[..n1])
                    && group_fits(&ts[1], Word(*gp.add(2)), &slot[n1..], &d[n1..])
            }
            _ => true,
        }
    }
    let (mut si, mut ci) = (0, 0);
    go(l, slot, &mut si, change, &mut ci)
}

/// `slot := slot ·g d` in place (builtin groups), or by a copy of the result.
///
/// # Safety
/// `g` a live group record and `d` live words of layout `l`.
unsafe fn group_apply(state: &mut CallCtx, l: &Layout, g: Word, slot: &mut [Word], d: &[Word], garbage: &mut Garbage) {
    let gp = g.as_ptr::<u64>();
    match (*gp, l) {
        (0, _) => slot[0] = Word::from_i64(slot[0].as_i64().wrapping_add(d[0].as_i64())),
        (1, _) => slot[0] = Word::from_f64(slot[0].as_f64() + d[0].as_f64()),
        (2, Layout::Bag(_)) => {
            let dst = &mut *slot[0].as_ptr::<NBag>();
            let src = native::bag_ref(d[0]);
            // Same key width by typing, multiplicities checked by `commit_fits`: cannot fail.
            let _ = dst.add_scaled(src, 1);
        }
        (3, Layout::Map(_, vl)) => {
            let inner = Word(*gp.add(1));
            let dst = &mut *slot[0].as_ptr::<NMap>();
            let src = native::map_ref(d[0]);
            if **vl == Layout::Int && *inner.as_ptr::<u64>() == 0 {
                // `intGroup` values: wrapping sums, a key at zero unbound, no garbage. Same
                // widths by typing: cannot fail.
                let _ = dst.add_ints(src);
                return;
            }
            if matches!(**vl, Layout::Bag(_)) && *inner.as_ptr::<u64>() == 2 {
                return add_bags(state, vl, dst, src, garbage);
            }
            // Keys in any order: each key's update is independent (builtin groups commute).
            for (k, v) in src.entries() {
                let dv = as_words(v);
                match dst.get_mut(k) {
                    Some(cur) => {
                        let cur = as_words_mut(cur);
                        group_apply(state, vl, inner, cur, dv, garbage);
                        if is_zero(vl, inner, cur) {
                            census(vl, cur, garbage);
                            dst.remove(k);
                        }
                    }
                    None => {
                        if !is_zero(vl, inner, dv) {
                            let copied = copy_into(state, vl, dv);
                            let _ = dst.set(k, raw(&copied));
                        }
                    }
                }
            }
        }
        (4, Layout::Tuple(ts)) if ts.len() == 2 => {
            let (g1, g2) = (Word(*gp.add(1)), Word(*gp.add(2)));
            let n1 = ts[0].words();
            let (a, b) = slot.split_at_mut(n1);
            group_apply(state, &ts[0], g1, a, &d[..n1], garbage);
            group_apply(state, &ts[1], g2, b, &d[n1..], garbage);
        }
        // A user's group: `update` recomputes instead (`user_group_in`), never gets here.
        _ => {}
    }
}

/// `dst ⊕ src` in `mapGroup bagGroup` (documents as bags), in place: each changed bag added in
/// place, an emptied one unbound (garbage), a new one copied in.
///
/// # Safety
/// `dst` a map of the state and `src` a live map of bags of layout `vl`.
unsafe fn add_bags(state: &mut CallCtx, vl: &Layout, dst: &mut NMap, src: &NMap, garbage: &mut Garbage) {
    // Documents keyed by one word (an Int): the table walked directly.
    if let Some(entries) = src.word_entries() {
        for (k, v) in entries {
            let add = native::bag_ref(Word(v));
            match dst.get_mut(&[k]) {
                Some(cur) => {
                    let bag = &mut *(cur[0] as *mut NBag);
                    // Same key width by typing, multiplicities checked by `commit_fits`.
                    let _ = bag.add_scaled(add, 1);
                    if bag.is_empty() {
                        garbage.collections += 1;
                        dst.remove(&[k]);
                    }
                }
                None if add.is_empty() => {}
                None => {
                    let copied = copy_into(state, vl, &[Word(v)]);
                    let _ = dst.set(&[k], raw(&copied));
                }
            }
        }
        return;
    }
    for (k, v) in src.entries() {
        let add = native::bag_ref(Word(v[0]));
        match dst.get_mut(k) {
            Some(cur) => {
                let bag = &mut *(cur[0] as *mut NBag);
                // Same key width by typing, multiplicities checked by `commit_fits`.
                let _ = bag.add_scaled(add, 1);
                if bag.is_empty() {
                    garbage.collections += 1;
                    dst.remove(k);
                }
            }
            None if add.is_empty() => {}
            None => {
                let copied = copy_into(state, vl, as_words(v));
                let _ = dst.set(k, raw(&copied));
            }
        }
    }
}

/// Does a change (words of layout `Delta l`, componentwise on tuples) refer to a bag or map of
/// the driver's state, which the commit updates in place?
///
/// # Safety
/// `change` must be live change words for that layout.
unsafe fn refers_to_state(l: &Layout, change: &[Word]) -> bool {
    // The common case first: a change of one bag, or of one map whose values hold no collections
    // (the histogram's `Map Int Int`): only that collection can be the state's.
    if let (Layout::Delta(t), [kind, payload]) = (l, change) {
        let flat = match &**t {
            Layout::Bag(_) => Some(true),
            Layout::Map(_, vl) if !holds_collections(vl) => Some(false),
            _ => None,
        };
        if let Some(bag) = flat {
            let skip = usize::from(kind.as_i64() != 0);
            let w = *payload.as_ptr::<u64>().add(skip);
            return if bag {
                native::bag_ref(Word(w)).is_persistent()
            } else {
                native::map_ref(Word(w)).is_persistent()
            };
        }
    }
    unsafe fn value(l: &Layout, ws: &[Word], i: &mut usize) -> bool {
        match l {
            Layout::Tuple(ts) => {
                let mut any = false;
                for t in ts {
                    any |= value(t, ws, i);
                }
                any
            }
            Layout::Array(e) => {
                let w = ws[*i];
                *i += 1;
                let n = e.words();
                if n == 0 || !holds_collections(e) {
                    return false;
                }
                let (len, elems) = native::read_array(w, n);
                let mut j = 0;
                (0..len).any(|_| value(e, &elems, &mut j))
            }
            Layout::Bag(_) => {
                let b = native::bag_ref(ws[*i]);
                *i += 1;
                b.is_persistent()
            }
            Layout::Map(_, vl) => {
                let m = native::map_ref(ws[*i]);
                *i += 1;
                m.is_persistent() || (holds_collections(vl) && m.entries().any(|(_, v)| value(vl, as_words(v), &mut 0)))
            }
            Layout::Delta(t) => {
                let (kind, p) = (ws[*i].as_i64(), ws[*i + 1].as_ptr::<u64>());
                *i += 2;
                let n = t.words();
                let skip = usize::from(kind != 0);
                value(t, as_words(std::slice::from_raw_parts(p.add(skip), n)), &mut 0)
            }
            l => {
                *i += l.words();
                false
            }
        }
    }
    value(l, change, &mut 0)
}

/// Adds the collections and arena bytes of a state value (words of layout `l`) to `g`.
///
/// # Safety
/// `words` must be live words of layout `l`.
unsafe fn census(l: &Layout, words: &[Word], g: &mut Garbage) {
    unsafe fn go(l: &Layout, ws: &[Word], i: &mut usize, g: &mut Garbage) {
        match l {
            Layout::Tuple(ts) => ts.iter().for_each(|t| go(t, ws, i, g)),
            Layout::Array(e) => {
                let w = ws[*i];
                *i += 1;
                let n = e.words();
                let (len, elems) = native::read_array(w, n);
                g.bytes += 8 * (1 + len * n);
                if holds_collections(e) || has_arrays(e) {
                    let mut j = 0;
                    (0..len).for_each(|_| go(e, &elems, &mut j, g));
                }
            }
            Layout::Bag(_) => {
                *i += 1;
                g.collections += 1;
            }
            Layout::Map(_, vl) => {
                let m = native::map_ref(ws[*i]);
                *i += 1;
                g.collections += 1;
                if holds_collections(vl) || has_arrays(vl) {
                    m.entries().for_each(|(_, v)| go(vl, as_words(v), &mut 0, g));
                }
            }
            l => *i += l.words(),
        }
    }
    go(l, words, &mut 0, g)
}

/// Does a value of layout `l` contain arrays?
fn has_arrays(l: &Layout) -> bool {
    match l {
        Layout::Array(_) => true,
        Layout::Tuple(ts) => ts.iter().any(has_arrays),
        Layout::Map(_, v) | Layout::Delta(v) => has_arrays(v),
        _ => false,
    }
}

/// The largest magnitude of a bag multiplicity in `words` (a value or change of layout `l`; 0
/// without bags).
///
/// # Safety
/// `words` must be live words of layout `l`.
unsafe fn bag_bound(l: &Layout, words: &[Word]) -> u64 {
    unsafe fn go(l: &Layout, ws: &[Word], i: &mut usize) -> u64 {
        match l {
            Layout::Tuple(ts) => ts.iter().map(|t| go(t, ws, i)).max().unwrap_or(0),
            Layout::Bag(_) => {
                let b = native::bag_ref(ws[*i]);
                *i += 1;
                b.entries().map(|(_, m)| m.unsigned_abs()).max().unwrap_or(0)
            }
            Layout::Map(_, vl) => {
                let w = ws[*i];
                *i += 1;
                if !holds_bags(vl) {
                    return 0;
                }
                native::map_ref(w).entries().map(|(_, v)| go(vl, as_words(v), &mut 0)).max().unwrap_or(0)
            }
            Layout::Array(e) => {
                let w = ws[*i];
                *i += 1;
                let n = e.words();
                if n == 0 || !holds_bags(e) {
                    return 0;
                }
                let (len, elems) = native::read_array(w, n);
                let mut j = 0;
                (0..len).map(|_| go(e, &elems, &mut j)).max().unwrap_or(0)
            }
            Layout::Delta(t) => {
                let (kind, p) = (ws[*i].as_i64(), ws[*i + 1].as_ptr::<u64>());
                *i += 2;
                if !holds_bags(t) {
                    return 0;
                }
                let skip = usize::from(kind != 0);
                go(t, as_words(std::slice::from_raw_parts(p.add(skip), t.words())), &mut 0)
            }
            l => {
                *i += l.words();
                0
            }
        }
    }
    go(l, words, &mut 0)
}

/// Does a value of layout `l` contain bags (whose multiplicities a commit could overflow)?
fn holds_bags(l: &Layout) -> bool {
    match l {
        Layout::Bag(_) => true,
        Layout::Tuple(ts) => ts.iter().any(holds_bags),
        Layout::Map(_, v) | Layout::Array(v) | Layout::Delta(v) => holds_bags(v),
        _ => false,
    }
}

/// Does a value of layout `l` contain bags or maps?
fn holds_collections(l: &Layout) -> bool {
    match l {
        Layout::Bag(_) | Layout::Map(..) => true,
        Layout::Tuple(ts) => ts.iter().any(holds_collections),
        Layout::Array(e) | Layout::Delta(e) => holds_collections(e),
        _ => false,
    }
}

/// Does change `change` (of a value of layout `l`) hold a `gchange` in a user's group?
///
/// # Safety
/// `change` must be live change words for layout `l`.
unsafe fn user_group_in(l: &Layout, change: &[Word]) -> bool {
    // The common case first: one change, not a tuple of them.
    if let (false, [kind, payload]) = (matches!(l, Layout::Tuple(_)), change) {
        return kind.as_i64() == 1 && group_has_user(Word(*payload.as_ptr::<u64>()), l);
    }
    fn group_has_user(mut g: Word, mut l: &Layout) -> bool {
        // SAFETY: group records made by compiled code, shaped by `l`.
        unsafe {
            loop {
                let gp = g.as_ptr::<u64>();
                match (*gp, l) {
                    (0..=2, _) => return false,
                    // (A loop, not a call, down maps' value groups: the common case.)
                    (3, Layout::Map(_, v)) => (g, l) = (Word(*gp.add(1)), v),
                    (4, Layout::Tuple(ts)) if ts.len() == 2 => {
                        return group_has_user(Word(*gp.add(1)), &ts[0]) || group_has_user(Word(*gp.add(2)), &ts[1])
                    }
                    _ => return true,
                }
            }
        }
    }
    #[inline]
    fn go(l: &Layout, change: &[Word], ci: &mut usize) -> bool {
        if let Layout::Tuple(ts) = l {
            return ts.iter().any(|t| go_tuple(t, change, ci));
        }
        let (kind, payload) = (change[*ci].as_i64(), change[*ci + 1]);
        *ci += 2;
        // SAFETY: a gchange payload starts with its group record.
        kind == 1 && group_has_user(unsafe { Word(*payload.as_ptr::<u64>()) }, l)
    }
    fn go_tuple(l: &Layout, change: &[Word], ci: &mut usize) -> bool {
        go(l, change, ci)
    }
    go(l, change, &mut 0)
}

/// Is `v` the zero of group `g` (builtin groups; as the interpreter's map operation decides)?
unsafe fn is_zero(l: &Layout, g: Word, v: &[Word]) -> bool {
    let gp = g.as_ptr::<u64>();
    match (*gp, l) {
        (0, _) => v[0].as_i64() == 0,
        (1, _) => v[0].as_f64() == 0.0,
        (2, _) => native::bag_ref(v[0]).is_empty(),
        (3, _) => native::map_ref(v[0]).is_empty(),
        (4, Layout::Tuple(ts)) if ts.len() == 2 => {
            let n1 = ts[0].words();
            is_zero(&ts[0], Word(*gp.add(1)), &v[..n1]) && is_zero(&ts[1], Word(*gp.add(2)), &v[n1..])
        }
        _ => false,
    }
}

/// A deep copy of `words` (layout `l`) into the state context: its collections are new and
/// persistent, its arrays in the state arena. Sharing is not preserved (so nothing aliases).
unsafe fn copy_into(state: &mut CallCtx, l: &Layout, words: &[Word]) -> Vec<Word> {
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    copy_at(state, l, words, &mut i, &mut out);
    out
}

unsafe fn copy_at(state: &mut CallCtx, l: &Layout, words: &[Word], i: &mut usize, out: &mut Vec<Word>) {
    match l {
        Layout::Tuple(ts) => {
            for t in ts {
                copy_at(state, t, words, i, out);
            }
        }
        Layout::Array(e) => {
            let n = e.words();
            let (len, elems) = native::read_array(words[*i], n);
            *i += 1;
            let copied =
                if n == 0 { Vec::new() } else { copy_into(state, &Layout::Tuple(vec![(**e).clone(); len]), &elems) };
            let arr = match state.new_array_slots(len, n) {
                Ok((p, slots)) => {
                    std::ptr::copy_nonoverlapping(copied.as_ptr() as *const u64, slots, copied.len());
                    Word::from_ptr(p)
                }
                Err(_) => Word::from_ptr(std::ptr::null::<u8>()),
            };
            out.push(arr);
        }
        Layout::Bag(_) => {
            let src = native::bag_ref(words[*i]);
            *i += 1;
            // Entry by entry (not a table clone): the copy's table fits its entries.
            let mut b = NBag::new(src.key_words());
            let _ = b.add_scaled(src, 1);
            b.set_persistent();
            out.push(Word::from_ptr(state.new_bag(b)));
        }
        Layout::Map(kl, vl) => {
            let src = native::map_ref(words[*i]);
            *i += 1;
            let mut m = NMap::new(kl.words(), vl.words());
            for (k, v) in src.entries() {
                let copied = copy_into(state, vl, as_words(v));
                let _ = m.set(k, raw(&copied));
            }
            m.set_persistent();
            out.push(Word::from_ptr(state.new_map(m)));
        }
        l => {
            let n = l.words();
            out.extend_from_slice(&words[*i..*i + n]);
            *i += n;
        }
    }
}
