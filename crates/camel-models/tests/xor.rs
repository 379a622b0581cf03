use camel_models::xor::train_xor;
use camel_nn::Device;

#[test]
fn mlp_learns_xor() {
    for seed in [0, 1, 2] {
        let losses = train_xor(500, seed, Device::Cpu).unwrap();
        let last = *losses.last().unwrap();
        assert!(
            last < 0.01,
            "seed {seed}: XOR loss {last} after 500 steps (first {})",
            losses[0]
        );
    }
}
