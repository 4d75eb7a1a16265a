//! The first-order SSA IR that closure-converted, defunctionalised programs are lowered into, and
//! that `jit` translates to Cranelift (ARCHITECTURE.md, `anf`).
//!
//! # Shape
//! A [`Module`] holds functions, `extern` declarations of runtime support functions, and closure
//! tags. A [`Function`] is a list of blocks in layout order; each block has typed parameters (no
//! phis) and ends with exactly one terminator. Entities (`Value`, `Block`, `Inst`, `FuncId`,
//! `ExtFuncId`, `TagId`) are `u32` newtypes in arenas; instruction data lives in `Function::insts`,
//! program order in `BlockData::insts`.
//!
//! # Values
//! Every value is one machine word of type `i64`, `f64`, `bool` (an `i8` holding 0 or 1) or `ptr`.
//! How language types map onto words is in [`layout`].
//!
//! # Calling convention (what `jit` implements)
//! - Every function and every support function takes an implicit first argument, the call context
//!   `ctx` (a pointer to the runtime's per-call state: arena bump pointers, error status). IR
//!   signatures do not mention it.
//! - Functions may return any number of values; the backend returns at most two in registers and
//!   the rest through a hidden out-pointer.
//! - Errors are not values: an instruction that fails (`boundscheck`, `sdiv`/`srem` by zero,
//!   `newarray` of a negative length, `alloc` out of memory, `trap`, a call of a `fallible` support
//!   function or of a function that may fail) reports the error through the `nabla_trap` support
//!   function and the whole call unwinds to its Rust caller, which turns it into an error value.
//!   No signal is ever raised.
//!
//! # Closures
//! Closures are defunctionalised: a closure is a tag (`i64`, the index of a [`TagDecl`]) plus an
//! environment record (`ptr`). Each tag names the function implementing its λ, whose first
//! parameter is the environment. Application is a `switch` over the tags that can flow there —
//! never an indirect call through a code pointer.

pub mod builder;
pub mod cfg;
pub mod entity;
pub mod layout;
pub mod parse;
pub mod print;
pub mod support;
pub mod verify;

#[cfg(test)]
mod tests;

use std::fmt;

use entity::entity;

pub use builder::Builder;
pub use entity::{EntityRef, PrimaryMap, SecondaryMap};
pub use parse::{parse, ParseError};
pub use print::{print, print_function};
pub use verify::{verify, VerifyError, VerifyErrorKind};

/// The type of an SSA value: one machine word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    I64,
    F64,
    /// A truth value, `i8` 0 or 1 in registers, one byte in memory (in an 8-byte slot).
    Bool,
    /// A pointer into an arena or to a runtime collection.
    Ptr,
}

impl Type {
    /// The name used in the text format.
    pub fn name(self) -> &'static str {
        match self {
            Type::I64 => "i64",
            Type::F64 => "f64",
            Type::Bool => "bool",
            Type::Ptr => "ptr",
        }
    }
    /// The type called `name` in the text format.
    pub fn from_name(name: &str) -> Option<Type> {
        match name {
            "i64" => Some(Type::I64),
            "f64" => Some(Type::F64),
            "bool" => Some(Type::Bool),
            "ptr" => Some(Type::Ptr),
            _ => None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

entity!(
    /// An SSA value: a block parameter or an instruction result.
    Value,
    "v"
);
entity!(
    /// A basic block.
    Block,
    "b"
);
entity!(
    /// An instruction (its data; its position is in the block's instruction list).
    Inst,
    "inst"
);
entity!(
    /// A function of the module.
    FuncId,
    "fn"
);
entity!(
    /// A runtime support function declared `extern`.
    ExtFuncId,
    "ext"
);
entity!(
    /// A closure tag: its index is the tag's run-time value.
    TagId,
    "t"
);

/// Parameter and result types (the implicit `ctx` argument is not listed).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Signature {
    pub params: Vec<Type>,
    pub rets: Vec<Type>,
}

impl Signature {
    /// A signature from its parameter and result types.
    pub fn new(params: Vec<Type>, rets: Vec<Type>) -> Signature {
        Signature { params, rets }
    }
}

/// A compilation unit: functions, support-function imports and closure tags.
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub funcs: PrimaryMap<FuncId, Function>,
    pub externs: PrimaryMap<ExtFuncId, ExtFunc>,
    pub tags: PrimaryMap<TagId, TagDecl>,
}

impl Module {
    /// An empty module.
    pub fn new() -> Module {
        Module::default()
    }
    /// The function called `name`.
    pub fn func_by_name(&self, name: &str) -> Option<FuncId> {
        self.funcs.iter().find(|(_, f)| f.name == name).map(|(id, _)| id)
    }
    /// The support function declared as `name`.
    pub fn extern_by_name(&self, name: &str) -> Option<ExtFuncId> {
        self.externs.iter().find(|(_, e)| e.name == name).map(|(id, _)| id)
    }
    /// Declares support function `name` (or returns the existing declaration of that name).
    pub fn declare_extern(&mut self, name: &str, sig: Signature, fallible: bool) -> ExtFuncId {
        if let Some(id) = self.extern_by_name(name) {
            return id;
        }
        self.externs.push(ExtFunc { name: name.to_string(), sig, fallible })
    }
    /// The closure signature of `tag`: its function's signature without the environment parameter.
    pub fn tag_signature(&self, tag: TagId) -> Option<Signature> {
        let decl = self.tags.get(tag)?;
        let f = self.funcs.get(decl.func)?;
        let params = f.sig.params.get(1..)?.to_vec();
        Some(Signature::new(params, f.sig.rets.clone()))
    }
}

/// A runtime support function the module imports by symbol name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtFunc {
    pub name: String,
    pub sig: Signature,
    /// May report an error (then the caller unwinds, as after a failing instruction).
    pub fallible: bool,
}

/// A closure tag: the λ's code and the layout of its environment record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagDecl {
    /// The function implementing the λ: `(env: ptr, args...) -> results`.
    pub func: FuncId,
    /// Field types of the environment record, one 8-byte slot each, in order.
    pub env: Vec<Type>,
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// The `n`th parameter of a block.
    Param(Block, u32),
    /// The `n`th result of an instruction.
    Result(Inst, u32),
    /// A hole in the numbering (left by the parser for numbers the text skips).
    Unused,
}

/// A value's type and definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
}

/// A block's parameters and its instructions in program order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockData {
    pub params: Vec<Value>,
    pub insts: Vec<Inst>,
}

/// An instruction: its operation and the values it defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstData {
    pub op: Op,
    pub results: Vec<Value>,
}

/// A branch target with the arguments for its block parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockCall {
    pub block: Block,
    pub args: Vec<Value>,
}

impl BlockCall {
    /// A jump to `block` passing `args`.
    pub fn new(block: Block, args: Vec<Value>) -> BlockCall {
        BlockCall { block, args }
    }
}

/// One-operand operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `i64 -> i64`, wrapping.
    Ineg,
    Fneg,
    Fabs,
    Fsqrt,
    /// `bool -> bool`.
    Not,
    /// `i64 -> f64`, signed conversion.
    Itof,
    /// `bool -> i64`, 0 or 1.
    Btoi,
}

/// Two-operand operations; both operands have the same type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// Wrapping integer arithmetic.
    Iadd,
    Isub,
    Imul,
    /// Signed division, truncating; by zero it fails; `i64::MIN / -1` wraps to `i64::MIN`.
    Sdiv,
    /// Remainder of `Sdiv` (sign of the dividend); by zero it fails; `i64::MIN % -1` is 0.
    Srem,
    Fadd,
    Fsub,
    Fmul,
    Fdiv,
    /// On `bool`.
    And,
    Or,
    Xor,
}

/// Comparison conditions: signed for `icmp` (which also compares `bool` and `ptr` for equality),
/// ordered for `fcmp` except `ne`, which is true on NaN (as Rust's `!=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Why a `trap` (or a failing instruction) stops the call; the numbers are the runtime ABI.
///
/// Every trap also carries a *site*: an `i64` that the front end maps back to the source span
/// that failed (lowering keeps a table of them); `-1` means "no site". The messages are the
/// reference interpreter's, word for word, because both engines must report the same error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrapCode {
    /// Payload: index, length.
    IndexOutOfBounds = 1,
    DivisionByZero = 2,
    /// Payload: the requested length.
    NegativeLength = 3,
    /// Payload: the requested size in bytes.
    OutOfMemory = 4,
    /// Payload: the two lengths.
    LengthMismatch = 5,
    /// Code the compiler believed unreachable.
    Unreachable = 6,
    /// `build` with a negative size. Payload: the size.
    BuildNegative = 7,
    /// `build` with a size over the array limit. Payload: the size, the limit.
    BuildTooLarge = 8,
    /// `zipWith` on arrays of different lengths. Payload: the two lengths.
    ZipWithLengths = 9,
    /// `dot` on arrays of different lengths. Payload: the two lengths.
    DotLengths = 10,
    /// `iterate` with a negative count. Payload: the count.
    IterateNegative = 11,
    /// A map literal binds a key twice (raised by the runtime, which knows the key).
    DuplicateKey = 12,
    /// Calls nested deeper than the stack the runtime allows (recursive functions check).
    StackOverflow = 13,
    /// An ILC derivative primitive needs a base value that dead-code elimination removed (the
    /// incremental driver then runs the total derivative).
    NeedsBase = 14,
    /// `toInt` of NaN or of a value outside Int's range. Payload: 0 for NaN, 1 for a value at
    /// or above 2^63, -1 for one below -2^63.
    ToIntRange = 15,
    /// A `vjp`'s cotangent whose length differs from the output's (raised by the runtime, which
    /// gets the path to the array from `ctCheck'`, see [`cotangent_path`]). Payload: the
    /// output's length, the cotangent's length.
    CotangentLength = 16,
    /// A bag multiplicity left Int's range (raised by the runtime's bag operations, which get
    /// the site as an argument).
    BagOverflow = 17,
}

impl TrapCode {
    /// Every trap code, in numeric order.
    pub const ALL: [TrapCode; 17] = [
        TrapCode::IndexOutOfBounds,
        TrapCode::DivisionByZero,
        TrapCode::NegativeLength,
        TrapCode::OutOfMemory,
        TrapCode::LengthMismatch,
        TrapCode::Unreachable,
        TrapCode::BuildNegative,
        TrapCode::BuildTooLarge,
        TrapCode::ZipWithLengths,
        TrapCode::DotLengths,
        TrapCode::IterateNegative,
        TrapCode::DuplicateKey,
        TrapCode::StackOverflow,
        TrapCode::NeedsBase,
        TrapCode::ToIntRange,
        TrapCode::CotangentLength,
        TrapCode::BagOverflow,
    ];
    /// The name used in the text format.
    pub fn name(self) -> &'static str {
        match self {
            TrapCode::IndexOutOfBounds => "oob",
            TrapCode::DivisionByZero => "divzero",
            TrapCode::NegativeLength => "neglen",
            TrapCode::OutOfMemory => "oom",
            TrapCode::LengthMismatch => "lenmismatch",
            TrapCode::Unreachable => "unreachable",
            TrapCode::BuildNegative => "build_negative",
            TrapCode::BuildTooLarge => "build_too_large",
            TrapCode::ZipWithLengths => "zipwith_lengths",
            TrapCode::DotLengths => "dot_lengths",
            TrapCode::IterateNegative => "iterate_negative",
            TrapCode::DuplicateKey => "duplicate_key",
            TrapCode::StackOverflow => "stack_overflow",
            TrapCode::NeedsBase => "needs_base",
            TrapCode::ToIntRange => "to_int_range",
            TrapCode::CotangentLength => "cotangent_length",
            TrapCode::BagOverflow => "bag_overflow",
        }
    }
    /// The numeric code passed to `nabla_trap`.
    pub fn code(self) -> i64 {
        self as i64
    }
    /// The trap code with number `code`.
    pub fn from_code(code: i64) -> Option<TrapCode> {
        TrapCode::ALL.iter().copied().find(|t| t.code() == code)
    }
    /// The trap code called `name` in the text format.
    pub fn from_name(name: &str) -> Option<TrapCode> {
        TrapCode::ALL.iter().copied().find(|t| t.name() == name)
    }
    /// The user-facing message for this trap with its payload (the interpreter's wording).
    pub fn message(self, a: i64, b: i64) -> String {
        match self {
            TrapCode::IndexOutOfBounds => format!("index {a} out of bounds for length {b}"),
            TrapCode::DivisionByZero => "division by zero".to_string(),
            TrapCode::NegativeLength => format!("negative array size {a}"),
            TrapCode::OutOfMemory => format!("out of memory allocating {a} bytes"),
            TrapCode::LengthMismatch => format!("arrays have different lengths {a} and {b}"),
            TrapCode::Unreachable => "internal error: unreachable code reached".to_string(),
            TrapCode::BuildNegative => format!("build: negative array size {a}"),
            TrapCode::BuildTooLarge => format!("build: array size {a} exceeds the limit of {b}"),
            TrapCode::ZipWithLengths => format!("zipWith: arrays have different lengths {a} and {b}"),
            TrapCode::DotLengths => format!("dot: arrays have different lengths {a} and {b}"),
            TrapCode::IterateNegative => format!("iterate: negative count {a}"),
            TrapCode::DuplicateKey => "duplicate key in map literal".to_string(),
            TrapCode::StackOverflow => "evaluation nested too deeply".to_string(),
            TrapCode::NeedsBase => NEEDS_BASE_MESSAGE.to_string(),
            TrapCode::ToIntRange => match a {
                0 => "toInt: NaN is not an Int".to_string(),
                1 => "toInt: a value at or above 2^63 is out of Int's range".to_string(),
                _ => "toInt: a value below -2^63 is out of Int's range".to_string(),
            },
            TrapCode::CotangentLength => cotangent_message(&[], a, b),
            TrapCode::BagOverflow => BAG_OVERFLOW_MESSAGE.to_string(),
        }
    }
}

/// The message of [`TrapCode::NeedsBase`] (the interpreter's `NEEDS_BASE` error says the same).
pub const NEEDS_BASE_MESSAGE: &str =
    "internal: this change needs a base value the self-maintainable derivative does not keep";

/// One step of the path from a `vjp`'s output to an array in it: `element i` of an array,
/// `component k` (1-based) of a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CotangentStep {
    Element(i64),
    Component(i64),
}

/// The most steps `ctCheck'`'s shape word holds (base-128 digits of an `i64`).
pub const COTANGENT_MAX_STEPS: usize = 9;

/// `ctCheck' n m shape idx`'s path: `shape`'s base-128 digits, outermost step lowest, are 1 for
/// an element (its index the next of `idx`) and `k + 1` for component `k` (1-based, `k <= 126`);
/// `None` when `idx` runs out.
pub fn cotangent_path(mut shape: i64, idx: &[i64]) -> Option<Vec<CotangentStep>> {
    let mut steps = Vec::new();
    let mut idx = idx.iter();
    while shape > 0 {
        steps.push(match shape % 128 {
            1 => CotangentStep::Element(*idx.next()?),
            d => CotangentStep::Component(d - 1),
        });
        shape /= 128;
    }
    Some(steps)
}

/// The shape word [`cotangent_path`] reads for steps that are `Some(k)` for component `k`
/// (1-based) and `None` for an element; `None` when they do not fit in it.
pub fn cotangent_shape(steps: &[Option<i64>]) -> Option<i64> {
    if steps.len() > COTANGENT_MAX_STEPS {
        return None;
    }
    let mut shape = 0;
    for s in steps.iter().rev() {
        let d = match s {
            None => 1,
            Some(k) if (1..=126).contains(k) => k + 1,
            Some(_) => return None,
        };
        shape = shape * 128 + d;
    }
    Some(shape)
}

/// The error of a `vjp` whose cotangent has length `m` where the output's array at `path` has
/// length `n` (the interpreter's `cotangent_mismatch` and `ctCheck'` in both engines).
pub fn cotangent_message(path: &[CotangentStep], n: i64, m: i64) -> String {
    format!(
        "vjp: the cotangent does not match the function's output{}: the output has length {n} but the cotangent \
         has length {m}",
        path_words(path)
    )
}

/// ` at component 2, element 7` for a path, nothing for the empty one.
fn path_words(path: &[CotangentStep]) -> String {
    let at: Vec<String> = path
        .iter()
        .map(|s| match s {
            CotangentStep::Element(i) => format!("element {i}"),
            CotangentStep::Component(k) => format!("component {k}"),
        })
        .collect();
    if at.is_empty() {
        String::new()
    } else {
        format!(" at {}", at.join(", "))
    }
}

/// The error of a dual vector of first-order type applied to a tangent of another shape: the
/// pairing `r* v = ⟨r, v⟩` is defined on the tangent space at the dual's point, whose arrays have
/// the vector's lengths (Mak & Ong Sec. 3: `r*` mimics the functional `⟨r, −⟩` on that space).
/// `n` is the vector's length at `path`, `m` the tangent's (both engines, `ctCheck'` with
/// [`pairing_shape`]).
pub fn pairing_message(path: &[CotangentStep], n: i64, m: i64) -> String {
    format!(
        "the tangent does not match the dual vector it is paired with{}: the dual vector has length {n} but the \
         tangent has length {m}",
        path_words(path)
    )
}

/// The shape word of `ctCheck'` for a pairing check (a dual vector against its tangent) at the
/// steps [`cotangent_shape`] encodes: its bitwise complement, so negative.
pub fn pairing_shape(steps: &[Option<i64>]) -> Option<i64> {
    cotangent_shape(steps).map(|s| !s)
}

/// The message of a failed `ctCheck' n m shape idx`: a `vjp`'s cotangent
/// ([`cotangent_message`]) for a shape word of [`cotangent_shape`], a pairing
/// ([`pairing_message`]) for one of [`pairing_shape`]; `None` when `idx` runs out.
pub fn shape_check_message(shape: i64, idx: &[i64], n: i64, m: i64) -> Option<String> {
    if shape < 0 {
        Some(pairing_message(&cotangent_path(!shape, idx)?, n, m))
    } else {
        Some(cotangent_message(&cotangent_path(shape, idx)?, n, m))
    }
}

/// The message of [`TrapCode::BagOverflow`] (the interpreter's bags say the same).
pub const BAG_OVERFLOW_MESSAGE: &str = "bag multiplicity overflow";

/// The site of a failure that has none (the runtime reports it without a source location).
pub const NO_SITE: i64 = -1;

/// The size in bytes of an array's header (its `i64` length); elements follow it.
pub const ARRAY_HEADER: u32 = 8;

/// An operation with its operands. Terminators are `Jump`, `Brif`, `Switch`, `Return`, `Trap`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Iconst(i64),
    /// The bits of an `f64` (so that `Op` is `Eq`).
    Fconst(u64),
    Bconst(bool),
    /// The null pointer (an empty environment record).
    Null,
    /// A closure tag's run-time value, as `i64`.
    TagConst(TagId),
    Unary(UnaryOp, Value),
    Binary(BinaryOp, Value, Value),
    /// Integer, `bool` or `ptr` comparison; gives `bool`.
    Icmp(Cmp, Value, Value),
    Fcmp(Cmp, Value, Value),
    /// `select c, a, b`: `a` if `c` else `b`.
    Select(Value, Value, Value),
    /// Loads the type's word from `ptr + offset`.
    Load(Type, Value, i32),
    /// `store value, ptr + offset`.
    Store(Value, Value, i32),
    /// A fresh arena record of the given number of bytes (uninitialised).
    Alloc(u32),
    /// A fresh arena array `(len, stride)`: header holding `len`, then `len * stride` bytes
    /// (uninitialised). Fails on a negative length or when out of memory.
    NewArray(Value, u32),
    /// The length stored in an array's header.
    ArrayLen(Value),
    /// `elemaddr array, index, stride` = `array + ARRAY_HEADER + index * stride` (unchecked).
    ElemAddr(Value, Value, u32),
    /// `boundscheck index, len, site`: fails unless `0 <= index < len`.
    BoundsCheck(Value, Value, Value),
    Call(FuncId, Vec<Value>),
    CallExt(ExtFuncId, Vec<Value>),
    Jump(BlockCall),
    Brif(Value, BlockCall, BlockCall),
    /// Branches on a closure tag; the cases are distinct tags of one closure signature.
    Switch(Value, Vec<(TagId, BlockCall)>),
    Return(Vec<Value>),
    /// `trap code(site, a, b)`: stops the call with an error at `site`; `a` and `b` (`i64`) are
    /// the message's payload.
    Trap(TrapCode, Value, Value, Value),
}

impl Op {
    /// Does this operation end a block?
    pub fn is_terminator(&self) -> bool {
        matches!(self, Op::Jump(_) | Op::Brif(..) | Op::Switch(..) | Op::Return(_) | Op::Trap(..))
    }

    /// The values the operation reads, in operand order (branch arguments included).
    pub fn operands(&self) -> Vec<Value> {
        let mut out = Vec::new();
        self.for_each_operand(|v| out.push(v));
        out
    }

    /// Calls `f` on every operand, in operand order.
    pub fn for_each_operand(&self, mut f: impl FnMut(Value)) {
        match self {
            Op::Iconst(_) | Op::Fconst(_) | Op::Bconst(_) | Op::Null | Op::TagConst(_) | Op::Alloc(_) => {}
            Op::Unary(_, a) | Op::ArrayLen(a) | Op::NewArray(a, _) | Op::Load(_, a, _) => f(*a),
            Op::Binary(_, a, b)
            | Op::Icmp(_, a, b)
            | Op::Fcmp(_, a, b)
            | Op::Store(a, b, _)
            | Op::ElemAddr(a, b, _) => {
                f(*a);
                f(*b)
            }
            Op::Select(c, a, b) | Op::BoundsCheck(c, a, b) | Op::Trap(_, c, a, b) => {
                f(*c);
                f(*a);
                f(*b)
            }
            Op::Call(_, args) | Op::CallExt(_, args) | Op::Return(args) => args.iter().copied().for_each(f),
            Op::Jump(bc) => bc.args.iter().copied().for_each(f),
            Op::Brif(c, t, e) => {
                f(*c);
                t.args.iter().chain(&e.args).copied().for_each(f)
            }
            Op::Switch(v, cases) => {
                f(*v);
                cases.iter().flat_map(|(_, bc)| &bc.args).copied().for_each(f)
            }
        }
    }

    /// The branch targets of a terminator (empty for other operations).
    pub fn branch_targets(&self) -> Vec<&BlockCall> {
        match self {
            Op::Jump(bc) => vec![bc],
            Op::Brif(_, t, e) => vec![t, e],
            Op::Switch(_, cases) => cases.iter().map(|(_, bc)| bc).collect(),
            _ => Vec::new(),
        }
    }
}

/// A function: signature, value and instruction arenas, blocks and their layout order.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub sig: Signature,
    pub values: PrimaryMap<Value, ValueData>,
    pub insts: PrimaryMap<Inst, InstData>,
    pub blocks: PrimaryMap<Block, BlockData>,
    /// Blocks in program order; the first is the entry, whose parameters are the function's.
    pub layout: Vec<Block>,
}

impl Function {
    /// A function with an entry block whose parameters are the signature's.
    pub fn new(name: &str, sig: Signature) -> Function {
        let mut f = Function {
            name: name.to_string(),
            sig: sig.clone(),
            values: PrimaryMap::new(),
            insts: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            layout: Vec::new(),
        };
        let entry = f.create_block();
        for ty in sig.params {
            f.append_block_param(entry, ty);
        }
        f
    }

    /// A function with no blocks at all (the parser fills it in).
    pub fn empty(name: &str, sig: Signature) -> Function {
        Function {
            name: name.to_string(),
            sig,
            values: PrimaryMap::new(),
            insts: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            layout: Vec::new(),
        }
    }

    /// The entry block, if the function has any block.
    pub fn entry(&self) -> Option<Block> {
        self.layout.first().copied()
    }

    /// A new empty block at the end of the layout.
    pub fn create_block(&mut self) -> Block {
        let b = self.blocks.push(BlockData::default());
        self.layout.push(b);
        b
    }

    /// Adds a parameter of type `ty` to `block`.
    pub fn append_block_param(&mut self, block: Block, ty: Type) -> Value {
        let n = self.blocks[block].params.len() as u32;
        let v = self.values.push(ValueData { ty, def: ValueDef::Param(block, n) });
        self.blocks[block].params.push(v);
        v
    }

    /// Appends an instruction to `block` with results of the given types.
    pub fn append_inst(&mut self, block: Block, op: Op, result_types: &[Type]) -> Inst {
        let inst = self.insts.push(InstData { op, results: Vec::new() });
        for (i, ty) in result_types.iter().enumerate() {
            let v = self.values.push(ValueData { ty: *ty, def: ValueDef::Result(inst, i as u32) });
            self.insts[inst].results.push(v);
        }
        self.blocks[block].insts.push(inst);
        inst
    }

    /// The type of `v`.
    pub fn value_type(&self, v: Value) -> Type {
        self.values[v].ty
    }

    /// The parameters of `block`.
    pub fn block_params(&self, block: Block) -> &[Value] {
        &self.blocks[block].params
    }

    /// The results of `inst`.
    pub fn inst_results(&self, inst: Inst) -> &[Value] {
        &self.insts[inst].results
    }

    /// The last instruction of `block` if it is a terminator.
    pub fn terminator(&self, block: Block) -> Option<&Op> {
        let last = *self.blocks.get(block)?.insts.last()?;
        let op = &self.insts.get(last)?.op;
        op.is_terminator().then_some(op)
    }
}
