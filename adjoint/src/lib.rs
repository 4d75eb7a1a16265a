//! adjoint
