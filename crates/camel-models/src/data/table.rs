//! Numeric tables from TSV/CSV files: a header row of column names, then one row of numbers per
//! sample. Used by the tabular regression task.

use super::DataError;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A numeric table: named columns, row-major cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Column names from the header row.
    pub columns: Vec<String>,
    /// Number of data rows.
    pub rows: usize,
    /// `rows × columns.len()` cells, row-major.
    pub cells: Vec<f32>,
}

impl Table {
    /// Reads `path`: tab-separated when its name ends in `.tsv` or its header holds a tab, else
    /// comma-separated. A non-numeric or missing cell is an error naming its line and column.
    pub fn load(path: &Path) -> Result<Table, DataError> {
        let bytes = std::fs::read(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                DataError::Missing {
                    path: path.to_path_buf(),
                    hint: "check the --data path".into(),
                }
            } else {
                DataError::Io {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        let first_line = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let tsv = path.extension().is_some_and(|e| e == "tsv") || first_line.contains(&b'\t');
        Self::parse(&bytes, if tsv { b'\t' } else { b',' }, path)
    }

    /// Parses `bytes` with `delimiter`; `path` names the source in errors.
    pub fn parse(bytes: &[u8], delimiter: u8, path: &Path) -> Result<Table, DataError> {
        let mismatch = |detail: String| DataError::Mismatch {
            path: path.to_path_buf(),
            detail,
        };
        let mut rdr = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(bytes);
        let columns: Vec<String> = rdr
            .headers()
            .map_err(|e| mismatch(format!("header row: {e}")))?
            .iter()
            .map(str::to_string)
            .collect();
        if columns.is_empty() || columns.iter().all(|c| c.is_empty()) {
            return Err(mismatch("no header row (expected column names)".into()));
        }
        let mut cells = Vec::new();
        let mut rows = 0usize;
        for record in rdr.records() {
            let record = record.map_err(|e| mismatch(e.to_string()))?;
            let line = record.position().map_or(rows + 2, |p| p.line() as usize);
            if record.len() == 1 && record[0].is_empty() {
                continue; // blank line
            }
            for (j, name) in columns.iter().enumerate() {
                let cell = record.get(j).unwrap_or("");
                if cell.is_empty() {
                    return Err(DataError::BadCell {
                        path: path.to_path_buf(),
                        line,
                        column: name.clone(),
                        value: None,
                    });
                }
                match cell.parse::<f32>() {
                    Ok(v) if v.is_finite() => cells.push(v),
                    _ => {
                        return Err(DataError::BadCell {
                            path: path.to_path_buf(),
                            line,
                            column: name.clone(),
                            value: Some(cell.to_string()),
                        })
                    }
                }
            }
            if record.len() > columns.len() {
                return Err(mismatch(format!(
                    "line {line}: {} cells, the header names {} columns",
                    record.len(),
                    columns.len()
                )));
            }
            rows += 1;
        }
        if rows == 0 {
            return Err(mismatch("no data rows after the header".into()));
        }
        Ok(Table {
            columns,
            rows,
            cells,
        })
    }

    /// Index of column `name`, or an error listing the columns there are.
    pub fn column_index(&self, name: &str, path: &Path) -> Result<usize, DataError> {
        self.columns
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| DataError::MissingColumn {
                path: path.to_path_buf(),
                column: name.to_string(),
                available: self.columns.clone(),
            })
    }

    /// Features and target of every row; `features` defaults to every column but the target.
    pub fn select(
        &self,
        features: Option<&[String]>,
        target: &str,
        path: &Path,
    ) -> Result<Selection, DataError> {
        let t = self.column_index(target, path)?;
        let names: Vec<String> = match features {
            Some(f) => f.to_vec(),
            None => self
                .columns
                .iter()
                .filter(|c| c.as_str() != target)
                .cloned()
                .collect(),
        };
        if names.is_empty() {
            return Err(DataError::Mismatch {
                path: path.to_path_buf(),
                detail: format!("no feature columns besides the target {target:?}"),
            });
        }
        let idx = names
            .iter()
            .map(|n| self.column_index(n, path))
            .collect::<Result<Vec<_>, _>>()?;
        let w = self.columns.len();
        let mut x = Vec::with_capacity(self.rows * idx.len());
        let mut y = Vec::with_capacity(self.rows);
        for r in 0..self.rows {
            let row = &self.cells[r * w..(r + 1) * w];
            x.extend(idx.iter().map(|&j| row[j]));
            y.push(row[t]);
        }
        Ok(Selection { names, x, y })
    }
}

/// Feature and target columns taken from a [`Table`].
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// Feature column names, in order.
    pub names: Vec<String>,
    /// Features, `rows × names.len()`, row-major.
    pub x: Vec<f32>,
    /// Target, one per row.
    pub y: Vec<f32>,
}

/// Per-column mean and standard deviation, fitted on training rows and saved beside the model
/// so that new rows are scaled the same way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    /// Column names, in order.
    pub names: Vec<String>,
    /// Column means.
    pub mean: Vec<f32>,
    /// Column standard deviations (1 where a column is constant).
    pub std: Vec<f32>,
}

impl Standardizer {
    /// Fits the columns of `x` (`n × names.len()`, row-major).
    pub fn fit(names: &[String], x: &[f32]) -> Standardizer {
        let d = names.len().max(1);
        let n = (x.len() / d).max(1) as f64;
        let mut mean = vec![0f64; d];
        let mut sq = vec![0f64; d];
        for row in x.chunks_exact(d) {
            for (j, &v) in row.iter().enumerate() {
                mean[j] += v as f64;
            }
        }
        mean.iter_mut().for_each(|m| *m /= n);
        for row in x.chunks_exact(d) {
            for (j, &v) in row.iter().enumerate() {
                sq[j] += (v as f64 - mean[j]).powi(2);
            }
        }
        let std = sq
            .iter()
            .map(|s| {
                let s = (s / n).sqrt();
                if s > 1e-12 {
                    s as f32
                } else {
                    1.0
                }
            })
            .collect();
        Standardizer {
            names: names.to_vec(),
            mean: mean.into_iter().map(|m| m as f32).collect(),
            std,
        }
    }

    /// `(x − mean) / std`, column by column.
    pub fn apply(&self, x: &[f32]) -> Vec<f32> {
        let d = self.mean.len().max(1);
        x.chunks_exact(d)
            .flat_map(|row| {
                row.iter()
                    .enumerate()
                    .map(|(j, &v)| (v - self.mean[j]) / self.std[j])
            })
            .collect()
    }

    /// `z · std + mean` for a single column `j`.
    pub fn invert(&self, j: usize, z: f32) -> f32 {
        z * self.std[j] + self.mean[j]
    }
}

/// A seeded split of `0..n` into (train, test) indices with `round(n · test_fraction)` test
/// rows (at least one of each when `n ≥ 2`).
pub fn train_test_split(n: usize, test_fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    let mut n_test = (n as f64 * test_fraction).round() as usize;
    if n >= 2 {
        n_test = n_test.clamp(1, n - 1);
    }
    let test = idx.split_off(n - n_test.min(n));
    (idx, test)
}

/// The formula behind `datasets/sales-example.tsv`: weekly sales (thousands of units) from
/// advertising spend and price:
/// `sales = 3 + 0.045·tv + 0.19·radio + 0·newspaper − 0.5·price + ε`, ε ~ N(0, 0.5²).
pub const SALES_FORMULA: SalesFormula = SalesFormula {
    intercept: 3.0,
    coefficients: [0.045, 0.19, 0.0, -0.5],
    noise_std: 0.5,
};

/// Coefficients of the generated sales table (see [`SALES_FORMULA`]).
#[derive(Clone, Copy, Debug)]
pub struct SalesFormula {
    /// Sales at zero spend and zero price.
    pub intercept: f32,
    /// Coefficients of `tv`, `radio`, `newspaper`, `price`, in that order.
    pub coefficients: [f32; 4],
    /// Standard deviation of the noise.
    pub noise_std: f32,
}

/// Column names of the generated sales table.
pub const SALES_COLUMNS: [&str; 5] = ["tv", "radio", "newspaper", "price", "sales"];

/// The generated sales table as TSV text: `n` rows drawn from `seed` with tv ~ U[0, 300),
/// radio ~ U[0, 50), newspaper ~ U[0, 100), price ~ U[1, 10) and sales by [`SALES_FORMULA`],
/// every cell rounded to two decimals.
pub fn sales_example_tsv(n: usize, seed: u64) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let f = SALES_FORMULA;
    let mut out = SALES_COLUMNS.join("\t");
    out.push('\n');
    for _ in 0..n {
        let x = [
            rng.gen_range(0.0..300.0f64),
            rng.gen_range(0.0..50.0f64),
            rng.gen_range(0.0..100.0f64),
            rng.gen_range(1.0..10.0f64),
        ];
        let x = x.map(|v| (v * 100.0).round() / 100.0);
        // Box–Muller: one standard normal from two uniforms
        let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
        let eps = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let y = f.intercept as f64
            + x.iter()
                .zip(f.coefficients)
                .map(|(v, c)| v * c as f64)
                .sum::<f64>()
            + f.noise_std as f64 * eps;
        out.push_str(&format!(
            "{:.2}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\n",
            x[0], x[1], x[2], x[3], y
        ));
    }
    out
}
