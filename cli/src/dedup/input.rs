//! The input of `koel dedup`: files (or stdin) read one after the other.

use anyhow::Context;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

enum Source {
    Stdin,
    File { path: PathBuf, file: File, len: u64 },
}

/// The inputs, opened up front so that a missing file fails before any
/// output is written. Reads them in order as one stream, ending each
/// input's last record with a newline if it lacks one.
pub struct Inputs {
    sources: Vec<Source>,
    current: usize,
    /// The last byte read from the current source.
    last: Option<u8>,
}

/// Bytes sampled to estimate the mean record length.
const SAMPLE: u64 = 1 << 20;

impl Inputs {
    /// Opens every path (`-` is stdin; none at all means stdin).
    ///
    /// # Errors
    ///
    /// A path that cannot be opened, or is a directory.
    pub fn open(paths: &[PathBuf]) -> anyhow::Result<Self> {
        let mut sources = Vec::with_capacity(paths.len().max(1));
        for path in paths {
            if path.as_os_str() == "-" {
                sources.push(Source::Stdin);
                continue;
            }
            let file =
                File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            let meta = file
                .metadata()
                .with_context(|| format!("cannot read {}", path.display()))?;
            if meta.is_dir() {
                anyhow::bail!("cannot read {}: it is a directory", path.display());
            }
            sources.push(Source::File {
                path: path.clone(),
                file,
                len: if meta.is_file() { meta.len() } else { 0 },
            });
        }
        if sources.is_empty() {
            sources.push(Source::Stdin);
        }
        Ok(Inputs {
            sources,
            current: 0,
            last: None,
        })
    }

    /// Total bytes, if every input is a regular file.
    pub fn total_bytes(&self) -> Option<u64> {
        self.sources
            .iter()
            .map(|s| match s {
                Source::File { len, .. } if *len > 0 => Some(*len),
                _ => None,
            })
            .sum()
    }

    /// An estimate of the number of records (a little high), from the
    /// files' sizes and the mean record length of the first megabyte; `None`
    /// if some input is not a regular file.
    ///
    /// # Errors
    ///
    /// If the sample cannot be read.
    pub fn estimate_records(&self) -> anyhow::Result<Option<u64>> {
        let Some(total) = self.total_bytes() else {
            return Ok(None);
        };
        let Some(Source::File { path, .. }) = self.sources.first() else {
            return Ok(None);
        };
        let mut sample = Vec::new();
        File::open(path)
            .and_then(|f| f.take(SAMPLE).read_to_end(&mut sample))
            .with_context(|| format!("cannot read {}", path.display()))?;
        let lines = memchr::memchr_iter(b'\n', &sample).count().max(1) as u64;
        let mean = (sample.len() as u64 / lines).max(1);
        Ok(Some((total / mean).saturating_mul(11) / 10 + 1000))
    }
}

fn read_error(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()))
}

impl Read for Inputs {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(source) = self.sources.get_mut(self.current) {
            let n = match source {
                Source::Stdin => io::stdin()
                    .lock()
                    .read(buf)
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot read stdin: {e}")))?,
                Source::File { path, file, .. } => {
                    file.read(buf).map_err(|e| read_error(path, e))?
                }
            };
            if n > 0 || buf.is_empty() {
                self.last = buf[..n].last().copied().or(self.last);
                return Ok(n);
            }
            self.current += 1;
            // A file whose last record lacks its newline ends that record
            // (as awk reads files), rather than gluing it to the next file.
            if self.last.take().is_some_and(|b| b != b'\n') {
                buf[0] = b'\n';
                return Ok(1);
            }
        }
        Ok(0)
    }
}
