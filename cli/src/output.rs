//! How every command writes its files, so that none damages what it was
//! given: an output that is a regular file (or does not exist yet) is
//! written to a temporary file and renamed over it only when the command
//! succeeds ([`koel::AtomicFile`], as `sort -o`), so a dedup output may
//! be one of its inputs (a build's may not: [`refuse_output_onto`]) and a
//! failed command leaves the old file. A symbolic link
//! is written through; anything else that is not a regular file is
//! refused, except by `dedup -o`, which streams into a FIFO or a device.

use anyhow::Context;
use koel::AtomicFile;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// `println!` for a command's report: the write's error is returned
/// (`cannot write output: ...`, one line and exit status 2) instead of
/// `println!`'s panic, e.g. when stdout is a full disk (`koel info f.koel
/// > report.txt`). On Unix a closed pipe never gets here: SIGPIPE ends
/// the process first (`main.rs`); elsewhere it is this error too.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::to_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that ignores a failed write (`eprintln!` panics, exit
/// status 101): with stderr gone there is nobody to tell, and the exit
/// status still says how the command ended.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Writes `text` to stdout and flushes it (`print!` for [`outln!`](crate::outln)).
pub fn to_stdout(text: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_fmt(text)
        .and_then(|()| stdout.flush())
        .context("cannot write output")
}

/// Fails early, before long work, if `path` cannot be written as an
/// output file; creates nothing.
pub fn check(path: &Path) -> anyhow::Result<()> {
    AtomicFile::create(path)
        .map(drop)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `bytes` to `path` under the rule above (plots, reports).
pub fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let context = || format!("cannot write {}", path.display());
    let mut out = AtomicFile::create(path).with_context(context)?;
    out.write_all(bytes).with_context(context)?;
    out.commit().with_context(context)
}

/// A streamed output file (`dedup -o`): replaced atomically if it is a
/// regular file, written through if it is a FIFO or a device.
#[derive(Debug)]
pub enum Stream {
    /// A regular file, replaced on [`finish`](Self::finish).
    Replace(AtomicFile),
    /// A FIFO or device, written as it comes.
    Through(File),
}

impl Stream {
    pub fn create(path: &Path) -> anyhow::Result<Stream> {
        let context = || format!("cannot write {}", path.display());
        match std::fs::metadata(path) {
            Ok(m) if is_streamable(&m) => OpenOptions::new()
                .write(true)
                .open(path)
                .map(Stream::Through)
                .with_context(context),
            _ => AtomicFile::create(path)
                .map(Stream::Replace)
                .with_context(context),
        }
    }

    pub fn file(&mut self) -> &mut File {
        match self {
            Stream::Replace(f) => f.file(),
            Stream::Through(f) => f,
        }
    }

    /// Puts the output in place (a regular file), or flushes it.
    pub fn finish(self) -> io::Result<()> {
        match self {
            Stream::Replace(f) => f.commit(),
            Stream::Through(mut f) => f.flush(),
        }
    }
}

/// A FIFO or a character device: something a stream of records goes into.
#[cfg(unix)]
fn is_streamable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    m.file_type().is_fifo() || m.file_type().is_char_device()
}

#[cfg(not(unix))]
fn is_streamable(_m: &std::fs::Metadata) -> bool {
    false
}

/// Fails if stdout is a regular file that is also one of `inputs` (`koel
/// dedup f.txt >> f.txt`), or stdin when it reads stdin (`koel dedup <
/// f.txt >> f.txt`; no paths, or `-`): the command would read what it
/// writes. `-` is stdin, never a file of that name.
pub fn refuse_stdout_onto(inputs: &[PathBuf]) -> anyhow::Result<()> {
    let Some(stdout) = stdio_file(io::stdout()) else {
        return Ok(());
    };
    if reads_stdin(inputs) && stdio_file(io::stdin()) == Some(stdout) {
        anyhow::bail!("standard input is also the output (stdout): use -o FILE to replace it");
    }
    match named(inputs).find(|&p| path_id(p) == Some(stdout)) {
        Some(input) => anyhow::bail!(
            "input file {} is also the output (stdout): use -o {} to replace it",
            input.display(),
            input.display()
        ),
        None => Ok(()),
    }
}

/// Fails if `output` is one of `inputs` (`koel build keys.txt -o
/// keys.txt`, or `koel build -o keys.txt < keys.txt`: no paths, or `-`,
/// read stdin): a filter file written there would replace the key list it
/// was built from. (`dedup -o` may name an input: its output is a
/// refinement of it, as for `sort -o`.)
pub fn refuse_output_onto(output: &Path, inputs: &[PathBuf]) -> anyhow::Result<()> {
    if !output.exists() {
        return Ok(()); // not there yet: no input can be it
    }
    if reads_stdin(inputs) && stdio_file(io::stdin()).is_some_and(|i| path_id(output) == Some(i)) {
        anyhow::bail!(
            "standard input is also the output {}: the filter would replace it (choose another --output)",
            output.display()
        );
    }
    if let Some(input) = named(inputs).find(|&input| same_file(input, output)) {
        anyhow::bail!(
            "input file {} is also the output: the filter would replace it (choose another --output)",
            input.display()
        );
    }
    Ok(())
}

/// Whether a command given `inputs` reads stdin: no paths, or `-`.
fn reads_stdin(inputs: &[PathBuf]) -> bool {
    inputs.is_empty() || inputs.iter().any(|p| p.as_os_str() == "-")
}

/// The inputs that name files (`-` is stdin, never a file of that name).
fn named(inputs: &[PathBuf]) -> impl Iterator<Item = &Path> {
    inputs
        .iter()
        .filter(|p| p.as_os_str() != "-")
        .map(PathBuf::as_path)
}

/// Device and inode of the regular file behind `stream` (stdin or
/// stdout), if it is one.
#[cfg(unix)]
fn stdio_file(stream: impl std::os::fd::AsFd) -> Option<(u64, u64)> {
    let fd = stream.as_fd().try_clone_to_owned().ok()?;
    let m = File::from(fd).metadata().ok().filter(|m| m.is_file())?;
    identity(&m)
}

#[cfg(not(unix))]
fn stdio_file<S>(_: S) -> Option<(u64, u64)> {
    None
}

/// Device and inode of the file `path` names.
fn path_id(path: &Path) -> Option<(u64, u64)> {
    identity(&std::fs::metadata(path).ok()?)
}

/// Device and inode of a file; none off Unix, where std cannot tell which
/// file a descriptor is.
#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// Whether paths `a` and `b` name one file (on Unix also through hard
/// links; elsewhere by [`canonical`] path).
fn same_file(a: &Path, b: &Path) -> bool {
    match (path_id(a), path_id(b)) {
        (Some(a), Some(b)) => a == b,
        _ => !cfg!(unix) && canonical(a) == canonical(b),
    }
}

/// Fails if two outputs of one command are the same file (the last would
/// silently win).
pub fn refuse_same_file(a: &Path, a_what: &str, b: &Path, b_what: &str) -> anyhow::Result<()> {
    if canonical(a) == canonical(b) {
        anyhow::bail!(
            "{a_what} {} and {b_what} {} are the same file",
            a.display(),
            b.display()
        );
    }
    Ok(())
}

/// `path` with its directory's symbolic links and `.`/`..` resolved, and
/// its own link followed if it is one; as given if that fails.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        match (
            std::fs::canonicalize(dir.unwrap_or(Path::new("."))),
            path.file_name(),
        ) {
            (Ok(dir), Some(name)) => dir.join(name),
            _ => path.to_path_buf(),
        }
    })
}
