//! The JIT: first-order SSA IR (`anf::ir`) → Cranelift IR → machine code. The only crate that
//! imports Cranelift. It takes the runtime's support functions as a table and knows nothing of
//! files, the command line or the interpreter.
//!
//! One long-lived [`Jit`] owns the `JITModule` and the reusable contexts; each [`Jit::compile`]
//! translates a verified IR module function by function and returns a [`CompiledModule`] whose
//! entry points can be called any number of times without recompiling. Every failure — an IR
//! verifier error, a support function missing from the table, a Cranelift error — comes back as a
//! [`JitError`]; nothing here panics on bad input.
//!
//! Calling convention (see `anf::ir` for the IR side): every compiled function takes the call
//! context (`*mut CtxHeader`) first; results beyond two go through a hidden out-pointer; errors
//! set `CtxHeader::status` and unwind by early returns, checked after each call that may fail.
//!
//! ```
//! use jit::{CtxHeader, Jit, JitConfig, SupportTable, Word};
//!
//! let text = "fn @square(f64) -> f64 {\nb0(v0: f64):\n    v1 = fmul v0, v0\n    return v1\n}\n";
//! let module = anf::ir::parse(text).unwrap();
//! let square = module.func_by_name("square").unwrap();
//! // This module neither allocates nor fails, so it needs no support functions.
//! let mut jit = Jit::new(JitConfig::default(), SupportTable::new()).unwrap();
//! let compiled = jit.compile(&module, &[square]).unwrap();
//! let mut ctx = CtxHeader::empty();
//! let entry = compiled.entry(square).unwrap();
//! for x in [1.0, 2.5, -3.0] {
//!     // SAFETY: `ctx` is a valid header and no pointers are passed.
//!     let r = unsafe { entry.call(&mut ctx, &[Word::from_f64(x)]) }.unwrap();
//!     assert_eq!(r[0].as_f64(), x * x);
//! }
//! ```

pub mod abi;
mod translate;
mod vector;

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use anf::ir::{self, EntityRef as _};
use cranelift_codegen::ir::types;
use cranelift_codegen::isa::CallConv;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId as ClFuncId, Linkage, Module as _, ModuleError};
use rustc_hash::FxHashMap;

pub use abi::{CtxHeader, SupportFn, SupportTable, Word, ALLOC_SYMBOL, TRAP_SYMBOL};

/// How the JIT compiles.
#[derive(Clone, Debug)]
pub struct JitConfig {
    /// Run the IR verifier before translating (the translator relies on verified IR).
    pub verify_ir: bool,
    /// Run Cranelift's own verifier on every function (costs ~25% of compile time).
    pub cranelift_verifier: bool,
}

impl Default for JitConfig {
    /// Both verifiers on in debug builds and tests; only the IR verifier in release builds.
    fn default() -> JitConfig {
        JitConfig { verify_ir: true, cranelift_verifier: cfg!(debug_assertions) }
    }
}

/// Why compilation failed.
#[derive(Clone, Debug, PartialEq)]
pub enum JitError {
    /// The host cannot run the JIT (no native ISA, not 64-bit).
    Unsupported(String),
    /// The IR does not verify.
    Verify(Vec<ir::VerifyError>),
    /// A support function the module needs is not in the table.
    MissingSupport(String),
    /// A support function's declaration does not match the table's.
    SupportMismatch { name: String, declared: String, table: String },
    /// Cranelift rejected a function.
    Codegen { func: String, message: String },
    /// Declaring, defining or finalising code failed.
    Module(String),
    /// An earlier failure left the JIT unusable.
    Poisoned,
}

impl fmt::Display for JitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JitError::Unsupported(m) => write!(f, "the JIT cannot run on this host: {m}"),
            JitError::Verify(es) => {
                write!(f, "IR does not verify:")?;
                for e in es {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
            JitError::MissingSupport(n) => write!(f, "support function `{n}` is not in the runtime's table"),
            JitError::SupportMismatch { name, declared, table } => {
                write!(f, "support function `{name}` is declared as {declared} but the runtime has {table}")
            }
            JitError::Codegen { func, message } => write!(f, "code generation failed for @{func}: {message}"),
            JitError::Module(m) => write!(f, "JIT module error: {m}"),
            JitError::Poisoned => write!(f, "the JIT is unusable after an earlier internal failure"),
        }
    }
}

impl std::error::Error for JitError {}

/// Why a call of compiled code failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The number of argument words does not match the signature.
    Arity { expected: usize, found: usize },
    /// The context's status was already set before the call.
    ContextFailed(i64),
    /// The call trapped with this status (an `anf::ir::TrapCode` number, or a runtime code);
    /// the runtime's context holds the details.
    Trapped(i64),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Arity { expected, found } => write!(f, "expected {expected} argument words, got {found}"),
            CallError::ContextFailed(s) => write!(f, "the call context already holds an error (status {s})"),
            CallError::Trapped(s) => write!(f, "the call failed (status {s})"),
        }
    }
}

impl std::error::Error for CallError {}

/// The compiler: owns the Cranelift module, the support table and the reusable contexts.
pub struct Jit {
    module: Option<JITModule>,
    ctx: Context,
    fctx: FunctionBuilderContext,
    support: SupportTable,
    config: JitConfig,
    call_conv: CallConv,
    /// Imported support functions, declared once per JIT.
    imports: FxHashMap<String, ClFuncId>,
    poisoned: bool,
    /// Held by every `CompiledModule`: code memory is freed on drop only when no handle remains.
    lease: Rc<()>,
}

/// The machine code of one IR module: an entry point per requested function.
#[derive(Clone, Debug)]
pub struct CompiledModule {
    entries: Vec<Option<Entry>>,
}

/// A callable compiled function: `extern "C" fn(ctx, args: *const Word, rets: *mut Word)`.
#[derive(Clone, Debug)]
pub struct Entry {
    name: String,
    code: *const u8,
    sig: ir::Signature,
    _lease: Rc<()>,
}

type EntryFn = unsafe extern "C" fn(*mut CtxHeader, *const Word, *mut Word);

impl CompiledModule {
    /// The entry point of `f`, if it was requested at compile time.
    pub fn entry(&self, f: ir::FuncId) -> Option<&Entry> {
        self.entries.get(f.index()).and_then(|e| e.as_ref())
    }
}

impl Entry {
    /// The function's name in the IR.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The function's IR signature.
    pub fn signature(&self) -> &ir::Signature {
        &self.sig
    }

    /// Calls the function with one word per parameter; returns one word per result.
    ///
    /// # Safety
    /// `ctx` must point to a live runtime context that starts with a [`CtxHeader`] and that the
    /// support functions of the table accept; pointer words must point to values laid out as
    /// `anf::ir::layout` says, allocated where the support functions expect them.
    pub unsafe fn call(&self, ctx: *mut CtxHeader, args: &[Word]) -> Result<Vec<Word>, CallError> {
        let mut rets = vec![Word(0); self.sig.rets.len()];
        self.call_into(ctx, args, &mut rets)?;
        Ok(rets)
    }

    /// Like [`Entry::call`], writing the results into `rets` (no allocation per call).
    ///
    /// # Safety
    /// As for [`Entry::call`].
    pub unsafe fn call_into(&self, ctx: *mut CtxHeader, args: &[Word], rets: &mut [Word]) -> Result<(), CallError> {
        if args.len() != self.sig.params.len() {
            return Err(CallError::Arity { expected: self.sig.params.len(), found: args.len() });
        }
        if rets.len() != self.sig.rets.len() {
            return Err(CallError::Arity { expected: self.sig.rets.len(), found: rets.len() });
        }
        let status = (*ctx).status;
        if status != 0 {
            return Err(CallError::ContextFailed(status));
        }
        let f: EntryFn = std::mem::transmute::<*const u8, EntryFn>(self.code);
        f(ctx, args.as_ptr(), rets.as_mut_ptr());
        match (*ctx).status {
            0 => Ok(()),
            s => Err(CallError::Trapped(s)),
        }
    }
}

/// Address space reserved per JIT module for its code and data (pages are committed only as
/// code is written; freed with the module). Under 2 GiB, so PC-relative references reach.
const CODE_REGION: usize = 1 << 30;

impl Jit {
    /// A JIT for the host with the given support functions.
    pub fn new(config: JitConfig, support: SupportTable) -> Result<Jit, JitError> {
        let mut flags = settings::builder();
        let bool_str = |b: bool| if b { "true" } else { "false" };
        let settings: [(&str, &str); 4] = [
            ("opt_level", "speed"),
            ("is_pic", "false"),
            ("use_colocated_libcalls", "false"),
            ("enable_verifier", bool_str(config.cranelift_verifier)),
        ];
        for (k, v) in settings {
            flags.set(k, v).map_err(|e| JitError::Unsupported(format!("setting {k}={v}: {e}")))?;
        }
        let isa_builder = cranelift_native::builder().map_err(|e| JitError::Unsupported(e.to_string()))?;
        let isa = isa_builder.finish(settings::Flags::new(flags)).map_err(|e| JitError::Unsupported(e.to_string()))?;
        if isa.pointer_type() != types::I64 {
            return Err(JitError::Unsupported("only 64-bit targets are supported".into()));
        }
        let call_conv = isa.default_call_conv();
        let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
        for f in support.iter() {
            builder.symbol(f.name.clone(), f.addr);
        }
        // One reserved region for all of the module's code and data: its functions call each
        // other and read their constants PC-relative (±2 GiB), which separate mappings placed
        // anywhere in the address space need not satisfy (a relocation overflow at finalisation).
        let region = cranelift_jit::ArenaMemoryProvider::new_with_size(CODE_REGION)
            .map_err(|e| JitError::Unsupported(format!("reserving {CODE_REGION} bytes for code: {e}")))?;
        builder.memory_provider(Box::new(region));
        let module = JITModule::new(builder);
        let ctx = module.make_context();
        Ok(Jit {
            module: Some(module),
            ctx,
            fctx: FunctionBuilderContext::new(),
            support,
            config,
            call_conv,
            imports: FxHashMap::default(),
            poisoned: false,
            lease: Rc::new(()),
        })
    }

    /// Compiles `m` and makes entry points for the functions in `entries`.
    pub fn compile(&mut self, m: &ir::Module, entries: &[ir::FuncId]) -> Result<CompiledModule, JitError> {
        if self.poisoned || self.module.is_none() {
            return Err(JitError::Poisoned);
        }
        if self.config.verify_ir {
            ir::verify(m).map_err(JitError::Verify)?;
        }
        for &f in entries {
            if !m.funcs.is_valid(f) {
                return Err(JitError::Module(format!("entry {f} is not a function of the module")));
            }
        }
        let needs = Needs::of(m);
        self.check_support(m, &needs)?;
        let result = catch_unwind(AssertUnwindSafe(|| self.compile_checked(m, entries, &needs)));
        match result {
            Ok(Ok(compiled)) => Ok(compiled),
            Ok(Err(e)) => Err(e),
            Err(panic) => {
                self.poisoned = true;
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                Err(JitError::Module(format!("internal error in code generation: {msg}")))
            }
        }
    }

    /// The machine code Cranelift makes for function `f` of `m`, as a listing (for tests and
    /// debugging; nothing is defined in the JIT).
    pub fn disassemble(&mut self, m: &ir::Module, f: ir::FuncId) -> Result<String, JitError> {
        if self.poisoned || self.module.is_none() {
            return Err(JitError::Poisoned);
        }
        ir::verify(m).map_err(JitError::Verify)?;
        let irf = m.funcs.get(f).ok_or_else(|| JitError::Module(format!("{f} is not a function of the module")))?;
        let needs = Needs::of(m);
        self.check_support(m, &needs)?;
        let externs: Vec<ClFuncId> =
            m.externs.values().map(|e| self.import(&e.name, &e.sig)).collect::<Result<_, _>>()?;
        let trap_fn = if needs.trap { Some(self.import(TRAP_SYMBOL, &abi::trap_signature())?) } else { None };
        let alloc_fn = if needs.alloc { Some(self.import(ALLOC_SYMBOL, &abi::alloc_signature())?) } else { None };
        let cold = self.cold_trampolines(m, &needs, externs.as_slice(), alloc_fn, false)?;
        let call_conv = self.call_conv;
        let module = self.module.as_mut().ok_or(JitError::Poisoned)?;
        // Callees are declared (never defined) so calls have something to refer to.
        let funcs: Vec<Option<ClFuncId>> = m
            .funcs
            .values()
            .map(|g| {
                let sig = translate::cl_signature(&g.sig, call_conv);
                module.declare_anonymous_function(&sig).map(Some).map_err(module_error)
            })
            .collect::<Result<_, _>>()?;
        let recursive = recursive(m);
        let may_fail = may_fail(m, &recursive);
        let env = translate::ModuleEnv {
            ir: m,
            funcs: &funcs,
            externs: &externs,
            trap_fn,
            alloc_fn,
            may_fail: &may_fail,
            recursive: &recursive,
            cold: &cold,
        };
        module.clear_context(&mut self.ctx);
        self.ctx.func.signature = translate::cl_signature(&irf.sig, call_conv);
        let codegen = |message: String| JitError::Codegen { func: irf.name.clone(), message };
        if let Err(e) = translate::translate_function(module, &env, irf, &mut self.ctx.func, &mut self.fctx) {
            self.fctx = FunctionBuilderContext::new();
            module.clear_context(&mut self.ctx);
            return Err(codegen(e));
        }
        self.ctx.set_disasm(true);
        let mut ctrl = cranelift_codegen::control::ControlPlane::default();
        let listing = match self.ctx.compile(module.isa(), &mut ctrl) {
            Ok(code) => Ok(code.vcode.clone().unwrap_or_default()),
            Err(e) => Err(codegen(format!("{:?}", e.inner))),
        };
        self.ctx.set_disasm(false);
        module.clear_context(&mut self.ctx);
        listing
    }

    /// Every extern and needed intrinsic is in the table with the declared signature.
    fn check_support(&self, m: &ir::Module, needs: &Needs) -> Result<(), JitError> {
        let mut wanted: Vec<(String, ir::Signature, bool)> =
            m.externs.values().map(|e| (e.name.clone(), e.sig.clone(), e.fallible)).collect();
        if needs.trap {
            wanted.push((TRAP_SYMBOL.into(), abi::trap_signature(), false));
        }
        if needs.alloc {
            wanted.push((ALLOC_SYMBOL.into(), abi::alloc_signature(), true));
        }
        for (name, sig, fallible) in wanted {
            let Some(f) = self.support.get(&name) else { return Err(JitError::MissingSupport(name)) };
            if f.sig != sig || f.fallible != fallible {
                let describe = |s: &ir::Signature, fl: bool| {
                    format!("{}{}", if fl { "fallible " } else { "" }, ir::print::sig_text(s))
                };
                return Err(JitError::SupportMismatch {
                    name,
                    declared: describe(&sig, fallible),
                    table: describe(&f.sig, f.fallible),
                });
            }
        }
        Ok(())
    }

    /// The register-preserving trampolines (`abi::COLD_SYMBOLS`) of the support functions `m`
    /// uses, declared in this module and, with `define`, defined (`translate::translate_cold_trampoline`).
    fn cold_trampolines(
        &mut self,
        m: &ir::Module,
        needs: &Needs,
        externs: &[ClFuncId],
        alloc_fn: Option<ClFuncId>,
        define: bool,
    ) -> Result<FxHashMap<String, ClFuncId>, JitError> {
        let mut wanted: Vec<(&str, ClFuncId, ir::Signature)> = Vec::new();
        for (e, &id) in m.externs.values().zip(externs) {
            if abi::COLD_SYMBOLS.contains(&e.name.as_str()) && e.sig.rets.len() <= 1 {
                wanted.push((
                    abi::COLD_SYMBOLS.iter().find(|s| **s == e.name).copied().unwrap_or(""),
                    id,
                    e.sig.clone(),
                ));
            }
        }
        if let (true, Some(id)) = (needs.alloc, alloc_fn) {
            wanted.push((ALLOC_SYMBOL, id, abi::alloc_signature()));
        }
        let mut out = FxHashMap::default();
        for (name, target, sig) in wanted {
            let module = self.module.as_mut().ok_or(JitError::Poisoned)?;
            let id = module.declare_anonymous_function(&translate::cold_signature(&sig)).map_err(module_error)?;
            if define {
                self.define(id, |module, func, fctx| {
                    translate::translate_cold_trampoline(module, target, &sig, func, fctx);
                    Ok(())
                })
                .map_err(|e| JitError::Codegen { func: format!("{name}.trampoline"), message: e })?;
            }
            out.insert(name.to_string(), id);
        }
        Ok(out)
    }

    /// Declares an imported support function once per JIT.
    fn import(&mut self, name: &str, sig: &ir::Signature) -> Result<ClFuncId, JitError> {
        if let Some(id) = self.imports.get(name) {
            return Ok(*id);
        }
        let module = self.module.as_mut().ok_or(JitError::Poisoned)?;
        let csig = translate::cl_support_signature(sig, self.call_conv);
        let id = module.declare_function(name, Linkage::Import, &csig).map_err(module_error)?;
        self.imports.insert(name.to_string(), id);
        Ok(id)
    }

    /// Declares, defines and finalises the module's functions and entries (support is checked).
    fn compile_checked(
        &mut self,
        m: &ir::Module,
        entries: &[ir::FuncId],
        needs: &Needs,
    ) -> Result<CompiledModule, JitError> {
        let externs: Vec<ClFuncId> =
            m.externs.values().map(|e| self.import(&e.name, &e.sig)).collect::<Result<_, _>>()?;
        let trap_fn = if needs.trap { Some(self.import(TRAP_SYMBOL, &abi::trap_signature())?) } else { None };
        let alloc_fn = if needs.alloc { Some(self.import(ALLOC_SYMBOL, &abi::alloc_signature())?) } else { None };
        let cold = self.cold_trampolines(m, needs, externs.as_slice(), alloc_fn, true)?;
        let call_conv = self.call_conv;
        let module = self.module.as_mut().ok_or(JitError::Poisoned)?;
        // Only what the entries can call is compiled: functions of closure tags that no switch
        // reaches, and helpers whose calls were inlined, cost nothing.
        let reachable = anf::opt::reachable_functions(m, entries);
        let mut funcs = Vec::with_capacity(m.funcs.len());
        for (f, live) in m.funcs.values().zip(&reachable) {
            if *live {
                let sig = translate::cl_signature(&f.sig, call_conv);
                funcs.push(Some(module.declare_anonymous_function(&sig).map_err(module_error)?));
            } else {
                funcs.push(None);
            }
        }
        let mut entry_ids = Vec::with_capacity(entries.len());
        for _ in entries {
            let sig = translate::entry_signature(call_conv);
            entry_ids.push(module.declare_anonymous_function(&sig).map_err(module_error)?);
        }
        let recursive = recursive(m);
        let may_fail = may_fail(m, &recursive);
        let env = translate::ModuleEnv {
            ir: m,
            funcs: &funcs,
            externs: &externs,
            trap_fn,
            alloc_fn,
            may_fail: &may_fail,
            recursive: &recursive,
            cold: &cold,
        };
        // Define everything; on the first failure, give the rest stub bodies so the module can
        // still be finalised (declared but undefined functions would make finalisation panic).
        let mut failure = None;
        for (i, f) in m.funcs.values().enumerate() {
            let Some(id) = funcs[i] else { continue };
            if failure.is_none() {
                if let Err(e) =
                    self.define(id, |module, func, fctx| translate::translate_function(module, &env, f, func, fctx))
                {
                    failure = Some(JitError::Codegen { func: f.name.clone(), message: e });
                }
            }
            if failure.is_some() {
                self.define_stub(id, &f.sig)?;
            }
        }
        for (&f, &id) in entries.iter().zip(&entry_ids) {
            let sig = &m.funcs[f].sig;
            let callee = funcs[f.index()].ok_or_else(|| JitError::Module(format!("entry {f} was not declared")))?;
            if failure.is_none() {
                if let Err(e) = self.define(id, |module, func, fctx| {
                    translate::translate_entry(module, callee, sig, func, fctx);
                    Ok(())
                }) {
                    failure = Some(JitError::Codegen { func: format!("{}.entry", m.funcs[f].name), message: e });
                }
            }
            if failure.is_some() {
                self.define_stub(id, &ir::Signature::new(vec![ir::Type::I64, ir::Type::I64], vec![]))?;
            }
        }
        let module = self.module.as_mut().ok_or(JitError::Poisoned)?;
        if let Err(e) = module.finalize_definitions() {
            self.poisoned = true;
            return Err(module_error(e));
        }
        if let Some(e) = failure {
            return Err(e);
        }
        let mut out = vec![None; m.funcs.len()];
        for (&f, &id) in entries.iter().zip(&entry_ids) {
            out[f.index()] = Some(Entry {
                name: m.funcs[f].name.clone(),
                code: module.get_finalized_function(id),
                sig: m.funcs[f].sig.clone(),
                _lease: self.lease.clone(),
            });
        }
        Ok(CompiledModule { entries: out })
    }

    /// Builds a function with `build` into the reusable context and defines it as `id`.
    fn define(
        &mut self,
        id: ClFuncId,
        build: impl FnOnce(
            &mut JITModule,
            &mut cranelift_codegen::ir::Function,
            &mut FunctionBuilderContext,
        ) -> Result<(), String>,
    ) -> Result<(), String> {
        let module = self.module.as_mut().ok_or("JIT module is gone")?;
        module.clear_context(&mut self.ctx);
        let decl_sig = module.declarations().get_function_decl(id).signature.clone();
        self.ctx.func.signature = decl_sig;
        let built = build(module, &mut self.ctx.func, &mut self.fctx);
        if let Err(e) = built {
            // A builder stopped part-way leaves state behind; start the next one afresh.
            self.fctx = FunctionBuilderContext::new();
            module.clear_context(&mut self.ctx);
            return Err(e);
        }
        let result = module.define_function(id, &mut self.ctx).map_err(|e| describe_define_error(&e, &self.ctx));
        module.clear_context(&mut self.ctx);
        result
    }

    /// Defines `id` as a function that returns zeros: used only after a failed compile.
    fn define_stub(&mut self, id: ClFuncId, _sig: &ir::Signature) -> Result<(), JitError> {
        let r = self.define(id, |module, func, fctx| {
            use cranelift_codegen::ir::InstBuilder;
            let mut b = cranelift_frontend::FunctionBuilder::new(func, fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let rets: Vec<_> = b.func.signature.returns.iter().map(|p| p.value_type).collect();
            let zeros: Vec<_> = rets
                .into_iter()
                .map(|t| if t == types::F64 { b.ins().f64const(0.0) } else { b.ins().iconst(t, 0) })
                .collect();
            b.ins().return_(&zeros);
            b.seal_all_blocks();
            b.finalize(module.target_config());
            Ok(())
        });
        r.map_err(|e| {
            self.poisoned = true;
            JitError::Module(format!("could not define a stub after a failed compile: {e}"))
        })
    }
}

impl Drop for Jit {
    /// Frees the code memory unless compiled entry points are still alive (then it is leaked).
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            if Rc::strong_count(&self.lease) == 1 {
                // SAFETY: no `Entry` exists any more, so no code of this module can be called.
                unsafe { module.free_memory() };
            } else {
                std::mem::forget(module);
            }
        }
    }
}

/// Which runtime intrinsics a module needs.
struct Needs {
    trap: bool,
    alloc: bool,
}

impl Needs {
    /// Scans the module's instructions.
    fn of(m: &ir::Module) -> Needs {
        // Recursive functions check the stack limit, which traps.
        let mut needs = Needs { trap: recursive(m).contains(&true), alloc: false };
        for f in m.funcs.values() {
            for data in f.insts.values() {
                match &data.op {
                    ir::Op::Alloc(_) => needs.alloc = true,
                    ir::Op::NewArray(..) => {
                        needs.alloc = true;
                        needs.trap = true;
                    }
                    ir::Op::BoundsCheck(..)
                    | ir::Op::Trap(..)
                    | ir::Op::Binary(ir::BinaryOp::Sdiv | ir::BinaryOp::Srem, ..) => needs.trap = true,
                    _ => {}
                }
            }
        }
        needs
    }
}

/// Which functions are on a cycle of the call graph: only they can nest calls without bound, so
/// only they check the stack limit.
fn recursive(m: &ir::Module) -> Vec<bool> {
    anf::opt::recursive_functions(m)
}

/// Which functions may fail: those with a failing instruction, a fallible support call or a stack
/// check, or a call of a function that may fail (a fixpoint over the call graph).
fn may_fail(m: &ir::Module, recursive: &[bool]) -> Vec<bool> {
    let local = |(i, f): (usize, &ir::Function)| {
        recursive[i]
            || layout_ops(f).any(|op| match op {
                ir::Op::Alloc(_)
                | ir::Op::NewArray(..)
                | ir::Op::BoundsCheck(..)
                | ir::Op::Trap(..)
                | ir::Op::Binary(ir::BinaryOp::Sdiv | ir::BinaryOp::Srem, ..) => true,
                ir::Op::CallExt(e, _) => m.externs.get(*e).is_some_and(|e| e.fallible),
                _ => false,
            })
    };
    let mut fails: Vec<bool> = m.funcs.values().enumerate().map(local).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for (i, f) in m.funcs.values().enumerate() {
            if fails[i] {
                continue;
            }
            let calls_failing =
                layout_ops(f).any(|op| matches!(op, ir::Op::Call(g, _) if fails.get(g.index()) == Some(&true)));
            if calls_failing {
                fails[i] = true;
                changed = true;
            }
        }
    }
    fails
}

/// The operations of the instructions in `f`'s layout (instructions outside it never run).
fn layout_ops(f: &ir::Function) -> impl Iterator<Item = &ir::Op> + '_ {
    f.layout.iter().flat_map(move |b| f.blocks[*b].insts.iter().map(move |i| &f.insts[*i].op))
}

/// A module error as a `JitError`.
fn module_error(e: ModuleError) -> JitError {
    JitError::Module(e.to_string())
}

/// A readable message for a failed `define_function`, with verifier details when there are any.
fn describe_define_error(e: &ModuleError, ctx: &Context) -> String {
    match e {
        ModuleError::Compilation(cranelift_codegen::CodegenError::Verifier(errs)) => {
            cranelift_codegen::print_errors::pretty_verifier_error(&ctx.func, None, errs.clone())
        }
        e => e.to_string(),
    }
}
