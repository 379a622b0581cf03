use crate::{Module, TrainingFlag};
use camel_core::{Result, Tensor};
use std::fmt;

/// Each activation is a struct holding its training flag, and a constant of the same name (the
/// value namespace is separate from the type namespace, as for a unit struct) so that `ReLU`
/// still reads as a value: `Sequential::new().add(ReLU)`. Every use of the constant is a new
/// module with its own flag.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, $method:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default)]
        pub struct $name {
            training: TrainingFlag,
        }

        $(#[$doc])*
        #[allow(non_upper_case_globals, clippy::declare_interior_mutable_const)]
        pub const $name: $name = $name {
            training: TrainingFlag::new(),
        };

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "()"))
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.$method()
            }
            fn set_training(&self, on: bool) {
                self.training.set(on)
            }
            fn is_training(&self) -> bool {
                self.training.get()
            }
        }
    };
}

activation!(
    /// `max(x, 0)`.
    ReLU, relu
);
activation!(
    /// GELU, tanh approximation.
    GELU, gelu
);
activation!(
    /// Logistic sigmoid.
    Sigmoid, sigmoid
);
activation!(
    /// Hyperbolic tangent.
    Tanh, tanh
);
