//! Row 7: restart. A filter at rated capacity is saved to a file and to
//! memory, inspected (header and checksum), loaded back, and asked the
//! same questions as the original: every answer must match. A copy with
//! one flipped payload byte must be refused.

use super::common::{uniform_keys, Layout};
use super::Config;
use anyhow::Context;
use koel::{ChecksumStatus, CuckooFilter, Growth};
use std::path::Path;
use std::time::Instant;

/// Save and load of one layout.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RestartRow {
    /// The layout's name.
    pub layout: String,
    /// Items in the filter.
    pub items: u64,
    /// Bytes of the saved file.
    pub file_bytes: u64,
    /// Seconds of `save` (temporary file, fsync, rename, fsync of the
    /// directory).
    pub save_secs: f64,
    /// Seconds of `load` from the file (page cache: it was just written).
    pub load_secs: f64,
    /// Seconds of `write_to` into memory.
    pub write_to_secs: f64,
    /// Seconds of `read_from` out of memory.
    pub read_from_secs: f64,
    /// `inspect` found a valid checksum and the item count.
    pub checksum_valid: bool,
    /// Item count the header holds.
    pub header_items: Option<u64>,
    /// A copy with one payload byte flipped was refused by `read_from`.
    pub corruption_refused: bool,
    /// Keys asked of both filters (inserted and never-inserted).
    pub probes: u64,
    /// Probes the loaded filter answered differently (must be 0).
    pub mismatches: u64,
}

/// Saves and loads a filter of each layout in `dir`.
///
/// # Errors
///
/// A filter cannot be built or filled, or the file cannot be written.
pub fn run(cfg: &Config, dir: &Path) -> anyhow::Result<Vec<RestartRow>> {
    let keys = uniform_keys(cfg.seed ^ 0x5afe, 0..cfg.items)?;
    let absent = uniform_keys(cfg.seed ^ 0x5afe, cfg.items..cfg.items + cfg.negatives)?;
    let mut rows = Vec::new();
    for layout in Layout::ALL {
        let filter = layout.build(cfg.items as usize, Growth::Fixed, cfg.seed)?;
        filter
            .insert_many(&keys)
            .map_err(|e| anyhow::anyhow!("filling the {} filter: {}", layout.name(), e.error))?;
        let path = dir.join(format!("restart-{}bit.koel", layout.bits));

        let start = Instant::now();
        filter
            .save(&path)
            .with_context(|| format!("cannot save to {}", path.display()))?;
        let save_secs = start.elapsed().as_secs_f64();
        let file_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        let start = Instant::now();
        let loaded = CuckooFilter::load(&path)
            .map_err(|e| anyhow::anyhow!("cannot load {}: {e}", path.display()))?;
        let load_secs = start.elapsed().as_secs_f64();
        // The file is only a measurement; do not leave it behind.
        let _ = std::fs::remove_file(&path);

        let mut bytes = Vec::new();
        let start = Instant::now();
        filter
            .write_to(&mut bytes)
            .context("write_to into memory")?;
        let write_to_secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let copy = CuckooFilter::read_from(&bytes[..])
            .map_err(|e| anyhow::anyhow!("read_from memory: {e}"))?;
        let read_from_secs = start.elapsed().as_secs_f64();

        let info = koel::inspect(&bytes[..]).map_err(|e| anyhow::anyhow!("inspect: {e}"))?;
        let checksum_valid = info.checksum == ChecksumStatus::Valid;
        let mut corrupt = bytes.clone();
        let at = corrupt.len() - corrupt.len() / 3;
        corrupt[at] ^= 0x10;
        let corruption_refused = CuckooFilter::read_from(&corrupt[..]).is_err();

        let mut mismatches = 0u64;
        for k in keys.iter().chain(&absent) {
            let want = filter.contains(k);
            mismatches +=
                u64::from(loaded.contains(k) != want) + u64::from(copy.contains(k) != want);
        }
        rows.push(RestartRow {
            layout: layout.name().to_string(),
            items: cfg.items,
            file_bytes,
            save_secs,
            load_secs,
            write_to_secs,
            read_from_secs,
            checksum_valid,
            header_items: info.item_count,
            corruption_refused,
            probes: (keys.len() + absent.len()) as u64,
            mismatches,
        });
    }
    Ok(rows)
}
