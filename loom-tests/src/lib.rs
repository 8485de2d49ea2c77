//! Loom models of koel live in `tests/`; build with `RUSTFLAGS="--cfg loom"`.
