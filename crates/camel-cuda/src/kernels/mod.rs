//! One module per kernel family (one `kernels/<family>.cu` or `kernels/<family>/` folder), one
//! typed launcher per kernel. Launchers take device pointers and sizes, compute and check the
//! launch configuration, and queue the kernel on the device's stream.

pub mod elementwise;
