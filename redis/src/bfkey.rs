//! The value of a `BF.*` key: a chain of koel Bloom filters (layers), as
//! RedisBloom scales: when the last layer holds its capacity, a new layer
//! `EXPANSION` times larger with half the false-positive rate is added,
//! so the chain's rate stays below the reserved one (layer `i` gets
//! `error_rate / 2^(i+1)`, at least 1e-20; their sum is under `error_rate`
//! plus at most 64e-20).

use crate::encoding::{self, Fields, Kind};
use koel::BloomFilter;
use std::io;

/// RedisBloom's defaults.
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
pub const DEFAULT_CAPACITY: i64 = 100;
pub const DEFAULT_EXPANSION: i64 = 2;
/// Layers a chain may have (RedisBloom has no limit; 64 layers of
/// doubling capacity exceed any memory).
const MAX_LAYERS: usize = 64;
/// The lowest rate a layer gets: koel's `BloomFilter` takes rates from
/// 1e-20 (below it an exact set is the better tool). Halving from a small
/// `error_rate` reaches it before 64 layers (at layer 46 from 1e-6), and
/// the chain stopped there; clamped layers add at most 64e-20 to the bound.
const MIN_LAYER_RATE: f64 = 1e-20;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub error_rate: f64,
    pub capacity: u64,
    /// 0 (or NONSCALING): a full filter refuses new items.
    pub expansion: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            error_rate: DEFAULT_ERROR_RATE,
            capacity: DEFAULT_CAPACITY as u64,
            expansion: DEFAULT_EXPANSION as u64,
        }
    }
}

/// Why an add failed.
#[derive(Debug, PartialEq)]
pub enum AddError {
    /// A non-scaling filter holds its capacity.
    Full,
    /// A new layer could not be built.
    Layer(String),
}

pub struct Layer {
    pub filter: BloomFilter,
    /// Items added to this layer (adds that set a new bit).
    pub items: u64,
}

pub struct BfKey {
    pub options: Options,
    /// The seed of layer 0; layer `i` uses `seed + i`.
    pub seed: u64,
    pub layers: Vec<Layer>,
}

impl BfKey {
    /// A new chain; `seed` None draws a random one (replicated by the
    /// caller).
    pub fn create(options: Options, seed: Option<u64>) -> Result<BfKey, String> {
        let first = Self::layer(&options, seed, 0)?;
        let seed = first.seed();
        Ok(BfKey {
            options,
            seed,
            layers: vec![Layer {
                filter: first,
                items: 0,
            }],
        })
    }

    fn layer(o: &Options, seed: Option<u64>, i: u32) -> Result<BloomFilter, String> {
        let growth = o.expansion.max(1).checked_pow(i).unwrap_or(u64::MAX);
        let capacity = o.capacity.saturating_mul(growth);
        let capacity = usize::try_from(capacity).map_err(|_| "capacity too large")?;
        let rate = (o.error_rate / 2f64.powi(i as i32 + 1)).max(MIN_LAYER_RATE);
        let mut b = BloomFilter::builder()
            .capacity(capacity)
            .false_positive_rate(rate);
        if let Some(seed) = seed {
            b = b.seed(seed.wrapping_add(u64::from(i)));
        }
        b.build().map_err(|e| e.to_string())
    }

    pub fn contains(&self, item: &[u8]) -> bool {
        self.layers.iter().any(|l| l.filter.contains(item))
    }

    /// Adds `item`: `Ok(true)` if it was new, `Ok(false)` if some layer
    /// (probably) had it.
    pub fn add(&mut self, item: &[u8]) -> Result<bool, AddError> {
        if self.contains(item) {
            return Ok(false);
        }
        let full = self
            .layers
            .last()
            .is_none_or(|l| l.items >= l.filter.capacity() as u64);
        if full {
            if self.options.expansion == 0 {
                return Err(AddError::Full);
            }
            if self.layers.len() >= MAX_LAYERS {
                return Err(AddError::Layer("too many layers".into()));
            }
            let filter = Self::layer(&self.options, Some(self.seed), self.layers.len() as u32)
                .map_err(AddError::Layer)?;
            self.layers.push(Layer { filter, items: 0 });
        }
        // `create` and `decode` never make an empty chain.
        let Some(last) = self.layers.last_mut() else {
            return Err(AddError::Layer("no layer".into()));
        };
        // `contains` said no: this insert sets a bit.
        last.filter.insert(item);
        last.items += 1;
        Ok(true)
    }

    /// Items added (RedisBloom's "Number of items inserted", BF.CARD).
    pub fn items(&self) -> u64 {
        self.layers.iter().map(|l| l.items).sum()
    }

    pub fn capacity(&self) -> u64 {
        self.layers.iter().map(|l| l.filter.capacity() as u64).sum()
    }

    pub fn memory(&self) -> usize {
        std::mem::size_of::<BfKey>()
            + self
                .layers
                .iter()
                .map(|l| std::mem::size_of::<Layer>() + l.filter.memory_usage())
                .sum::<usize>()
    }

    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let o = &self.options;
        let mut fields = Vec::new();
        for v in [
            o.error_rate.to_bits(),
            o.capacity,
            o.expansion,
            self.seed,
            self.layers.len() as u64,
        ] {
            fields.extend_from_slice(&v.to_le_bytes());
        }
        for l in &self.layers {
            fields.extend_from_slice(&l.items.to_le_bytes());
        }
        encoding::encode(Kind::Bloom, &fields, |out| {
            self.layers
                .iter()
                .try_for_each(|l| l.filter.write_to(&mut *out))
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<BfKey, String> {
        let (fields, mut payload) = encoding::decode(Kind::Bloom, bytes)?;
        let mut f = Fields::new(fields);
        let options = Options {
            error_rate: f64::from_bits(f.u64()?),
            capacity: f.u64()?,
            expansion: f.u64()?,
        };
        let seed = f.u64()?;
        let n = f.u64()?;
        if n == 0 || n > MAX_LAYERS as u64 {
            return Err(format!("{n} layers"));
        }
        let mut layers = Vec::new();
        for _ in 0..n {
            let items = f.u64()?;
            let filter = BloomFilter::read_from(&mut payload).map_err(|e| e.to_string())?;
            layers.push(Layer { filter, items });
        }
        f.end()?;
        if !payload.is_empty() {
            return Err("bytes after the last layer".into());
        }
        Ok(BfKey {
            options,
            seed,
            layers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_scales_keeps_every_item_and_round_trips() {
        let mut k = BfKey::create(
            Options {
                capacity: 100,
                ..Options::default()
            },
            Some(5),
        )
        .unwrap();
        let new = (0..1000u32)
            .filter(|i| k.add(&i.to_le_bytes()).unwrap())
            .count() as u64;
        assert_eq!(k.items(), new);
        assert!(k.layers.len() >= 3, "{} layers", k.layers.len());
        let back = BfKey::decode(&k.encode().unwrap()).unwrap();
        assert_eq!(
            (back.items(), back.layers.len()),
            (k.items(), k.layers.len())
        );
        assert!((0..1000u32).all(|i| back.contains(&i.to_le_bytes())));
    }

    #[test]
    fn nonscaling_filter_refuses_past_its_capacity() {
        let mut k = BfKey::create(
            Options {
                capacity: 10,
                expansion: 0,
                ..Options::default()
            },
            None,
        )
        .unwrap();
        let mut i = 0u32;
        while k.items() < 10 {
            k.add(&i.to_le_bytes()).unwrap();
            i += 1;
        }
        assert_eq!(k.add(b"one more, never seen"), Err(AddError::Full));
        assert_eq!(k.items(), 10);
    }
}
