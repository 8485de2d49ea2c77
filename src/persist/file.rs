//! Atomic replacement of a file: write a temporary file beside it, sync it,
//! rename it over the target, sync the directory.
//!
//! `rename` within one directory is atomic on POSIX file systems: a reader
//! (or a reboot) sees the old file or the new one, never a mix. The first
//! sync makes sure the new file's bytes are on disk before the rename can
//! be; without it a crash right after the rename can leave an empty or torn
//! file under the old name (the classic ext4 delayed-allocation loss). The
//! directory sync makes the rename itself durable.
//!
//! What is replaced, and how:
//!
//! * only a regular file, or nothing: a directory, device, FIFO or socket
//!   at the path is refused (renaming over `/dev/full` as root would
//!   replace the device node with a file);
//! * a symbolic link is followed: the file it points to is replaced (or
//!   created) and the link stays a link;
//! * the new file keeps the old one's permission bits (and, where the
//!   process may, its owner and group);
//! * on Linux the temporary file is created with `O_TMPFILE`: it has no
//!   name while it is written, so a process killed mid-save (`kill -9`,
//!   OOM) leaves nothing partial behind. It gets a name only for the two
//!   system calls that link and rename it (Linux cannot link over a file);
//!   that name is the target's own, so the complete file a process killed
//!   between those calls leaves is removed by the next save of the same
//!   target once it is 10 s old. Elsewhere (or on file systems without
//!   `O_TMPFILE`) it is a short hidden name, `.koel-<16 hex>.tmp`, removed
//!   on error; its length does not depend on the target's, so any legal
//!   file name can be saved to.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A file being written that replaces `target` atomically on
/// [`commit`](Self::commit), and vanishes if dropped before.
///
/// Shared with the `koel` command-line tool, which writes every output
/// file this way; not part of the library's stable API.
#[derive(Debug)]
pub struct AtomicFile {
    file: File,
    /// The file to replace, symbolic links resolved.
    target: PathBuf,
    /// `target`'s directory.
    dir: PathBuf,
    /// The temporary file's name, if it has one (not with `O_TMPFILE`).
    temp: Option<PathBuf>,
    /// Whether `target` existed when we started.
    replaces: bool,
}

impl AtomicFile {
    /// Starts replacing `path`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if `path` names no file (`/`, `..`), is something
    /// other than a regular file, or is a loop of symbolic links;
    /// `PermissionDenied` if it exists and the caller may not write it (a
    /// write-protected file is not replaced); any error creating the
    /// temporary file (e.g. a read-only directory).
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        let target = resolve(path)?;
        let old = match std::fs::metadata(&target) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if let Some(m) = &old {
            if !m.is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "it is {}, not a regular file (koel replaces only regular files)",
                        file_type_name(m)
                    ),
                ));
            }
            // Replace only a file the caller may write in place, as `sort
            // -o`, `cp` and a shell redirection do: the rename below needs
            // only the directory's permission, and would replace a
            // write-protected file. Opening it for writing, without
            // truncating, changes nothing.
            OpenOptions::new().write(true).open(&target)?;
        }
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let (file, temp) = create_temp(&dir)?;
        let mut this = AtomicFile {
            file,
            target,
            dir,
            temp,
            replaces: old.is_some(),
        };
        if let Some(m) = &old {
            this.copy_owner_and_mode(m)?;
        }
        Ok(this)
    }

    /// The file that will be replaced (symbolic links resolved).
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file, for writing.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Syncs the new file, puts it in place of the target and syncs the
    /// directory.
    ///
    /// # Errors
    ///
    /// Any I/O error; the target is then as it was.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all()?;
        match self.temp.take() {
            Some(temp) => {
                let renamed = std::fs::rename(&temp, &self.target);
                if renamed.is_err() {
                    // Best effort: the rename's error is the one to report.
                    let _ = std::fs::remove_file(&temp);
                }
                renamed?;
            }
            None => self.link_unnamed()?,
        }
        sync_dir(&self.dir)
    }

    /// Gives the unnamed (`O_TMPFILE`) file its name.
    #[cfg(target_os = "linux")]
    fn link_unnamed(&self) -> io::Result<()> {
        if !self.replaces {
            // Nothing to replace: link it under the target's name directly.
            match linux::link_fd(&self.file, &self.target) {
                Ok(()) => return Ok(()),
                // Someone created the target meanwhile: replace it below.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        // `linkat` cannot replace a file: link under a temporary name and
        // rename that over the target. The target's own link name first, so
        // that a save killed between the two calls left its (complete) file
        // where this one finds it: removed here once stale.
        let own = self.dir.join(link_name(&self.target));
        remove_if_stale(&own);
        let mut temp = own;
        loop {
            match linux::link_fd(&self.file, &temp) {
                Ok(()) => {
                    let renamed = std::fs::rename(&temp, &self.target);
                    if renamed.is_err() {
                        let _ = std::fs::remove_file(&temp);
                    }
                    return renamed;
                }
                // A live save of the same target holds it: another name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    temp = self.dir.join(temp_name());
                }
                Err(e) => return Err(e),
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn link_unnamed(&self) -> io::Result<()> {
        unreachable!("only Linux creates unnamed temporary files")
    }

    /// Gives the new file the old one's permission bits, and its owner and
    /// group where this process may (root, or a group change to one of
    /// ours); an owner we may not set is left as ours, as `cp` does.
    #[cfg(unix)]
    fn copy_owner_and_mode(&mut self, old: &Metadata) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let new = self.file.metadata()?;
        if new.uid() != old.uid() || new.gid() != old.gid() {
            // Owner before mode: changing the owner clears set-id bits.
            let _ = std::os::unix::fs::fchown(&self.file, Some(old.uid()), Some(old.gid()))
                .or_else(|_| std::os::unix::fs::fchown(&self.file, None, Some(old.gid())));
        }
        self.file.set_permissions(old.permissions())
    }

    #[cfg(not(unix))]
    fn copy_owner_and_mode(&mut self, old: &Metadata) -> io::Result<()> {
        self.file.set_permissions(old.permissions())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(temp) = &self.temp {
            // Best effort: the error that got us here is the one to report.
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// `path` with symbolic links followed to the file they name, which need
/// not exist yet (a link to a missing file is written through, as the
/// shell's `>` does).
fn resolve(path: &Path) -> io::Result<PathBuf> {
    // The kernel's limit on links followed in one lookup.
    const MAX_LINKS: usize = 40;
    let no_name = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file (it ends in `/` or `..`)",
        )
    };
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if path.file_name().is_none() {
            return Err(no_name());
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        "too many levels of symbolic links",
    ))
}

/// "a directory", "a character device", ... for an error message.
fn file_type_name(m: &Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// A fresh temporary file in `dir`: unnamed where the OS can, else under a
/// short random name (returned).
fn create_temp(dir: &Path) -> io::Result<(File, Option<PathBuf>)> {
    #[cfg(target_os = "linux")]
    if let Some(file) = linux::create_unnamed(dir)? {
        return Ok((file, None));
    }
    loop {
        let path = dir.join(temp_name());
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((f, Some(path))),
            // Taken by a concurrent save (or a stale file): another name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// `.koel-<16 hex digits>.tmp`: short, so that any legal target name can
/// be saved to, and random, so that concurrent saves (of any process)
/// rarely collide; `create_new` settles the rare collision.
fn temp_name() -> OsString {
    use std::hash::{BuildHasher, Hasher};
    use std::time::{SystemTime, UNIX_EPOCH};
    // `RandomState` is seeded randomly per process and per instance.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    OsString::from(format!(".koel-{:016x}.tmp", h.finish()))
}

/// The name under which a save links its finished file next to `target`
/// before renaming it over `target`: one per target, so that a save killed
/// between the two calls leaves a file the next save of `target` finds.
#[cfg(target_os = "linux")]
fn link_name(target: &Path) -> OsString {
    let name = target.file_name().unwrap_or_default();
    let h = xxhash_rust::xxh3::xxh3_64(name.as_encoded_bytes());
    OsString::from(format!(".koel-{h:016x}.tmp"))
}

/// How old a file under a target's [`link_name`] must be before a save
/// takes it for a killed save's leftover: a live save holds that name for
/// the microseconds between its link and its rename.
/// Removes the regular file at `path` if its last status change (its
/// link, for a leftover) is older than [`STALE_AFTER`]. Best effort: a
/// leftover that stays is only disk space.
#[cfg(target_os = "linux")]
fn remove_if_stale(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return;
    };
    let changed = std::time::UNIX_EPOCH
        + std::time::Duration::new(
            u64::try_from(m.ctime()).unwrap_or(0),
            u32::try_from(m.ctime_nsec()).unwrap_or(0),
        );
    let stale = changed.elapsed().is_ok_and(|age| age >= STALE_AFTER);
    if m.is_file() && stale {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(all(target_os = "linux", not(test)))]
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(10);
#[cfg(all(target_os = "linux", test))]
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    use std::path::Path;

    /// An unnamed file in `dir` (`O_TMPFILE`), or `None` where the kernel,
    /// the file system or a missing `/proc` (needed to name it later) does
    /// not allow one.
    pub(super) fn create_unnamed(dir: &Path) -> io::Result<Option<File>> {
        if !Path::new("/proc/self/fd").is_dir() {
            return Ok(None);
        }
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(dir)
        {
            Ok(f) => Ok(Some(f)),
            // EOPNOTSUPP: the file system has no O_TMPFILE; EISDIR or
            // EINVAL: a kernel older than 3.11 (O_TMPFILE includes
            // O_DIRECTORY, so an old kernel opens the directory).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Gives the unnamed `file` the name `path` (fails if `path` exists).
    pub(super) fn link_fd(file: &File, path: &Path) -> io::Result<()> {
        let invalid = |_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte");
        let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(invalid)?;
        let to = CString::new(path.as_os_str().as_bytes()).map_err(invalid)?;
        // SAFETY: both pointers are NUL-terminated strings that live until
        // the call returns; `linkat` reads them and keeps nothing.
        let rc = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                // Follow the /proc magic link to the open file itself
                // (linking by `AT_EMPTY_PATH` would need a capability).
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// Replaces `target` with what `write` writes, atomically (see the module
/// docs). On any error `target` is left as it was and nothing is left
/// behind.
pub(crate) fn replace_atomically(
    target: &Path,
    write: impl FnOnce(&mut BufWriter<&mut File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut out = AtomicFile::create(target)?;
    {
        // The payload is written in large chunks; the buffer only merges
        // the small header and trailer writes.
        let mut w = BufWriter::with_capacity(64 * 1024, out.file());
        write(&mut w)?;
        w.flush()?;
    }
    out.commit()
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

    /// Every name in `dir` but `keep`.
    fn leftovers(dir: &Path, keep: &str) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != keep)
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_stale_leftover_of_a_killed_save_is_removed_by_the_next_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.koel");
        filter(1, 0..1000).save(&path).unwrap();
        // What a save killed between its link and its rename leaves: a
        // complete file under the target's own link name.
        let left = dir.path().join(link_name(&path));
        std::fs::copy(&path, &left).unwrap();
        // Fresh, it may be a live save's: kept, and this save links under
        // another name.
        filter(2, 0..1000).save(&path).unwrap();
        assert_eq!(CuckooFilter::load(&path).unwrap().seed(), 2);
        assert!(left.exists(), "a fresh link name may be a live save's");
        std::thread::sleep(STALE_AFTER + std::time::Duration::from_millis(200));
        filter(3, 0..1000).save(&path).unwrap();
        assert_eq!(CuckooFilter::load(&path).unwrap().seed(), 3);
        assert_eq!(
            leftovers(dir.path(), "f.koel"),
            Vec::<String>::new(),
            "the stale leftover is removed"
        );
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
        assert!(
            leftovers(dir.path(), "f.koel").is_empty(),
            "temp file removed"
        );

        // And a save that succeeds replaces it.
        new.save(&path).unwrap();
        let back = CuckooFilter::load(&path).unwrap();
        assert_eq!(back.seed(), 2);
        assert!((500_000..600_000u64).all(|k| back.contains(&k)));
        assert!(leftovers(dir.path(), "f.koel").is_empty());
    }

    #[test]
    fn the_named_fallback_also_leaves_nothing_and_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.koel");
        std::fs::write(&path, b"old").unwrap();
        let (file, temp) = {
            let p = dir.path().join(temp_name());
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
                .unwrap();
            (f, Some(p))
        };
        let mut out = AtomicFile {
            file,
            target: path.clone(),
            dir: dir.path().to_path_buf(),
            temp,
            replaces: true,
        };
        out.write_all(b"half").unwrap();
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert!(leftovers(dir.path(), "f.koel").is_empty());
    }

    #[test]
    fn the_named_fallback_commits_by_rename() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.koel");
        std::fs::write(&path, b"old").unwrap();
        let temp = dir.path().join(temp_name());
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .unwrap();
        let mut out = AtomicFile {
            file,
            target: path.clone(),
            dir: dir.path().to_path_buf(),
            temp: Some(temp),
            replaces: true,
        };
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert!(leftovers(dir.path(), "f.koel").is_empty());
    }

    #[test]
    fn a_path_without_a_file_name_is_an_error() {
        let f = filter(3, 0..10);
        let err = f.save(Path::new("/")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
