//! `spate-lab bench-fec`: what coding (spec §6.9) costs this machine's CPU, in % of one core
//! per Gbit/s of file data coded — the units of `bench-io`.
//!
//! For each block size and loss rate it encodes blocks of protected-session chunks (1432
//! bytes) with the symbols `--fec auto` sends in the last horizon (λ + 3√λ + 1 at λ = loss ·
//! K), and rebuilds each block from all but `loss · K` of its chunks (evenly spread) plus as
//! many symbols. Both run on one core, the way the sender and the receiver do, so wall time is
//! CPU time. Only coded blocks pay: `--fec auto` codes the last few round trips of a transfer,
//! so a whole transfer pays these rates on that share of its bytes.

use std::time::Instant;

use anyhow::{bail, Result};
use spate_proto::coding::{decode, encode};

/// Options of `spate-lab bench-fec`.
#[derive(clap::Args)]
pub struct FecArgs {
    /// Chunks per block (at most 4096).
    #[arg(long, value_delimiter = ',', default_values_t = [3840u32, 1024, 256])]
    block: Vec<u32>,
    /// Loss rates to rebuild from, percent.
    #[arg(long, value_delimiter = ',', default_values_t = [1.0f64, 2.0])]
    loss_pct: Vec<f64>,
    /// Bytes of file data to code per measurement.
    #[arg(long, default_value_t = 256 << 20)]
    bytes: u64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Chunk size of a protected session at the default datagram (1472 − 24 − 16).
const CHUNK: usize = 1432;

#[derive(serde::Serialize)]
struct Row {
    block: u32,
    loss_pct: f64,
    symbols: usize,
    encode_core_pct_per_gbps: f64,
    decode_core_pct_per_gbps: f64,
}

pub fn run(a: FecArgs) -> Result<()> {
    let mut rows = Vec::new();
    for &k in &a.block {
        if k == 0 || k > spate_proto::wire::MAX_BLOCK_CHUNKS {
            bail!("--block {k}: blocks have 1 to 4096 chunks");
        }
        for &loss in &a.loss_pct {
            if !(0.0..25.0).contains(&loss) {
                bail!("--loss-pct {loss}: use 0 to 25");
            }
            rows.push(measure(k, loss / 100.0, a.bytes));
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("coding cost on one core, % of a core per Gbit/s of file data ({CHUNK}-byte chunks)");
    println!("block  loss %  symbols  encode  rebuild");
    for r in &rows {
        println!(
            "{:<6} {:<7} {:<8} {:<7.2} {:.2}",
            r.block, r.loss_pct, r.symbols, r.encode_core_pct_per_gbps, r.decode_core_pct_per_gbps
        );
    }
    Ok(())
}

fn measure(k: u32, loss: f64, bytes: u64) -> Row {
    let lambda = loss * f64::from(k);
    let m = ((lambda + 3.0 * lambda.sqrt() + 1.0).ceil() as usize)
        .min(spate_proto::coding::repair_capacity(k) as usize);
    let lost = (lambda.round() as usize).min(m);
    let chunks: Vec<Vec<u8>> = (0..k as usize)
        .map(|i| (0..CHUNK).map(|j| (i * 131 + j * 7) as u8).collect())
        .collect();
    let block_bytes = u64::from(k) * CHUNK as u64;
    let blocks = bytes.div_ceil(block_bytes).max(1);
    let (mut enc_s, mut dec_s) = (0.0, 0.0);
    for _ in 0..blocks {
        let t = Instant::now();
        let symbols = encode(&chunks, m).expect("encodes");
        enc_s += t.elapsed().as_secs_f64();
        // Lose `lost` chunks spread over the block; rebuild from the rest and `lost` symbols.
        let step = (k as usize / lost.max(1)).max(1);
        let gone: Vec<usize> = (0..lost).map(|i| i * step).collect();
        let have = (0..k as usize)
            .filter(|i| !gone.contains(i))
            .map(|i| (i, chunks[i].as_slice()));
        let syms = symbols
            .iter()
            .take(lost)
            .enumerate()
            .map(|(i, s)| (i, s.as_slice()));
        let t = Instant::now();
        let rebuilt = decode(k, have, syms).expect("rebuilds");
        dec_s += t.elapsed().as_secs_f64();
        assert!(
            rebuilt.iter().all(|(i, b)| *b == chunks[*i]),
            "rebuilt bytes differ"
        );
    }
    let gbit = (blocks * block_bytes) as f64 * 8.0 / 1e9;
    Row {
        block: k,
        loss_pct: loss * 100.0,
        symbols: m,
        encode_core_pct_per_gbps: 100.0 * enc_s / gbit,
        decode_core_pct_per_gbps: 100.0 * dec_s / gbit,
    }
}
