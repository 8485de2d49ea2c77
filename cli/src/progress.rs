//! Progress bars on stderr, drawn only when stderr is a terminal (never in
//! pipes, logs or tests).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// A bar over `len` units (`None`: a spinner), hidden unless stderr is a
/// terminal.
pub fn bar(len: Option<u64>, template: &str) -> ProgressBar {
    let bar = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(8));
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(125));
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}
