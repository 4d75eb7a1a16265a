//! The public Rust API: compile a definition once, then call it any number of times with `f64`
//! scalars and slices, without recompiling and without re-marshalling the program's own data.
//!
//! [`Compiled::new`] type-checks the program, specialises the definition at its type, lowers and
//! JIT-compiles it, and evaluates the program's definitions once (they live as long as the
//! `Compiled`). Each call writes the arguments into preallocated buffers (arrays are copied into a
//! reused buffer, scalars go in registers), resets and reuses one call context (its arena keeps its
//! memory), and runs native code; [`Compiled::call_f64`] returns a `Real` result without building
//! any value. A caller repeating a call with the same arguments can write them once
//! ([`Compiled::bind`]) and then only run ([`Compiled::call_bound`]), reading the result with
//! [`Compiled::last_result`].
//!
//! ```
//! use runtime::api::{Arg, Compiled};
//!
//! let src = "
//! def poly (x : Real) = 3.0 * x * x - 2.0 * x + 1.0
//! def norm (xs : Array Real) = sqrt (dot xs xs)
//! def hypot (x : Real) (y : Real) = sqrt (x * x + y * y)
//! def rosenbrock (x, y) = (1.0 - x) ^ 2.0 + 100.0 * (y - x * x) ^ 2.0
//! def scale (k : Real) (xs : Array Real) = map (fun x -> k * x) xs
//! ";
//! let mut poly = Compiled::new(src, "poly").unwrap();
//! let ys: Vec<f64> = (0..4).map(|i| poly.call_f64(&[Arg::Real(i as f64)]).unwrap()).collect();
//! assert_eq!(ys, vec![1.0, 2.0, 9.0, 22.0]);
//!
//! let mut norm = Compiled::new(src, "norm").unwrap();
//! assert_eq!(norm.call_f64(&[Arg::Reals(&[3.0, 4.0])]).unwrap(), 5.0);
//!
//! // Curried parameters and tuple parameters are passed in order.
//! let mut hypot = Compiled::new(src, "hypot").unwrap();
//! assert_eq!(hypot.call_f64(&[Arg::Real(5.0), Arg::Real(12.0)]).unwrap(), 13.0);
//! let mut rosenbrock = Compiled::new(src, "rosenbrock").unwrap();
//! assert_eq!(rosenbrock.call_f64(&[Arg::Real(1.0), Arg::Real(1.0)]).unwrap(), 0.0);
//!
//! // Array results are copied into a caller's vector.
//! let mut scale = Compiled::new(src, "scale").unwrap();
//! let mut out = Vec::new();
//! scale.call_reals(&[Arg::Real(2.0), Arg::Reals(&[1.0, 2.5])], &mut out).unwrap();
//! assert_eq!(out, vec![2.0, 5.0]);
//!
//! // Arguments marshalled once and called many times (a benchmark's runs): `call_bound` only
//! // runs the code, and the result is read out of native memory after the last call.
//! norm.bind(&[Arg::Reals(&[6.0, 8.0])]).unwrap();
//! for _ in 0..3 {
//!     norm.call_bound().unwrap();
//! }
//! assert_eq!(norm.last_result().unwrap().to_string(), "10.0");
//!
//! // Errors are the language's, located in the source.
//! let mut first = Compiled::new("def first (xs : Array Real) = xs.[0]", "first").unwrap();
//! let e = first.call_f64(&[Arg::Reals(&[])]).unwrap_err();
//! assert_eq!(e.message, "index 0 out of bounds for length 0");
//! ```
//!
//! A `Compiled` is not `Send`: it owns its machine code and must stay on the thread that made it.
//!
//! [`Arg::Value`] passes any data value (arrays of arrays, of tuples, of `Int`s) to a parameter of
//! that type. [`Function`] takes whole values per parameter.
//!
//! A differentiation site the compiler does not handle yet falls back alone, as under `nabla run`:
//! compiled code calls the reference interpreter for that site (on the caller's thread) and runs
//! the rest natively; [`Compiled::note`] names such sites.

use std::rc::Rc;

use anf::ir;
use anf::lower::{self, LowerOptions};
use frontend::types::Type;
use frontend::{Diagnostic, Span};
use jit::Word;

use crate::engine::{root_span, to_value, Layout, Machine};
use crate::native::{CallCtx, DEFAULT_ARENA_LIMIT};
use crate::value::Value;

mod function;
pub use crate::driver::{GroupDelta, Incremental, StateSize, Step};
pub use function::{Backend, Function};

/// Stack compiled code may use below the caller of [`Compiled::call`]: closures nested deeper (only
/// closures that build closures at run time nest without a bound) are the error "evaluation nested
/// too deeply", never a stack overflow.
pub const STACK_BUDGET: usize = 512 << 10;

/// One argument of a call, matched in order against the definition's parameters (curried
/// parameters one after another, tuples component by component).
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Real(f64),
    Int(i64),
    Bool(bool),
    /// An `Array Real`.
    Reals(&'a [f64]),
    /// Any data value (arrays of arrays, arrays of tuples, `Array Int`, …) for a parameter leaf
    /// of that type; checked against the parameter's type before the call.
    Value(&'a Value),
}

/// What a parameter leaf accepts.
#[derive(Clone, Debug, PartialEq)]
enum Leaf {
    Real,
    Int,
    Bool,
    Reals,
    /// Any other data type: an array whose elements are not `Real` (arrays of arrays, of
    /// tuples, of `Int`s), written into reused buffers from an [`Arg::Value`].
    Data(Layout),
}

/// A definition compiled once, callable many times.
pub struct Compiled {
    name: String,
    /// The sites left to the interpreter, one line each (`None`: all native code).
    note: Option<String>,
    machine: Machine,
    /// Holds what `main` computed: the definitions' values, the closure's environment.
    _globals: Box<CallCtx>,
    closure: [Word; 2],
    /// Reset and reused by every call.
    ctx: Box<CallCtx>,
    leaves: Vec<Leaf>,
    result: Layout,
    args: Vec<Word>,
    rets: Vec<Word>,
    /// One reused `[len, elements…]` buffer per array parameter.
    arrays: Vec<Vec<u64>>,
    /// Reused `[len, elements…]` buffers for the arrays of [`Arg::Value`] arguments (one per
    /// array, inner arrays included), taken in order by each call.
    nested: Vec<Vec<u64>>,
    /// Whether `args` (and the buffers it points to) hold arguments written by [`Compiled::bind`].
    bound: bool,
    /// Whether `rets` holds the result of the last call, valid until the next bind or call.
    has_result: bool,
}

/// What compiling needs from the front end, in a form that crosses threads.
struct Prepared {
    module: ir::Module,
    main: ir::FuncId,
    apply: ir::FuncId,
    sites: Vec<(Span, Option<Layout>)>,
    root: Layout,
    leaves: Vec<Leaf>,
    result: Layout,
    span: Span,
    /// Whether the program has sites left to the interpreter.
    interpreted: bool,
}

impl Compiled {
    /// Compiles definition `name` of program `src`, a function of data parameters (`Real`,
    /// `Int`, `Bool`, `Array Real` and tuples of them, curried or not) returning data.
    pub fn new(src: &str, name: &str) -> Result<Compiled, Diagnostic> {
        Compiled::with(src, name, false)
    }

    fn with(src: &str, name: &str, gradient: bool) -> Result<Compiled, Diagnostic> {
        let prep = if gradient { prepare_gradient } else { prepare };
        let p = {
            let (src, name) = (src.to_string(), name.to_string());
            frontend::with_big_stack(move || prep(&src, &name))?
        };
        let mut machine = Machine::from_parts(&p.module, p.main, Some(p.apply), p.sites, p.root, p.span, STACK_BUDGET)
            .map_err(|e| Diagnostic::error(p.span, e))?;
        // Per-site fallback: the sites' terms are made again here (they cannot cross threads).
        if p.interpreted {
            machine.set_interpreted(interpreted_sites(src, name, gradient)?);
        }
        let note = machine.interpreted_note().map(|n| crate::engine::note_with_lines(&n, src));
        let mut globals = CallCtx::new(DEFAULT_ARENA_LIMIT);
        let closure = match machine.main_words(&mut globals)?.as_slice() {
            [tag, env] => [*tag, *env],
            _ => return Err(Diagnostic::error(p.span, "internal: the definition is not a closure")),
        };
        let n_arrays = p.leaves.iter().filter(|l| **l == Leaf::Reals).count();
        let n_args = 2 + p.leaves.len();
        let n_rets = p.result.words();
        Ok(Compiled {
            name: name.to_string(),
            note,
            machine,
            _globals: globals,
            closure,
            ctx: CallCtx::new(DEFAULT_ARENA_LIMIT),
            leaves: p.leaves,
            result: p.result,
            args: vec![Word(0); n_args],
            rets: vec![Word(0); n_rets],
            arrays: vec![Vec::new(); n_arrays],
            nested: Vec::new(),
            bound: false,
            has_result: false,
        })
    }

    /// The sites of the definition left to the reference interpreter (per-site fallback), one
    /// line each with its `line:column`, as `nabla run` notes them; `None` when all of it is
    /// native code.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Calls the definition; the result as a [`Value`] (printable as `nabla run` prints).
    pub fn call(&mut self, args: &[Arg]) -> Result<Value, Diagnostic> {
        self.run(args)?;
        // SAFETY: the result words were just made by compiled code in `self.ctx`, not reset since.
        Ok(unsafe { to_value(&self.result, &mut self.rets.iter().copied()) })
    }

    /// Calls a definition whose result is `Real`.
    pub fn call_f64(&mut self, args: &[Arg]) -> Result<f64, Diagnostic> {
        if self.result != Layout::Real {
            return Err(self.usage("its result is not a Real"));
        }
        self.run(args)?;
        Ok(self.rets[0].as_f64())
    }

    /// Calls a definition whose result is `Array Real`, writing the elements into `out`.
    pub fn call_reals(&mut self, args: &[Arg], out: &mut Vec<f64>) -> Result<(), Diagnostic> {
        if self.result != Layout::Array(Box::new(Layout::Real)) {
            return Err(self.usage("its result is not an Array Real"));
        }
        self.run(args)?;
        // SAFETY: an `Array Real` made by compiled code in `self.ctx` (or one of the inputs).
        let xs = unsafe { crate::native::read_f64_array(self.rets[0]) };
        out.clear();
        out.extend_from_slice(&xs);
        Ok(())
    }

    /// Bytes the call context's arena holds from the system (it is reused, not regrown, by
    /// later calls that need no more).
    pub fn arena_reserved(&self) -> usize {
        self.ctx.arena_reserved()
    }

    /// The most memory the call context's arenas held at once during the last call: the
    /// high-water mark of compiled code's memory (loop temporaries freed by compaction do not
    /// count twice; see ARCHITECTURE.md, "Memory model").
    pub fn arena_peak(&self) -> usize {
        self.ctx.arena_peak()
    }

    /// The most bags and maps alive at once during the last call (they live outside the arena).
    pub fn collections_peak(&self) -> usize {
        self.ctx.collections_peak()
    }

    /// Bounds the memory one call may allocate (`nabla run --max-memory`; default 4 GiB): a call
    /// that needs more fails with "out of memory allocating N bytes". The interpreter's bound is
    /// `value::meter::set_limit`.
    pub fn set_max_memory(&mut self, bytes: usize) {
        self.ctx.set_arena_limit(bytes);
    }

    /// Writes the arguments into the native buffers once, for any number of
    /// [`Compiled::call_bound`]s: a caller that calls with the same arguments many times (a
    /// benchmark's runs) pays for the marshalling once. Replaces any earlier bound arguments.
    pub fn bind(&mut self, args: &[Arg]) -> Result<(), Diagnostic> {
        self.has_result = false;
        self.bound = false;
        self.write_args(args)?;
        self.bound = true;
        Ok(())
    }

    /// Calls the definition with the arguments of the last [`Compiled::bind`] (compiled code
    /// never writes into its arguments, so every call sees the same ones); the result stays in
    /// native memory until [`Compiled::last_result`] reads it.
    pub fn call_bound(&mut self) -> Result<(), Diagnostic> {
        if !self.bound {
            return Err(self.usage("no arguments are bound"));
        }
        self.exec()
    }

    /// The result of the last successful call (of any kind), as a [`Value`]; `None` before
    /// any, after a failed call, or after a [`Compiled::bind`] (successful or not).
    pub fn last_result(&self) -> Option<Value> {
        // SAFETY: the result words were made by compiled code in `self.ctx`, not reset since,
        // and the argument buffers they may point into are unchanged since that call.
        self.has_result.then(|| unsafe { to_value(&self.result, &mut self.rets.iter().copied()) })
    }

    /// Writes the arguments and runs `@apply` in the reset call context.
    fn run(&mut self, args: &[Arg]) -> Result<(), Diagnostic> {
        self.bind(args)?;
        self.exec()
    }

    /// Writes the arguments into `args` and the reused buffers.
    fn write_args(&mut self, args: &[Arg]) -> Result<(), Diagnostic> {
        if args.len() != self.leaves.len() {
            return Err(self.usage(&format!("it takes {} arguments, given {}", self.leaves.len(), args.len())));
        }
        self.args[0] = self.closure[0];
        self.args[1] = self.closure[1];
        let mut array = 0;
        let mut nested = 0;
        for (i, (leaf, arg)) in self.leaves.iter().zip(args).enumerate() {
            self.args[2 + i] = match (leaf, arg) {
                (Leaf::Real, Arg::Real(x)) => Word::from_f64(*x),
                (Leaf::Int, Arg::Int(n)) => Word::from_i64(*n),
                (Leaf::Bool, Arg::Bool(b)) => Word::from_bool(*b),
                (Leaf::Reals, Arg::Reals(xs)) => {
                    let buf = &mut self.arrays[array];
                    array += 1;
                    buf.clear();
                    buf.push(xs.len() as u64);
                    buf.extend(xs.iter().map(|x| x.to_bits()));
                    Word::from_ptr(buf.as_ptr())
                }
                (Leaf::Real | Leaf::Int | Leaf::Bool | Leaf::Reals | Leaf::Data(_), Arg::Value(v)) => {
                    let layout = leaf.layout();
                    let mut words = Vec::with_capacity(1);
                    encode(&layout, v, &mut words, &mut self.nested, &mut nested)
                        .map_err(|why| self.usage(&format!("argument {} {why}", i + 1)))?;
                    match words.as_slice() {
                        [w] => Word(*w),
                        _ => return Err(self.usage(&format!("argument {} is not one word", i + 1))),
                    }
                }
                (leaf, arg) => {
                    return Err(self.usage(&format!("argument {} is {arg:?}, but the parameter is {leaf:?}", i + 1)))
                }
            };
        }
        Ok(())
    }

    /// Runs `@apply` on the written arguments in the reset call context.
    fn exec(&mut self) -> Result<(), Diagnostic> {
        self.has_result = false;
        self.ctx.reset();
        self.ctx.reset_peak();
        self.machine.prepare(&mut self.ctx);
        let entry = self.machine.apply_entry().ok_or_else(|| self.usage("it has no entry point"))?;
        // SAFETY: the context is live and reset; the arguments follow `ir::layout` for the
        // parameters' types (arrays point to `[len, elements…]` buffers that outlive the call).
        let r = unsafe { entry.call_into(self.ctx.header(), &self.args, &mut self.rets) };
        r.map_err(|e| self.machine.call_error(&self.ctx, e))?;
        self.has_result = true;
        Ok(())
    }

    fn usage(&self, why: &str) -> Diagnostic {
        Diagnostic::error(Span::SYNTHETIC, format!("cannot call `{}` this way: {why}", self.name))
    }
}

/// A compiled gradient: definition `f : s -> Real` (`s` made of `Real`, `Int`, `Bool`,
/// `Array Real` and tuples of them) compiled once as one forward and one reverse phase
/// (`adjoint::reverse`), then called many times. Each call takes the parameter's leaves as
/// [`Arg`]s (tuple components in order) and writes the gradient into the caller's buffer: the
/// `Real` leaves in order, an `Array Real` leaf as its elements (an `Int` or `Bool` leaf takes no
/// room: its gradient is zero). No compilation and no heap allocation per call: the call context's
/// arena is reset and reused.
///
/// ```
/// use runtime::api::{Arg, Gradient};
///
/// let src = "
/// def sq (z : Real) = z * z
/// def rosen (x : Array Real) =
///   fold (fun acc i -> acc + 100.0 * sq (x.[i + 1] - x.[i] * x.[i]) + sq (1.0 - x.[i])) 0.0
///        (build (len x - 1) (fun i -> i))
/// def scaled (k, (x : Array Real)) = k * sum (map (fun v -> v * v) x)
/// ";
/// let mut rosen = Gradient::new(src, "rosen").unwrap();
/// let x = [1.0, 1.0, 1.0];
/// let mut g = [0.0; 3];
/// let value = rosen.call(&[Arg::Reals(&x)], &mut g).unwrap();
/// assert_eq!((value, g), (0.0, [0.0, 0.0, 0.0]));
/// let value = rosen.call(&[Arg::Reals(&[0.0, 0.0])], &mut g[..2]).unwrap();
/// assert_eq!((value, &g[..2]), (1.0, &[-2.0, 0.0][..]));
///
/// // A tuple parameter: the gradient is (∂/∂k, ∂/∂x₀, ∂/∂x₁).
/// let mut scaled = Gradient::new(src, "scaled").unwrap();
/// let mut g = [0.0; 3];
/// let v = scaled.call(&[Arg::Real(2.0), Arg::Reals(&[1.0, 3.0])], &mut g).unwrap();
/// assert_eq!((v, g), (20.0, [10.0, 4.0, 12.0]));
/// ```
pub struct Gradient {
    inner: Compiled,
}

impl Gradient {
    /// Compiles the gradient of definition `name` of `src` (one parameter, result `Real`).
    pub fn new(src: &str, name: &str) -> Result<Gradient, Diagnostic> {
        let inner = Compiled::with(src, name, true)?;
        if inner.leaves.iter().any(|l| matches!(l, Leaf::Data(_))) {
            return Err(inner.usage(
                "the gradient handle takes Real, Int, Bool, Array Real and tuples of them (use `Function` for other data)",
            ));
        }
        Ok(Gradient { inner })
    }

    /// The sites left to the interpreter (per-site fallback), as [`Compiled::note`].
    pub fn note(&self) -> Option<&str> {
        self.inner.note()
    }

    /// How many `f64`s the gradient takes for these arguments.
    pub fn gradient_len(&self, args: &[Arg]) -> usize {
        args.iter()
            .map(|a| match a {
                Arg::Real(_) => 1,
                Arg::Reals(xs) => xs.len(),
                _ => 0,
            })
            .sum()
    }

    /// Evaluates `f` at `args`, writes its gradient into `grad` (which must have
    /// [`Gradient::gradient_len`] elements) and returns its value.
    pub fn call(&mut self, args: &[Arg], grad: &mut [f64]) -> Result<f64, Diagnostic> {
        let need = self.gradient_len(args);
        if grad.len() != need {
            return Err(self
                .inner
                .usage(&format!("the gradient buffer has {} elements, the gradient {need}", grad.len())));
        }
        self.inner.run(args)?;
        let c = &self.inner;
        let mut k = 0;
        for (i, leaf) in c.leaves.iter().enumerate() {
            let w = c.rets[1 + i];
            match leaf {
                Leaf::Real => {
                    grad[k] = w.as_f64();
                    k += 1;
                }
                Leaf::Reals => {
                    // SAFETY: an `Array Real` (`[len, elements…]`) made by compiled code in the
                    // call context, not reset since; its length is the argument's (the gradient
                    // of an array has its shape).
                    let p = w.as_ptr::<u64>();
                    let n = unsafe { *p } as usize;
                    let m = n.min(grad.len() - k);
                    for j in 0..m {
                        grad[k + j] = f64::from_bits(unsafe { *p.add(1 + j) });
                    }
                    k += m;
                }
                // `new` refuses other data parameters.
                Leaf::Int | Leaf::Bool | Leaf::Data(_) => {}
            }
        }
        Ok(c.rets[0].as_f64())
    }
}

/// Front end, monomorphisation and lowering, on a thread with a big stack.
fn prepare(src: &str, name: &str) -> Result<Prepared, Diagnostic> {
    let (mono, def_span) = transformed(src, name, false)?;
    prepare_mono(&mono, name, def_span)
}

/// [`prepare`] for the value-and-gradient definition of `name` (`adjoint::reverse::value_and_gradient`).
fn prepare_gradient(src: &str, name: &str) -> Result<Prepared, Diagnostic> {
    let (mono, def_span) = transformed(src, name, true)?;
    prepare_mono(&mono, name, def_span)
}

/// Definition `name` of `src` specialised and with its differentiation sites made ordinary terms
/// (`adjoint::reverse`): sites the transform does not compile become `interp'` calls of
/// `mono.interpreted`. With `gradient`, the value-and-gradient definition of `name`, which must
/// compile whole. Deterministic: the same source gives the same sites, in the same order.
fn transformed(src: &str, name: &str, gradient: bool) -> Result<(anf::mono::MonoProgram, Span), Diagnostic> {
    let program = frontend::check_source(src)?;
    let id = crate::find_def(&program, name)?;
    let def_span = program.def(id).span;
    let mono = anf::mono::monomorphise(&program, id)?;
    let not_compiled =
        |nc: adjoint::reverse::NotCompiled| Diagnostic::error(nc.span, format!("{} is not compiled yet", nc.what));
    let mono = if gradient {
        adjoint::reverse::value_and_gradient(&mono, mono.root()).map_err(not_compiled)?
    } else {
        adjoint::reverse::transform(&mono).map_err(not_compiled)?.unwrap_or(mono)
    };
    Ok((mono, def_span))
}

/// The interpreted sites of definition `name` of `src` (per-site fallback), made again on this
/// thread: [`Prepared`] crosses threads, and the sites' terms cannot.
fn interpreted_sites(src: &str, name: &str, gradient: bool) -> Result<Rc<anf::mono::Interpreted>, Diagnostic> {
    let (mono, def_span) = transformed(src, name, gradient)?;
    mono.interpreted.ok_or_else(|| Diagnostic::error(def_span, "internal: the interpreted sites were not made again"))
}

fn prepare_mono(mono: &anf::mono::MonoProgram, name: &str, def_span: Span) -> Result<Prepared, Diagnostic> {
    let interpreted = mono.interpreted.as_ref().is_some_and(|i| !i.sites.is_empty());
    // ILC's `derive`, function changes and `nil` of functions become ordinary terms.
    let expanded = adjoint::incremental::expand(mono)?;
    let mono = &expanded;
    let span = root_span(mono);
    let ty = mono.def(mono.root()).ty.clone();
    let (params, result) = split_params(&ty);
    let mut leaves = Vec::new();
    for p in &params {
        if !data_leaves(p, &mut leaves) {
            return Err(Diagnostic::error(
                def_span,
                format!("`{name}` has a parameter of type {p}; the API passes Real, Int, Bool, Array Real and tuples"),
            ));
        }
    }
    if params.is_empty() {
        return Err(Diagnostic::error(def_span, format!("`{name}` is not a function (its type is {ty})")));
    }
    if !result.is_first_order() {
        return Err(Diagnostic::error(def_span, format!("`{name}` returns {result}, which is not data")));
    }
    let options = LowerOptions { apply_arity: Some(params.len()) };
    let lowered = lower::lower(mono, &options).map_err(|e| Diagnostic::error(def_span, e.message))?;
    let apply = lowered.apply.ok_or_else(|| Diagnostic::error(def_span, "internal: no apply entry"))?;
    Ok(Prepared {
        module: lowered.module,
        main: lowered.main,
        apply,
        sites: lowered.sites.iter().map(|s| (s.span, s.key.as_ref().map(Layout::of))).collect(),
        root: Layout::of(&lowered.root_ty),
        leaves,
        result: Layout::of(&result),
        span,
        interpreted,
    })
}

/// The curried parameters of a function type and its final result.
fn split_params(t: &Type) -> (Vec<Type>, Type) {
    let mut params = Vec::new();
    let mut t = t.clone();
    while let Type::Fun(a, b) = t {
        params.push((*a).clone());
        t = (*b).clone();
    }
    (params, t)
}

/// Appends the leaves of a parameter type; false if it is not one the API passes.
fn data_leaves(t: &Type, out: &mut Vec<Leaf>) -> bool {
    match t {
        Type::Real => out.push(Leaf::Real),
        Type::Int => out.push(Leaf::Int),
        Type::Bool => out.push(Leaf::Bool),
        Type::Unit => {}
        Type::Array(e) if **e == Type::Real => out.push(Leaf::Reals),
        Type::Array(e) if is_plain_data(e) => out.push(Leaf::Data(Layout::of(t))),
        Type::Tuple(ts) => return ts.iter().all(|t| data_leaves(t, out)),
        _ => return false,
    }
    true
}

/// Real, Int, Bool, Unit, and arrays and tuples of them: what [`encode`] writes.
pub(crate) fn is_plain_data(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Array(e) => is_plain_data(e),
        Type::Tuple(ts) => ts.iter().all(is_plain_data),
        _ => false,
    }
}

impl Leaf {
    fn layout(&self) -> Layout {
        match self {
            Leaf::Real => Layout::Real,
            Leaf::Int => Layout::Int,
            Leaf::Bool => Layout::Bool,
            Leaf::Reals => Layout::Array(Box::new(Layout::Real)),
            Leaf::Data(l) => l.clone(),
        }
    }
}

/// Writes `v` as words of layout `l` (`ir::layout`) onto `out`: scalars as one word, tuples
/// component by component, arrays as a pointer to a `[len, element words…]` buffer taken from
/// `pool` at index `*next` (reused across calls; its heap block does not move once filled).
/// A value that does not have the layout is an error naming what was expected.
fn encode(l: &Layout, v: &Value, out: &mut Vec<u64>, pool: &mut Vec<Vec<u64>>, next: &mut usize) -> Result<(), String> {
    match (l, v) {
        (Layout::Real, Value::Real(x)) => out.push(x.to_bits()),
        (Layout::Int, Value::Int(n)) => out.push(*n as u64),
        (Layout::Bool, Value::Bool(b)) => out.push(Word::from_bool(*b).0),
        (Layout::Unit, Value::Unit) => {}
        (Layout::Tuple(ls), Value::Tuple(vs)) if ls.len() == vs.len() => {
            for (l, v) in ls.iter().zip(vs.iter()) {
                encode(l, v, out, pool, next)?;
            }
        }
        (Layout::Array(e), Value::Array(vs)) => {
            if vs.len() as i64 > crate::interp::MAX_ARRAY_LEN {
                return Err(format!("has {} elements, more than an array may hold", vs.len()));
            }
            let i = *next;
            *next += 1;
            if pool.len() <= i {
                pool.resize_with(i + 1, Vec::new);
            }
            let mut buf = std::mem::take(&mut pool[i]);
            buf.clear();
            buf.reserve(1 + vs.len() * e.words());
            buf.push(vs.len() as u64);
            let r = vs.iter().try_for_each(|v| encode(e, v, &mut buf, pool, next));
            out.push(buf.as_ptr() as u64);
            pool[i] = buf;
            r?;
        }
        (l, v) => return Err(format!("is {}, which is not a value of layout {l:?}", function::describe(v))),
    }
    Ok(())
}
