//! `cargo run --example xor [-- cuda]`: an MLP learns XOR.
use camel_models::xor::train_xor;
use camel_nn::Device;

fn main() -> camel_models::Result<()> {
    let device: Device = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("device"))
        .unwrap_or(Device::Cpu);
    let losses = train_xor(500, 0, device)?;
    for (i, l) in losses.iter().enumerate().step_by(50) {
        println!("step {i:4}: loss {l:.5}");
    }
    println!("final loss {:.6}", losses.last().unwrap());
    Ok(())
}
