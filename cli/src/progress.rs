//! Progress bars on stderr, drawn only when stderr is a terminal (never in
//! pipes, logs or tests).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `--quiet` was given: no bar is drawn.
static HIDDEN: AtomicBool = AtomicBool::new(false);

/// Draws no bar from now on (`--quiet`).
pub fn hide() {
    // Relaxed: set before the command starts any thread that draws.
    HIDDEN.store(true, Ordering::Relaxed);
}

/// A bar over `len` units (`None`: a spinner), hidden unless stderr is a
/// terminal and the command is not `--quiet`.
pub fn bar(len: Option<u64>, template: &str) -> ProgressBar {
    let bar = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    // Relaxed: see `hide`.
    if std::io::stderr().is_terminal() && !HIDDEN.load(Ordering::Relaxed) {
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
