//! A cursor for building functions instruction by instruction (used by lowering and tests).

use super::{
    BinaryOp, Block, BlockCall, Cmp, ExtFuncId, FuncId, Function, Inst, Op, Signature, TagId, TrapCode, Type, UnaryOp,
    Value,
};

/// Appends instructions to the current block of a function.
pub struct Builder<'a> {
    pub func: &'a mut Function,
    block: Block,
}

impl<'a> Builder<'a> {
    /// A builder positioned at the end of `func`'s entry block.
    ///
    /// Panics if the function has no block, which `Function::new` guarantees it has.
    pub fn new(func: &'a mut Function) -> Builder<'a> {
        let block = func.entry().expect("Function::new creates an entry block");
        Builder { func, block }
    }

    /// The block instructions go into.
    pub fn current_block(&self) -> Block {
        self.block
    }

    /// Moves the cursor to the end of `block`.
    pub fn switch_to(&mut self, block: Block) {
        self.block = block;
    }

    /// A new block with parameters of the given types; returns it and its parameters.
    pub fn create_block(&mut self, params: &[Type]) -> (Block, Vec<Value>) {
        let b = self.func.create_block();
        let vs = params.iter().map(|t| self.func.append_block_param(b, *t)).collect();
        (b, vs)
    }

    /// The parameters of `block`.
    pub fn params(&self, block: Block) -> Vec<Value> {
        self.func.block_params(block).to_vec()
    }

    /// Appends `op` with results of the given types.
    pub fn inst(&mut self, op: Op, result_types: &[Type]) -> Inst {
        self.func.append_inst(self.block, op, result_types)
    }

    /// Appends `op` with one result of type `ty`.
    fn value(&mut self, op: Op, ty: Type) -> Value {
        let inst = self.inst(op, &[ty]);
        self.func.insts[inst].results[0]
    }

    /// An `i64` constant.
    pub fn iconst(&mut self, n: i64) -> Value {
        self.value(Op::Iconst(n), Type::I64)
    }
    /// An `f64` constant.
    pub fn fconst(&mut self, x: f64) -> Value {
        self.value(Op::Fconst(x.to_bits()), Type::F64)
    }
    /// A `bool` constant.
    pub fn bconst(&mut self, b: bool) -> Value {
        self.value(Op::Bconst(b), Type::Bool)
    }
    /// The null pointer.
    pub fn null(&mut self) -> Value {
        self.value(Op::Null, Type::Ptr)
    }
    /// A closure tag's value.
    pub fn tag(&mut self, tag: TagId) -> Value {
        self.value(Op::TagConst(tag), Type::I64)
    }
    /// A one-operand operation.
    pub fn unary(&mut self, op: UnaryOp, a: Value) -> Value {
        let ty = match op {
            UnaryOp::Ineg | UnaryOp::Btoi => Type::I64,
            UnaryOp::Fneg | UnaryOp::Fabs | UnaryOp::Fsqrt | UnaryOp::Itof => Type::F64,
            UnaryOp::Not => Type::Bool,
        };
        self.value(Op::Unary(op, a), ty)
    }
    /// A two-operand operation.
    pub fn binary(&mut self, op: BinaryOp, a: Value, b: Value) -> Value {
        let ty = binary_result(op);
        self.value(Op::Binary(op, a, b), ty)
    }
    /// An integer/bool/ptr comparison.
    pub fn icmp(&mut self, cmp: Cmp, a: Value, b: Value) -> Value {
        self.value(Op::Icmp(cmp, a, b), Type::Bool)
    }
    /// A float comparison.
    pub fn fcmp(&mut self, cmp: Cmp, a: Value, b: Value) -> Value {
        self.value(Op::Fcmp(cmp, a, b), Type::Bool)
    }
    /// `a` if `c` else `b`.
    pub fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        let ty = self.func.value_type(a);
        self.value(Op::Select(c, a, b), ty)
    }
    /// Loads a word of type `ty` from `ptr + offset`.
    pub fn load(&mut self, ty: Type, ptr: Value, offset: i32) -> Value {
        self.value(Op::Load(ty, ptr, offset), ty)
    }
    /// Stores `v` at `ptr + offset`.
    pub fn store(&mut self, v: Value, ptr: Value, offset: i32) {
        self.inst(Op::Store(v, ptr, offset), &[]);
    }
    /// A fresh arena record of `bytes` bytes.
    pub fn alloc(&mut self, bytes: u32) -> Value {
        self.value(Op::Alloc(bytes), Type::Ptr)
    }
    /// A fresh arena array of `len` elements of `stride` bytes.
    pub fn new_array(&mut self, len: Value, stride: u32) -> Value {
        self.value(Op::NewArray(len, stride), Type::Ptr)
    }
    /// An array's length.
    pub fn array_len(&mut self, array: Value) -> Value {
        self.value(Op::ArrayLen(array), Type::I64)
    }
    /// The address of element `index` (unchecked).
    pub fn elem_addr(&mut self, array: Value, index: Value, stride: u32) -> Value {
        self.value(Op::ElemAddr(array, index, stride), Type::Ptr)
    }
    /// Fails at `site` unless `0 <= index < len`.
    pub fn bounds_check(&mut self, index: Value, len: Value, site: Value) {
        self.inst(Op::BoundsCheck(index, len, site), &[]);
    }
    /// Calls function `f` whose results have types `rets`.
    pub fn call(&mut self, f: FuncId, rets: &[Type], args: Vec<Value>) -> Vec<Value> {
        let inst = self.inst(Op::Call(f, args), rets);
        self.func.insts[inst].results.clone()
    }
    /// Calls support function `f` with signature `sig`.
    pub fn call_ext(&mut self, f: ExtFuncId, sig: &Signature, args: Vec<Value>) -> Vec<Value> {
        let inst = self.inst(Op::CallExt(f, args), &sig.rets);
        self.func.insts[inst].results.clone()
    }
    /// Jumps to `block` with `args`.
    pub fn jump(&mut self, block: Block, args: Vec<Value>) {
        self.inst(Op::Jump(BlockCall::new(block, args)), &[]);
    }
    /// Branches to `then` if `c` else to `els`.
    pub fn brif(&mut self, c: Value, then: BlockCall, els: BlockCall) {
        self.inst(Op::Brif(c, then, els), &[]);
    }
    /// Branches on a closure tag.
    pub fn switch(&mut self, tag: Value, cases: Vec<(TagId, BlockCall)>) {
        self.inst(Op::Switch(tag, cases), &[]);
    }
    /// Returns `values`.
    pub fn ret(&mut self, values: Vec<Value>) {
        self.inst(Op::Return(values), &[]);
    }
    /// Stops the call with an error at `site` with payload `a`, `b`.
    pub fn trap(&mut self, code: TrapCode, site: Value, a: Value, b: Value) {
        self.inst(Op::Trap(code, site, a, b), &[]);
    }
}

/// The result type of a two-operand operation.
pub fn binary_result(op: BinaryOp) -> Type {
    match op {
        BinaryOp::Iadd | BinaryOp::Isub | BinaryOp::Imul | BinaryOp::Sdiv | BinaryOp::Srem => Type::I64,
        BinaryOp::Fadd | BinaryOp::Fsub | BinaryOp::Fmul | BinaryOp::Fdiv => Type::F64,
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => Type::Bool,
    }
}
