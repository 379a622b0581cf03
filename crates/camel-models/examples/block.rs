//! `cargo run --example block [-- --device cpu|cuda]`: a transformer block without attention (LayerNorm →
//! Linear → GELU → Linear, residual) learns a token-to-token map; prints the loss.
use camel_models::block::train_block;
use camel_nn::Device;

fn main() -> camel_models::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let device: Device = args
        .iter()
        .position(|a| a == "--device")
        .and_then(|i| args.get(i + 1))
        .or(args.first())
        .map(|s| s.parse().expect("device: cpu or cuda"))
        .unwrap_or(Device::Cpu);
    let losses = train_block(32, 64, 16, 32, 300, 0, device)?;
    for (i, l) in losses.iter().enumerate().step_by(50) {
        println!("step {i:4}: loss {l:.5}");
    }
    let (first, last) = (losses[0], *losses.last().unwrap());
    println!(
        "{device}: initial loss {first:.4}, final loss {last:.5} ({:.0}× lower)",
        first / last
    );
    Ok(())
}
