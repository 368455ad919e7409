//! `docs/test-vectors/` is what the reference writes: a test that fails when the encoding, the
//! parser or the files drift apart (rewrite the files with `spate-lab test-vectors`).

use std::path::Path;

use spate_proto::vectors;

#[test]
fn docs_test_vectors_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/test-vectors");
    for v in vectors::all() {
        vectors::check(&v).unwrap();
    }
    for (name, want) in vectors::files() {
        let path = dir.join(&name);
        let got = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `spate-lab test-vectors`", path.display()));
        assert!(
            got == want,
            "{} differs from the reference encoding; run `spate-lab test-vectors` and review the diff",
            path.display()
        );
    }
}

/// The hex in each `NAME.txt`, read as an independent implementer would (strip comments, join
/// the hex), parses with the reference parser.
#[test]
fn the_text_files_parse_as_written() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/test-vectors");
    for v in vectors::all() {
        let text = std::fs::read_to_string(dir.join(format!("{}.txt", v.name))).unwrap();
        let hex: String = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .collect::<String>()
            .split_whitespace()
            .collect();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(bytes, v.bytes(), "{}", v.name);
        match v.kind {
            vectors::Kind::Packet => {
                spate_proto::wire::parse(&bytes).unwrap();
            }
            vectors::Kind::Manifest => {
                let want = if v.name == "request" {
                    vectors::example_request()
                } else {
                    vectors::example_manifest()
                };
                assert_eq!(spate_proto::Manifest::decode(&bytes).unwrap(), want);
            }
        }
    }
}

/// `handshake.txt` (spec §9, Appendix B) is what the reference computes from its inputs.
#[test]
fn the_handshake_vector_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/test-vectors");
    let text = std::fs::read_to_string(dir.join("handshake.txt")).unwrap();
    spate_proto::secure::vector::check(&text).unwrap();
}
