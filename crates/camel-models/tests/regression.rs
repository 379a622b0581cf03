//! Tabular regression: the TSV/CSV loader's errors, the seeded split, the standardizer, and a
//! linear fit on `datasets/sales-example.tsv` that recovers the formula it was generated from.

use camel_models::data::{
    sales_example_tsv, train_test_split, DataError, Standardizer, Table, SALES_FORMULA,
};
use camel_models::regression::{Regression, RegressionConfig};
use camel_nn::Device;
use std::path::{Path, PathBuf};

fn sales_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sales-example.tsv")
}

fn parse(text: &str) -> Result<Table, DataError> {
    Table::parse(text.as_bytes(), b'\t', Path::new("t.tsv"))
}

#[test]
fn reads_header_and_numbers() {
    let t = parse("a\tb\n1\t2\n3.5\t-4e2\n").unwrap();
    assert_eq!(t.columns, ["a", "b"]);
    assert_eq!((t.rows, t.cells.clone()), (2, vec![1.0, 2.0, 3.5, -400.0]));
    let csv = Table::parse(b"x,y\n1,2\n", b',', Path::new("t.csv")).unwrap();
    assert_eq!(csv.cells, [1.0, 2.0]);
}

#[test]
fn bad_cell_is_named_by_line_and_column() {
    let e = parse("a\tb\n1\t2\n3\tfour\n").unwrap_err();
    match &e {
        DataError::BadCell {
            line,
            column,
            value,
            ..
        } => {
            assert_eq!((*line, column.as_str()), (3, "b"));
            assert_eq!(value.as_deref(), Some("four"));
        }
        other => panic!("expected BadCell, got {other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "t.tsv: line 3, column \"b\": not a number: \"four\""
    );
    // NaN and infinities are not usable numbers either
    assert!(matches!(parse("a\nnan\n"), Err(DataError::BadCell { .. })));
}

#[test]
fn missing_cell_is_named_by_line_and_column() {
    for text in ["a\tb\n1\t2\n5\t\n", "a\tb\n1\t2\n5\n"] {
        let e = parse(text).unwrap_err();
        assert!(
            matches!(&e, DataError::BadCell { line: 3, column, value: None, .. } if column == "b"),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .contains("line 3, column \"b\": missing value"),
            "{e}"
        );
    }
}

#[test]
fn missing_column_lists_the_header() {
    let t = parse("a\tb\n1\t2\n").unwrap();
    let e = t.select(None, "sales", Path::new("t.tsv")).unwrap_err();
    assert!(matches!(&e, DataError::MissingColumn { column, .. } if column == "sales"));
    assert!(e.to_string().contains("[\"a\", \"b\"]"), "{e}");
    let e = t
        .select(Some(&["a".into(), "c".into()]), "b", Path::new("t.tsv"))
        .unwrap_err();
    assert!(matches!(&e, DataError::MissingColumn { column, .. } if column == "c"));
}

#[test]
fn empty_and_absent_files_are_errors() {
    assert!(matches!(parse("a\tb\n"), Err(DataError::Mismatch { .. })));
    let e = Table::load(Path::new("/nonexistent/camel.tsv")).unwrap_err();
    assert!(matches!(e, DataError::Missing { .. }), "{e:?}");
}

#[test]
fn split_is_seeded_and_disjoint() {
    let (a, b) = train_test_split(100, 0.2, 3);
    assert_eq!((a.len(), b.len()), (80, 20));
    assert_eq!((a.clone(), b.clone()), train_test_split(100, 0.2, 3));
    assert_ne!(b, train_test_split(100, 0.2, 4).1);
    let mut all: Vec<usize> = a.into_iter().chain(b).collect();
    all.sort();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
}

#[test]
fn standardizer_centres_and_scales() {
    let names = vec!["a".to_string(), "c".to_string()];
    let x = [1.0, 5.0, 3.0, 5.0];
    let s = Standardizer::fit(&names, &x);
    assert_eq!(
        (s.mean.clone(), s.std.clone()),
        (vec![2.0, 5.0], vec![1.0, 1.0])
    );
    assert_eq!(s.apply(&x), [-1.0, 0.0, 1.0, 0.0]);
    assert_eq!(s.invert(0, 1.0), 3.0);
}

#[test]
fn committed_example_is_the_generators_output() {
    let on_disk = std::fs::read_to_string(sales_path()).unwrap();
    assert_eq!(
        on_disk,
        sales_example_tsv(400, 7),
        "regenerate with the make_sales example"
    );
}

/// A linear fit on the example recovers the generating formula: each coefficient within
/// 5 % of its value plus 0.01, the intercept within 0.5 (its standard error at 320 rows is
/// about 0.15, since it extrapolates to zero spend and zero price).
#[test]
fn linear_fit_recovers_the_formula() {
    let cfg = RegressionConfig {
        data: sales_path(),
        target: "sales".into(),
        features: None,
        hidden: vec![],
        epochs: 150,
        batch_size: 32,
        lr: 1e-2,
        seed: 0,
        test_fraction: 0.2,
    };
    let (reg, score) = Regression::fit(&cfg, Device::Cpu, |_, _| Ok(())).unwrap();
    let (b, c) = reg.linear_coefficients().unwrap().unwrap();
    let f = SALES_FORMULA;
    for (j, (&got, &want)) in c.iter().zip(&f.coefficients).enumerate() {
        let tol = 0.05 * want.abs() + 0.01;
        assert!(
            (got - want).abs() <= tol,
            "coefficient {j}: {got} vs {want} (±{tol})"
        );
    }
    assert!(
        (b - f.intercept).abs() <= 0.5,
        "intercept {b} vs {}",
        f.intercept
    );
    assert_eq!((score.n_train, score.n_test), (320, 80));
    // the noise is the floor: RMSE near its standard deviation, R² near 1
    assert!(score.rmse < 1.5 * f.noise_std, "{score:?}");
    assert!(score.r2 > 0.97, "{score:?}");
}
