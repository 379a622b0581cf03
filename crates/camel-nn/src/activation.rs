use crate::Module;
use camel_core::{Result, Tensor};

macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, $method:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;
        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.$method()
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
