//! koel's research harness, kept out of the user's `koel` binary: the
//! design study's test matrix ([`bench`], run as `koel-lab bench`). The
//! memory-floor bench (`benches/floor.rs`) and the huge-pages experiment
//! (`examples/huge_pages.rs`) live beside it. It reuses the CLI's stress
//! runner, key generators and output helpers through the `koel-cli`
//! library.

pub mod bench;
