//! Image decoding to packed RGB8. JPEG goes through zune-jpeg (pure Rust,
//! SIMD; the fastest of the decoders measured, see results/README.md "Real data"), PNG
//! through the png crate. The format is told by the file's first bytes, not
//! its name: ImageNet has PNGs and CMYK JPEGs named `.JPEG`.
use anyhow::{anyhow, bail, Result};
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;

/// Width and height of a decoded image, whose pixels are in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    pub width: usize,
    pub height: usize,
}

/// Decodes `bytes` (JPEG or PNG) into `out` as packed RGB8, row-major; `out`
/// is resized to width × height × 3 and reused across calls.
pub fn decode_rgb(bytes: &[u8], out: &mut Vec<u8>) -> Result<Dims> {
    if bytes.starts_with(&[0xFF, 0xD8]) {
        decode_jpeg(bytes, out)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        decode_png(bytes, out)
    } else if bytes.is_empty() {
        bail!("empty file")
    } else {
        bail!("neither a JPEG nor a PNG")
    }
}

fn jpeg_opts(strict: bool) -> DecoderOptions {
    DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB).set_strict_mode(strict)
}

fn jpeg_into(bytes: &[u8], out: &mut Vec<u8>, strict: bool) -> Result<Dims> {
    let mut dec = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), jpeg_opts(strict));
    dec.decode_headers().map_err(|e| anyhow!("JPEG: {e}"))?;
    let info = dec.info().ok_or_else(|| anyhow!("JPEG: no header"))?;
    let size = dec.output_buffer_size().ok_or_else(|| anyhow!("JPEG: image too large"))?;
    let dims = Dims { width: info.width as usize, height: info.height as usize };
    if size != dims.width * dims.height * 3 || size == 0 {
        bail!("JPEG: unexpected output size {size} for {}×{}", dims.width, dims.height);
    }
    out.resize(size, 0);
    dec.decode_into(out).map_err(|e| anyhow!("JPEG: {e}"))?;
    Ok(dims)
}

/// zune-jpeg's lenient mode fills a truncated scan with grey instead of
/// failing (as libjpeg does, with a warning). A file whose tail has no
/// end-of-image marker is decoded again in strict mode, which fails on
/// truncation but accepts a valid file with trailing bytes.
fn decode_jpeg(bytes: &[u8], out: &mut Vec<u8>) -> Result<Dims> {
    let mut end = bytes.len();
    while end > 0 && bytes[end - 1] == 0 {
        end -= 1;
    }
    let tail = &bytes[end.saturating_sub(4096)..end];
    let has_eoi = tail.windows(2).any(|w| w == [0xFF, 0xD9]);
    if has_eoi {
        jpeg_into(bytes, out, false)
    } else {
        jpeg_into(bytes, out, true).map_err(|e| anyhow!("truncated JPEG (no end-of-image marker; {e})"))
    }
}

fn decode_png(bytes: &[u8], out: &mut Vec<u8>) -> Result<Dims> {
    let mut dec = png::Decoder::new(std::io::Cursor::new(bytes));
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().map_err(|e| anyhow!("PNG: {e}"))?;
    let n = reader.output_buffer_size().ok_or_else(|| anyhow!("PNG: image too large"))?;
    let mut raw = vec![0u8; n];
    let info = reader.next_frame(&mut raw).map_err(|e| anyhow!("PNG: {e}"))?;
    let (w, h) = (info.width as usize, info.height as usize);
    let ch = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => bail!("PNG: palette not expanded"),
    };
    out.resize(w * h * 3, 0);
    for y in 0..h {
        let src = &raw[y * info.line_size..][..w * ch];
        let dst = &mut out[y * w * 3..][..w * 3];
        for (d, s) in dst.chunks_exact_mut(3).zip(src.chunks_exact(ch)) {
            // Alpha is dropped, as PIL's convert("RGB") does.
            if ch < 3 {
                d.fill(s[0]);
            } else {
                d.copy_from_slice(&s[..3]);
            }
        }
    }
    Ok(Dims { width: w, height: h })
}
