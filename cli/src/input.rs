//! The input of `dedup` and `build`, taken the same way by both: files
//! (or stdin) of records read one after the other, and where in a record
//! its key is.

use anyhow::Context;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Records sized for when an input's size is unknown (stdin, pipes).
pub const DEFAULT_EXPECTED: u64 = 10_000_000;

/// The input options of `dedup` and `build`.
#[derive(clap::Args, Debug)]
pub struct InputArgs {
    /// Input files, read in order ("-" is stdin) [default: stdin].
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The same as FILE... (kept for scripts written for `build --input`).
    #[arg(
        long = "input",
        short = 'i',
        value_name = "FILE",
        hide = true,
        conflicts_with = "files"
    )]
    input: Vec<PathBuf>,
    /// The key is this field (1-based) instead of the whole line.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub field: Option<u32>,
    /// Field delimiter for --field: one byte, or "tab".
    #[arg(long, default_value = "tab", value_parser = crate::parse::delimiter)]
    pub delimiter: u8,
}

impl InputArgs {
    /// The input paths as given (`-` is stdin; none means stdin).
    pub fn paths(&self) -> &[PathBuf] {
        if self.input.is_empty() {
            &self.files
        } else {
            &self.input
        }
    }

    /// Where the key is; `strip_cr` as in [`KeySpec`].
    pub fn key(&self, strip_cr: bool) -> KeySpec {
        KeySpec {
            field: self.field.map(|f| f as usize),
            delimiter: self.delimiter,
            strip_cr,
        }
    }
}

/// Where the key of a record is.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// The 1-based field holding the key, or the whole line.
    pub field: Option<usize>,
    pub delimiter: u8,
    /// Strip one trailing `\r` (CRLF line ends) before finding the key:
    /// `build`'s key lists, so that they match `query`'s. `dedup` keeps it:
    /// a record and its key are bytes, CR included.
    pub strip_cr: bool,
}

impl KeySpec {
    /// The key of `line`, or `None` if it has fewer fields than `field`.
    #[inline]
    pub fn key<'a>(&self, line: &'a [u8]) -> Option<&'a [u8]> {
        let line = match line {
            [rest @ .., b'\r'] if self.strip_cr => rest,
            _ => line,
        };
        match self.field {
            None => Some(line),
            Some(k) => line.split(|&b| b == self.delimiter).nth(k - 1),
        }
    }
}

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

/// A file up to this size has its records counted; a larger one is
/// sampled (a full count of a 300 MB file added 0.25 s to a 1.1 s run).
const COUNT_WHOLE: u64 = 8 << 20;
/// Bytes of each window read.
const WINDOW: u64 = 16 << 10;
/// Windows of a sampled file, evenly spaced (4 MiB in all).
const SAMPLES: u64 = 256;

impl Inputs {
    /// Opens every path (`-` is stdin; none at all means stdin).
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

    /// Records to size a filter for: the regular files' records with a
    /// little room, since a filter is built for its capacity and not a slot
    /// more, plus [`DEFAULT_EXPECTED`] if some input is not a regular file
    /// (stdin, a pipe), whose records cannot be known in advance. A small
    /// file is counted; a large one is estimated from the newlines in
    /// windows spread evenly over all of it, so that no one region (a long
    /// first line) decides. Files are rewound.
    pub fn expected_records(&self) -> anyhow::Result<u64> {
        let mut records = 0u64;
        let mut unsized_input = false;
        let mut buf = Vec::with_capacity(WINDOW as usize);
        for source in &self.sources {
            let Source::File { path, file, len } = source else {
                unsized_input = true;
                continue;
            };
            let len = *len;
            if len == 0 {
                // Empty, or not a regular file (a FIFO cannot be read twice).
                unsized_input |= !file.metadata().is_ok_and(|m| m.is_file());
                continue;
            }
            let context = || format!("cannot read {}", path.display());
            // Reads through `&File` (its position is the file's): rewound below.
            let mut file: &File = file;
            let whole = len <= COUNT_WHOLE;
            let (windows, step) = match whole {
                true => (len.div_ceil(WINDOW), WINDOW),
                false => (SAMPLES, len / SAMPLES),
            };
            let (mut read, mut newlines, mut last) = (0u64, 0u64, b'\n');
            for w in 0..windows {
                file.seek(SeekFrom::Start(step * w)).with_context(context)?;
                buf.clear();
                file.take(WINDOW)
                    .read_to_end(&mut buf)
                    .with_context(context)?;
                read += buf.len() as u64;
                newlines += memchr::memchr_iter(b'\n', &buf).count() as u64;
                last = buf.last().copied().unwrap_or(last);
            }
            records += if whole {
                newlines + u64::from(last != b'\n')
            } else {
                // A quarter more than the density says: sampling error and
                // uneven files cost a little memory instead of a doubling.
                (newlines as f64 * len as f64 / read.max(1) as f64 * 1.25) as u64 + 1
            };
            file.seek(SeekFrom::Start(0)).with_context(context)?;
        }
        let sized = records + records / 64 + 1000;
        Ok(sized + if unsized_input { DEFAULT_EXPECTED } else { 0 })
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
