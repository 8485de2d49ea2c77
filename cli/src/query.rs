//! `koel query`: is a key (maybe) in a filter file?

use crate::Outcome;
use anyhow::Context;
use std::ffi::OsString;
use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  koel query users.koel alice             # prints 'maybe\\talice' or 'absent\\talice'
  koel query users.koel alice bob carol
  koel query users.koel < names.txt        # one key per line
  if koel query users.koel \"$name\" >/dev/null; then echo seen; fi

Keys on stdin may end in LF or CRLF (one trailing CR is not part of the
key, as in `koel build`); keys on the command line are taken as given. A
chain of filters answers maybe if any of its filters does.

Exit status with a single key on the command line: 0 if maybe present, 1
if absent. Otherwise 0. 2 on an error (missing or damaged file).";

#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The filter file.
    pub file: PathBuf,
    /// Keys to look up [default: one per line from stdin]. Any bytes on
    /// Unix, as `build` takes key lines.
    pub keys: Vec<OsString>,
}

pub fn main(args: Args) -> anyhow::Result<Outcome> {
    let filter = crate::filter_file::open(&args.file)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut answer = |key: &[u8]| -> anyhow::Result<bool> {
        let hit = filter.contains_hash(filter.hash_bytes(key));
        out.write_all(if hit { b"maybe\t" } else { b"absent\t" })
            .and_then(|()| out.write_all(key))
            .and_then(|()| out.write_all(b"\n"))
            .context("cannot write output")?;
        Ok(hit)
    };
    let mut hits = 0;
    for key in &args.keys {
        // On Unix its bytes whatever they are (a key line of `build` may be
        // any bytes); on Windows its UTF-8 (WTF-8 for ill-formed UTF-16,
        // never equal to a UTF-8 key line).
        hits += usize::from(answer(key.as_encoded_bytes())?);
    }
    if args.keys.is_empty() {
        for line in std::io::stdin().lock().split(b'\n') {
            let line = line.context("cannot read stdin")?;
            // One line end, LF or CRLF: `build` strips the CR of its key
            // lines too, so a key list from Windows finds its keys.
            answer(line.strip_suffix(b"\r").unwrap_or(&line))?;
        }
    }
    out.flush().context("cannot write output")?;
    Ok(if args.keys.len() == 1 && hits == 0 {
        Outcome::CheckFailed
    } else {
        Outcome::Success
    })
}
