//! camel-nn
