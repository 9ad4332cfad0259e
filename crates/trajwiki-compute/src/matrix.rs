//! Borrowed row-major matrices in f32, f16 or bf16.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use crate::sketch::{check_fits, SketchView};
use crate::ComputeError;

/// The element type of a [`MatrixView`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16.
    Bf16,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
        }
    }
}

/// The element storage of a [`MatrixView`].
#[derive(Debug, Clone, Copy)]
pub enum MatrixData<'a> {
    /// f32 elements.
    F32(&'a [f32]),
    /// f16 elements.
    F16(&'a [f16]),
    /// bf16 elements.
    Bf16(&'a [bf16]),
}

/// A borrowed row-major `rows × dim` matrix of embeddings. Rows are assumed L2-normalised, so a
/// dot product is a cosine similarity.
#[derive(Debug, Clone, Copy)]
pub struct MatrixView<'a> {
    data: MatrixData<'a>,
    rows: usize,
    dim: usize,
    sketch: Option<SketchView<'a>>,
}

impl<'a> MatrixView<'a> {
    fn new(data: MatrixData<'a>, len: usize, dim: usize) -> Result<Self, ComputeError> {
        if dim == 0 {
            return Err(ComputeError::ZeroDimension);
        }
        if !len.is_multiple_of(dim) {
            return Err(ComputeError::WrongDimension {
                what: "matrix buffer (a multiple of dim)",
                expected: (len / dim + 1) * dim,
                got: len,
            });
        }
        if len / dim > u32::MAX as usize {
            return Err(ComputeError::IndexOutOfRange {
                what: "row count (indices are u32)",
                index: (len / dim) as u64,
                len: u32::MAX as usize,
            });
        }
        Ok(MatrixView {
            data,
            rows: len / dim,
            dim,
            sketch: None,
        })
    }

    /// The same rows with their int8 sketch, which a CPU scan reads first (see
    /// [`crate::sketch`]); refused unless it has the matrix's shape.
    pub fn with_sketch(mut self, sketch: SketchView<'a>) -> Result<Self, ComputeError> {
        check_fits(&sketch, self.rows, self.dim)?;
        self.sketch = Some(sketch);
        Ok(self)
    }

    /// The rows' sketch, if they have one.
    pub fn sketch(&self) -> Option<SketchView<'a>> {
        self.sketch
    }

    /// Rows `start..` of this matrix (empty when `start` is past the end).
    pub fn rows_from(&self, start: usize) -> MatrixView<'a> {
        let start = start.min(self.rows);
        let from = start * self.dim;
        let data = match self.data {
            MatrixData::F32(d) => MatrixData::F32(&d[from..]),
            MatrixData::F16(d) => MatrixData::F16(&d[from..]),
            MatrixData::Bf16(d) => MatrixData::Bf16(&d[from..]),
        };
        MatrixView {
            data,
            rows: self.rows - start,
            dim: self.dim,
            sketch: self.sketch.map(|s| s.rows_from(start)),
        }
    }

    /// Views an f32 buffer of `data.len() / dim` rows.
    pub fn f32(data: &'a [f32], dim: usize) -> Result<Self, ComputeError> {
        Self::new(MatrixData::F32(data), data.len(), dim)
    }

    /// Views an f16 buffer of `data.len() / dim` rows.
    pub fn f16(data: &'a [f16], dim: usize) -> Result<Self, ComputeError> {
        Self::new(MatrixData::F16(data), data.len(), dim)
    }

    /// Views a bf16 buffer of `data.len() / dim` rows.
    pub fn bf16(data: &'a [bf16], dim: usize) -> Result<Self, ComputeError> {
        Self::new(MatrixData::Bf16(data), data.len(), dim)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Dimension of each row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Element type.
    pub fn dtype(&self) -> Dtype {
        match self.data {
            MatrixData::F32(_) => Dtype::F32,
            MatrixData::F16(_) => Dtype::F16,
            MatrixData::Bf16(_) => Dtype::Bf16,
        }
    }

    /// The element storage.
    pub fn data(&self) -> MatrixData<'a> {
        self.data
    }

    /// Size of the matrix in bytes.
    pub fn bytes(&self) -> usize {
        self.rows * self.dim * self.dtype().size()
    }

    /// Writes row `i` as f32 into `out` (`out.len() == dim`). `i` must be in range.
    pub fn row_f32(&self, i: usize, out: &mut [f32]) {
        let r = i * self.dim..(i + 1) * self.dim;
        match self.data {
            MatrixData::F32(d) => out.copy_from_slice(&d[r]),
            // Exact conversions, vectorised where the CPU has F16C (detected at run time).
            MatrixData::F16(d) => d[r].convert_to_f32_slice(out),
            MatrixData::Bf16(d) => d[r].convert_to_f32_slice(out),
        }
    }
}
