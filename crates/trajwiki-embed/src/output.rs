//! Writing embeddings for other programs: JSON lines (one array per row) and NumPy `.npy`.

use std::io::{self, Write};

use trajwiki_core::embed::Embeddings;

/// Writes one JSON array per row, one row per line.
pub fn write_jsonl<W: Write>(mut w: W, e: &Embeddings) -> io::Result<()> {
    for row in e.rows() {
        serde_json::to_writer(&mut w, row)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes a NumPy 1.0 `.npy` file of shape `(rows, dim)`, little-endian `float32`, C order.
pub fn write_npy<W: Write>(mut w: W, e: &Embeddings) -> io::Result<()> {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        e.len(),
        e.dim()
    );
    // Magic (6) + version (2) + header length (2) + header, padded with spaces and ended by a
    // newline to a multiple of 64 bytes.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let len = u16::try_from(header.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "npy header too long"))?;
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(header.as_bytes())?;
    let mut buf = Vec::with_capacity(e.as_slice().len() * 4);
    for v in e.as_slice() {
        buf.extend_from_slice(&v.to_le_bytes());
    }
    w.write_all(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_layout() {
        let e = Embeddings::new(2, vec![1.0, 0.0, 0.6, 0.8]).unwrap();
        let mut out = Vec::new();
        write_npy(&mut out, &e).unwrap();
        assert_eq!(&out[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([out[8], out[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&out[10..10 + hlen]).unwrap();
        assert!(header.contains("'shape': (2, 2)"));
        assert!(header.ends_with('\n'));
        assert_eq!(out.len(), 10 + hlen + 16);
        assert_eq!(&out[10 + hlen + 8..10 + hlen + 12], &0.6f32.to_le_bytes());
    }

    #[test]
    fn jsonl_rows() {
        let e = Embeddings::new(2, vec![1.0, 0.0, 0.6, 0.8]).unwrap();
        let mut out = Vec::new();
        write_jsonl(&mut out, &e).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "[1.0,0.0]\n[0.6,0.8]\n");
    }
}
