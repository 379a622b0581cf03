use camel_core::*;
#[test]
fn smoke() -> Result<()> {
    let d = Device::Cpu;
    let x = Tensor::randn(&[5, 4], 0, d)?;
    let w = Tensor::randn(&[3, 4], 1, d)?;
    let b = Tensor::randn(&[3], 2, d)?;
    let t = Tensor::from_vec_i64(vec![0, 1, 2, 1, 0], &[5], d)?;
    let f = |a: &[Tensor]| {
        a[0].matmul_t(&a[1], false, true)?
            .add(&a[2])?
            .gelu()?
            .log_softmax()
    };
    let err = gradcheck(
        f,
        &[x.clone(), w.clone(), b.clone()],
        GradcheckOptions::default(),
    )?;
    println!("worst {err}");
    let f2 = |a: &[Tensor]| {
        a[0].matmul_t(&a[1], false, true)?
            .add(&a[2])?
            .tanh()?
            .cross_entropy(&t)
    };
    gradcheck(
        f2,
        &[x.clone(), w.clone(), b.clone()],
        GradcheckOptions::default(),
    )?;
    let f3 = |a: &[Tensor]| {
        a[0].reshape(&[2, 10])?
            .transpose(0, 1)?
            .pad(&[(1, 2), (0, 1)], 0.5)?
            .max_dim(1, false)?
            .sigmoid()
    };
    gradcheck(f3, &[x.clone()], GradcheckOptions::default())?;
    let f4 = |a: &[Tensor]| {
        a[0].reshape(&[4, 5, 1])?
            .matmul(
                &a[1]
                    .reshape(&[1, 3, 4])?
                    .broadcast_to(&[4, 3, 4])?
                    .transpose(1, 2)?
                    .narrow(1, 0, 1)?,
            )?
            .softmax()
    };
    gradcheck(f4, &[x.clone(), w.clone()], GradcheckOptions::default())?;
    let f5 = |a: &[Tensor]| a[0].div(&a[1].exp()?)?.mean_dim(0, true)?.sqrt();
    gradcheck(
        f5,
        &[x.exp()?, Tensor::randn(&[4], 3, d)?],
        GradcheckOptions::default(),
    )?;
    let e = x.add(&w);
    println!("{}", e.unwrap_err());
    Ok(())
}
