//! anf
