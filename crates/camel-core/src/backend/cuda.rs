//! CUDA backend (filled in by the CUDA backend work).
