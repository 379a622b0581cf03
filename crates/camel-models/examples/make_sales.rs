//! Writes `datasets/sales-example.tsv`, the tabular-regression example: 400 rows of the formula
//! in `camel_models::data::SALES_FORMULA` with seeded noise.
//!
//! ```text
//! cargo run -p camel-models --example make_sales [-- OUT.tsv]
//! ```

fn main() -> std::io::Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../datasets/sales-example.tsv"
        )
        .to_string()
    });
    std::fs::write(&out, camel_models::data::sales_example_tsv(400, 7))?;
    println!("wrote {out}");
    Ok(())
}
