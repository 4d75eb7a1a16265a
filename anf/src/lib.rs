//! A-normal form and everything between typed terms and the first-order SSA IR:
//! monomorphisation, A-normalisation (Mak & Ong Sec. 3.2, App. B), closure conversion and
//! defunctionalisation, lowering, and the IR itself.

pub mod anormal;
pub mod ir;
pub mod lower;
pub mod mono;
pub mod opt;
