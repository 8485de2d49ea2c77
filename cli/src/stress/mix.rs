//! `--mix`: the weights of the three operations of a stress run.

use anyhow::{bail, Context};
use std::fmt;
use std::str::FromStr;

/// Weights of the three operations, from `--mix read=90,insert=9,remove=1`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mix {
    /// Weight of `contains`.
    pub read: u32,
    /// Weight of `insert_unique`.
    pub insert: u32,
    /// Weight of `remove`.
    pub remove: u32,
}

impl Mix {
    pub fn total(&self) -> u32 {
        self.read + self.insert + self.remove
    }
}

impl FromStr for Mix {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let mut mix = Mix::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, weight)) = part.split_once('=') else {
                bail!("mix entry {part:?} is not NAME=WEIGHT (e.g. read=90,insert=9,remove=1)");
            };
            let weight: u32 = weight
                .trim()
                .parse()
                .ok()
                .filter(|&w| w <= 1_000_000)
                .with_context(|| {
                    format!("mix weight {weight:?} is not a whole number from 0 to 1000000")
                })?;
            let slot = match name.trim() {
                "read" | "contains" => &mut mix.read,
                "insert" => &mut mix.insert,
                "remove" | "delete" => &mut mix.remove,
                other => bail!("unknown operation {other:?} in mix: use read, insert, remove"),
            };
            *slot = weight;
        }
        if mix.total() == 0 {
            bail!("mix {s:?} has no operation with a weight above 0");
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "read={},insert={},remove={}",
            self.read, self.insert, self.remove
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_parses_weights_and_rejects_nonsense() {
        let m: Mix = "read=90,insert=9,remove=1".parse().unwrap();
        assert_eq!((m.read, m.insert, m.remove), (90, 9, 1));
        let m: Mix = "insert=1".parse().unwrap();
        assert_eq!((m.read, m.insert, m.remove), (0, 1, 0));
        for bad in [
            "",
            "read=0",
            "read",
            "read=x",
            "read=-1",
            "write=5",
            "read=99999999999",
        ] {
            assert!(bad.parse::<Mix>().is_err(), "{bad:?} should not parse");
        }
    }
}
