//! camel-optim
