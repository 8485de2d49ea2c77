//! Atomic replacement of a file: write a temporary file beside it, sync it,
//! rename it over the target, sync the directory.
//!
//! `rename` within one directory is atomic on POSIX file systems: a reader
//! (or a reboot) sees the old file or the new one, never a mix. The first
//! sync makes sure the new file's bytes are on disk before the rename can
//! be; without it a crash right after the rename can leave an empty or torn
//! file under the old name (the classic ext4 delayed-allocation loss). The
//! directory sync makes the rename itself durable.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of concurrent saves within one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// A temporary file beside `target` that is removed unless kept.
struct Temp {
    path: PathBuf,
    keep: bool,
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.keep {
            // Best effort: the error that got us here is the one to report.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates a fresh temporary file in `dir`, named after `name`.
fn create_temp(dir: &Path, name: &str) -> io::Result<(Temp, File)> {
    let pid = std::process::id();
    loop {
        // Relaxed: only uniqueness matters, no other memory is ordered.
        let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".{name}.{pid}.{n}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((Temp { path, keep: false }, f)),
            // A stale file of an earlier process with our pid: next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Replaces `target` with what `write` writes, atomically (see the module
/// docs). On any error the temporary file is removed and `target` is left
/// as it was.
pub(crate) fn replace_atomically(
    target: &Path,
    write: impl FnOnce(&mut BufWriter<&mut File>) -> io::Result<()>,
) -> io::Result<()> {
    let name = target.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot save to {}: not a file name", target.display()),
        )
    })?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (mut temp, mut file) = create_temp(dir, name)?;
    {
        // The payload is written in large chunks; the buffer only merges
        // the small header and trailer writes.
        let mut w = BufWriter::with_capacity(64 * 1024, &mut file);
        write(&mut w)?;
        w.flush()?;
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp.path, target)?;
    temp.keep = true;
    sync_dir(dir)
}

/// Makes a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Windows has no directory handle to sync; `MoveFileEx` (behind `rename`)
/// is as durable as it gets there.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CuckooFilter;

    /// A writer that fails once `left` bytes have gone through.
    struct FailAfter<W> {
        inner: W,
        left: usize,
    }

    impl<W: Write> Write for FailAfter<W> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::Error::other("injected failure"));
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            self.inner.write(&buf[..n])
        }
        fn flush(&mut self) -> io::Result<()> {
            self.inner.flush()
        }
    }

    fn filter(seed: u64, keys: std::ops::Range<u64>) -> CuckooFilter {
        let f = CuckooFilter::builder()
            .capacity(200_000)
            .seed(seed)
            .build()
            .unwrap();
        for k in keys {
            f.insert(&k).unwrap();
        }
        f
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn a_save_failing_halfway_leaves_the_old_file_loadable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.koel");
        let old = filter(1, 0..100_000);
        old.save(&path).unwrap();
        let old_bytes = std::fs::read(&path).unwrap();

        // The same code path as `save`, with the file's writer failing
        // halfway through the payload (a full disk, an I/O error).
        let new = filter(2, 500_000..600_000);
        let half = old_bytes.len() / 2;
        let err = replace_atomically(&path, |w| {
            new.write_to(FailAfter {
                inner: w,
                left: half,
            })
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "injected failure");

        assert_eq!(std::fs::read(&path).unwrap(), old_bytes, "old file intact");
        let back = CuckooFilter::load(&path).unwrap();
        assert_eq!(back.seed(), 1);
        assert!((0..100_000u64).all(|k| back.contains(&k)));
        assert!(leftovers(dir.path()).is_empty(), "temp file removed");

        // And a save that succeeds replaces it.
        new.save(&path).unwrap();
        let back = CuckooFilter::load(&path).unwrap();
        assert_eq!(back.seed(), 2);
        assert!((500_000..600_000u64).all(|k| back.contains(&k)));
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_path_without_a_file_name_is_an_error() {
        let f = filter(3, 0..10);
        let err = f.save(Path::new("/")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
