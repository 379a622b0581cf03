//! The optimizer updates on the GPU: the optimizer ladder (`kernels/optim`), one launch for
//! many tensors.

use super::{UpdateKernels, UpdateRule};
use crate::backend::cuda::{self, CudaStorage};
use crate::Result;

impl UpdateKernels for CudaStorage {
    fn update_multi(
        ps: &mut [&mut Self],
        gs: &[&Self],
        states: &mut [Vec<&mut Self>],
        rules: &[UpdateRule],
    ) -> Result<()> {
        let pc: Vec<&CudaStorage> = ps.iter().map(|p| &**p).collect();
        let sc: Vec<Vec<&CudaStorage>> = states
            .iter()
            .map(|st| st.iter().map(|s| &**s).collect())
            .collect();
        cuda::update_multi(&pc, gs, &sc, rules)
    }
}
