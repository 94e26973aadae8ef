//! Any bytes as an (uncompressed) delta against a fixed base: applying it
//! never panics, never writes past the bound it is given, and whatever it
//! accepts is exactly the content, length and SHA-256 the delta ends with.
//! Shared by the `delta` fuzz target and the seed replay in `cargo test`.

use std::io::Write;
use std::sync::OnceLock;

use portfolio_wire::delta::{apply, hex, read_header};
use sha2::{Digest, Sha256};

/// The base every seed delta applies to.
pub const BASE: &[u8] = include_bytes!("../delta_base.json");

/// At most this much output: a delta that writes more is refused.
const AT_MOST: u64 = 1 << 20;

/// The base, as the open file `apply` reads it from.
pub fn base_file() -> &'static std::fs::File {
    static FILE: OnceLock<std::fs::File> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("delta-fuzz-base-{}", std::process::id()));
        std::fs::write(&path, BASE).expect("write the base");
        let file = std::fs::File::open(&path).expect("open the base");
        let _ = std::fs::remove_file(&path);
        file
    })
}

/// Counts and hashes what is written, and refuses a byte past the bound.
struct Bounded {
    len: u64,
    hasher: Sha256,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.len += buf.len() as u64;
        assert!(
            self.len <= AT_MOST,
            "wrote {} bytes past {AT_MOST}",
            self.len
        );
        self.hasher.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub fn check(data: &[u8]) {
    let mut reader = data;
    if read_header(&mut reader).is_err() {
        return;
    }
    let mut out = Bounded {
        len: 0,
        hasher: Sha256::new(),
    };
    if let Ok(applied) = apply(
        base_file(),
        BASE.len() as u64,
        &mut reader,
        &mut out,
        AT_MOST,
    ) {
        assert_eq!(applied.len, out.len);
        assert_eq!(applied.sha256, hex(&out.hasher.finalize()));
    }
}
