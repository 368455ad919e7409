//! Test vectors for independent implementations (`docs/spec.md` Appendix B).
//!
//! Each [`Vector`] is a packet (or the manifest, object 0) written out field by field: the bytes
//! of every field, its name as the spec gives it, and the value it encodes. The fields are
//! encoded here one at a time with the primitive encodings of §1.1 — not with the packet
//! encoders — and [`check`] then holds the two against each other: the reference parser must
//! read the vector's bytes, and the reference encoders must write the same bytes back from
//! what it read. A vector that drifts from the implementation (or the implementation from the
//! vectors) fails `check`, which a test runs against the files in `docs/test-vectors/`.
//!
//! `spate-lab test-vectors` writes the files: `NAME.txt` (one field per line: hex, then `#`
//! and the field) and `vectors.json` (every vector as one hex string with its fields).

use core::fmt::Write as _;

use crate::codec::Writer;
use crate::manifest::Manifest;
use crate::wire::{
    self, Accept, Close, Data, FeedbackRepr, Have, HaveEntry, Hello, Packet, PacketType,
};

/// One field of a vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name in the spec.
    pub name: &'static str,
    /// The value it encodes, as text.
    pub value: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// What a vector's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole datagram.
    Packet,
    /// An encoded manifest (object 0).
    Manifest,
}

/// A byte-exact example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vector {
    /// File name stem (`hello`, `feedback`, …).
    pub name: &'static str,
    /// What it shows.
    pub description: &'static str,
    /// Datagram or manifest.
    pub kind: Kind,
    /// The fields in order; their bytes, concatenated, are the vector.
    pub fields: Vec<Field>,
}

impl Vector {
    /// The whole vector.
    pub fn bytes(&self) -> Vec<u8> {
        self.fields.iter().flat_map(|f| f.bytes.clone()).collect()
    }

    /// The `NAME.txt` form: a comment header, then one field per line (long fields wrap at 16
    /// bytes; the comment stands on the first line).
    pub fn text(&self) -> String {
        let mut out = format!(
            "# {}: {}\n# {} bytes; hex, one field per line; everything after '#' is a comment.\n",
            self.name,
            self.description,
            self.bytes().len()
        );
        for f in &self.fields {
            for (i, line) in f.bytes.chunks(16).enumerate() {
                let hex = hex_spaced(line);
                if i == 0 {
                    let _ = writeln!(out, "{hex:<48} # {}: {}", f.name, f.value);
                } else {
                    let _ = writeln!(out, "{hex}");
                }
            }
        }
        out
    }
}

fn hex_spaced(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Builds a vector one field at a time.
struct Fields(Vec<Field>);

impl Fields {
    fn put(&mut self, name: &'static str, value: impl ToString, bytes: Vec<u8>) -> &mut Self {
        self.0.push(Field {
            name,
            value: value.to_string(),
            bytes,
        });
        self
    }

    fn varint(&mut self, name: &'static str, v: u64) -> &mut Self {
        let mut buf = [0u8; 8];
        let mut w = Writer::new(&mut buf);
        w.varint(v).expect("a varint fits 8 bytes");
        let n = w.len();
        self.put(name, v, buf[..n].to_vec())
    }

    fn header(&mut self, ty: PacketType, flags: u8, flag_names: &str, pn: u64) -> &mut Self {
        let ty_name = format!("{ty:?}").to_uppercase();
        self.put("Version", 1, vec![1])
            .put(
                "Flags | Type",
                format!(
                    "flags {flags:#x} ({flag_names}) | type {} ({ty_name})",
                    ty as u8
                ),
                vec![(flags << 4) | ty as u8],
            )
            .put(
                "Session ID",
                format!("{SESSION:#010x}"),
                SESSION.to_be_bytes().to_vec(),
            )
            .put("Packet Number", pn, pn.to_be_bytes()[2..].to_vec())
    }
}

/// The session ID of every packet vector: "SPAT" in ASCII.
pub const SESSION: u32 = 0x5350_4154;

/// The address-validation token of the example ACCEPT, echoed by the example PING (§4.8).
pub const EXAMPLE_TOKEN: u64 = 0x5a17_e0c0_ffee_0001;

/// The example request (§5.6): a glob, and a directory asked for with everything below it.
pub fn example_request() -> Manifest {
    Manifest::new(vec![
        crate::Entry::request("logs/*.gz", false),
        crate::Entry::request("photos", true),
    ])
}

/// The example manifest: Destination `in/`, a directory, a file below it, an empty file, a
/// streamed file.
pub fn example_manifest() -> Manifest {
    use crate::manifest::{Entry, EntryKind, Mtime};
    Manifest {
        destination: "in/".into(),
        entries: vec![
            Entry {
                path: "docs".into(),
                kind: EntryKind::Directory,
                size: 0,
                mode: 0o755,
                mtime: Some(Mtime {
                    secs: 1_700_000_000,
                    nanos: 0,
                }),
                digest: None,
            },
            Entry {
                path: "docs/a.txt".into(),
                kind: EntryKind::File,
                size: 5,
                mode: 0o644,
                mtime: None,
                digest: Some(*blake3_hello()),
            },
            Entry {
                path: "empty".into(),
                kind: EntryKind::File,
                size: 0,
                mode: 0o600,
                mtime: None,
                digest: Some(BLAKE3_EMPTY),
            },
            Entry {
                path: "docs/b.txt".into(),
                kind: EntryKind::StreamedFile,
                size: 5,
                mode: 0o644,
                mtime: None,
                digest: None,
            },
        ],
    }
}

/// BLAKE3 of the five bytes `hello` (the content of `docs/a.txt` in the example).
pub fn blake3_hello() -> &'static [u8; 32] {
    &[
        0xea, 0x8f, 0x16, 0x3d, 0xb3, 0x86, 0x82, 0x92, 0x5e, 0x44, 0x91, 0xc5, 0xe5, 0x8d, 0x4b,
        0xb3, 0x50, 0x6e, 0xf8, 0xc1, 0x4e, 0xb7, 0x8a, 0x86, 0xe9, 0x08, 0xc5, 0x62, 0x4a, 0x67,
        0x20, 0x0f,
    ]
}

/// BLAKE3 of no bytes (an empty file's digest).
pub const BLAKE3_EMPTY: [u8; 32] = [
    0xaf, 0x13, 0x49, 0xb9, 0xf5, 0xf9, 0xa1, 0xa6, 0xa0, 0x40, 0x4d, 0xea, 0x36, 0xdc, 0xc9, 0x49,
    0x9b, 0xcb, 0x25, 0xc9, 0xad, 0xc1, 0x12, 0xb7, 0xcc, 0x9a, 0x93, 0xca, 0xe4, 0x1f, 0x32, 0x62,
];

fn manifest_fields(f: &mut Fields, m: &Manifest) {
    f.varint("Destination Length", m.destination.len() as u64)
        .put(
            "Destination",
            format!("{:?}", m.destination),
            m.destination.as_bytes().to_vec(),
        )
        .varint("Entry Count", m.entries.len() as u64);
    for e in &m.entries {
        let (kind, kind_name) = match e.kind {
            crate::EntryKind::File => (0, "file"),
            crate::EntryKind::Directory => (1, "directory"),
            crate::EntryKind::StreamedFile => (2, "streamed file"),
            crate::EntryKind::Request { .. } => (3, "request"),
        };
        let recursive = matches!(e.kind, crate::EntryKind::Request { recursive: true });
        let flags = u8::from(e.digest.is_some())
            | u8::from(e.mtime.is_some()) << 1
            | kind << 2
            | u8::from(recursive) << 4;
        let what = format!(
            "{flags:#04x}: {}{}kind {}{}",
            if e.digest.is_some() { "digest, " } else { "" },
            if e.mtime.is_some() { "mtime, " } else { "" },
            kind_name,
            if recursive { ", RECURSIVE" } else { "" }
        );
        f.put("Flags", what, vec![flags])
            .varint("Size", e.size)
            .varint("Mode", u64::from(e.mode));
        f.0.last_mut().expect("just pushed").value = format!("{:#o}", e.mode);
        if let Some(t) = e.mtime {
            let z = ((t.secs << 1) ^ (t.secs >> 63)) as u64;
            f.varint("Mtime Seconds (zigzag)", z);
            f.0.last_mut().expect("just pushed").value = format!("{z} = {} s", t.secs);
            f.varint("Mtime Nanos", u64::from(t.nanos));
        }
        if let Some(d) = e.digest {
            f.put("Digest", format!("BLAKE3 {}", hex(&d)), d.to_vec());
        }
        f.varint("Path Length", e.path.len() as u64).put(
            "Path",
            format!("{:?}", e.path),
            e.path.as_bytes().to_vec(),
        );
    }
}

/// Every vector, in the order of the spec's sections.
pub fn all() -> Vec<Vector> {
    let manifest = example_manifest();
    let mut v = Vec::new();

    let mut f = Fields(Vec::new());
    manifest_fields(&mut f, &manifest);
    v.push(Vector {
        name: "manifest",
        description: "object 0 (§5.1): Destination \"in/\", a directory \"docs\" (mode 0755, \
                      mtime), the file \"docs/a.txt\" (5 bytes \"hello\", with digest), an \
                      empty file \"empty\" (digest of no bytes) and the streamed file \
                      \"docs/b.txt\" (5 bytes, its digest after them in its object)",
        kind: Kind::Manifest,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    manifest_fields(&mut f, &example_request());
    v.push(Vector {
        name: "request",
        description: "object 0 of a GET session (§5.6): the requests \"logs/*.gz\" (a glob) and \
                      \"photos\" with RECURSIVE",
        kind: Kind::Manifest,
        fields: f.0,
    });

    let encoded_manifest = manifest.encode().expect("the example manifest is valid");
    let mut f = Fields(Vec::new());
    f.header(PacketType::Hello, 0x3, "VERIFY | RESUME", 0)
        .put("Max Datagram", 1232, 1232u16.to_be_bytes().to_vec())
        .put("Cipher", "0 (none)", vec![0])
        .varint("Feedback Interval", 10_000)
        .varint("Idle Timeout", 60_000)
        .varint("Object Count", manifest.entries.len() as u64)
        .varint("Manifest Length", encoded_manifest.len() as u64)
        .varint("Prefix Length", encoded_manifest.len() as u64)
        .put(
            "Manifest Prefix",
            "the whole manifest (see manifest.txt)",
            encoded_manifest.clone(),
        );
    let used: usize = f.0.iter().map(|x| x.bytes.len()).sum();
    f.put(
        "Padding",
        format!("{} zero bytes, to Max Datagram", 1232 - used),
        vec![0; 1232 - used],
    );
    v.push(Vector {
        name: "hello",
        description: "HELLO (§4.1), packet number 0, VERIFY and RESUME, the whole example \
                      manifest as prefix, padded to its Max Datagram of 1232",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Accept, 0x1, "RESUME", 0)
        .put(
            "Max Datagram",
            "1232 = min(HELLO's 1232, receiver's 65507)",
            1232u16.to_be_bytes().to_vec(),
        )
        .varint("Idle Timeout", 60_000)
        .put(
            "Token",
            "0x5a17e0c0ffee0001 (chosen at random by the receiver)",
            EXAMPLE_TOKEN.to_be_bytes().to_vec(),
        );
    v.push(Vector {
        name: "accept",
        description: "ACCEPT (§4.2) of that HELLO, offering to resume (RESUME is 0x1 here, 0x2 \
                      in HELLO)",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Data, 0x2, "PROBE", 1)
        .put("Object", 2, 2u32.to_be_bytes().to_vec())
        .put("Offset", 0, 0u64.to_be_bytes().to_vec())
        .put("Payload", "\"hello\"", b"hello".to_vec());
    v.push(Vector {
        name: "data",
        description: "DATA (§4.3): all 5 bytes of object 2 (docs/a.txt), asking for a report",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    let mut object = b"hello".to_vec();
    object.extend_from_slice(blake3_hello());
    f.header(PacketType::Data, 0, "none", 2)
        .put("Object", 4, 4u32.to_be_bytes().to_vec())
        .put("Offset", 0, 0u64.to_be_bytes().to_vec())
        .put(
            "Payload",
            format!(
                "\"hello\" and its BLAKE3 digest {}: the whole 37-byte object",
                hex(blake3_hello())
            ),
            object,
        );
    v.push(Vector {
        name: "data-streamed",
        description: "DATA (§4.3, §5.1): all of object 4, the streamed file docs/b.txt: its 5 \
                      bytes, then the 32-byte digest trailer",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Data, 0x1, "RETRANSMISSION", 5)
        .put("Object", 2, 2u32.to_be_bytes().to_vec())
        .put("Offset", 4096, 4096u64.to_be_bytes().to_vec())
        .put("Payload", "\"hi\"", b"hi".to_vec());
    v.push(Vector {
        name: "data-retransmission",
        description: "DATA (§4.3, Appendix A): a retransmission, object 2, offset 4096",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Ping, 0, "none", 7).put(
        "Token",
        "0x5a17e0c0ffee0001 (the ACCEPT's)",
        EXAMPLE_TOKEN.to_be_bytes().to_vec(),
    );
    v.push(Vector {
        name: "ping",
        description: "PING (§4.4): the ACCEPT's token, which validates the sender's address (§4.8)",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Feedback, 0, "none", 3)
        .varint("Largest Received", 100)
        .varint("Ack Delay", 100)
        .varint("Receive Time", 5)
        .varint("Bytes Received", 3000)
        .varint("First Missing Object", 1)
        .varint("First Missing Offset", 0)
        .put(
            "Range Count",
            "2 (the reference always writes this field in two-byte form)",
            vec![0x40, 0x02],
        )
        .varint("First Range", 10)
        .varint("Gap", 3)
        .varint("Length", 5)
        .varint("Gap", 68)
        .varint("Length", 0);
    v.push(Vector {
        name: "feedback",
        description: "FEEDBACK (§4.5): packets 90..=100, 80..=85 and 10 received; watermark \
                      object 1 offset 0",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Feedback, 0x1, "COMPLETE", 4)
        .varint("Largest Received", 12)
        .varint("Ack Delay", 250)
        .varint("Receive Time", 81_000)
        .varint("Bytes Received", 1_048_576)
        .varint("First Missing Object", 4)
        .varint("First Missing Offset", 0)
        .put("Range Count", "0 (two-byte form)", vec![0x40, 0x00])
        .varint("First Range", 12);
    v.push(Vector {
        name: "feedback-complete",
        description: "FEEDBACK (§4.5) with COMPLETE: packets 0..=12 received, watermark past \
                      the last object (Object Count + 1 = 4, offset 0) of a 3-entry manifest",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Feedback, 0x2, "VALIDATED", 5)
        .varint("Largest Received", 40)
        .varint("Ack Delay", 120)
        .varint("Receive Time", 93_000)
        .varint("Bytes Received", 58_880)
        .varint("First Missing Object", 1)
        .varint("First Missing Offset", 28_960)
        .put("Range Count", "0 (two-byte form)", vec![0x40, 0x00])
        .varint("First Range", 40)
        .varint("Extension Type", 1)
        .put(
            "Extension Length",
            "4 (the Value is one 4-byte varint)",
            vec![0x04],
        )
        .varint("Write Limit", 16_806_176);
    v.push(Vector {
        name: "feedback-limit",
        description: "FEEDBACK (§4.5) with a Write Limit (extension type 1): the receiver has \
                      taken 28 960 data bytes of this session and can queue 16 MiB more, so the \
                      sender may have sent at most 16 806 176",
        kind: Kind::Packet,
        fields: f.0,
    });

    let reason = "manifest rejected: entry 1: path \"../x\" has a '.' or '..' component";
    let mut f = Fields(Vec::new());
    f.header(PacketType::Close, 0, "none", 0)
        .put("Code", "3 (Refused)", 3u16.to_be_bytes().to_vec())
        .varint("Reason Length", reason.len() as u64)
        .put("Reason", format!("{reason:?}"), reason.as_bytes().to_vec());
    v.push(Vector {
        name: "close",
        description: "CLOSE (§4.6) Refused, as a receiver answers a manifest with a bad path",
        kind: Kind::Packet,
        fields: f.0,
    });

    let mut f = Fields(Vec::new());
    f.header(PacketType::Have, 0, "none", 2)
        .varint("Entry Count", 3)
        .varint("Object Delta", 1)
        .put("Whole", "2: objects 1 and 2 held entirely", vec![0x02])
        .varint("Object Delta", 2)
        .put("Whole", "0: one range of object 4", vec![0x00])
        .varint("Offset", 0)
        .varint("Length", 1_048_576)
        .varint("Object Delta", 0)
        .put("Whole", "0: another range of object 4", vec![0x00])
        .varint("Offset", 3_145_728)
        .varint("Length", 1_048_576);
    let mut g = Fields(Vec::new());
    g.header(PacketType::Feedback, 0x2, "VALIDATED", 9)
        .varint("Largest Received", 5000)
        .varint("Ack Delay", 90)
        .varint("Receive Time", 410_000)
        .varint("Bytes Received", 7_193_000)
        .varint("First Missing Object", 1)
        .varint("First Missing Offset", 5_857_280)
        .put("Range Count", "0 (two-byte form)", vec![0x40, 0x00])
        .varint("First Range", 60)
        .varint("Extension Type", 2)
        .put("Extension Length", "5 (two pairs)", vec![0x05])
        .varint("Object", 1)
        .varint("First Chunk", 0)
        .varint("Object", 1)
        .varint("First Chunk", 4096)
        .varint("Extension Type", 3)
        .put(
            "Extension Length",
            "4 (the Value is one 4-byte varint)",
            vec![0x04],
        )
        .varint("Keep Limit", 32 << 20);
    v.push(Vector {
        name: "feedback-rebuilt",
        description: "FEEDBACK (§4.5, §6.9) listing Rebuilt Blocks (extension type 2): the \
                      coded blocks of object 1 that start at chunks 0 and 4096 were rebuilt \
                      from repair symbols; and a Keep Limit (type 3): this receiver keeps 32 MiB \
                      of coded chunks, not the 128 MiB a sender may otherwise have outstanding",
        kind: Kind::Packet,
        fields: g.0,
    });

    for index in 0..2u32 {
        let symbol = example_symbol(index);
        let mut g = Fields(Vec::new());
        g.header(PacketType::Repair, 0, "none", 40 + u64::from(index))
            .put("Object", 1, 1u32.to_be_bytes().to_vec())
            .put("First Chunk", 0, 0u32.to_be_bytes().to_vec())
            .put("Count", "3 (K; R(3) = 16)", 3u16.to_be_bytes().to_vec())
            .put("Index", index, (index as u16).to_be_bytes().to_vec())
            .put("Symbol", format!("repair symbol {index}"), symbol);
        v.push(Vector {
            name: if index == 0 { "repair" } else { "repair-1" },
            description: if index == 0 {
                "REPAIR (§4.9, §6.9): symbol 0 of the block of object 1 made of its chunks \
                 0, 1 and 2, in a session whose chunk size is 64 bytes (an illustration: real \
                 sessions have at least 1208); chunk j holds the bytes 64·j + i (mod 256), \
                 i = 0..63"
            } else {
                "REPAIR (§4.9, §6.9): symbol 1 of the same block as `repair`"
            },
            kind: Kind::Packet,
            fields: g.0,
        });
    }

    v.push(Vector {
        name: "have",
        description: "HAVE (§4.7): objects 1–2 whole, and bytes 0..1 MiB and 3..4 MiB of \
                      object 4",
        kind: Kind::Packet,
        fields: f.0,
    });
    v
}

/// The chunks of the example coded block (`repair` vectors): 3 chunks of 64 bytes, chunk `j`
/// holding `64·j + i` (mod 256) at byte `i`.
pub fn example_chunks() -> Vec<Vec<u8>> {
    (0..3)
        .map(|j| (0..64).map(|i| (64 * j + i) as u8).collect())
        .collect()
}

/// Repair symbol `index` of the example block, as the reference code computes it.
fn example_symbol(index: u32) -> Vec<u8> {
    crate::coding::encode(&example_chunks(), index as usize + 1)
        .ok()
        .and_then(|s| s.into_iter().nth(index as usize))
        .unwrap_or_default()
}

/// Check one vector against the reference: it parses, and re-encoding what was parsed gives
/// the same bytes (for REPAIR, the symbol is also the code's own). Returns what went wrong.
pub fn check(v: &Vector) -> Result<(), String> {
    let bytes = v.bytes();
    if let Ok(p) = wire::parse(&bytes) {
        if let Packet::Repair(r) = p.packet {
            if r.symbol != example_symbol(r.index).as_slice() {
                return Err(format!("{}: the symbol is not the code's", v.name));
            }
        }
    }
    let again = match v.kind {
        Kind::Manifest => {
            let m = Manifest::decode(&bytes).map_err(|e| format!("{}: {e}", v.name))?;
            let expected = if v.name == "request" {
                example_request()
            } else {
                example_manifest()
            };
            if m != expected {
                return Err(format!("{}: decodes to {m:?}", v.name));
            }
            m.encode().map_err(|e| format!("{}: {e}", v.name))?
        }
        Kind::Packet => reencode(&bytes).map_err(|e| format!("{}: {e}", v.name))?,
    };
    if again != bytes {
        return Err(format!(
            "{}: the reference encodes\n  {}\nbut the vector is\n  {}",
            v.name,
            hex(&again),
            hex(&bytes)
        ));
    }
    Ok(())
}

/// Parse a datagram with the reference parser and write it again with the reference encoders.
fn reencode(datagram: &[u8]) -> Result<Vec<u8>, wire::WireError> {
    let p = wire::parse(datagram)?;
    let mut out = vec![0u8; datagram.len() + 64];
    let mut w = Writer::new(&mut out);
    p.header.encode(&mut w)?;
    match p.packet {
        Packet::Hello(h) => Hello::encode(&h, &mut w, datagram.len())?,
        Packet::Accept(a) => Accept::encode(&a, &mut w)?,
        Packet::Data(d) => {
            Data::encode_fields(d.object, d.offset, &mut w)?;
            w.put(d.payload)?;
        }
        Packet::Ping(p) => p.encode(&mut w)?,
        Packet::Feedback(f) => {
            let mut ranges = f.ranges.iter();
            let (lo, hi) = ranges.next().ok_or(wire::WireError::Truncated)?;
            let mut first = FeedbackRepr { ..f.repr };
            first.flags = wire::FeedbackFlags::from_bits(p.header.flags);
            first.encode(&mut w, core::iter::once((lo, hi)).chain(ranges))?;
        }
        Packet::Close(c) => {
            let reason = core::str::from_utf8(c.reason)
                .map_err(|_| wire::WireError::Invalid("reason is not UTF-8"))?;
            Close::encode(c.code, reason, &mut w)?;
        }
        Packet::Repair(r) => {
            wire::Repair::encode_fields(r.object, r.first_chunk, r.count, r.index, &mut w)?;
            w.put(r.symbol)?;
        }
        Packet::Have(h) => {
            let entries: Vec<HaveEntry> = h.entries().collect();
            Have::encode(&entries, &mut w)?;
        }
    }
    let n = w.len();
    out.truncate(n);
    Ok(out)
}

/// Every vector as JSON: `[{"name", "description", "kind", "hex", "fields": [{"name", "value",
/// "hex"}]}]`.
pub fn json(vectors: &[Vector]) -> String {
    fn s(x: &str) -> String {
        let mut o = String::from("\"");
        for c in x.chars() {
            match c {
                '"' => o.push_str("\\\""),
                '\\' => o.push_str("\\\\"),
                '\n' => o.push_str("\\n"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(o, "\\u{:04x}", c as u32);
                }
                c => o.push(c),
            }
        }
        o.push('"');
        o
    }
    let mut out = String::from("[\n");
    for (i, v) in vectors.iter().enumerate() {
        let kind = match v.kind {
            Kind::Packet => "packet",
            Kind::Manifest => "manifest",
        };
        let _ = write!(
            out,
            "  {{\n    \"name\": {},\n    \"description\": {},\n    \"kind\": \"{kind}\",\n    \
             \"hex\": \"{}\",\n    \"fields\": [\n",
            s(v.name),
            s(v.description),
            hex(&v.bytes())
        );
        for (j, f) in v.fields.iter().enumerate() {
            let _ = writeln!(
                out,
                "      {{\"name\": {}, \"value\": {}, \"hex\": \"{}\"}}{}",
                s(f.name),
                s(&f.value),
                hex(&f.bytes),
                if j + 1 < v.fields.len() { "," } else { "" }
            );
        }
        let _ = writeln!(
            out,
            "    ]\n  }}{}",
            if i + 1 < vectors.len() { "," } else { "" }
        );
    }
    out.push_str("]\n");
    out
}

/// The files of `docs/test-vectors/`: (file name, contents).
pub fn files() -> Vec<(String, String)> {
    let vs = all();
    let mut out: Vec<(String, String)> = vs
        .iter()
        .map(|v| (format!("{}.txt", v.name), v.text()))
        .collect();
    out.push(("vectors.json".into(), json(&vs)));
    out.push(("handshake.txt".into(), crate::secure::vector::text()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vector_matches_the_reference() {
        for v in all() {
            check(&v).unwrap();
        }
    }

    /// A vector with one byte changed no longer checks: `check` can fail.
    #[test]
    fn a_changed_vector_is_caught() {
        for v in all() {
            let mut bad = v.clone();
            let f = bad
                .fields
                .iter_mut()
                .find(|f| f.name == "Session ID" || f.name == "Entry Count")
                .unwrap();
            // Changing the session ID still parses (and re-encodes the same) — so change
            // something the parser interprets: the version, or the entry count.
            if f.name == "Session ID" {
                bad.fields[0].bytes[0] = 2;
            } else {
                f.bytes[0] += 1;
            }
            assert!(check(&bad).is_err(), "{}", v.name);
        }
    }
}
